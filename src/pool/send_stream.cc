#include "pool/send_stream.h"

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "pool/compress.h"
#include "util/coding.h"

namespace volstack::pool {

namespace {

constexpr size_t kBeginFixed = 52;

void PutCksum128(uint8_t* p, XXH128_hash_t h) {
  EncodeLE64(p, h.low64);
  EncodeLE64(p + 8, h.high64);
}

std::string TypeName(uint32_t t) {
  switch (t) {
    case 1:
      return "BEGIN";
    case 2:
      return "WRITE";
    case 3:
      return "FREE";
    case 4:
      return "END";
  }
  return "type " + std::to_string(t);
}

}  // namespace

Result<Compression> CompressionByName(const std::string& name) {
  for (Compression c : {Compression::kLz4, Compression::kZstd}) {
    if (CompressionName(c) == name) return c;
  }
  return Status::NotSupported("unknown compression algorithm '" + name + "'");
}

std::vector<uint8_t> EncodeBeginPayload(const StreamBegin& b) {
  nlohmann::json j{{"toname", b.toname}, {"fromname", b.fromname}, {"props", b.props}};
  if (b.resumed()) j["resume_offset"] = b.resume_offset;
  if (b.features & kFeatureCompressed) j["compress"] = b.compress;
  const std::string js = j.dump();
  std::vector<uint8_t> out(kBeginFixed + js.size());
  EncodeLE64(&out[0], b.features);
  EncodeLE64(&out[8], b.toguid);
  EncodeLE64(&out[16], b.fromguid);
  EncodeLE64(&out[24], b.volsize);
  EncodeLE32(&out[32], b.volblocksize);
  EncodeLE32(&out[36], 0);
  EncodeLE64(&out[40], b.creation);
  EncodeLE32(&out[48], static_cast<uint32_t>(js.size()));
  std::memcpy(&out[kBeginFixed], js.data(), js.size());
  return out;
}

Result<StreamBegin> DecodeBeginPayload(std::span<const uint8_t> in) {
  if (in.size() < kBeginFixed) return Status::Corruption("BEGIN record too short");
  StreamBegin b;
  b.features = DecodeLE64(&in[0]);
  b.toguid = DecodeLE64(&in[8]);
  b.fromguid = DecodeLE64(&in[16]);
  b.volsize = DecodeLE64(&in[24]);
  b.volblocksize = DecodeLE32(&in[32]);
  b.creation = DecodeLE64(&in[40]);
  const uint32_t n = DecodeLE32(&in[48]);
  if (n != in.size() - kBeginFixed) return Status::Corruption("BEGIN record: bad name length");
  if ((b.features & ~kKnownFeatures) != 0) {
    return Status::NotSupported("stream uses features this volstack does not know (0x" + [&] {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(b.features));
      return std::string(buf);
    }() + "): upgrade volstack to receive it");
  }
  const uint32_t vbs = b.volblocksize;
  if (vbs < 4096 || vbs > kMaxWritePayload || (vbs & (vbs - 1)) != 0 || b.volsize == 0 ||
      b.volsize % vbs != 0 || b.toguid == 0) {
    return Status::Corruption("BEGIN record: bad volume geometry or guid");
  }
  try {
    auto j = nlohmann::json::parse(in.begin() + kBeginFixed, in.end());
    b.toname = j.at("toname").get<std::string>();
    b.fromname = j.at("fromname").get<std::string>();
    b.props = j.at("props").get<std::map<std::string, std::string>>();
    if (b.resumed()) b.resume_offset = j.at("resume_offset").get<uint64_t>();
    if (b.features & kFeatureCompressed) {
      b.compress = j.at("compress").get<std::vector<std::string>>();
    }
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("BEGIN record: bad names: ") + e.what());
  }
  const auto at = b.toname.find('@');
  if (at == std::string::npos || at + 1 == b.toname.size() ||
      b.incremental() != !b.fromname.empty()) {
    return Status::Corruption("BEGIN record: bad snapshot names");
  }
  if (b.resume_offset % vbs != 0 || b.resume_offset > b.volsize) {
    return Status::Corruption("BEGIN record: bad resume offset");
  }
  for (const std::string& name : b.compress) {
    if (!CompressionByName(name).ok()) {
      return Status::NotSupported("cannot receive: the stream's blocks are compressed with '" +
                                  name +
                                  "', which this volstack cannot decode: send it without -c");
    }
  }
  return b;
}

std::string EncodeResumeToken(const ResumeState& r) {
  const std::string js = nlohmann::json{{"toguid", r.toguid}, {"fromguid", r.fromguid},
                                        {"toname", r.toname}, {"fromname", r.fromname},
                                        {"offset", r.offset}, {"compressok", r.compressed}}
                             .dump();
  static const char kHex[] = "0123456789abcdef";
  std::string out = "1-";
  for (unsigned char c : js) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

Result<ResumeState> DecodeResumeToken(const std::string& token) {
  auto bad = [] { return Status::InvalidArgument("invalid resume token"); };
  if (token.size() < 2 || token.compare(0, 2, "1-") != 0 || token.size() % 2 != 0) return bad();
  std::string js;
  for (size_t i = 2; i + 1 < token.size(); i += 2) {
    auto nib = [](char c) {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    };
    const int hi = nib(token[i]), lo = nib(token[i + 1]);
    if (hi < 0 || lo < 0) return bad();
    js += static_cast<char>(hi * 16 + lo);
  }
  ResumeState r;
  try {
    auto j = nlohmann::json::parse(js);
    r.toguid = j.at("toguid").get<uint64_t>();
    r.fromguid = j.at("fromguid").get<uint64_t>();
    r.toname = j.at("toname").get<std::string>();
    r.fromname = j.at("fromname").get<std::string>();
    r.offset = j.at("offset").get<uint64_t>();
    r.compressed = j.value("compressok", false);
  } catch (const std::exception&) {
    return bad();
  }
  return r;
}

std::map<std::string, std::string> ResumeProps(const ResumeState& r) {
  return {{"resume:toguid", std::to_string(r.toguid)},
          {"resume:fromguid", std::to_string(r.fromguid)},
          {"resume:toname", r.toname},
          {"resume:fromname", r.fromname},
          {"resume:offset", std::to_string(r.offset)},
          {"resume:compressok", r.compressed ? "1" : "0"}};
}

Result<ResumeState> ResumeFromProps(const std::map<std::string, std::string>& props) {
  ResumeState r;
  try {
    r.toguid = std::stoull(props.at("resume:toguid"));
    r.fromguid = std::stoull(props.at("resume:fromguid"));
    r.toname = props.at("resume:toname");
    r.fromname = props.at("resume:fromname");
    r.offset = std::stoull(props.at("resume:offset"));
    auto c = props.find("resume:compressok");
    r.compressed = c != props.end() && c->second == "1";
  } catch (const std::exception&) {
    return Status::NotFound("no resumable receive state");
  }
  return r;
}

// ---------------------------------------------------------------------------------------
// StreamWriter

StreamWriter::StreamWriter(Sink sink) : sink_(std::move(sink)), hash_(XXH3_createState()) {
  XXH3_128bits_reset(hash_);  // records before a Begin (a walk that only counts) hash too
}

StreamWriter::~StreamWriter() { XXH3_freeState(hash_); }

Status StreamWriter::Record(RecordType type, Compression comp, uint64_t a, uint64_t b,
                            std::span<const uint8_t> payload, const uint8_t* cksum) {
  uint8_t h[kRecordHeaderSize] = {};
  EncodeLE32(&h[0], static_cast<uint32_t>(type));
  h[4] = static_cast<uint8_t>(comp);
  EncodeLE64(&h[8], a);
  EncodeLE64(&h[16], b);
  EncodeLE64(&h[24], payload.size());
  if (cksum != nullptr) {
    std::memcpy(&h[32], cksum, 16);
  } else if (!payload.empty()) {
    PutCksum128(&h[32], XXH3_128bits(payload.data(), payload.size()));
  }
  EncodeLE64(&h[48], seq_++);
  EncodeLE64(&h[56], XXH3_64bits(h, 56));
  // One sink call per record: the header and its payload together.
  buf_.assign(h, h + kRecordHeaderSize);
  buf_.insert(buf_.end(), payload.begin(), payload.end());
  XXH3_128bits_update(hash_, h, kRecordHeaderSize);
  bytes_ += buf_.size();
  return sink_(buf_);
}

Status StreamWriter::Begin(const StreamBegin& b) {
  XXH3_128bits_reset(hash_);
  seq_ = 0;
  free_len_ = 0;
  const auto payload = EncodeBeginPayload(b);
  return Record(RecordType::kBegin, Compression::kNone, kStreamMagic, kStreamVersion, payload);
}

Status StreamWriter::FlushFree() {
  if (free_len_ == 0) return Status::Ok();
  const uint64_t len = std::exchange(free_len_, 0);
  frees_++;
  return Record(RecordType::kFree, Compression::kNone, free_off_, len, {});
}

Status StreamWriter::Write(uint64_t offset, uint64_t lsize, std::span<const uint8_t> data,
                           Compression comp, const uint8_t* cksum) {
  VS_RETURN_IF_ERROR(FlushFree());
  writes_++;
  return Record(RecordType::kWrite, comp, offset, lsize, data, cksum);
}

Status StreamWriter::Free(uint64_t offset, uint64_t length) {
  if (length == 0) return Status::Ok();
  if (free_len_ > 0 && free_off_ + free_len_ == offset) {
    free_len_ += length;
    return Status::Ok();
  }
  VS_RETURN_IF_ERROR(FlushFree());
  free_off_ = offset;
  free_len_ = length;
  return Status::Ok();
}

Status StreamWriter::End() {
  VS_RETURN_IF_ERROR(FlushFree());
  uint8_t ck[16];
  PutCksum128(ck, XXH3_128bits_digest(hash_));
  return Record(RecordType::kEnd, Compression::kNone, 0, seq_, {}, ck);
}

// ---------------------------------------------------------------------------------------
// StreamReader

StreamReader::StreamReader(Source source) : source_(std::move(source)), hash_(XXH3_createState()) {}

StreamReader::~StreamReader() { XXH3_freeState(hash_); }

Result<size_t> StreamReader::Fill(uint8_t* dst, size_t n) {
  size_t got = 0;
  while (got < n) {
    VS_ASSIGN_OR_RETURN(size_t r, source_(dst + got, n - got));
    if (r == 0) break;
    got += r;
  }
  offset_ += got;
  return got;
}

Status StreamReader::Fail(const std::string& why) const {
  return Status::Corruption("invalid send stream: " + why + " (record " + std::to_string(seq_) +
                            " at byte " + std::to_string(record_start_) + ")");
}

Result<StreamRecord> StreamReader::Next() {
  if (at_end_) return Status::FromErrno(ENODATA, "end of the stream");
  record_start_ = offset_;
  uint8_t h[kRecordHeaderSize];
  VS_ASSIGN_OR_RETURN(size_t got, Fill(h, sizeof h));
  if (got == 0 && !in_substream_) {
    at_end_ = true;
    return Status::FromErrno(ENODATA, "end of the stream");
  }
  if (got < sizeof h) return Fail("truncated: the input ends inside a record header");
  StreamRecord r;
  const uint32_t type = DecodeLE32(&h[0]);
  const uint64_t a = DecodeLE64(&h[8]), b = DecodeLE64(&h[16]);
  // Magic and version first: a newer stream's header may be laid out otherwise.
  if (!in_substream_) {
    if (type != static_cast<uint32_t>(RecordType::kBegin) || a != kStreamMagic) {
      return Fail(record_start_ == 0 ? "not a volstack send stream (no BEGIN record)"
                                     : "expected a BEGIN record after END");
    }
    if (b != kStreamVersion) {
      if (b > kStreamVersion) {
        return Status::NotSupported("send stream version " + std::to_string(b) +
                                    " is newer than this volstack reads (version " +
                                    std::to_string(kStreamVersion) +
                                    "): upgrade volstack to receive it");
      }
      return Fail("unknown stream version " + std::to_string(b));
    }
    seq_ = 0;
    XXH3_128bits_reset(hash_);
  }
  if (DecodeLE64(&h[56]) != XXH3_64bits(h, 56)) return Fail("record header checksum mismatch");
  if (DecodeLE64(&h[48]) != seq_) {
    return Fail("record out of sequence (found number " + std::to_string(DecodeLE64(&h[48])) + ")");
  }
  if (type < 1 || type > 4) return Fail("unknown record " + TypeName(type));
  r.type = static_cast<RecordType>(type);
  if (r.type == RecordType::kBegin && in_substream_) return Fail("BEGIN inside a substream");
  if (h[4] > static_cast<uint8_t>(Compression::kZstd) ||
      (h[4] != 0 && r.type != RecordType::kWrite) || h[5] || h[6] || h[7]) {
    return Fail("bad flags in a " + TypeName(type) + " record");
  }
  r.comp = static_cast<Compression>(h[4]);
  const uint64_t plen = DecodeLE64(&h[24]);
  const uint64_t max = r.type == RecordType::kBegin   ? kMaxBeginPayload
                       : r.type == RecordType::kWrite ? kMaxWritePayload
                                                      : 0;
  if (plen > max) return Fail(TypeName(type) + " payload too long");
  if (r.type == RecordType::kEnd) {
    uint8_t want[16];
    PutCksum128(want, XXH3_128bits_digest(hash_));
    if (std::memcmp(want, &h[32], 16) != 0 || b != seq_) {
      return Fail("stream checksum mismatch at END");
    }
    in_substream_ = false;
    return r;
  }
  r.payload.resize(plen);
  VS_ASSIGN_OR_RETURN(got, Fill(r.payload.data(), plen));
  if (got < plen) return Fail("truncated: the input ends inside a " + TypeName(type) + " record");
  uint8_t ck[16] = {};
  if (plen > 0) PutCksum128(ck, XXH3_128bits(r.payload.data(), plen));
  if (std::memcmp(ck, &h[32], 16) != 0) return Fail(TypeName(type) + " payload checksum mismatch");
  XXH3_128bits_update(hash_, h, sizeof h);
  seq_++;
  switch (r.type) {
    case RecordType::kBegin: {
      auto begin = DecodeBeginPayload(r.payload);
      if (!begin.ok()) {
        if (begin.status().code() == EOPNOTSUPP) return begin.status();
        return Fail(begin.status().message());
      }
      r.begin = std::move(*begin);
      r.payload.clear();
      comp_allowed_ = 0;
      for (const std::string& name : r.begin.compress) {
        comp_allowed_ |= 1u << static_cast<uint8_t>(*CompressionByName(name));
      }
      in_substream_ = true;
      break;
    }
    case RecordType::kWrite:
      r.offset = a;
      r.length = b;
      if (r.comp == Compression::kNone && plen != b) return Fail("WRITE size mismatch");
      if (r.comp != Compression::kNone) {
        // Stored compressed only when that saves space, so never as long as the block.
        if (plen == 0 || plen >= b) return Fail("compressed WRITE size mismatch");
        if ((comp_allowed_ & (1u << h[4])) == 0) {
          return Fail("WRITE compressed with " + CompressionName(r.comp) +
                      ", which its BEGIN does not list");
        }
      }
      break;
    case RecordType::kFree:
      r.offset = a;
      r.length = b;
      break;
    case RecordType::kEnd:
      break;
  }
  return r;
}

}  // namespace volstack::pool

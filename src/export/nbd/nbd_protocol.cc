#include "export/nbd/nbd_protocol.h"

#include <cerrno>

#include "util/coding.h"

namespace volstack::exportfs::nbd {

OptionHeader DecodeOptionHeader(std::span<const uint8_t, kOptionHeaderSize> h) {
  return OptionHeader{DecodeBE64(h.data()), DecodeBE32(h.data() + 8), DecodeBE32(h.data() + 12)};
}

void EncodeOptionReplyHeader(std::span<uint8_t, kOptionReplyHeaderSize> out, uint32_t option,
                             uint32_t type, uint32_t length) {
  EncodeBE64(out.data(), kOptReplyMagic);
  EncodeBE32(out.data() + 8, option);
  EncodeBE32(out.data() + 12, type);
  EncodeBE32(out.data() + 16, length);
}

Result<Request> DecodeRequest(std::span<const uint8_t, kRequestSize> h) {
  const uint32_t magic = DecodeBE32(h.data());
  if (magic != kRequestMagic) {
    return Status::Corruption("nbd: bad request magic " + std::to_string(magic));
  }
  Request r;
  r.flags = DecodeBE16(h.data() + 4);
  r.type = DecodeBE16(h.data() + 6);
  r.cookie = DecodeBE64(h.data() + 8);
  r.offset = DecodeBE64(h.data() + 16);
  r.length = DecodeBE32(h.data() + 24);
  return r;
}

void EncodeRequest(std::span<uint8_t, kRequestSize> out, const Request& r) {
  EncodeBE32(out.data(), kRequestMagic);
  EncodeBE16(out.data() + 4, r.flags);
  EncodeBE16(out.data() + 6, r.type);
  EncodeBE64(out.data() + 8, r.cookie);
  EncodeBE64(out.data() + 16, r.offset);
  EncodeBE32(out.data() + 24, r.length);
}

void EncodeSimpleReply(std::span<uint8_t, kSimpleReplySize> out, uint32_t error, uint64_t cookie) {
  EncodeBE32(out.data(), kSimpleReplyMagic);
  EncodeBE32(out.data() + 4, error);
  EncodeBE64(out.data() + 8, cookie);
}

void EncodeChunkHeader(std::span<uint8_t, kChunkHeaderSize> out, uint16_t flags, uint16_t type,
                       uint64_t cookie, uint32_t length) {
  EncodeBE32(out.data(), kStructuredReplyMagic);
  EncodeBE16(out.data() + 4, flags);
  EncodeBE16(out.data() + 6, type);
  EncodeBE64(out.data() + 8, cookie);
  EncodeBE32(out.data() + 16, length);
}

uint32_t WireError(const Status& status) {
  switch (status.code()) {
    case 0:
      return 0;
    case EPERM:
    case EROFS:
      return kEperm;
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return kEnospc;
    case EINVAL:
      return kEinval;
    case EOVERFLOW:
      return kEoverflow;
    case EOPNOTSUPP:
      return kEnotsup;
    case ENOMEM:
      return kEnomem;
    case ESHUTDOWN:
      return kEshutdown;
    default:
      return kEio;
  }
}

namespace {
// A bounds-checked reader over an option's data.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> d) : d_(d) {}
  bool U16(uint16_t* v) {
    if (d_.size() - pos_ < 2) return false;
    *v = DecodeBE16(d_.data() + pos_);
    pos_ += 2;
    return true;
  }
  bool U32(uint32_t* v) {
    if (d_.size() - pos_ < 4) return false;
    *v = DecodeBE32(d_.data() + pos_);
    pos_ += 4;
    return true;
  }
  bool Str(uint32_t n, std::string* s) {
    if (d_.size() - pos_ < n) return false;
    s->assign(reinterpret_cast<const char*>(d_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == d_.size(); }

 private:
  std::span<const uint8_t> d_;
  size_t pos_ = 0;
};
}  // namespace

Result<InfoRequest> DecodeInfoRequest(std::span<const uint8_t> data) {
  Reader r(data);
  InfoRequest req;
  uint32_t name_len = 0;
  uint16_t n = 0;
  if (!r.U32(&name_len) || name_len > 4096 || !r.Str(name_len, &req.name) || !r.U16(&n)) {
    return Status::Corruption("nbd: malformed INFO/GO request");
  }
  for (uint16_t i = 0; i < n; i++) {
    uint16_t item = 0;
    if (!r.U16(&item)) return Status::Corruption("nbd: INFO/GO request list is truncated");
    req.items.push_back(item);
  }
  if (!r.done()) return Status::Corruption("nbd: INFO/GO request has trailing bytes");
  return req;
}

Result<MetaContextRequest> DecodeMetaContextRequest(std::span<const uint8_t> data) {
  Reader r(data);
  MetaContextRequest req;
  uint32_t name_len = 0;
  uint32_t n = 0;
  if (!r.U32(&name_len) || name_len > 4096 || !r.Str(name_len, &req.name) || !r.U32(&n)) {
    return Status::Corruption("nbd: malformed meta context request");
  }
  for (uint32_t i = 0; i < n; i++) {
    uint32_t len = 0;
    std::string q;
    if (!r.U32(&len) || len > 4096 || !r.Str(len, &q)) {
      return Status::Corruption("nbd: meta context query list is truncated");
    }
    req.queries.push_back(std::move(q));
  }
  if (!r.done()) return Status::Corruption("nbd: meta context request has trailing bytes");
  return req;
}

}  // namespace volstack::exportfs::nbd

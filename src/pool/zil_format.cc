#include "pool/zil_format.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "pool/checksum.h"
#include "util/coding.h"

namespace volstack::pool {

namespace {
void EncodeDva(uint8_t* p, const Dva& d) {
  EncodeLE32(p, d.vdev);
  EncodeLE32(p + 4, d.asize_sectors);
  EncodeLE64(p + 8, d.offset);
}
Dva DecodeDva(const uint8_t* p) {
  Dva d;
  d.vdev = DecodeLE32(p);
  d.asize_sectors = DecodeLE32(p + 4);
  d.offset = DecodeLE64(p + 8);
  return d;
}
}  // namespace

namespace {
constexpr uint32_t kSector = 512;
constexpr uint64_t kStampCountMask = 0xffff;

// The stamp of sector `index` of block `seq` of chain `guid`, without its count bits.
uint64_t StampTag(uint64_t guid, uint64_t seq, uint32_t index) {
  uint8_t in[20];
  EncodeLE64(in, guid);
  EncodeLE64(in + 8, seq);
  EncodeLE32(in + 16, index);
  const Checksum c = ComputeChecksum(ChecksumType::kXxh3_128, in);
  return DecodeLE64(c.bytes.data()) & ~kStampCountMask;
}

// The sector's count n when one of its stamp copies is (guid, seq, index)'s, else 0.
uint32_t SectorStamp(const uint8_t* sector, uint64_t tag) {
  for (const uint64_t s : {DecodeLE64(sector), DecodeLE64(sector + kSector - 8)}) {
    if ((s & ~kStampCountMask) == tag && (s & kStampCountMask) != 0) {
      return static_cast<uint32_t>(s & kStampCountMask);
    }
  }
  return 0;
}

uint32_t EncodeLogical(const ZilBlockInfo& info, std::span<const ZilRecordRef> records,
                       std::span<uint8_t> out, uint64_t magic) {
  uint64_t used = kZilBlockHeaderSize;
  for (const auto& r : records) used += ZilRecordSize(r.type, r.length);
  VS_CHECK_OP(used, <=, out.size());
  std::memset(out.data(), 0, out.size());
  uint8_t* b = out.data();
  EncodeLE64(b + 16, magic);
  EncodeLE64(b + 24, info.guid);
  EncodeLE64(b + 32, info.seq);
  EncodeLE64(b + 40, info.dataset_guid);
  EncodeLE32(b + 48, static_cast<uint32_t>(used));
  EncodeLE32(b + 52, static_cast<uint32_t>(records.size()));
  EncodeDva(b + 56, info.next);
  uint8_t* p = b + kZilBlockHeaderSize;
  for (const auto& r : records) {
    p[0] = static_cast<uint8_t>(r.type);
    p[1] = r.flags;
    EncodeLE64(p + 8, r.txg);
    EncodeLE64(p + 16, r.offset);
    EncodeLE64(p + 24, r.length);
    if (r.type == ZilRecordType::kWrite && r.length > 0) {
      std::memcpy(p + kZilRecordHeaderSize, r.data, r.length);
    }
    p += ZilRecordSize(r.type, r.length);
  }
  const Checksum c =
      ComputeChecksum(ChecksumType::kXxh3_128, std::span<const uint8_t>(b + 16, used - 16));
  std::memcpy(b, c.bytes.data(), 16);
  return static_cast<uint32_t>(used);
}

Result<ZilBlockRead> DecodeLogical(std::span<const uint8_t> block, uint64_t guid, uint64_t seq,
                                   uint64_t magic) {
  auto bad = [](const char* why) { return Status::Corruption(std::string("log block: ") + why); };
  if (block.size() < kZilBlockHeaderSize) return bad("truncated");
  const uint8_t* b = block.data();
  if (DecodeLE64(b + 16) != magic) return bad("no magic");
  ZilBlockRead out;
  out.info.guid = DecodeLE64(b + 24);
  out.info.seq = DecodeLE64(b + 32);
  out.info.dataset_guid = DecodeLE64(b + 40);
  out.used = DecodeLE32(b + 48);
  const uint32_t count = DecodeLE32(b + 52);
  out.info.next = DecodeDva(b + 56);
  if (out.info.guid != guid) return bad("another chain");
  if (out.info.seq != seq) return bad("out of sequence");
  if (out.used < kZilBlockHeaderSize || out.used > block.size()) return bad("used size");
  const Checksum c =
      ComputeChecksum(ChecksumType::kXxh3_128, std::span<const uint8_t>(b + 16, out.used - 16));
  if (std::memcmp(c.bytes.data(), b, 16) != 0) return bad("checksum mismatch");
  uint64_t pos = kZilBlockHeaderSize;
  for (uint32_t i = 0; i < count; i++) {
    if (pos + kZilRecordHeaderSize > out.used) return bad("record past the end");
    const uint8_t* p = b + pos;
    ZilRecord r;
    if (p[0] != 1 && p[0] != 2) return bad("record type");
    r.type = static_cast<ZilRecordType>(p[0]);
    r.flags = p[1];
    if ((r.flags & ~kZilRecordContinued) != 0) return bad("record flags");
    r.txg = DecodeLE64(p + 8);
    r.offset = DecodeLE64(p + 16);
    r.length = DecodeLE64(p + 24);
    if (r.length == 0 || (r.type == ZilRecordType::kWrite && r.length > kZilMaxBlock)) {
      return bad("record length");
    }
    if (r.offset + r.length < r.offset) return bad("record range");
    const uint64_t size = ZilRecordSize(r.type, r.length);
    if (pos + size > out.used) return bad("record past the end");
    if (r.type == ZilRecordType::kWrite) {
      r.data.assign(p + kZilRecordHeaderSize, p + kZilRecordHeaderSize + r.length);
    }
    pos += size;
    out.records.push_back(std::move(r));
  }
  if (pos != out.used) return bad("used size does not match the records");
  return out;
}
}  // namespace

uint64_t ZilPhysSize(uint32_t format, uint64_t used) {
  if (format == kZilFormatPlain) return used;
  // Two sectors at least, so an unreadable first sector alone never hides a whole write.
  return std::max<uint64_t>(2, (used + kZilSectorPayload - 1) / kZilSectorPayload) * kSector;
}

uint64_t ZilCapacity(uint32_t format, uint64_t phys) {
  if (format == kZilFormatPlain) return phys;
  return phys / kSector * kZilSectorPayload;
}

uint32_t EncodeZilBlock(const ZilBlockInfo& info, std::span<const ZilRecordRef> records,
                        std::span<uint8_t> out, uint32_t format) {
  if (format == kZilFormatPlain) return EncodeLogical(info, records, out, kZilBlockMagic);
  VS_CHECK_OP(format, ==, kZilFormatStamped);
  VS_CHECK_OP(out.size() % kSector, ==, 0u);
  const uint64_t n = out.size() / kSector;
  VS_CHECK_OP(n, <=, kStampCountMask);
  std::vector<uint8_t> logical(ZilCapacity(format, out.size()));
  const uint32_t used = EncodeLogical(info, records, logical, kZilBlockMagicV2);
  for (uint64_t i = 0; i < n; i++) {
    uint8_t* s = out.data() + i * kSector;
    const uint64_t stamp = StampTag(info.guid, info.seq, static_cast<uint32_t>(i)) | n;
    EncodeLE64(s, stamp);
    std::memcpy(s + 8, logical.data() + i * kZilSectorPayload, kZilSectorPayload);
    EncodeLE64(s + kSector - 8, stamp);
  }
  return used;
}

Result<ZilBlockRead> DecodeZilBlock(std::span<const uint8_t> block, uint64_t guid, uint64_t seq,
                                    uint32_t format) {
  if (format == kZilFormatPlain) return DecodeLogical(block, guid, seq, kZilBlockMagic);
  if (format != kZilFormatStamped) return Status::Corruption("log block: unknown format");
  if (block.size() % kSector != 0) return Status::Corruption("log block: not whole sectors");
  const uint64_t sectors = block.size() / kSector;
  std::vector<uint8_t> logical(sectors * kZilSectorPayload);
  for (uint64_t i = 0; i < sectors; i++) {
    std::memcpy(logical.data() + i * kZilSectorPayload, block.data() + i * kSector + 8,
                kZilSectorPayload);
  }
  VS_ASSIGN_OR_RETURN(ZilBlockRead out, DecodeLogical(logical, guid, seq, kZilBlockMagicV2));
  // The checksum covers the payload only: each sector holding part of it must carry this
  // block's stamp too, or a stale copy of the same bytes elsewhere would pass.
  const uint64_t need = ZilPhysSize(format, out.used) / kSector;
  for (uint64_t i = 0; i < need; i++) {
    if (SectorStamp(block.data() + i * kSector, StampTag(guid, seq, static_cast<uint32_t>(i))) <
        need) {
      return Status::Corruption("log block: sector not stamped");
    }
  }
  return out;
}

ZilBlockState ClassifyZilBlock(std::span<const uint8_t> block, uint64_t guid, uint64_t seq,
                               uint32_t format, const std::vector<bool>* unreadable) {
  if (format != kZilFormatStamped) return ZilBlockState::kUnwritten;
  const uint64_t sectors = block.size() / kSector;
  auto lost = [&](uint64_t i) {
    return unreadable != nullptr && i < unreadable->size() && (*unreadable)[i];
  };
  // n by majority over the stamped sectors: a damaged count cannot outvote the rest.
  std::vector<uint32_t> counts(sectors, 0);
  std::map<uint32_t, uint64_t> votes;
  bool any_lost = false;
  for (uint64_t i = 0; i < sectors; i++) {
    if (lost(i)) {
      any_lost = true;
      continue;
    }
    counts[i] =
        SectorStamp(block.data() + i * kSector, StampTag(guid, seq, static_cast<uint32_t>(i)));
    if (counts[i] != 0) votes[counts[i]]++;
  }
  if (votes.empty()) {
    // Nothing stamped: never written, unless the unreadable sectors were all of it.
    // Every write stamps at least its first two sectors (ZilPhysSize).
    return any_lost && lost(0) && lost(1) ? ZilBlockState::kUnknown : ZilBlockState::kUnwritten;
  }
  uint64_t n = 0, best = 0;
  for (const auto& [c, v] : votes) {
    if (v > best) n = c, best = v;
  }
  if (n > sectors) return ZilBlockState::kDamaged;  // a chain's block is never larger
  bool unknown = false;
  for (uint64_t i = 0; i < n; i++) {
    if (lost(i)) {
      unknown = true;
    } else if (counts[i] == 0) {
      return ZilBlockState::kTorn;
    }
  }
  return unknown ? ZilBlockState::kUnknown : ZilBlockState::kDamaged;
}

const char* ZilBlockStateName(ZilBlockState s) {
  switch (s) {
    case ZilBlockState::kUnwritten:
      return "not written";
    case ZilBlockState::kTorn:
      return "torn";
    case ZilBlockState::kDamaged:
      return "damaged";
    case ZilBlockState::kUnknown:
      return "partly unreadable";
  }
  return "?";
}

}  // namespace volstack::pool

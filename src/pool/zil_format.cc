#include "pool/zil_format.h"

#include <cstring>

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

uint32_t EncodeZilBlock(const ZilBlockInfo& info, std::span<const ZilRecordRef> records,
                        std::span<uint8_t> out) {
  uint64_t used = kZilBlockHeaderSize;
  for (const auto& r : records) used += ZilRecordSize(r.type, r.length);
  VS_CHECK_OP(used, <=, out.size());
  std::memset(out.data(), 0, out.size());
  uint8_t* b = out.data();
  EncodeLE64(b + 16, kZilBlockMagic);
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

Result<ZilBlockRead> DecodeZilBlock(std::span<const uint8_t> block, uint64_t guid, uint64_t seq) {
  auto bad = [](const char* why) { return Status::Corruption(std::string("log block: ") + why); };
  if (block.size() < kZilBlockHeaderSize) return bad("truncated");
  const uint8_t* b = block.data();
  if (DecodeLE64(b + 16) != kZilBlockMagic) return bad("no magic");
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

}  // namespace volstack::pool

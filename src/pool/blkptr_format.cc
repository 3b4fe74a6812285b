#include "pool/blkptr_format.h"

#include <algorithm>
#include <cstring>

#include "util/coding.h"

namespace volstack::pool {

void EncodeBlockPtr(const BlockPtr& bp, uint8_t* out) {
  std::memset(out, 0, kBlkptrSize);
  if (bp.IsHole()) return;
  for (int i = 0; i < kMaxDvas; i++) {
    EncodeLE32(out + 16 * i, bp.dva[i].vdev);
    EncodeLE32(out + 16 * i + 4, bp.dva[i].asize_sectors);
    EncodeLE64(out + 16 * i + 8, bp.dva[i].offset);
  }
  EncodeLE32(out + 48, bp.lsize);
  EncodeLE32(out + 52, bp.psize);
  out[56] = static_cast<uint8_t>(bp.comp);
  out[57] = static_cast<uint8_t>(bp.cksum);
  out[58] = static_cast<uint8_t>(bp.type);
  out[59] = bp.level;
  EncodeLE64(out + 64, bp.fill);
  EncodeLE64(out + 72, bp.phys_birth);
  EncodeLE64(out + 80, bp.birth);
  std::memcpy(out + 96, bp.checksum.bytes.data(), 32);
}

Result<BlockPtr> DecodeBlockPtr(std::span<const uint8_t> in) {
  if (in.size() < kBlkptrSize) return Status::Corruption("blkptr: truncated");
  const uint8_t* p = in.data();
  BlockPtr bp;
  if (std::all_of(p, p + kBlkptrSize, [](uint8_t b) { return b == 0; })) return bp;
  for (int i = 0; i < kMaxDvas; i++) {
    bp.dva[i].vdev = DecodeLE32(p + 16 * i);
    bp.dva[i].asize_sectors = DecodeLE32(p + 16 * i + 4);
    bp.dva[i].offset = DecodeLE64(p + 16 * i + 8);
  }
  bp.lsize = DecodeLE32(p + 48);
  bp.psize = DecodeLE32(p + 52);
  const uint8_t comp = p[56], cksum = p[57], type = p[58];
  bp.level = p[59];
  const uint32_t flags = DecodeLE32(p + 60);
  bp.fill = DecodeLE64(p + 64);
  bp.phys_birth = DecodeLE64(p + 72);
  bp.birth = DecodeLE64(p + 80);
  std::memcpy(bp.checksum.bytes.data(), p + 96, 32);
  auto bad = [&](const std::string& why) { return Status::Corruption("blkptr: " + why); };
  if (bp.birth == 0) return bad("non-zero pointer with birth txg 0");
  if (comp > static_cast<uint8_t>(Compression::kZstd)) {
    return bad("unsupported compression " + std::to_string(comp));
  }
  if (!IsValidChecksumType(cksum)) return bad("unknown checksum type " + std::to_string(cksum));
  if (type < 1 || type > 4) return bad("unknown block type " + std::to_string(type));
  if (flags != 0) return bad("unknown flags");
  if (bp.lsize == 0 || bp.psize == 0 || bp.psize > bp.lsize) return bad("bad sizes");
  // Only data is compressed, and a stream no smaller than the block is stored as it is.
  if (comp != 0 && (type != static_cast<uint8_t>(BlockType::kVolData) || bp.psize == bp.lsize)) {
    return bad("compression on a block that is not compressed data");
  }
  if (comp == 0 && bp.psize != bp.lsize) return bad("psize differs from lsize, uncompressed");
  if (bp.dva[0].empty()) return bad("no DVA");
  for (const Dva& d : bp.dva) {
    if (!d.empty() && d.asize() < bp.psize) return bad("asize below psize");
    if (d.offset > (uint64_t{1} << 56)) return bad("offset out of range");
  }
  if (bp.level > 16) return bad("level out of range");
  bp.comp = static_cast<Compression>(comp);
  bp.cksum = static_cast<ChecksumType>(cksum);
  bp.type = static_cast<BlockType>(type);
  return bp;
}

std::string BlockPtr::ToString() const {
  if (IsHole()) return "<hole>";
  return "DVA[0]=<" + std::to_string(dva[0].vdev) + ":" + std::to_string(dva[0].offset) + ":" +
         std::to_string(dva[0].asize()) + "> L" + std::to_string(level) + " type " +
         std::to_string(static_cast<int>(type)) + " " + std::to_string(lsize) + "L/" +
         std::to_string(psize) + "P birth=" + std::to_string(birth);
}

}  // namespace volstack::pool

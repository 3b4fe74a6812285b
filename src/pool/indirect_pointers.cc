#include "pool/indirect_pointers.h"

#include <algorithm>

namespace volstack::pool {

std::optional<PackedBlockPtr> PackedBlockPtr::Pack(const BlockPtr& bp) {
  const auto tail = std::span(bp.checksum.bytes).subspan(16);
  if (bp.dva[1] != Dva{} || bp.dva[2] != Dva{} || bp.phys_birth != 0 ||
      std::any_of(tail.begin(), tail.end(), [](uint8_t b) { return b != 0; })) {
    return std::nullopt;
  }
  PackedBlockPtr p;
  p.offset = bp.dva[0].offset;
  p.birth = bp.birth;
  p.fill = bp.fill;
  p.vdev = bp.dva[0].vdev;
  p.asize_sectors = bp.dva[0].asize_sectors;
  p.lsize = bp.lsize;
  p.psize = bp.psize;
  p.comp = bp.comp;
  p.cksum = bp.cksum;
  p.type = bp.type;
  p.level = bp.level;
  std::copy_n(bp.checksum.bytes.begin(), p.checksum.size(), p.checksum.begin());
  return p;
}

BlockPtr PackedBlockPtr::Unpack() const {
  BlockPtr bp;
  bp.dva[0] = Dva{vdev, asize_sectors, offset};
  bp.lsize = lsize;
  bp.psize = psize;
  bp.comp = comp;
  bp.cksum = cksum;
  bp.type = type;
  bp.level = level;
  bp.fill = fill;
  bp.birth = birth;
  std::copy(checksum.begin(), checksum.end(), bp.checksum.bytes.begin());
  return bp;
}

void IndirectPointers::Set(uint32_t i, const BlockPtr& bp) {
  if (full_) {
    full_[i] = bp;
    return;
  }
  if (const std::optional<PackedBlockPtr> p = PackedBlockPtr::Pack(bp)) {
    packed_[i] = *p;
    return;
  }
  full_ = std::make_unique<BlockPtr[]>(kBpsPerIndirect);
  for (uint32_t k = 0; k < kBpsPerIndirect; k++) full_[k] = packed_[k].Unpack();
  full_[i] = bp;
}

uint64_t IndirectPointers::Bytes() const {
  return sizeof(*this) + (full_ ? kBpsPerIndirect * sizeof(BlockPtr) : 0);
}

}  // namespace volstack::pool

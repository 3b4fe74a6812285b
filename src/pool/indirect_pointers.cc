#include "pool/indirect_pointers.h"

#include <algorithm>

namespace volstack::pool {

namespace {
constexpr size_t kPackedChecksum = 16;  // bytes of a checksum in the packed line
}  // namespace

PackedBlockPtr PackedBlockPtr::Of(const BlockPtr& bp) {
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
  std::copy_n(bp.checksum.bytes.begin(), kPackedChecksum, p.checksum.begin());
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

BlockPtrExtras BlockPtrExtras::Of(const BlockPtr& bp) {
  static_assert(kMaxDvas == 3, "a DVA past the third needs a field here");
  BlockPtrExtras x;
  x.dva1 = bp.dva[1];
  x.dva2 = bp.dva[2];
  x.phys_birth = bp.phys_birth;
  std::copy_n(bp.checksum.bytes.begin() + kPackedChecksum, x.checksum_tail.size(),
              x.checksum_tail.begin());
  return x;
}

bool BlockPtrExtras::empty() const {
  return dva1 == Dva{} && dva2 == Dva{} && phys_birth == 0 &&
         std::all_of(checksum_tail.begin(), checksum_tail.end(), [](uint8_t b) { return b == 0; });
}

void BlockPtrExtras::ApplyTo(BlockPtr& bp) const {
  bp.dva[1] = dva1;
  bp.dva[2] = dva2;
  bp.phys_birth = phys_birth;
  std::copy(checksum_tail.begin(), checksum_tail.end(),
            bp.checksum.bytes.begin() + kPackedChecksum);
}

void IndirectPointers::Set(uint32_t i, const BlockPtr& bp) {
  packed_[i] = PackedBlockPtr::Of(bp);
  const BlockPtrExtras x = BlockPtrExtras::Of(bp);
  if (!extras_ && x.empty()) return;
  if (!extras_) extras_ = std::make_unique<BlockPtrExtras[]>(kBpsPerIndirect);  // all empty
  extras_[i] = x;
}

uint64_t IndirectPointers::Bytes() const {
  return sizeof(*this) + (extras_ ? kBpsPerIndirect * sizeof(BlockPtrExtras) : 0);
}

}  // namespace volstack::pool

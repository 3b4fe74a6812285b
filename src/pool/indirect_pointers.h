// IndirectPointers: the 128 block pointers of one indirect block, as a volume's indirect
// cache holds them in memory.
//
// Why packed. The cached indirect blocks share the pool's cache bound with the block cache
// (block_cache.h, "Bound"): every byte they take is a byte of data the cache cannot hold.
// A BlockPtr is 120 bytes in memory, three DVAs and a 32-byte checksum; the pointers a
// volume writes use one DVA, an XXH3-128 checksum (16 bytes) and no phys_birth. Packed,
// such a pointer takes 64 bytes, one cache line, so a 256 MiB volume of 4 KiB blocks keeps
// its 512 L1 blocks in 4 MiB instead of 8, and the block cache holds 1,000 more blocks of
// its data at the default bound (docs/bench.md, "Eighteenth round"). One line a pointer is
// also what a read's prefetch of it loads (Volume::PrefetchPointer).
//
// Two forms. A block starts packed. The first pointer that does not pack (a second DVA, a
// SHA-256 checksum, a phys_birth) moves the whole block to the full form, 128 BlockPtrs on
// the heap, for as long as it is cached: a lookup then needs no test per pointer beyond
// the form's. Both forms hold every pointer exactly (Unpack(Pack(bp)) == bp).
//
// Not thread-safe: the volume's tree_mu_ guards it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "pool/blkptr_format.h"

namespace volstack::pool {

inline constexpr uint32_t kIndirectShift = 7;
inline constexpr uint32_t kBpsPerIndirect = 1u << kIndirectShift;

// A block pointer in one cache line: what a BlockPtr holds, less the fields a pointer that
// packs leaves empty (DVAs 1 and 2, phys_birth, the checksum's last 16 bytes).
struct alignas(64) PackedBlockPtr {
  uint64_t offset = 0;  // dva[0]
  uint64_t birth = 0;
  uint64_t fill = 0;
  uint32_t vdev = 0;  // dva[0]
  uint32_t asize_sectors = 0;
  uint32_t lsize = 0;
  uint32_t psize = 0;
  Compression comp = Compression::kNone;
  ChecksumType cksum = ChecksumType::kXxh3_128;
  BlockType type = BlockType::kNone;
  uint8_t level = 0;
  std::array<uint8_t, 16> checksum{};

  // nullopt when `bp` holds something the packed form has no room for.
  static std::optional<PackedBlockPtr> Pack(const BlockPtr& bp);
  BlockPtr Unpack() const;
};
static_assert(sizeof(PackedBlockPtr) == 64);

class IndirectPointers {
 public:
  BlockPtr Get(uint32_t i) const { return full_ ? full_[i] : packed_[i].Unpack(); }
  // May move the block to the full form (see above), which costs Bytes() more.
  void Set(uint32_t i, const BlockPtr& bp);
  bool packed() const { return full_ == nullptr; }
  // Where pointer i lies in the packed form (valid while packed(); a prefetch's target).
  const PackedBlockPtr* PackedAt(uint32_t i) const { return &packed_[i]; }
  // What this object costs in memory, heap included.
  uint64_t Bytes() const;

 private:
  std::array<PackedBlockPtr, kBpsPerIndirect> packed_{};
  std::unique_ptr<BlockPtr[]> full_;  // non-null: the full form
};

}  // namespace volstack::pool

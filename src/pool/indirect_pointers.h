// IndirectPointers: the 128 block pointers of one indirect block, as a volume's indirect
// cache holds them in memory.
//
// Why packed. The cached indirect blocks share the pool's cache bound with the block cache
// (block_cache.h, "Bound"): every byte they take is a byte of data the cache cannot hold.
// A BlockPtr is 120 bytes in memory, three DVAs and a 32-byte checksum; the pointers a
// volume writes use one DVA, an XXH3-128 checksum (16 bytes) and no phys_birth. Packed,
// such a pointer takes 64 bytes, one cache line, so a 256 MiB volume of 4 KiB blocks keeps
// its 512 L1 blocks in 4.4 MiB instead of 8, and the block cache holds 900 more blocks of
// its data at the default bound (docs/notes/memory.md). One line a pointer is
// also what a read's prefetch of it loads (Volume::PrefetchPointer).
//
// Extras. What a packed pointer has no room for (DVAs 1 and 2, phys_birth, the checksum's
// last 16 bytes: a SHA-256 checksum, mirrors, clones) goes to a second array of 56 bytes a
// pointer, made for the whole block the first time one of its pointers needs it and kept
// while the block is cached. A block with extras costs about what the unpacked form did
// (15,641 bytes of lines and extras against 15,448 of BlockPtrs, heap included); one
// without costs 8,450. The packed array always holds the rest of every pointer, so a
// lookup reads one line plus, only in a block with extras, one more. Every pointer comes
// back exactly as set.
//
// Not thread-safe: the volume's tree_mu_ guards it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "pool/blkptr_format.h"

namespace volstack::pool {

inline constexpr uint32_t kIndirectShift = 7;
inline constexpr uint32_t kBpsPerIndirect = 1u << kIndirectShift;

// A block pointer in one cache line: all of a BlockPtr but its extras (below).
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
  std::array<uint8_t, 16> checksum{};  // its first 16 bytes

  static PackedBlockPtr Of(const BlockPtr& bp);
  // The pointer, its extras empty.
  BlockPtr Unpack() const;
};
static_assert(sizeof(PackedBlockPtr) == 64);

// What a PackedBlockPtr leaves out; all zero for the pointers a volume writes by default.
struct BlockPtrExtras {
  Dva dva1, dva2;
  uint64_t phys_birth = 0;
  std::array<uint8_t, 16> checksum_tail{};

  static BlockPtrExtras Of(const BlockPtr& bp);
  bool empty() const;
  void ApplyTo(BlockPtr& bp) const;
};
static_assert(sizeof(BlockPtrExtras) == 56);

class IndirectPointers {
 public:
  BlockPtr Get(uint32_t i) const {
    BlockPtr bp = packed_[i].Unpack();
    if (extras_) extras_[i].ApplyTo(bp);
    return bp;
  }
  // May give the block its extras (see above), which costs Bytes() more.
  void Set(uint32_t i, const BlockPtr& bp);
  // Where pointer i's packed line lies (a prefetch's target).
  const PackedBlockPtr* PackedAt(uint32_t i) const { return &packed_[i]; }
  // What this object costs in memory, its extras included.
  uint64_t Bytes() const;

 private:
  std::array<PackedBlockPtr, kBpsPerIndirect> packed_{};
  std::unique_ptr<BlockPtrExtras[]> extras_;  // null: every pointer's extras are empty
};

}  // namespace volstack::pool

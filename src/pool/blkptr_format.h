// The block pointer (blkptr): 128 bytes that locate, size, date and checksum one block.
// Every block's checksum lives in its parent's pointer, so the pool is a Merkle tree whose
// root pointer sits in the uberblock. Layout (little-endian), after ZFS's blkptr_t:
//
//   off size field
//   --- ---- -------------------------------------------------------------------------
//     0   16 dva[0]   u32 vdev id | u32 asize in 512-byte sectors | u64 byte offset
//    16   16 dva[1]   (room for mirrors / ditto copies; asize 0 = unused)
//    32   16 dva[2]
//    48    4 lsize    logical size in bytes (what a reader gets back)
//    52    4 psize    physical size in bytes (the compressed stream; == lsize for "none")
//    56    1 comp     0 none, 1 lz4, 2 zstd (data blocks only: compress.h)
//    57    1 cksum    ChecksumType: 1 xxh3-128, 2 sha256
//    58    1 type     BlockType
//    59    1 level    0 data, >0 indirect
//    60    4 flags    0 (reserved: embedded, gang, encryption)
//    64    8 fill     L0 blocks with data beneath this pointer (1 for an L0)
//    72    8 phys_birth  txg the bytes were written (0 = same as birth)
//    80    8 birth    logical birth txg (snapshots / incremental send compare this)
//    88    8 reserved
//    96   32 checksum of the psize bytes at dva[0]
//
// A hole is 128 zero bytes (birth 0): it costs no space and reads as zeroes.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "pool/checksum.h"
#include "util/result.h"

namespace volstack::pool {

inline constexpr size_t kBlkptrSize = 128;
inline constexpr int kMaxDvas = 3;

enum class BlockType : uint8_t {
  kNone = 0,
  kMos = 1,          // the pool's meta-object-set block (dataset directory, space map list)
  kSpaceMap = 2,     // a block of space-map records
  kVolData = 3,      // a volume's data block (level 0)
  kVolIndirect = 4,  // a volume's indirect block (level >= 1)
};

enum class Compression : uint8_t { kNone = 0, kLz4 = 1, kZstd = 2 };

struct Dva {
  uint32_t vdev = 0;
  uint32_t asize_sectors = 0;  // allocated size / 512; 0 = no DVA
  uint64_t offset = 0;         // byte offset on the vdev
  uint64_t asize() const { return uint64_t{asize_sectors} << 9; }
  bool empty() const { return asize_sectors == 0; }
  bool operator==(const Dva&) const = default;
};

struct BlockPtr {
  Dva dva[kMaxDvas];
  uint32_t lsize = 0;
  uint32_t psize = 0;
  Compression comp = Compression::kNone;
  ChecksumType cksum = ChecksumType::kXxh3_128;
  BlockType type = BlockType::kNone;
  uint8_t level = 0;
  uint64_t fill = 0;
  uint64_t phys_birth = 0;
  uint64_t birth = 0;
  Checksum checksum;

  bool IsHole() const { return birth == 0; }
  bool operator==(const BlockPtr&) const = default;
  std::string ToString() const;
};

// Writes exactly kBlkptrSize bytes.
void EncodeBlockPtr(const BlockPtr& bp, uint8_t* out);
// Reads kBlkptrSize bytes. All-zero -> a hole; anything inconsistent -> Corruption.
Result<BlockPtr> DecodeBlockPtr(std::span<const uint8_t> in);

}  // namespace volstack::pool

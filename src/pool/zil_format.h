// The intent log (ZIL) on disk: the per-volume log header kept in the MOS directory entry,
// and the log blocks it chains. See zil.h for how they are written and replayed, and
// docs/format/pool.md ("Intent log") for the prose spec.
//
// ZIL header (in the dataset's MOS entry, JSON object "zil"; absent = no log):
//   guid   u64  random id of this chain (never 0); every block of the chain carries it
//   seq    u64  sequence number of the head block
//   head   DVA  where the head block is; its asize is how much may be read (<= 128 KiB)
//   floor  u64  replay skips records with txg <= floor (0: the imported txg). Written
//               while a replay is being committed, so a crash in the middle replays again
//               from the same point.
//
// Log block (at a DVA named by the header or by the previous block; only `used` bytes,
// padded to the allocation unit, are written and claimed):
//   off  size  field
//   0    16    XXH3-128 of bytes [16, used)
//   16   8     magic kZilBlockMagic ("VSZILBK\1")
//   24   8     chain guid
//   32   8     seq (the header's seq for the head, +1 for each next block)
//   40   8     dataset guid
//   48   4     used: header + records, bytes
//   52   4     record count
//   56   16    next: u32 vdev, u32 asize in 512-byte sectors, u64 byte offset. The next
//              block of the chain, allocated before this one was written.
//   72   24    zero
//   96   ...   records
//
// Record (8-byte aligned):
//   0    1     type: 1 write (data follows), 2 zero (discard / write-zeroes)
//   1    1     flags: bit 0 "continued": a write split over blocks, more of it follows in
//              the next record. Replay applies a split write only when its last part is
//              there, so a write is replayed whole or not at all.
//   2    6     zero
//   8    8     txg the change belongs to (an upper bound: replay skips txg <= imported)
//   16   8     offset in the volume, bytes
//   24   8     length, bytes
//   32   ...   write: `length` bytes of data, zero-padded to a multiple of 8
//
// A block is valid only if its checksum verifies, its magic, guid and seq are the expected
// ones, and its records lie inside `used`. The chain ends at the first invalid block.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pool/blkptr_format.h"
#include "util/result.h"

namespace volstack::pool {

inline constexpr uint64_t kZilBlockMagic = 0x014b424c495a5356ull;  // "VSZILBK\1"
inline constexpr uint32_t kZilMaxBlock = 128 * 1024;
inline constexpr uint32_t kZilBlockHeaderSize = 96;
inline constexpr uint32_t kZilRecordHeaderSize = 32;

struct ZilHeaderPhys {
  uint64_t guid = 0;  // 0: no log
  uint64_t seq = 0;
  Dva head;
  uint64_t floor = 0;
  bool empty() const { return guid == 0; }
  bool operator==(const ZilHeaderPhys&) const = default;
};

enum class ZilRecordType : uint8_t { kWrite = 1, kZero = 2 };

// A record to encode: data points at `length` bytes for a write, is empty for a zero.
inline constexpr uint8_t kZilRecordContinued = 1;

struct ZilRecordRef {
  ZilRecordType type = ZilRecordType::kWrite;
  uint8_t flags = 0;
  uint64_t txg = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  const uint8_t* data = nullptr;
};

struct ZilRecord {
  ZilRecordType type = ZilRecordType::kWrite;
  uint8_t flags = 0;
  uint64_t txg = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::vector<uint8_t> data;  // write: `length` bytes
  bool operator==(const ZilRecord&) const = default;
};

struct ZilBlockInfo {
  uint64_t guid = 0;
  uint64_t seq = 0;
  uint64_t dataset_guid = 0;
  Dva next;
};

// Bytes a record takes in a block.
inline uint64_t ZilRecordSize(ZilRecordType type, uint64_t length) {
  return kZilRecordHeaderSize + (type == ZilRecordType::kWrite ? (length + 7) / 8 * 8 : 0);
}

// Encodes a block into `out` (at least the used size; the rest is zero-filled). Returns the
// used size.
uint32_t EncodeZilBlock(const ZilBlockInfo& info, std::span<const ZilRecordRef> records,
                        std::span<uint8_t> out);

struct ZilBlockRead {
  ZilBlockInfo info;
  uint32_t used = 0;
  std::vector<ZilRecord> records;
};

// Decodes and validates a block read from disk (any length >= its used size). Corruption
// when it is not block `seq` of chain `guid`.
Result<ZilBlockRead> DecodeZilBlock(std::span<const uint8_t> block, uint64_t guid, uint64_t seq);

}  // namespace volstack::pool

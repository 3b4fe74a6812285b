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
//
// Block formats. Format 1 (chains named by a MOS of version 2-7) stores the block above
// as it is. Format 2 (MOS version 8 and later) stores the same logical block, with magic
// kZilBlockMagicV2, cut into 496-byte pieces, one per 512-byte sector, each between two
// copies of the sector's stamp, and stamps every sector the write covers:
//   sector off  size  field
//   0           8     stamp
//   8           496   the next 496 bytes of the logical block (zero past `used`)
//   504         8     stamp (a copy)
//   stamp = (low 64 bits of XXH3-128(LE64 chain guid, LE64 seq, LE32 sector index))
//           with its low 16 bits replaced by n, the number of sectors the write covered.
// The stamps tell a block that was never written (no sector stamped) or torn by a crash
// during its write (some sectors stamped: its commit never returned, so no record in it
// was acknowledged) from one that was written whole and damaged afterwards (every sector
// 0..n-1 stamped, yet the block is invalid): the first two end the chain, the last is an
// acknowledged record lost and is reported (zil_manager.cc, Claim). A sector damaged in
// a few bytes keeps one stamp copy; a sector replaced whole is, alone, indistinguishable
// from one never written.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pool/blkptr_format.h"
#include "util/result.h"

namespace volstack::pool {

inline constexpr uint64_t kZilBlockMagic = 0x014b424c495a5356ull;    // "VSZILBK\1"
inline constexpr uint64_t kZilBlockMagicV2 = 0x024b424c495a5356ull;  // "VSZILBK\2"
inline constexpr uint32_t kZilFormatPlain = 1;                       // block format 1
inline constexpr uint32_t kZilFormatStamped = 2;  // block format 2: stamped sectors
inline constexpr uint32_t kZilSectorPayload = 496;
inline constexpr uint32_t kZilMaxBlock = 128 * 1024;
inline constexpr uint32_t kZilBlockHeaderSize = 96;
inline constexpr uint32_t kZilRecordHeaderSize = 32;

struct ZilHeaderPhys {
  uint64_t guid = 0;  // 0: no log
  uint64_t seq = 0;
  Dva head;
  uint64_t floor = 0;
  // The chain's block format: kZilFormatStamped for chains this volstack starts; a chain
  // named by a MOS older than version 8 is kZilFormatPlain (mos_format.h).
  uint32_t format = kZilFormatStamped;
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

// Bytes a block of `used` logical bytes takes on disk in `format`, before rounding up to
// the allocation unit; and the logical bytes `phys` bytes on disk hold.
uint64_t ZilPhysSize(uint32_t format, uint64_t used);
uint64_t ZilCapacity(uint32_t format, uint64_t phys);

// Encodes a block into `out` (at least ZilPhysSize(used); the rest is zero-filled, and in
// format 2 every sector of `out` is stamped, out.size() a multiple of 512). Returns the
// used (logical) size.
uint32_t EncodeZilBlock(const ZilBlockInfo& info, std::span<const ZilRecordRef> records,
                        std::span<uint8_t> out, uint32_t format = kZilFormatStamped);

struct ZilBlockRead {
  ZilBlockInfo info;
  uint32_t used = 0;
  std::vector<ZilRecord> records;
};

// Decodes and validates a block read from disk (any length >= its physical size; in
// format 2 a multiple of 512). Corruption when it is not block `seq` of chain `guid`.
Result<ZilBlockRead> DecodeZilBlock(std::span<const uint8_t> block, uint64_t guid, uint64_t seq,
                                    uint32_t format = kZilFormatStamped);

// What an invalid format-2 block is, by its stamps (format 1 blocks carry none: always
// kUnwritten).
enum class ZilBlockState : uint8_t {
  kUnwritten = 0,  // no sector stamped: the chain's end
  kTorn = 1,       // some sectors stamped: a write cut by a crash, never acknowledged
  kDamaged = 2,    // every sector of the write stamped: written whole, damaged since
  // Some sectors could not be read, and every other sector of the write is stamped: an
  // unreadable sector may be one that was written (the block whole) or one torn.
  kUnknown = 3,
};
// `unreadable` (if given): one flag per sector of `block` that could not be read (its
// bytes are ignored). A sector read back unstamped inside the write proves a tear.
ZilBlockState ClassifyZilBlock(std::span<const uint8_t> block, uint64_t guid, uint64_t seq,
                               uint32_t format = kZilFormatStamped,
                               const std::vector<bool>* unreadable = nullptr);
const char* ZilBlockStateName(ZilBlockState s);

}  // namespace volstack::pool

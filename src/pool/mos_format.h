// The MOS (meta-object set) block and space-map blocks.
//
// The MOS is one block, pointed to by the uberblock's rootbp, that describes everything
// else: pool properties, the dataset directory (each volume's geometry, properties and tree
// root pointer) and the list of space-map blocks. It is rewritten (copy-on-write) every txg.
//
//   MOS block (psize rounded up to the vdev allocation unit):
//   off      size      field
//   0        8         magic ("SMOS\0\0\0" + format version byte: 2; 3 once the pool
//                      holds a snapshot or a clone; 4 with a resumable receive; 5 with
//                      compressed blocks)
//   8        8         txg that wrote it
//   16       4         nbp: number of block pointers that follow
//   20       4         json length n
//   24       nbp*128   blkptrs: dataset roots (in directory order), then space-map blocks
//   ...      n         JSON {"props":{..}, "next_id":N, "datasets":[{...,"root":i,
//                            "zil":{guid,seq,vdev,asize,offset,floor} (only when a log
//                            exists: zil_format.h), "origin":S (v3, a clone's origin
//                            snapshot)}], "nsm":K}
//            "defer":[{"txg":T,"nbp":k}] (v6: each txg's deferred frees, oldest first;
//            their blocks' pointers follow the space-map blocks', in this order)
//            A v3 directory also lists snapshots: entries named "pool/vol@snap" whose
//            root is the volume's root as of create_txg (their txg), read-only.
//
//   Space-map block (type kSpaceMap): an append-only log of allocation records, replayed in
//   order at import (a later txg's block follows an earlier one):
//   off   size      field
//   0     8         magic kSpaceMapMagic ("VSSPMAP\1")
//   8     8         count
//   16    16*count  records: u64 (bit 63 = free, bits 0-62 byte offset),
//                            u64 (bits 48-63 vdev id, bits 0-47 length in bytes)
//
// The space map records the blocks of dataset trees (data and indirect). The MOS block and
// the space-map blocks themselves are not recorded in it: import adds them from their
// pointers. A condensed space map (written when the log grows long) lists every live extent
// as an alloc record and replaces the log.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "pool/blkptr_format.h"
#include "pool/zil_format.h"
#include "util/result.h"

namespace volstack::pool {

// The last byte is the MOS format version: 1 had no intent log, 2 adds the "zil" entries,
// 3 adds snapshot entries and clones' "origin". A MOS is written as version 3 only while
// the pool holds a snapshot or a clone (the feature is "active", as ZFS's feature flags
// say), so a pool that never used them stays readable by a version-2 volstack.
// 4 marks a pool holding the resume state of a partial `zfs receive -s` (a hidden dataset
// with "resume:" properties: receive.cc), written only while one exists.
// 5 adds compressed blocks (compress.h) and each dataset's "lused"; a MOS is written as
// version 5 from the first compressed block on (MosPhys::compressed).
// 6 adds the persisted deferred frees (defer_map.h): written while any txg's deferred
// frees are listed, which, as every commit frees the MOS before it, is from a pool's
// second txg on.
// 8 marks the intent-log chains it names as stamped (zil_format.h, block format 2): written
// while any volume has a log chain. Version 7 is reserved (raidz).
// Versions are ordered: a MOS is written as the highest version any active feature needs.
inline constexpr uint64_t kMosMagicV8 = 0x08000053534f4d53ull;  // "SMOS\0\0\0\x08"
inline constexpr uint64_t kMosMagicV6 = 0x06000053534f4d53ull;  // "SMOS\0\0\0\6"
inline constexpr uint64_t kMosMagicV5 = 0x05000053534f4d53ull;  // "SMOS\0\0\0\5"
inline constexpr uint64_t kMosMagicV4 = 0x04000053534f4d53ull;  // "SMOS\0\0\0\4"
inline constexpr uint64_t kMosMagic = 0x03000053534f4d53ull;    // "SMOS\0\0\0\3"
inline constexpr uint64_t kMosMagicV2 = 0x02000053534f4d53ull;
inline constexpr uint64_t kMosMagicV1 = 0x01000053534f4d53ull;
inline constexpr uint64_t kSpaceMapMagic = 0x01504d4150535356ull;  // "VSSPMAP\1"
inline constexpr size_t kMaxMetaBlock = 16u << 20;
// A space-map block holds at most this many bytes: one run of the length the free sets
// count (kIndirectBlockSize, RangeSet's run unit) and ReserveDirty keeps for a commit's
// metadata, so a commit never needs a longer run for its space map, however finely small
// frees have cut the free space. Readers take any size up to kMaxMetaBlock (pools written
// before the cap hold blocks of up to 128 KiB).
inline constexpr size_t kSpaceMapBlockSize = 16 * 1024;
inline constexpr size_t kSpaceMapEntriesPerBlock = (kSpaceMapBlockSize - 16) / 16;

struct DatasetPhys {
  uint64_t id = 0;
  std::string name;  // full name: "trunk/funk"
  uint64_t guid = 0;
  uint64_t create_txg = 0;
  uint64_t volsize = 0;
  uint32_t volblocksize = 0;
  uint32_t levels = 1;
  uint64_t used = 0;  // bytes allocated to its tree
  // The same blocks by logical size ("lused", v5; without it, used: nothing compressed).
  uint64_t lused = 0;
  BlockPtr root;
  std::map<std::string, std::string> props;  // stored (non-default) properties
  ZilHeaderPhys zil;                         // the volume's intent log, if any
  std::string origin;  // a clone's origin snapshot ("pool/vol@snap"); empty otherwise (v3)
  bool is_snapshot() const { return name.find('@') != std::string::npos; }
  bool operator==(const DatasetPhys&) const = default;
};

// One txg's deferred frees (defer_map.h): space-map blocks whose records, all frees, are
// the extents that txg freed; they become allocatable once txg + kTxgDefer is durable.
struct DeferListPhys {
  uint64_t txg = 0;
  std::vector<BlockPtr> blocks;
  bool operator==(const DeferListPhys&) const = default;
};

struct MosPhys {
  uint64_t txg = 0;
  std::map<std::string, std::string> props;
  uint64_t next_id = 1;
  std::vector<DatasetPhys> datasets;
  std::vector<BlockPtr> space_map;
  // Compressed blocks may exist (version 5): set by the first compressed block written and
  // kept from then on, as ZFS's lz4_compress feature stays active once used.
  bool compressed = false;
  // The deferred frees not yet allocatable, oldest txg first (version 6 while non-empty).
  std::vector<DeferListPhys> deferred;
  bool operator==(const MosPhys&) const = default;
};

std::vector<uint8_t> EncodeMos(const MosPhys& mos);
Result<MosPhys> DecodeMos(std::span<const uint8_t> block);

struct SpaceMapEntry {
  bool free = false;
  uint32_t vdev = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  bool operator==(const SpaceMapEntry&) const = default;
};

// At most kSpaceMapEntriesPerBlock entries; the result is 16 + 16*n bytes.
std::vector<uint8_t> EncodeSpaceMapBlock(std::span<const SpaceMapEntry> entries);
Result<std::vector<SpaceMapEntry>> DecodeSpaceMapBlock(std::span<const uint8_t> block);

}  // namespace volstack::pool

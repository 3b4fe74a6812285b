// vdev labels and uberblocks: what import reads to find a pool and its newest state.
//
// Every vdev carries four 256 KiB labels, two at each end (S = size rounded down to 256 KiB):
//
//   0          256K        512K     1M                           S-512K      S-256K      S
//   | label L0 | label L1  | (rsvd) | allocatable space ...      | label L2  | label L3  |
//
// One label (256 KiB):
//
//   off    size   part
//   0      16K    blank (room for a partition table / boot env, as in ZFS)
//   16K    112K   config: LabelConfig (see below), self-checksummed
//   128K   128K   uberblock ring: 32 slots of 4 KiB, slot = txg % 32
//
// Config region (112 KiB):
//   off  size field
//   0    8    magic kLabelMagic ("VSPLABEL")
//   8    8    version (1; 2 on the children of a mirror vdev, 3 on those of a raidz vdev:
//             older volstacks refuse them)
//   16   8    json length n (<= region - 64)
//   24   n    JSON: name, state, pool_guid, vdev_guid, vdev_id, vdev_guids[], ashift, txg
//             (version 2, a mirror child: leaf_guid, children[{guid, path}], alloc_end;
//             version 3, a raidz child: the same and nparity, sector)
//   -40  8    embedded-checksum magic kEckMagic
//   -32  32   SHA-256 of bytes [0, region-40) || LE64(device offset of the region)
//
// Uberblock slot (4 KiB):
//   off  size field
//   0    8    magic 0x00bab10c
//   8    8    version (1)
//   16   8    txg
//   24   8    guid_sum: sum of all vdev guids (import refuses a partial vdev set)
//   32   8    timestamp (unix seconds)
//   40   8    pool_guid
//   48   128  rootbp: blkptr of the MOS block
//   176  8    vdev_count
//   184  8    flags (0; room for an intent-log head / checkpoint)
//   192  ...  zero
//   4056 8    kEckMagic
//   4064 32   SHA-256 of bytes [0, 4056) || LE64(device offset of the slot)
//
// Labels' config is rewritten only on create/import/export/destroy, even labels (L0, L2)
// first, flush, then odd ones; uberblocks are written every txg to all four labels of
// every vdev.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pool/blkptr_format.h"
#include "util/result.h"

namespace volstack::pool {

inline constexpr uint64_t kLabelSize = 256 * 1024;
inline constexpr int kLabelCount = 4;
inline constexpr uint64_t kLabelConfigOffset = 16 * 1024;
inline constexpr uint64_t kLabelConfigSize = 112 * 1024;
inline constexpr uint64_t kUberRingOffset = 128 * 1024;
inline constexpr uint64_t kUberSlotSize = 4096;
inline constexpr uint64_t kUberSlots = 32;
inline constexpr uint64_t kAllocStart = 1024 * 1024;  // first allocatable byte
inline constexpr uint64_t kMinVdevSize = 64ull * 1024 * 1024;
inline constexpr uint64_t kLabelMagic = 0x4c4542414c505356ull;  // "VSPLABEL" little-endian
inline constexpr uint64_t kEckMagic = 0x0210da7ab10c7a11ull;
inline constexpr uint64_t kUberblockMagic = 0x00bab10cull;
inline constexpr uint64_t kFormatVersion = 1;
// The label version of a mirror's children (docs/format/pool.md, "Mirrors"): a volstack
// that knows only version 1 must not import one child of a mirror as a plain vdev.
inline constexpr uint64_t kMirrorLabelVersion = 2;
// The label version of a raidz's children (docs/format/pool.md, "Raidz"): one child holds
// only a column of each block, and a volstack that knows mirrors must not take it for one.
inline constexpr uint64_t kRaidzLabelVersion = 3;

// Byte offset of label `index` (0..3) on a device of `device_size` bytes.
uint64_t LabelOffset(uint64_t device_size, int index);
// End (exclusive) of allocatable space.
uint64_t AllocEnd(uint64_t device_size);

enum class PoolState { kActive, kExported, kDestroyed };
std::string PoolStateName(PoolState s);

struct LabelConfig {
  std::string name;
  PoolState state = PoolState::kActive;
  uint64_t pool_guid = 0;
  uint64_t vdev_guid = 0;
  uint32_t vdev_id = 0;
  std::vector<uint64_t> vdev_guids;  // all top-level vdevs, by id
  uint32_t ashift = 12;
  uint64_t txg = 0;  // txg when the label was written
  uint64_t version = kFormatVersion;
  // The vdev's size in bytes when the label was written; 0 in labels older than the field.
  // Import refuses a vdev smaller than this (a truncated file lost the end of the pool).
  uint64_t vdev_size = 0;
  // A child (leaf) of a mirror top-level vdev (label version 2); empty `children` for a
  // plain vdev, whose leaf is the top-level vdev itself (leaf guid == vdev_guid).
  struct Child {
    uint64_t guid = 0;
    std::string path;      // the device name the child had when the label was written
    bool offline = false;  // taken offline (zpool offline): imported OFFLINE
    bool operator==(const Child&) const = default;
  };
  uint64_t leaf_guid = 0;       // this device's guid among `children`
  std::vector<Child> children;  // every child of the mirror, by position
  uint64_t alloc_end = 0;       // end of the mirror's allocatable space (its smallest child)
  // A child of a raidz (label version 3): its parity (1 or 2) and column sector size;
  // `children` are its columns in order and `alloc_end` is the end of its logical space.
  uint32_t nparity = 0;
  uint32_t sector = 0;
  bool has_children() const { return !children.empty(); }
  bool is_mirror() const { return !children.empty() && nparity == 0; }
  bool is_raidz() const { return nparity > 0; }
  bool operator==(const LabelConfig&) const = default;
};

// Encodes into exactly kLabelConfigSize bytes, checksummed for `device_offset`.
std::vector<uint8_t> EncodeLabelConfig(const LabelConfig& c, uint64_t device_offset);
Result<LabelConfig> DecodeLabelConfig(std::span<const uint8_t> region, uint64_t device_offset);

struct Uberblock {
  uint64_t version = kFormatVersion;
  uint64_t txg = 0;
  uint64_t guid_sum = 0;
  uint64_t timestamp = 0;
  uint64_t pool_guid = 0;
  uint64_t vdev_count = 0;
  BlockPtr rootbp;
  bool operator==(const Uberblock&) const = default;
};

// Encodes into exactly kUberSlotSize bytes, checksummed for `device_offset`.
std::vector<uint8_t> EncodeUberblock(const Uberblock& ub, uint64_t device_offset);
Result<Uberblock> DecodeUberblock(std::span<const uint8_t> slot, uint64_t device_offset);

}  // namespace volstack::pool

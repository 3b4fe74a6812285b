// The on-disk records of the kernel targets lvm2 loads for raid1 and mirror LVs, as far as
// volstack reads and writes them to serve those LVs without device-mapper
// (docs/format/lvm2.md, "raid1 and mirror LVs"). All integers little-endian.
//
//  dm-raid superblock (drivers/md/dm-raid.c, struct dm_raid_superblock), sector 0 of each
//  _rmeta_N sub-LV; the rest of the first 4 KiB is zero:
//  +0   magic u32 "DmRd" (0x64526D44)   +4   compat_features u32 (bit 0: v1.9.0 fields)
//  +8   num_devices u32                  +12  array_position u32 (this leg's index)
//  +16  events u64                       +24  failed_devices u64 (bit i: leg i failed)
//  +32  disk_recovery_offset u64 (sectors of this leg rebuilt; ~0 = in sync)
//  +40  array_resync_offset u64 (sectors of the initial sync done; ~0 = done)
//  +48  level u32 (1)   +52 layout u32   +56 stripe_sectors u32
//  +60  flags u32 (reshape states)       +64  reshape_position u64
//  +72  new_level u32 +76 new_layout u32 +80 new_stripe_sectors u32 +84 delta_disks u32
//  +88  array_sectors u64                +96  data_offset u64   +104 new_data_offset u64
//  +112 sectors u64 (used leg size)      +120 extended_failed_devices[3] u64
//  +144 incompat_features u32            (148 bytes)
//
//  md write-intent bitmap (drivers/md/md-bitmap.h, bitmap_super_t) at byte 4096 of each
//  _rmeta_N, its bits right after it (byte 4096 + 256), one bit per region, set = the region
//  may differ between legs:
//  +0  magic u32 "bitm" (0x6d746962)   +4 version u32 (4)   +8 uuid[16]
//  +24 events u64   +32 events_cleared u64   +40 sync_size u64 (sectors)
//  +48 state u32 (bit 1: stale)   +52 chunksize u32 (bytes)   +56 daemon_sleep u32 (s)
//  +60 write_behind u32   +64 sectors_reserved u32   +68 nodes u32   +72 cluster_name[64]
//
//  dm-log disk log (drivers/md/dm-log.c) of a mirror LV, on its _mlog sub-LV:
//  +0 magic u32 "MiRr" (0x4D695272)   +4 version u32 (2)   +8 nr_regions u64
//  clean bits at byte 1024, one per region, set = the region is in sync.
#pragma once

#include <cstdint>
#include <span>

#include "util/result.h"

namespace volstack::lvm {

inline constexpr uint32_t kDmRaidMagic = 0x64526D44;
inline constexpr uint32_t kDmRaidFeatureV190 = 0x1;
inline constexpr uint64_t kMaxSector = ~uint64_t{0};
inline constexpr uint32_t kDmRaidSuperblockBytes = 4096;  // read and written as one block
inline constexpr uint64_t kMdBitmapOffset = 4096;         // in the rmeta sub-LV
inline constexpr uint32_t kMdBitmapSuperBytes = 256;
inline constexpr uint32_t kMdBitmapMagic = 0x6d746962;
inline constexpr uint32_t kMdBitmapVersion = 4;
inline constexpr uint32_t kMdBitmapStale = 0x2;
inline constexpr uint32_t kMirrorLogMagic = 0x4D695272;
inline constexpr uint32_t kMirrorLogVersion = 2;
inline constexpr uint64_t kMirrorLogBitsOffset = 1024;

struct DmRaidSuperblock {
  uint32_t compat_features = kDmRaidFeatureV190;
  uint32_t num_devices = 0;
  uint32_t array_position = 0;
  uint64_t events = 0;
  uint64_t failed_devices = 0;
  uint64_t disk_recovery_offset = kMaxSector;
  uint64_t array_resync_offset = kMaxSector;
  uint32_t level = 1, layout = 0, stripe_sectors = 0;
  uint32_t flags = 0;
  uint64_t reshape_position = kMaxSector;
  uint32_t new_level = 1, new_layout = 0, new_stripe_sectors = 0, delta_disks = 0;
  uint64_t array_sectors = 0;
  uint64_t data_offset = 0, new_data_offset = 0;
  uint64_t sectors = 0;
  uint64_t extended_failed_devices[3] = {0, 0, 0};
  uint32_t incompat_features = 0;

  bool leg_failed(uint32_t i) const { return i < 64 && (failed_devices >> i) & 1; }
};

// `block` is the first kDmRaidSuperblockBytes of an rmeta. NotFound when it is all zero (an
// rmeta lvm2 wiped and no kernel has used yet); Corruption when the magic is wrong.
Result<DmRaidSuperblock> DecodeDmRaidSuperblock(std::span<const uint8_t> block);
// Fills `block` (kDmRaidSuperblockBytes, zeroed first).
void EncodeDmRaidSuperblock(const DmRaidSuperblock& sb, std::span<uint8_t> block);

struct MdBitmapSuper {
  uint32_t version = kMdBitmapVersion;
  uint8_t uuid[16] = {};
  uint64_t events = 0, events_cleared = 0;
  uint64_t sync_size = 0;  // sectors
  uint32_t state = 0;
  uint32_t chunksize = 0;  // bytes per bit
  uint32_t daemon_sleep = 5;
  uint32_t write_behind = 0;
  uint32_t sectors_reserved = 0;
  uint32_t nodes = 0;
};

// NotFound when all zero; Corruption on a wrong magic.
Result<MdBitmapSuper> DecodeMdBitmapSuper(std::span<const uint8_t> bytes);
void EncodeMdBitmapSuper(const MdBitmapSuper& sb, std::span<uint8_t> bytes);

struct MirrorLogHeader {
  uint32_t version = kMirrorLogVersion;
  uint64_t nr_regions = 0;
};
// NotFound when the magic is absent (dm-log then treats the log as new: nothing in sync).
Result<MirrorLogHeader> DecodeMirrorLogHeader(std::span<const uint8_t> bytes);
void EncodeMirrorLogHeader(const MirrorLogHeader& h, std::span<uint8_t> bytes);

}  // namespace volstack::lvm

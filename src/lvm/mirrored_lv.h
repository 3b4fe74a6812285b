// raid1 and mirror LVs as volstack serves them: which LVs qualify, how their legs are found
// in the metadata lvm2 writes, and their activation as a MirroredDevice (mirrored_device.h).
//
// lvm2's layout (lib/raid/raid.c, lib/mirror/mirrored.c export):
//   raid1:  segment type "raid1", device_count, region_size (sectors),
//           raids = ["X_rmeta_0", "X_rimage_0", "X_rmeta_1", "X_rimage_1", ...]; each image a
//           linear sub-LV as long as X, each rmeta one extent.
//   mirror: segment type "mirror", mirror_count, region_size, optional mirror_log = "X_mlog",
//           mirrors = ["X_mimage_0", 0, "X_mimage_1", 0, ...].
// The segment stays kept byte for byte (metadata.h) and the LV and its sub-LVs stay
// unchangeable; only activation of the top LV is served. Its sub-LVs are still refused.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "lvm/lv_device.h"
#include "lvm/metadata.h"
#include "lvm/mirrored_device.h"

namespace volstack::lvm {

// Whether `lv` is a raid1 or mirror LV volstack activates: one kept segment of type "raid1"
// or "mirror" covering the LV.
bool IsServedMirroredLv(const LogicalVolume& lv);

// The legs (sub-LV names) of a served mirrored LV, and its region size in sectors.
struct MirroredLayout {
  MirroredDevice::Kind kind = MirroredDevice::Kind::kRaid1;
  std::vector<std::string> images, metas;  // metas: raid1 only
  std::string log;                         // mirror only; "" for a core log
  uint64_t region_sectors = 0;
};
Result<MirroredLayout> MirroredLayoutOf(const VolumeGroup& vg, const LogicalVolume& lv);

// Activates `lv` (IsServedMirroredLv). A leg on a missing PV is a failed leg: the LV is
// served degraded as long as one leg is in sync (lvm2's default activation mode for raid).
Result<bdev::BlockDevicePtr> ActivateMirroredLv(const VolumeGroup& vg, const LogicalVolume& lv,
                                                const std::vector<bdev::BlockDevicePtr>& pv_devs,
                                                const LvActivation& activation,
                                                MirroredDevice::OpenReport* report = nullptr);

// What a report shows of a raid1 LV without activating it: the legs its newest superblock
// records as failed, and whether any superblock exists. Legs on missing PVs count as failed.
struct MirroredHealth {
  bool superblocks = false;
  std::vector<bool> failed;
  bool degraded() const;
};
MirroredHealth ReadMirroredHealth(const VolumeGroup& vg, const LogicalVolume& lv,
                                  const std::vector<bdev::BlockDevicePtr>& pv_devs);

}  // namespace volstack::lvm

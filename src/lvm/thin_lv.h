// Thin LVs as volstack serves them: how a thin LV finds its pool in the metadata lvm2 writes,
// and its activation as a ThinDevice (thin_device.h).
//
// lvm2's layout (lib/thin/thin.c export):
//   thin LV:   one segment, type "thin", thin_pool = "POOL", transaction_id, device_id
//              (the id in the pool's metadata), optional origin / external_origin;
//   thin pool: one segment, type "thin-pool", metadata = "POOL_tmeta", pool = "POOL_tdata",
//              transaction_id (must equal the pool metadata's), chunk_size (sectors: the
//              data block size), discards, zero_new_blocks;
//   POOL_tmeta and POOL_tdata: hidden linear or striped LVs (lvol0_pmspare, the spare
//   metadata LV, too).
// The segments stay kept byte for byte (metadata.h) and every LV involved stays unchangeable;
// only activation of a thin LV is served (reads and writes: thin_pool.h). The pool LV and its
// sub-LVs are still refused.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "lvm/lv_device.h"
#include "lvm/metadata.h"

namespace volstack::lvm {

// Whether `lv` is a thin LV volstack activates: one kept segment of type "thin" covering it,
// without an external origin.
bool IsServedThinLv(const LogicalVolume& lv);

struct ThinLayout {
  std::string pool, tmeta, tdata;
  uint64_t device_id = 0;
  uint64_t chunk_sectors = 0;
  uint64_t transaction_id = 0;  // the pool's
};
Result<ThinLayout> ThinLayoutOf(const VolumeGroup& vg, const LogicalVolume& lv);

// Activates `lv` (IsServedThinLv). Every thin LV of one pool activated in this process
// shares one ThinPool.
Result<bdev::BlockDevicePtr> ActivateThinLv(const VolumeGroup& vg, const LogicalVolume& lv,
                                            const std::vector<bdev::BlockDevicePtr>& pv_devs,
                                            const LvActivation& activation);

// lvm2's Data% of a thin LV: its mapped blocks (the pool's committed device details) times
// the block size, over the LV's size, in percent. nullopt when the pool cannot be read.
std::optional<double> ThinDataPercent(const VolumeGroup& vg, const LogicalVolume& lv,
                                      const std::vector<bdev::BlockDevicePtr>& pv_devs);

}  // namespace volstack::lvm

// Extent allocation for LVs: linear and striped segments under lvm2's "normal" and
// "contiguous" policies.
//
//   normal      linear: first continue the LV's last segment in place if the PE after it is
//               free, then take free runs PV by PV in order. striped: repeatedly pick the N
//               PVs with the largest free runs and lay one segment across them.
//   contiguous  every new area must extend the previous one in place, or (for a new LV)
//               fit in one free run per stripe; otherwise ENOSPC.
//
// Invariant kept (and re-checked by ValidateVg on every commit): no PE is used twice. On
// failure the VG is unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lvm/metadata.h"

namespace volstack::lvm {

enum class AllocPolicy { kNormal, kContiguous };

Result<AllocPolicy> ParseAllocPolicy(const std::string& name);  // "normal", "contiguous", "inherit"

struct AllocRequest {
  uint32_t extents = 0;  // LEs to add; a multiple of stripes
  uint32_t stripes = 1;
  uint32_t stripe_size = 0;  // sectors, when stripes > 1
  AllocPolicy policy = AllocPolicy::kNormal;
  std::vector<int> pvs;  // PV indexes allowed; empty: every allocatable PV
};

struct FreeRun {
  uint32_t start = 0;
  uint32_t count = 0;
  bool operator==(const FreeRun&) const = default;
};

// Free PE runs of each PV (parallel to vg.pvs), in PE order.
std::vector<std::vector<FreeRun>> FreeExtents(const VolumeGroup& vg);

// Appends `req.extents` LEs to LV `lv_name`. ENOSPC (VG unchanged) when they do not fit.
Status AllocateExtents(VolumeGroup& vg, const std::string& lv_name, const AllocRequest& req);

// Trims LV `lv_name` to `new_le_count` extents (> 0), freeing PEs from its end.
Status ReduceExtents(VolumeGroup& vg, const std::string& lv_name, uint32_t new_le_count);

// Joins adjacent segments that continue each other on the same areas (lvm2's
// lv_merge_segments), so an extension in place stays one segment.
void MergeSegments(LogicalVolume& lv);

}  // namespace volstack::lvm

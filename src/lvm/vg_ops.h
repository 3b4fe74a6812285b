// Changes to the VolumeGroup model, one per lvm2 command. Each works on the caller's copy
// and leaves it unchanged on error; the caller commits the copy with Lvm::Commit, which
// validates it again.
#pragma once

#include <string>
#include <vector>

#include "lvm/allocator.h"
#include "lvm/metadata.h"
#include "lvm/pv.h"

namespace volstack::lvm {

// The PV record a VG gets for `pv` with `extent_size` (sectors): pe_count from the space
// between pe_start and the end of the device (less an mda at the end).
Result<PhysicalVolume> MakePvRecord(const Pv& pv, uint32_t extent_size);

// lvm2's rule: a power of two, or a multiple of 128 KiB (256 sectors); at least 1 KiB.
bool IsValidExtentSize(uint64_t sectors);

Result<VolumeGroup> NewVg(const std::string& name, uint32_t extent_size,
                          const std::vector<const Pv*>& pvs);
Status AddPvToVg(VolumeGroup& vg, const Pv& pv);
// Fails with EBUSY if any LV uses the PV. Renumbers the areas of later PVs.
Status RemovePvFromVg(VolumeGroup& vg, const std::string& pv_uuid);

struct NewLvOptions {
  std::string name;
  AllocRequest alloc;
};
Status CreateLv(VolumeGroup& vg, const NewLvOptions& options);
Status RemoveLv(VolumeGroup& vg, const std::string& lv_name);
Status RenameLv(VolumeGroup& vg, const std::string& from, const std::string& to);

}  // namespace volstack::lvm

#include "lvm/vg_ops.h"

#include <sys/utsname.h>

#include <ctime>

#include "lvm/uuid.h"

namespace volstack::lvm {

bool IsValidExtentSize(uint64_t sectors) {
  if (sectors < 2 || sectors > UINT32_MAX) return false;
  return (sectors & (sectors - 1)) == 0 || sectors % 256 == 0;
}

Result<PhysicalVolume> MakePvRecord(const Pv& pv, uint32_t extent_size) {
  PhysicalVolume rec;
  rec.id = pv.uuid();
  rec.device = pv.name();
  rec.dev_size = pv.dev()->size() / kSector;
  rec.pe_start = pv.pe_start_bytes() / kSector;
  const uint64_t end = pv.usable_end_bytes();
  const uint64_t ext = uint64_t{extent_size} * kSector;
  if (end <= pv.pe_start_bytes() || (end - pv.pe_start_bytes()) / ext == 0) {
    return Status::InvalidArgument("PV " + pv.name() + " is too small for one extent of " +
                                   std::to_string(ext) + " bytes");
  }
  const uint64_t count = (end - pv.pe_start_bytes()) / ext;
  rec.pe_count = static_cast<uint32_t>(std::min<uint64_t>(count, UINT32_MAX));
  return rec;
}

Result<VolumeGroup> NewVg(const std::string& name, uint32_t extent_size,
                          const std::vector<const Pv*>& pvs) {
  if (!IsValidLvmName(name)) return Status::InvalidArgument("invalid volume group name " + name);
  if (!IsValidExtentSize(extent_size)) {
    return Status::InvalidArgument("invalid extent size " + std::to_string(extent_size) +
                                   " sectors");
  }
  VolumeGroup vg;
  vg.name = name;
  vg.id = GenerateId();
  vg.seqno = 0;  // Commit makes it 1
  vg.extent_size = extent_size;
  for (const Pv* pv : pvs) VS_RETURN_IF_ERROR(AddPvToVg(vg, *pv));
  return vg;
}

Status AddPvToVg(VolumeGroup& vg, const Pv& pv) {
  if (vg.FindPvById(pv.uuid()) >= 0) {
    return Status::Exists("Physical volume '" + pv.name() + "' is already in volume group '" +
                          vg.name + "'");
  }
  VS_ASSIGN_OR_RETURN(auto rec, MakePvRecord(pv, vg.extent_size));
  vg.pvs.push_back(std::move(rec));
  return Status::Ok();
}

Status RemovePvFromVg(VolumeGroup& vg, const std::string& pv_uuid) {
  const int idx = vg.FindPvById(pv_uuid);
  if (idx < 0) return Status::NotFound("PV " + FormatId(pv_uuid) + " is not in VG " + vg.name);
  if (vg.pv_allocated_extents(idx) > 0) {
    return Status::Busy("Physical volume \"" + vg.pvs[idx].device + "\" still in use");
  }
  if (vg.pvs.size() == 1) {
    return Status::InvalidArgument("Can't remove final physical volume from volume group \"" +
                                   vg.name + "\"");
  }
  vg.pvs.erase(vg.pvs.begin() + idx);
  for (auto& lv : vg.lvs) {
    for (auto& seg : lv.segments) {
      for (auto& a : seg.areas) {
        if (a.pv > idx) a.pv--;
      }
    }
  }
  return Status::Ok();
}

Status CreateLv(VolumeGroup& vg, const NewLvOptions& options) {
  if (!IsValidNewLvName(options.name)) {
    return Status::InvalidArgument("Logical volume name \"" + options.name + "\" is invalid.");
  }
  if (vg.FindLv(options.name)) {
    return Status::Exists("Logical Volume \"" + options.name +
                          "\" already exists in volume group \"" + vg.name + "\"");
  }
  if (vg.max_lv && vg.lvs.size() >= vg.max_lv) {
    return Status::NoSpace("Maximum number of logical volumes (" + std::to_string(vg.max_lv) +
                           ") reached in volume group " + vg.name);
  }
  if (options.alloc.extents == 0)
    return Status::InvalidArgument("Unable to create LV with zero extents");
  VolumeGroup copy = vg;
  LogicalVolume lv;
  lv.name = options.name;
  lv.id = GenerateId();
  lv.creation_time = static_cast<uint64_t>(::time(nullptr));
  struct utsname u;
  if (::uname(&u) == 0) lv.creation_host = u.nodename;
  if (options.alloc.policy == AllocPolicy::kContiguous) lv.allocation_policy = "contiguous";
  copy.lvs.push_back(std::move(lv));
  VS_RETURN_IF_ERROR(AllocateExtents(copy, options.name, options.alloc));
  vg = std::move(copy);
  return Status::Ok();
}

Status RemoveLv(VolumeGroup& vg, const std::string& lv_name) {
  for (auto it = vg.lvs.begin(); it != vg.lvs.end(); ++it) {
    if (it->name != lv_name) continue;
    for (const auto& other : vg.lvs) {
      for (const auto& seg : other.segments) {
        for (const auto& a : seg.areas) {
          if (a.lv == lv_name) return Status::Busy("LV " + lv_name + " is in use by " + other.name);
        }
      }
    }
    if (it->HasStatus("LOCKED") || it->HasStatus("PVMOVE")) {
      return Status::Busy("Can't remove locked logical volume " + lv_name);
    }
    vg.lvs.erase(it);
    return Status::Ok();
  }
  return Status::NotFound("Failed to find logical volume \"" + vg.name + "/" + lv_name + "\"");
}

Status RenameLv(VolumeGroup& vg, const std::string& from, const std::string& to) {
  LogicalVolume* lv = vg.FindLv(from);
  if (!lv)
    return Status::NotFound("Existing logical volume \"" + from +
                            "\" not found in volume group \"" + vg.name + "\"");
  if (!IsValidNewLvName(to))
    return Status::InvalidArgument("New logical volume name \"" + to + "\" is invalid.");
  if (vg.FindLv(to)) {
    return Status::Exists("Logical Volume \"" + to + "\" already exists in volume group \"" +
                          vg.name + "\"");
  }
  lv->name = to;
  return Status::Ok();
}

}  // namespace volstack::lvm

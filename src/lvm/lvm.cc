#include "lvm/lvm.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <mutex>

#include "lvm/kept_lvs.h"
#include "lvm/lv_device.h"
#include "lvm/mirrored_lv.h"
#include "lvm/thin_lv.h"
#include "lvm/uuid.h"

namespace volstack::lvm {

bool VgHandle::partial() const { return std::find(pvs.begin(), pvs.end(), nullptr) != pvs.end(); }

int VgHandle::mda_count() const {
  int n = 0;
  for (const Pv* pv : pvs) {
    if (pv) n += static_cast<int>(pv->label().metadata_areas.size());
  }
  return n;
}

ExportInfo MakeExportInfo(const std::string& description) {
  ExportInfo info;
  info.description = description;
  struct utsname u;
  if (::uname(&u) == 0) {
    info.creation_host = u.nodename;
    info.uname = std::string(u.sysname) + " " + u.nodename + " " + u.release + " " + u.version +
                 " " + u.machine;
  }
  info.creation_time = static_cast<uint64_t>(::time(nullptr));
  return info;
}

Lvm::Lvm(DeviceOpener opener, bool read_only, std::shared_ptr<Activations> activations)
    : opener_(std::move(opener)),
      read_only_(read_only),
      activations_(activations ? std::move(activations) : Activations::Default()) {}
Lvm::~Lvm() = default;

Result<Pv*> Lvm::AddDevice(const std::string& name) {
  for (auto& pv : pvs_) {
    if (pv->name() == name) return pv.get();
  }
  VS_ASSIGN_OR_RETURN(auto dev, opener_(name, read_only_));
  VS_ASSIGN_OR_RETURN(auto pv, Pv::Open(name, std::move(dev)));
  for (auto& other : pvs_) {
    if (other->uuid() == pv->uuid()) {
      return Status::Exists(name + ": duplicate of PV " + FormatId(pv->uuid()) + " on " +
                            other->name());
    }
  }
  pvs_.push_back(std::move(pv));
  return pvs_.back().get();
}

void Lvm::Scan(const std::vector<std::string>& names) {
  for (const auto& name : names) {
    auto pv = AddDevice(name);
    if (!pv.ok() && !pv.status().IsNotFound() && pv.status().code() != EEXIST) {
      scan_errors_.push_back({name, pv.status()});
    }
  }
  Assemble();
}

void Lvm::Assemble() {
  vgs_.clear();
  std::map<std::string, const VolumeGroup*> best;  // VG id -> highest seqno copy
  for (auto& pv : pvs_) {
    for (const auto& c : pv->copies()) {
      if (!c.error.ok() &&
          std::none_of(scan_errors_.begin(), scan_errors_.end(), [&](const ScanError& e) {
            return e.status.message() == c.error.message();
          })) {
        scan_errors_.push_back({pv->name(), c.error});
      }
      if (!c.vg) continue;
      auto& b = best[c.vg->id];
      if (!b || c.vg->seqno > b->seqno) b = &*c.vg;
    }
  }
  for (auto& [id, vg] : best) {
    VgHandle h;
    h.vg = *vg;
    for (const auto& pvm : h.vg.pvs) {
      Pv* found = nullptr;
      for (auto& pv : pvs_) {
        if (pv->uuid() == pvm.id) found = pv.get();
      }
      h.pvs.push_back(found);
      if (!found) {
        h.warnings.push_back("Couldn't find device with uuid " + FormatId(pvm.id) + ".");
        continue;
      }
      for (const auto& c : found->copies()) {
        if (!c.vg || c.vg->seqno != h.vg.seqno || c.vg->id != h.vg.id) h.inconsistent = true;
      }
    }
    if (h.inconsistent) {
      h.warnings.push_back("Inconsistent metadata found for VG " + h.vg.name + ".");
    }
    vgs_.push_back(std::move(h));
  }
  std::sort(vgs_.begin(), vgs_.end(),
            [](const VgHandle& a, const VgHandle& b) { return a.vg.name < b.vg.name; });
}

VgHandle* Lvm::FindVg(const std::string& name) {
  for (auto& h : vgs_) {
    if (h.vg.name == name) return &h;
  }
  return nullptr;
}

Pv* Lvm::FindPv(const std::string& name_or_uuid) {
  for (auto& pv : pvs_) {
    if (pv->name() == name_or_uuid) return pv.get();
  }
  auto raw = ParseId(name_or_uuid);
  for (auto& pv : pvs_) {
    if (raw.ok() && pv->uuid() == *raw) return pv.get();
  }
  return nullptr;
}

VgHandle* Lvm::VgOfPv(const Pv* pv) {
  for (auto& h : vgs_) {
    for (const Pv* p : h.pvs) {
      if (p == pv) return &h;
    }
  }
  return nullptr;
}

Result<Pv*> Lvm::CreatePv(const std::string& name, const PvCreateOptions& options) {
  if (read_only_) return Status::ReadOnly("LVM session is read-only");
  for (auto it = pvs_.begin(); it != pvs_.end(); ++it) {
    if ((*it)->name() != name) continue;
    if (VgHandle* h = VgOfPv(it->get())) {
      return Status::Exists("Can't initialize physical volume \"" + name + "\" of volume group \"" +
                            h->vg.name + "\" without -ff");
    }
    pvs_.erase(it);
    break;
  }
  VS_ASSIGN_OR_RETURN(auto dev, opener_(name, false));
  if (auto existing = Pv::Open(name, dev); existing.ok()) {
    if (const MdaCopy* c = (*existing)->best_copy()) {
      return Status::Exists("Can't initialize physical volume \"" + name + "\" of volume group \"" +
                            c->vg->name + "\" without -ff");
    }
  }
  VS_ASSIGN_OR_RETURN(auto pv, Pv::Create(name, std::move(dev), options));
  pvs_.push_back(std::move(pv));
  Assemble();
  return pvs_.back().get();
}

Status Lvm::RemovePv(Pv* pv) {
  if (read_only_) return Status::ReadOnly("LVM session is read-only");
  if (VgHandle* h = VgOfPv(pv)) {
    return Status::Busy("PV " + pv->name() + " is used by VG " + h->vg.name +
                        " so please use vgreduce first.");
  }
  VS_RETURN_IF_ERROR(pv->Wipe());
  pvs_.erase(std::find_if(pvs_.begin(), pvs_.end(), [&](auto& p) { return p.get() == pv; }));
  Assemble();
  return Status::Ok();
}

Status Lvm::Commit(VolumeGroup vg, const std::string& description,
                   const std::vector<Pv*>& released) {
  if (read_only_) return Status::ReadOnly("LVM session is read-only");
  // Kept LVs first: a change to one is refused naming it, before anything it breaks.
  for (const VgHandle& h : vgs_) {
    if (!vg.id.empty() && h.vg.id == vg.id) VS_RETURN_IF_ERROR(CheckKeptUnchanged(h.vg, vg));
  }
  VS_RETURN_IF_ERROR(ValidateVg(vg));
  std::vector<Pv*> members;
  for (const auto& pvm : vg.pvs) {
    Pv* found = nullptr;
    for (auto& pv : pvs_) {
      if (pv->uuid() == pvm.id) found = pv.get();
    }
    if (!found) {
      return Status::NotFound("VG " + vg.name + ": PV " + FormatId(pvm.id) +
                              " is missing; refusing to write metadata");
    }
    members.push_back(found);
  }
  int mdas = 0;
  for (Pv* pv : members) mdas += static_cast<int>(pv->mdas().size());
  if (mdas == 0) return Status::InvalidArgument("VG " + vg.name + ": no metadata areas");
  // Sessions of one stack (the daemon's requests and its pvmove job) commit one at a time,
  // and never on top of metadata newer than the copy they changed.
  std::lock_guard commit_lock(activations_->commit_mu());
  if (!vg.id.empty() && vg.seqno > 0) {
    uint32_t newest = 0;
    for (Pv* pv : members) {
      if (!pv->Reload().ok()) continue;
      for (const auto& c : pv->copies()) {
        if (c.vg && c.vg->id == vg.id) newest = std::max(newest, c.vg->seqno);
      }
    }
    if (newest > vg.seqno) {
      Assemble();
      return Status::FromErrno(EAGAIN, "VG " + vg.name + " changed since it was read (seqno " +
                                           std::to_string(newest) + " on disk, " +
                                           std::to_string(vg.seqno) + " here); try again");
    }
  }
  vg.seqno++;
  const std::string text = ExportVg(vg, MakeExportInfo(description));

  for (Pv* pv : members) VS_RETURN_IF_ERROR(pv->SetInUse(true));
  std::vector<std::vector<RawLocn>> locns(members.size());
  for (size_t i = 0; i < members.size(); i++) {
    for (auto& mda : members[i]->mdas()) {
      auto l = mda.WriteText(text);
      if (!l.ok()) return l.status().WithContext(members[i]->name());
      locns[i].push_back(*l);
    }
  }
  auto flush_all = [&]() -> Status {
    for (Pv* pv : members) VS_RETURN_IF_ERROR(pv->dev()->Flush());
    return Status::Ok();
  };
  VS_RETURN_IF_ERROR(flush_all());
  for (size_t i = 0; i < members.size(); i++) {
    auto& m = members[i]->mdas();
    for (size_t j = 0; j < m.size(); j++) VS_RETURN_IF_ERROR(m[j].Precommit(locns[i][j]));
  }
  VS_RETURN_IF_ERROR(flush_all());
  for (size_t i = 0; i < members.size(); i++) {
    auto& m = members[i]->mdas();
    for (size_t j = 0; j < m.size(); j++) VS_RETURN_IF_ERROR(m[j].Commit(locns[i][j]));
  }
  VS_RETURN_IF_ERROR(flush_all());
  for (Pv* pv : released) VS_RETURN_IF_ERROR(pv->MakeOrphan());
  for (Pv* pv : members) VS_RETURN_IF_ERROR(pv->Reload());
  Assemble();
  // LVs active in this process (the daemon's) follow the committed metadata.
  if (VgHandle* h = FindVg(vg.name)) {
    std::vector<bdev::BlockDevicePtr> devs;
    for (Pv* pv : h->pvs) devs.push_back(pv ? pv->dev() : nullptr);
    Status remap = RemapLiveLvs(h->vg, devs, activations_.get());
    if (!remap.ok())
      return remap.WithContext("metadata committed, but an active LV did not follow");
  }
  return Status::Ok();
}

Status Lvm::ChangePvUuid(Pv* pv, const std::string& raw_uuid, const VolumeGroup* vg,
                         const std::string& description) {
  if (read_only_) return Status::ReadOnly("LVM session is read-only");
  if (!IsValidRawId(raw_uuid)) return Status::InvalidArgument("invalid PV UUID " + raw_uuid);
  for (const auto& other : pvs_) {
    if (other.get() != pv && other->uuid() == raw_uuid) {
      return Status::Exists("UUID " + FormatId(raw_uuid) + " already in use on " + other->name());
    }
  }
  VgHandle* h = VgOfPv(pv);
  if (!h) {
    if (vg) return Status::InvalidArgument(pv->name() + " is an orphan PV");
    VS_RETURN_IF_ERROR(pv->SetUuid(raw_uuid));
    Assemble();
    return Status::Ok();
  }
  if (h->partial()) {
    return Status::NotFound("Cannot change VG " + h->vg.name + " while PVs are missing.");
  }
  const int index = h->vg.FindPvById(pv->uuid());
  if (!vg || vg->id != h->vg.id || index < 0 || vg->pvs.size() != h->vg.pvs.size() ||
      vg->pvs[index].id != raw_uuid) {
    return Status::InvalidArgument("VG metadata for " + pv->name() + " must carry its new UUID");
  }
  const std::string old = pv->uuid();
  VS_RETURN_IF_ERROR(pv->SetUuid(raw_uuid));
  Status s = Commit(*vg, description);
  if (s.ok()) return s;
  // Put the old label back unless some mda already committed the new metadata (then the new
  // UUID is the one the VG knows).
  Status reload = Reload();
  if (reload.ok() && VgOfPv(pv) == nullptr) {
    Status undo = pv->SetUuid(old);
    if (!undo.ok()) {
      return Status::FromErrno(s.code(), s.message() + "; restoring the old label of " +
                                             pv->name() + " failed too: " + undo.message());
    }
    Assemble();
  }
  return s;
}

Status Lvm::Reload() {
  for (auto& pv : pvs_) VS_RETURN_IF_ERROR(pv->Reload());
  Assemble();
  return Status::Ok();
}

Status Lvm::RemoveVg(VgHandle* handle) {
  if (read_only_) return Status::ReadOnly("LVM session is read-only");
  if (handle->partial()) return Status::NotFound("VG " + handle->vg.name + " has missing PVs");
  std::vector<Pv*> pvs = handle->pvs;
  for (Pv* pv : pvs) VS_RETURN_IF_ERROR(pv->MakeOrphan());
  Assemble();
  return Status::Ok();
}

Result<bdev::BlockDevicePtr> Lvm::Activate(VgHandle& handle, const std::string& lv_name,
                                           bool partial) {
  const LogicalVolume* lv = handle.vg.FindLv(lv_name);
  if (!lv) {
    return Status::NotFound("Failed to find logical volume \"" + handle.vg.name + "/" + lv_name +
                            "\"");
  }
  std::vector<bdev::BlockDevicePtr> devs;
  for (Pv* pv : handle.pvs) devs.push_back(pv ? pv->dev() : nullptr);
  LvActivation act;
  act.activations = activations_;
  act.partial = partial;
  // raid1 and mirror LVs are served (degraded when a leg's PV is missing), thin LVs
  // read-only; their sub-LVs, thin pools and every other kept type are not.
  if (IsServedMirroredLv(*lv)) return ActivateMirroredLv(handle.vg, *lv, devs, act);
  if (IsServedThinLv(*lv)) return ActivateThinLv(handle.vg, *lv, devs, act);
  VS_RETURN_IF_ERROR(CheckServed(handle.vg, lv_name, "activated"));
  VS_ASSIGN_OR_RETURN(auto dev, LvDevice::Create(handle.vg, lv_name, devs, act));
  return bdev::BlockDevicePtr(std::move(dev));
}

}  // namespace volstack::lvm

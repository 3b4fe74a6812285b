// The pool and LVM branches of the device-name resolver (Stack::Resolve, device_names.cc),
// and the opens they share with the rest of the stack: pools from zpool.cache, LVM sessions
// over the devices file and the pool volumes.
#include <algorithm>
#include <cstdio>

#include "stack/lvm_state.h"
#include "stack/snapshot_devices.h"
#include "stack/stack.h"
#include "util/request_io.h"

namespace volstack::stack {

// "trunk/funk" is a volume of a pool in the state dir's zpool.cache. The pool is imported for
// the call; the returned device keeps it open and the pool syncs and closes when the last
// reference drops.
Result<bdev::BlockDevicePtr> Stack::OpenPoolVolume(const std::string& name, bool read_only,
                                                   Lookup lookup) {
  const size_t slash = name.find('/');
  if (slash == std::string::npos) return Status::NotFound("no pool volume '" + name + "'");
  auto cached = FindCachedPool(state_.root, name.substr(0, slash));
  if (!cached.ok() || !cached->has_value()) {
    return Status::NotFound("no pool volume '" + name + "'");
  }
  VS_ASSIGN_OR_RETURN(auto p, OpenPoolAt(name.substr(0, slash), read_only, lookup));
  VS_RETURN_IF_ERROR(CheckSnapshotDevice(*p, name));  // "pool/vol@snap": snapdev=visible
  pool::OpenVolumeOptions o;
  o.read_only = read_only;
  return p->OpenVolume(name, o);
}

// "vg/lv" is any LV of a VG found on the scanned devices (the devices file and the pool
// volumes), activated for the caller. The returned LvDevice owns its PV devices, so it stays
// usable after the scan session is gone.
Result<bdev::BlockDevicePtr> Stack::OpenLv(const std::string& name, bool read_only, Lookup lookup) {
  auto [vg, lv] = SplitLvName(name);
  if (lv.empty() || lv.find('/') != std::string::npos || lookup.for_lv) {
    return Status::NotFound("no LV '" + name + "'");
  }
  auto session = OpenLvmAt(read_only, {}, {.in_session = lookup.in_session, .for_lv = true});
  lvm::VgHandle* h = session->FindVg(vg);
  if (!h || !h->vg.FindLv(lv)) return Status::NotFound("no LV '" + name + "'");
  // The PVs were opened read-only for a read-only caller, so the LV is read-only too.
  return session->Activate(*h, lv, false);
}

std::unique_ptr<lvm::Lvm> Stack::OpenLvm(bool read_only, const std::vector<std::string>& extra) {
  return OpenLvmAt(read_only, extra, Lookup{});
}

std::unique_ptr<lvm::Lvm> Stack::OpenLvmAt(bool read_only, const std::vector<std::string>& extra,
                                           Lookup lookup) {
  std::vector<std::string> names;
  auto add = [&](const std::string& n) {
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  };
  for (const auto& n : extra) add(NormalizeDeviceName(n));
  auto devices = ReadListFile(LvmDevicesPath(state_.root));
  if (!devices.ok()) std::fprintf(Err(), "volstack: %s\n", devices.status().ToString().c_str());
  for (const auto& n : devices.ok() ? *devices : std::vector<std::string>{}) add(n);
  if (!lookup.in_session) {
    for (const auto& n : ListPoolVolumeNamesAt(lookup)) add(n);
  }
  const Lookup inner{.in_session = true, .for_lv = lookup.for_lv};
  auto opener = [this, inner](const std::string& name, bool ro) {
    return Resolve(name, ro, inner);
  };
  auto lvm = std::make_unique<lvm::Lvm>(opener, read_only, activations_);
  lvm->Scan(names);
  return lvm;
}

// A pool that cannot be read is named on stderr, as lvm2 names a device it cannot read: its
// volumes' PVs are missing from the scan, and a VG on them would otherwise just be "not
// found", with no hint why.
std::vector<std::string> Stack::ListPoolVolumeNames() { return ListPoolVolumeNamesAt(Lookup{}); }

std::vector<std::string> Stack::ListPoolVolumeNamesAt(Lookup lookup) {
  std::vector<std::string> out;
  auto pools = ReadPoolCache(state_.root);
  if (!pools.ok()) {
    std::fprintf(Err(), "  WARNING: pool volumes not scanned: %s\n",
                 pools.status().message().c_str());
    return out;
  }
  for (const auto& c : *pools) {
    auto p = OpenPoolAt(c.name, /*read_only=*/true, lookup);
    if (!p.ok()) {
      std::fprintf(Err(), "  WARNING: volumes of pool %s not scanned: %s\n", c.name.c_str(),
                   p.status().message().c_str());
      continue;
    }
    for (const auto& d : (*p)->ListDatasets()) {
      if (d.type == "volume") out.push_back(d.name);
    }
  }
  return out;
}

std::vector<std::string> Stack::ListDeviceNames() {
  std::vector<std::string> names = ListPoolVolumeNames();
  auto session = OpenLvmAt(true, {}, {.in_session = false, .for_lv = true});
  for (const auto& h : session->vgs()) {
    for (const auto& lv : h.vg.lvs) {
      if (lv.visible()) names.push_back(h.vg.name + "/" + lv.name);
    }
  }
  return names;
}

Result<std::shared_ptr<pool::Pool>> Stack::OpenPool(const std::string& name, bool read_only) {
  return OpenPoolAt(name, read_only, Lookup{});
}

// The lookup goes on to the pool's vdevs: a vdev that is an LV, met while resolving an LV,
// is not resolved again (a pool on an LV whose PV is that pool's volume ends there).
Result<std::shared_ptr<pool::Pool>> Stack::OpenPoolAt(const std::string& name, bool read_only,
                                                      Lookup lookup) {
  return open_pools_.Open(name, read_only,
                          [&](bool ro) { return ImportCachedPool(name, ro, lookup); });
}

Result<std::shared_ptr<pool::Pool>> Stack::ImportCachedPool(const std::string& name, bool read_only,
                                                            Lookup lookup) {
  VS_ASSIGN_OR_RETURN(auto entry, FindCachedPool(state_.root, name));
  if (!entry) return Status::NotFound("cannot open '" + name + "': no such pool");
  std::vector<bdev::BlockDevicePtr> devs;
  std::string missing;  // a mirror may do without some: the import decides
  Lookup vdev_lookup = lookup;
  vdev_lookup.vdev = true;
  for (const auto& v : entry->vdevs) {
    auto d = Resolve(v, read_only, vdev_lookup);
    if (!d.ok() && d.status().IsNotFound()) {
      missing += (missing.empty() ? "" : ", ") + v;
      continue;
    }
    if (!d.ok()) {
      return d.status().WithContext("cannot open pool '" + name + "': vdev " + v);
    }
    devs.push_back(*d);
  }
  if (devs.empty()) {
    return Status::NotFound("cannot open pool '" + name + "': vdev " + missing + " is missing");
  }
  pool::PoolImportOptions io;
  io.expected_guid = entry->guid;  // checked before anything is written to the vdevs
  io.read_only = read_only;        // no label update, no log replay
  // A read-only instance lists or scans (zpool list, lvm2's device scan) and is closed by
  // the same command: a data cache, whose tables are sized by the pool's cachemax, would
  // cost it more than all it reads.
  io.tuning.cache_data = !read_only;
  auto imported = pool::Pool::Import(devs, io);
  if (!imported.ok() && !missing.empty()) {
    return imported.status().WithContext("cannot open pool '" + name + "' (missing " + missing +
                                         ")");
  }
  VS_ASSIGN_OR_RETURN(auto p, std::move(imported));
  if (p->guid() != entry->guid) {
    return Status::NotFound("cannot open '" + name + "': the vdevs now hold another pool");
  }
  return p;
}

}  // namespace volstack::stack

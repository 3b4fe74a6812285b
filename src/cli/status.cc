// `volstack status`: the stack as a tree, top to bottom as data flows up:
//
//   pool → its vdevs and volumes → the VG a volume is a PV of → its LVs → each device's
//   exports (devfs file, loop devices and what mounts them, NBD listeners)
//
// with health, sizes and what uses what; `--json` gives the same data. The data comes from
// the state dir (zpool.cache, lvm/active, loops.json, nbd.json), the pools and PV labels
// (read-only when no daemon runs; the daemon's own open pools when it does), and the kernel
// (loop devices from sysfs, mounts from /proc/self/mountinfo, open devfs files from /proc).
// Only the first line and what is live (active devices, the devfs mount, serving listeners)
// differ between a daemon and none.
#include "cli/status.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/device_usage.h"
#include "cli/lvm_common.h"
#include "cli/pool_common.h"
#include "cli/status_snapshots.h"
#include "export/loop_bindings.h"
#include "stack/nbd_listeners.h"
#include "stack/stack.h"
#include "util/request_io.h"

namespace volstack::cli {

namespace {

using nlohmann::json;

// A device's exports: devfs file (live), loop devices (live, and recorded ones not bound),
// NBD listeners (recorded; serving or not).
json ExportsOf(const std::string& name, const DeviceUsage& usage, bool active,
               const std::string& devfs_dir, const std::vector<exportfs::LoopBinding>& recorded,
               const std::vector<stack::NbdListenerStatus>& nbd) {
  json e = json::object();
  e["devfs"] = active && !devfs_dir.empty() ? json(devfs_dir + "/" + name) : json(nullptr);
  json loops = json::array();
  std::set<std::string> bound;
  for (const auto& l : usage.LoopsOf(name)) {
    bound.insert(l.device);
    json mounts = json::array();
    for (const auto& m : usage.MountsOf(l.device)) {
      mounts.push_back({{"mount_point", m.mount_point}, {"fstype", m.fstype}});
    }
    loops.push_back({{"device", l.device},
                     {"bound", true},
                     {"sector_size", l.sector_size},
                     {"read_only", l.read_only},
                     {"mounts", mounts}});
  }
  for (const auto& b : recorded) {
    if (b.name == name && !bound.count(b.device)) {
      loops.push_back({{"device", b.device},
                       {"bound", false},
                       {"sector_size", b.sector_size},
                       {"read_only", b.read_only},
                       {"mounts", json::array()}});
    }
  }
  e["loops"] = loops;
  json listeners = json::array();
  for (const auto& l : nbd) {
    for (const auto& x : l.record.exports) {
      if (x.device != name) continue;
      const bool missing =
          std::find(l.unserved.begin(), l.unserved.end(), x.name) != l.unserved.end();
      listeners.push_back({{"address", l.record.address()},
                           {"export", x.name},
                           {"serving", l.serving && !missing},
                           {"connections", l.connections}});
    }
  }
  e["nbd"] = listeners;
  return e;
}

void PrintExports(const json& e, const std::string& indent) {
  if (!e["devfs"].is_null()) {
    std::fprintf(Out(), "%sdevfs %s\n", indent.c_str(), e["devfs"].get<std::string>().c_str());
  }
  for (const auto& l : e["loops"]) {
    std::fprintf(Out(), "%sloop %s  %u-byte sectors%s%s\n", indent.c_str(),
                 l["device"].get<std::string>().c_str(), l["sector_size"].get<uint32_t>(),
                 l["read_only"].get<bool>() ? "  read-only" : "",
                 l["bound"].get<bool>() ? "" : "  (not bound; restored at up)");
    for (const auto& m : l["mounts"]) {
      std::fprintf(Out(), "%s  mounted on %s (%s)\n", indent.c_str(),
                   m["mount_point"].get<std::string>().c_str(),
                   m["fstype"].get<std::string>().c_str());
    }
  }
  for (const auto& n : e["nbd"]) {
    std::fprintf(Out(), "%snbd %s export %s  %s\n", indent.c_str(),
                 n["address"].get<std::string>().c_str(), n["export"].get<std::string>().c_str(),
                 n["serving"].get<bool>() ? "serving" : "stopped (restored at up)");
  }
}

}  // namespace

int PrintStatus(const Context& ctx) {
  const stack::StateDir state{ctx.global.state_dir};
  stack::Stack& stk = ctx.stack();
  stack::Stack* daemon = stk.live() ? &stk : nullptr;
  const std::string devfs_dir = daemon ? daemon->devfs_dir() : "";
  const DeviceUsage usage = DeviceUsage::Snapshot(ctx);
  auto loops = exportfs::LoadLoopBindings(ctx.global.state_dir);
  if (!loops.ok()) std::fprintf(Err(), "volstack: %s\n", loops.status().ToString().c_str());
  const auto recorded_loops = loops.ok() ? *loops : std::vector<exportfs::LoopBinding>{};
  auto nbd = stk.nbd().List();
  if (!nbd.ok()) std::fprintf(Err(), "volstack: %s\n", nbd.status().ToString().c_str());
  const auto listeners = nbd.ok() ? *nbd : std::vector<stack::NbdListenerStatus>{};
  const auto active_list = lvmcli::ReadListFile(lvmcli::ActiveFile(ctx));
  const std::set<std::string> at_up(active_list.begin(), active_list.end());
  auto is_active = [&](const std::string& name) {
    return daemon != nullptr && daemon->registry().Find(name) != nullptr;
  };
  auto exports = [&](const std::string& name) {
    return ExportsOf(name, usage, is_active(name), devfs_dir, recorded_loops, listeners);
  };

  json tree;
  tree["state_dir"] = ctx.global.state_dir;
  tree["daemon"] = daemon != nullptr;
  tree["devfs"] = devfs_dir.empty() ? json(nullptr) : json(devfs_dir);
  const std::string transport = daemon ? daemon->devfs_transport() : "";
  tree["fuse_transport"] = transport.empty() ? json(nullptr) : json(transport);

  // Pools, their vdevs and volumes.
  json pools = json::array();
  auto cached = poolcli::ReadCache(ctx);
  if (!cached.ok()) std::fprintf(Err(), "volstack: %s\n", cached.status().ToString().c_str());
  const auto unavailable =
      daemon ? daemon->UnavailablePools() : std::map<std::string, std::string>{};
  for (const auto& entry : cached.ok() ? *cached : std::vector<poolcli::CachedPool>{}) {
    json p{{"name", entry.name}, {"vdevs", entry.vdevs}, {"volumes", json::array()}};
    // The daemon's own pool; without a daemon, a read-only import.
    std::shared_ptr<pool::Pool> live;
    if (daemon != nullptr) {
      live = daemon->FindLivePool(entry.name);
      if (!live) {
        auto it = unavailable.find(entry.name);
        p["health"] = "UNAVAIL";
        p["reason"] = it != unavailable.end() ? it->second : "not imported";
      }
    } else if (auto opened = poolcli::OpenPool(ctx, entry.name, /*read_only=*/true); !opened.ok()) {
      p["health"] = "UNAVAIL";
      p["reason"] = opened.status().message();
    } else {
      live = *opened;
    }
    if (live) {
      const auto info = live->Info();
      p["health"] = info.health;
      p["size"] = info.size;
      p["allocated"] = info.allocated;
      for (const auto& d : live->ListDatasets()) {
        if (d.type != "volume") continue;
        p["volumes"].push_back({{"name", d.name},
                                {"size", d.volsize},
                                {"volblocksize", d.volblocksize},
                                {"active", is_active(d.name)},
                                {"pv_of", usage.VgOfPv(d.name)},
                                {"used_by", usage.UsesOf(d.name)},
                                {"exports", exports(d.name)},
                                {"snapshots", SnapshotsOfVolume(*live, d, exports)}});
      }
    }
    pools.push_back(p);
  }
  tree["pools"] = pools;

  // VGs, their PVs and LVs.
  json vgs = json::array();
  {
    auto session = lvmcli::OpenSession(ctx, /*read_only=*/true);
    for (const auto& h : session->vgs()) {
      json v{{"name", h.vg.name},
             {"extent_size", h.vg.extent_bytes()},
             {"size", h.vg.total_extents() * h.vg.extent_bytes()},
             {"free", (h.vg.total_extents() - h.vg.allocated_extents()) * h.vg.extent_bytes()},
             {"partial", h.partial()},
             {"pvs", json::array()},
             {"lvs", json::array()}};
      for (size_t i = 0; i < h.vg.pvs.size(); i++) {
        const lvm::Pv* pv = i < h.pvs.size() ? h.pvs[i] : nullptr;
        v["pvs"].push_back({{"name", pv ? pv->name() : h.vg.pvs[i].device},
                            {"missing", pv == nullptr},
                            {"size", uint64_t{h.vg.pvs[i].pe_count} * h.vg.extent_bytes()}});
      }
      for (const auto& lv : h.vg.lvs) {
        if (!lv.visible()) continue;
        const std::string name = h.vg.name + "/" + lv.name;
        v["lvs"].push_back({{"name", name},
                            {"size", uint64_t{lv.le_count()} * h.vg.extent_bytes()},
                            {"active", is_active(name)},
                            {"active_at_up", at_up.count(name) > 0},
                            {"used_by", usage.UsesOf(name)},
                            {"exports", exports(name)}});
      }
      vgs.push_back(v);
    }
  }
  tree["vgs"] = vgs;

  if (ctx.global.json) {
    std::fprintf(Out(), "%s\n", tree.dump(2).c_str());
    return kExitOk;
  }
  std::string reason = daemon ? daemon->devfs_transport_reason() : "";
  if (!reason.empty()) reason = ": " + reason;
  std::fprintf(
      Out(), "stack %s (%s)\n", ctx.global.state_dir.c_str(),
      daemon ? ("daemon running, devfs " + devfs_dir + ", FUSE transport " + transport + reason)
                   .c_str()
             : "no daemon");
  auto size = [](const json& j) { return poolcli::Bytes(j.get<uint64_t>(), false); };
  for (const auto& p : pools) {
    std::fprintf(Out(), "  pool %s  %s", p["name"].get<std::string>().c_str(),
                 p["health"].get<std::string>().c_str());
    if (p.contains("size")) {
      std::fprintf(Out(), "  size %s  alloc %s", size(p["size"]).c_str(),
                   size(p["allocated"]).c_str());
    }
    if (p.contains("reason")) std::fprintf(Out(), "  (%s)", p["reason"].get<std::string>().c_str());
    std::fprintf(Out(), "\n");
    for (const auto& v : p["vdevs"])
      std::fprintf(Out(), "    vdev %s\n", v.get<std::string>().c_str());
    for (const auto& v : p["volumes"]) {
      std::fprintf(Out(), "    volume %s  %s  volblocksize %s%s%s\n",
                   v["name"].get<std::string>().c_str(), size(v["size"]).c_str(),
                   size(v["volblocksize"]).c_str(), v["active"].get<bool>() ? "  active" : "",
                   SnapshotCount(v["snapshots"]).c_str());
      if (!v["pv_of"].get<std::string>().empty()) {
        std::fprintf(Out(), "      PV of VG %s\n", v["pv_of"].get<std::string>().c_str());
      }
      PrintExports(v["exports"], "      ");
      PrintSnapshots(v["snapshots"], "      ", PrintExports);
    }
  }
  for (const auto& v : vgs) {
    std::fprintf(Out(), "  vg %s  size %s  free %s%s\n", v["name"].get<std::string>().c_str(),
                 size(v["size"]).c_str(), size(v["free"]).c_str(),
                 v["partial"].get<bool>() ? "  PARTIAL" : "");
    for (const auto& pv : v["pvs"]) {
      std::fprintf(Out(), "    pv %s  %s%s\n", pv["name"].get<std::string>().c_str(),
                   size(pv["size"]).c_str(), pv["missing"].get<bool>() ? "  MISSING" : "");
    }
    for (const auto& lv : v["lvs"]) {
      const char* state = lv["active"].get<bool>()         ? "active"
                          : lv["active_at_up"].get<bool>() ? "inactive (active at up)"
                                                           : "inactive";
      std::fprintf(Out(), "    lv %s  %s  %s\n", lv["name"].get<std::string>().c_str(),
                   size(lv["size"]).c_str(), state);
      PrintExports(lv["exports"], "      ");
    }
  }
  return kExitOk;
}

}  // namespace volstack::cli

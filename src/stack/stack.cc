// The daemon's live stack and how it converges to the state dir.
//
// Theory. The state dir says what should exist (zpool.cache: pools; lvm/active: LVs;
// loops.json: loop bindings); the daemon holds what does (open pools, active devices in its
// registry, the devfs mount, bound loops). Commands run inside the daemon change disks and
// state files exactly as they do offline; after each one, Reconcile() makes the live stack
// match the state dir again: it imports pools that appeared, drops pools that were exported,
// registers new volumes and LVs and unregisters removed ones. Devfs follows the registry, so
// a device shows up as a file the moment it is registered. `up` is Reconcile() plus devfs,
// loop bindings and NBD listeners (nbd_listeners.h); `down` releases in reverse order.
// `status` (status.cc) reads this live view through UnavailablePools()/LiveDevfsDir().
//
// Pools are held open here (LiveStack::pools) so that every open of a pool in this process
// returns the same Pool (poolcli::OpenPool consults the process's open pools first): two Pool
// objects on one set of vdevs would be two writers.
//
// Threads: everything here runs on the daemon's request thread (requests are serialized) or
// at start and stop, so the LiveStack needs no lock of its own beyond the registry's.
#include "cli/assembly.h"

#include <sys/mount.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "cli/device_names.h"
#include "cli/lvm_common.h"
#include "cli/lvm_pvmove.h"
#include "cli/nbd_listeners.h"
#include "cli/pool_common.h"
#include "export/devfs.h"
#include "export/loop_bindings.h"
#include "export/loop_device.h"

namespace volstack::cli {

namespace {

struct LiveStack {
  std::map<std::string, std::shared_ptr<pool::Pool>> pools;
  std::map<std::string, std::string> unavailable;  // pool name -> why it is not imported
  std::set<std::string> registered;                // names this file put in the registry
  std::unique_ptr<exportfs::Devfs> devfs;
};

LiveStack& Live() {
  static LiveStack* live = new LiveStack;  // lives as long as the daemon process
  return *live;
}

Context DaemonContext(const stack::Daemon& daemon) {
  Context ctx;
  ctx.global.state_dir = daemon.state().root;
  return ctx;
}

void Register(stack::Daemon& daemon, const std::string& name, bdev::BlockDevicePtr device) {
  if (daemon.registry().Add(name, std::move(device)).ok()) Live().registered.insert(name);
}

void Unregister(stack::Daemon& daemon, const std::string& name) {
  if (auto device = daemon.registry().Remove(name); device.ok()) {
    (*device)->Flush().IgnoreError();  // best effort: the device may be gone with its pool
  }
  Live().registered.erase(name);
}

// Pools: import what the cache lists, drop what it no longer lists.
void ReconcilePools(stack::Daemon& daemon, const Context& ctx) {
  auto cached = poolcli::ReadCache(ctx);
  if (!cached.ok()) {
    std::fprintf(stderr, "volstack: %s\n", cached.status().ToString().c_str());
    return;
  }
  std::set<std::string> wanted;
  for (const auto& entry : *cached) {
    wanted.insert(entry.name);
    if (Live().pools.count(entry.name)) continue;
    auto p = poolcli::OpenPool(ctx, entry.name, /*read_only=*/false);
    if (!p.ok()) {
      Live().unavailable[entry.name] = p.status().ToString();
      continue;
    }
    Live().unavailable.erase(entry.name);
    Live().pools[entry.name] = *p;
  }
  for (auto it = Live().unavailable.begin(); it != Live().unavailable.end();) {
    it = wanted.count(it->first) ? std::next(it) : Live().unavailable.erase(it);
  }
  for (auto it = Live().pools.begin(); it != Live().pools.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    // Exported or destroyed by a command: its volumes leave the registry first.
    for (const auto& name : std::set<std::string>(Live().registered)) {
      if (name.rfind(it->first + "/", 0) == 0) Unregister(daemon, name);
    }
    it->second->Close().IgnoreError();
    it = Live().pools.erase(it);
  }
  for (auto& [pool_name, p] : Live().pools) {
    std::set<std::string> volumes;
    for (const auto& d : p->ListDatasets()) {
      if (d.type == "volume") volumes.insert(d.name);
    }
    for (const auto& name : volumes) {
      if (daemon.registry().Find(name)) continue;
      auto device = p->OpenVolume(name);
      if (device.ok()) Register(daemon, name, *device);
    }
    for (const auto& name : std::set<std::string>(Live().registered)) {
      if (name.rfind(pool_name + "/", 0) == 0 && !volumes.count(name)) Unregister(daemon, name);
    }
  }
}

// LVs: activate what lvm/active lists, deactivate what it no longer lists.
void ReconcileLvs(stack::Daemon& daemon, const Context& ctx) {
  const auto lines = lvmcli::ReadListFile(lvmcli::ActiveFile(ctx));
  const std::set<std::string> wanted(lines.begin(), lines.end());
  std::set<std::string> pool_volumes;
  for (const auto& [name, p] : Live().pools) {
    for (const auto& d : p->ListDatasets()) pool_volumes.insert(d.name);
  }
  for (const auto& name : std::set<std::string>(Live().registered)) {
    if (!pool_volumes.count(name) && !wanted.count(name)) Unregister(daemon, name);
  }
  std::vector<std::string> missing;
  for (const auto& name : wanted) {
    if (!daemon.registry().Find(name)) missing.push_back(name);
  }
  if (missing.empty()) return;
  auto session = lvmcli::OpenSession(ctx, /*read_only=*/false);
  for (const auto& name : missing) {
    auto [vg, lv] = lvmcli::SplitLvName(name);
    lvm::VgHandle* handle = session->FindVg(vg);
    if (handle == nullptr || handle->vg.FindLv(lv) == nullptr) {
      std::fprintf(stderr, "volstack: cannot activate %s: not found on the scanned devices\n",
                   name.c_str());
      continue;
    }
    auto device = session->Activate(*handle, lv, handle->partial());
    if (!device.ok()) {
      std::fprintf(stderr, "volstack: cannot activate %s: %s\n", name.c_str(),
                   device.status().ToString().c_str());
      continue;
    }
    Register(daemon, name, *device);
  }
}

// After a kill -9 the old mount point is left as a dead FUSE connection ("Transport endpoint
// is not connected"); it must be detached before devfs can mount there again.
void ClearDeadMount(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 && errno == ENOTCONN) ::umount2(dir.c_str(), MNT_DETACH);
}

bool IsMounted(const std::string& device) {
  std::ifstream mounts("/proc/mounts");
  std::string source, rest;
  while (mounts >> source && std::getline(mounts, rest)) {
    if (source == device) return true;
  }
  return false;
}

// The loops bound to files of this stack's devfs.
std::vector<exportfs::LoopInfo> OurLoops(const std::string& devfs_dir) {
  std::vector<exportfs::LoopInfo> ours;
  for (auto& info : exportfs::ListLoops()) {
    if (info.backing_file.rfind(devfs_dir + "/", 0) == 0) ours.push_back(std::move(info));
  }
  return ours;
}

// Rebinds every recorded loop that is not bound to its devfs file: on the same /dev/loopN
// when it is free, else on another (and says so). With a fresh devfs mount, a loop still
// bound to the file's path is bound to the dead mount before it and is rebound too.
Status RestoreLoops(stack::Daemon& daemon, bool devfs_fresh) {
  const std::string& root = daemon.state().root;
  VS_ASSIGN_OR_RETURN(auto bindings, exportfs::LoadLoopBindings(root));
  Status result;
  std::map<std::string, std::string> moved;  // old device -> new
  for (auto& b : bindings) {
    auto info = exportfs::GetLoopInfo(b.device);
    const bool bound_here = info.ok() && info->backing_file == b.file;
    if (bound_here && !devfs_fresh) continue;
    if (bound_here) exportfs::DetachLoop(b.device).IgnoreError();
    if (!daemon.registry().Find(b.name)) {
      result = Status::NotFound("loop " + b.device + ": device " + b.name + " is not active");
      continue;
    }
    exportfs::LoopConfig config;
    config.sector_size = b.sector_size;
    config.read_only = b.read_only;
    config.direct_io = b.direct_io;
    auto attached = exportfs::AttachLoop(b.device, b.file, config);
    if (!attached.ok()) attached = exportfs::AttachLoop("", b.file, config);
    if (!attached.ok()) {
      result = attached.status().WithContext("loop for " + b.name);
      continue;
    }
    if (attached->device != b.device) {
      std::fprintf(stderr, "volstack: %s is busy; %s is now bound to %s\n", b.device.c_str(),
                   b.name.c_str(), attached->device.c_str());
      moved[b.device] = attached->device;
    }
  }
  if (!moved.empty()) {
    VS_RETURN_IF_ERROR(
        exportfs::UpdateLoopBindings(root, [&](std::vector<exportfs::LoopBinding>& now) {
          for (auto& b : now) {
            if (auto it = moved.find(b.device); it != moved.end()) b.device = it->second;
          }
          return Status::Ok();
        }));
  }
  return result;
}

}  // namespace

void Reconcile(stack::Daemon& daemon) {
  const Context ctx = DaemonContext(daemon);
  ReconcilePools(daemon, ctx);
  ReconcileLvs(daemon, ctx);
}

std::shared_ptr<pool::Pool> FindLivePool(const std::string& name) {
  if (stack::Daemon::Current() == nullptr) return nullptr;
  auto it = Live().pools.find(name);
  return it == Live().pools.end() ? nullptr : it->second;
}

Status AssembleUp(stack::Daemon& daemon) {
  Reconcile(daemon);
  Status result;
  for (const auto& [name, why] : Live().unavailable) {
    result = Status::NotFound("pool " + name + " is unavailable: " + why);
  }
  const bool devfs_fresh = !Live().devfs;
  if (devfs_fresh) {
    const std::string dir = daemon.state().devfs_dir();
    ClearDeadMount(dir);
    auto devfs = exportfs::Devfs::Mount(dir, daemon.registry());
    if (!devfs.ok()) return devfs.status().WithContext("devfs");
    Live().devfs = std::move(*devfs);
  }
  Status loops = RestoreLoops(daemon, devfs_fresh);
  if (!loops.ok()) result = loops;
  Status nbd = RestoreNbdListeners(daemon, DaemonContext(daemon));
  if (!nbd.ok()) result = nbd;
  if (Status moves = ResumeInterruptedMoves(daemon); !moves.ok()) result = moves;
  return result;
}

Status AssembleDown(stack::Daemon& daemon, bool force) {
  const std::string devfs_dir = daemon.state().devfs_dir();
  const auto loops = OurLoops(devfs_dir);
  if (!force) {
    for (const auto& loop : loops) {
      if (IsMounted(loop.device)) {
        return Status::Busy(loop.device + " (" + loop.backing_file.substr(devfs_dir.size() + 1) +
                            ") is mounted; unmount it or use --force");
      }
    }
  }
  // A running pvmove stops at a checkpoint first rather than failing under a closing
  // stack; the next `up` resumes it.
  daemon.StopJobs();
  // Loop bindings and NBD listeners stay recorded (loops.json, nbd.json): the next `up`
  // restores them.
  for (const auto& loop : loops) exportfs::DetachLoop(loop.device).IgnoreError();
  if (Live().devfs) {
    if (Status s = Live().devfs->Unmount(); !s.ok() && !force) return s;
    Live().devfs.reset();
  }
  StopAllNbdListeners();
  for (const auto& name : std::set<std::string>(Live().registered)) Unregister(daemon, name);
  Status result;
  for (auto& [name, p] : Live().pools) {
    if (Status s = p->Close(); !s.ok()) result = s;
  }
  Live().pools.clear();
  return result;
}

std::map<std::string, std::string> UnavailablePools() {
  if (stack::Daemon::Current() == nullptr) return {};
  return Live().unavailable;
}

void ReleaseFromDaemon(const std::vector<std::string>& names) {
  auto* daemon = stack::Daemon::Current();
  if (daemon == nullptr) return;
  for (const auto& name : names) Unregister(*daemon, name);
}

std::string LiveDevfsDir() {
  if (stack::Daemon::Current() == nullptr || !Live().devfs) return "";
  return Live().devfs->dir();
}

}  // namespace volstack::cli

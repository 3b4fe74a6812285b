// The live stack: how it comes up from the state dir, converges to it and goes down
// (stack.h has the theory; docs/stack.md the picture).
//
// Pools are held open here (pools_) so that every open of a pool in this stack returns the
// same Pool (OpenPool consults the stack's open pools first): two Pool objects on one set of
// vdevs would be two writers.
#include "stack/stack.h"

#include <cstdio>
#include <map>
#include <set>

#include "export/loop_bindings.h"
#include "stack/lvm_state.h"
#include "stack/nbd_listeners.h"
#include "stack/pvmove_jobs.h"
#include "stack/snapshot_devices.h"
#include "util/request_io.h"

namespace volstack::stack {

std::unique_ptr<Stack> Stack::Open(StateDir state, Mode mode, Options options) {
  return std::unique_ptr<Stack>(new Stack(std::move(state), mode, std::move(options)));
}

Stack::Stack(StateDir state, Mode mode, Options options)
    : state_(std::move(state)),
      mode_(mode),
      kernel_(options.kernel ? options.kernel : SystemKernel()),
      options_(std::move(options)),
      nbd_(std::make_unique<NbdListeners>(*this)),
      pvmoves_(std::make_unique<PvmoveJobs>(*this)) {}

Stack::~Stack() {
  // Jobs and listeners use the rest of the stack: they go first.
  jobs_.StopAll();
  nbd_.reset();
}

void Stack::Register(const std::string& name, bdev::BlockDevicePtr device) {
  if (registry_.Add(name, std::move(device)).ok()) registered_.insert(name);
}

void Stack::Unregister(const std::string& name) {
  if (auto device = registry_.Remove(name); device.ok()) {
    (*device)->Flush().IgnoreError();  // best effort: the device may be gone with its pool
  }
  registered_.erase(name);
}

// Pools: import what the cache lists, drop what it no longer lists.
void Stack::ReconcilePools() {
  auto cached = ReadPoolCache(state_.root);
  if (!cached.ok()) {
    std::fprintf(Err(), "volstack: %s\n", cached.status().ToString().c_str());
    return;
  }
  std::set<std::string> wanted;
  for (const auto& entry : *cached) {
    wanted.insert(entry.name);
    if (pools_.count(entry.name)) continue;
    auto p = OpenPool(entry.name, /*read_only=*/false);
    if (!p.ok()) {
      unavailable_[entry.name] = p.status();
      continue;
    }
    unavailable_.erase(entry.name);
    pools_[entry.name] = *p;
  }
  for (auto it = unavailable_.begin(); it != unavailable_.end();) {
    it = wanted.count(it->first) ? std::next(it) : unavailable_.erase(it);
  }
  for (auto it = pools_.begin(); it != pools_.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    // Exported or destroyed by a command: its volumes leave the registry first.
    for (const auto& name : std::set<std::string>(registered_)) {
      if (name.rfind(it->first + "/", 0) == 0) Unregister(name);
    }
    it->second->Close().IgnoreError();
    it = pools_.erase(it);
  }
  for (auto& [pool_name, p] : pools_) {
    std::set<std::string> volumes;
    for (const auto& d : p->ListDatasets()) {
      if (d.type == "volume") volumes.insert(d.name);
    }
    for (auto& s : VisibleSnapshotNames(*p)) volumes.insert(std::move(s));  // read-only
    for (const auto& name : volumes) {
      if (registry_.Find(name)) continue;
      auto device = p->OpenVolume(name);
      if (device.ok()) Register(name, *device);
    }
    for (const auto& name : std::set<std::string>(registered_)) {
      if (name.rfind(pool_name + "/", 0) == 0 && !volumes.count(name)) Unregister(name);
    }
  }
}

// LVs: activate what lvm/active lists, deactivate what it no longer lists.
void Stack::ReconcileLvs() {
  auto read = ReadListFile(LvmActivePath(state_.root));
  if (!read.ok()) {
    // A record this volstack cannot read changes nothing that is active.
    std::fprintf(Err(), "volstack: %s\n", read.status().ToString().c_str());
    return;
  }
  const auto& lines = *read;
  const std::set<std::string> wanted(lines.begin(), lines.end());
  std::set<std::string> pool_volumes;
  for (const auto& [name, p] : pools_) {
    for (const auto& d : p->ListDatasets()) pool_volumes.insert(d.name);
    for (auto& s : VisibleSnapshotNames(*p)) pool_volumes.insert(std::move(s));
  }
  for (const auto& name : std::set<std::string>(registered_)) {
    if (!pool_volumes.count(name) && !wanted.count(name)) Unregister(name);
  }
  std::vector<std::string> missing;
  for (const auto& name : wanted) {
    if (!registry_.Find(name)) missing.push_back(name);
  }
  if (missing.empty()) return;
  auto session = OpenLvm(/*read_only=*/false);
  for (const auto& name : missing) {
    auto [vg, lv] = SplitLvName(name);
    lvm::VgHandle* handle = session->FindVg(vg);
    if (handle == nullptr || handle->vg.FindLv(lv) == nullptr) {
      std::fprintf(Err(), "volstack: cannot activate %s: not found on the scanned devices\n",
                   name.c_str());
      continue;
    }
    auto device = session->Activate(*handle, lv, handle->partial());
    if (!device.ok()) {
      std::fprintf(Err(), "volstack: cannot activate %s: %s\n", name.c_str(),
                   device.status().ToString().c_str());
      continue;
    }
    Register(name, *device);
  }
}

// The loops bound to files of this stack's devfs.
std::vector<exportfs::LoopInfo> Stack::OurLoops(const std::string& devfs_dir) {
  std::vector<exportfs::LoopInfo> ours;
  for (auto& info : kernel_->ListLoops()) {
    if (info.backing_file.rfind(devfs_dir + "/", 0) == 0) ours.push_back(std::move(info));
  }
  return ours;
}

// Rebinds every recorded loop that is not bound to its devfs file: on the same /dev/loopN
// when it is free, else on another (and says so). With a fresh devfs mount, a loop still
// bound to the file's path is bound to the dead mount before it and is rebound too.
Status Stack::RestoreLoops(bool devfs_fresh) {
  const std::string& root = state_.root;
  VS_ASSIGN_OR_RETURN(auto bindings, exportfs::LoadLoopBindings(root));
  Status result;
  std::map<std::string, std::string> moved;  // old device -> new
  for (auto& b : bindings) {
    auto info = kernel_->GetLoopInfo(b.device);
    const bool bound_here = info.ok() && info->backing_file == b.file;
    if (bound_here && !devfs_fresh) continue;
    if (bound_here) kernel_->DetachLoop(b.device).IgnoreError();
    if (!registry_.Find(b.name)) {
      result = Status::NotFound("loop " + b.device + ": device " + b.name + " is not active");
      continue;
    }
    exportfs::LoopConfig config;
    config.sector_size = b.sector_size;
    config.read_only = b.read_only;
    config.direct_io = b.direct_io;
    auto attached = kernel_->AttachLoop(b.device, b.file, config);
    if (!attached.ok()) attached = kernel_->AttachLoop("", b.file, config);
    if (!attached.ok()) {
      result = attached.status().WithContext("loop for " + b.name);
      continue;
    }
    if (attached->device != b.device) {
      std::fprintf(Err(), "volstack: %s is busy; %s is now bound to %s\n", b.device.c_str(),
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

void Stack::Reconcile() {
  if (!live()) return;
  ReconcilePools();
  ReconcileLvs();
}

std::shared_ptr<pool::Pool> Stack::FindLivePool(const std::string& name) const {
  auto it = pools_.find(name);
  return it == pools_.end() ? nullptr : it->second;
}

Status Stack::Up() {
  if (!live()) return Status::InvalidArgument("only the daemon's stack comes up");
  jobs_.Reopen();
  Reconcile();
  Status result;
  for (const auto& [name, why] : unavailable_) {
    // The import's own status (its code, its one message), not a string of it wrapped in
    // another: that printed two errno texts ("...: Structure needs cleaning: No such file").
    result = why.WithContext("pool " + name + " is unavailable");
  }
  const bool devfs_fresh = !devfs_;
  if (devfs_fresh) {
    auto devfs = kernel_->MountDevfs(state_.devfs_dir(), registry_);
    if (!devfs.ok()) return devfs.status().WithContext("devfs");
    devfs_ = std::move(*devfs);
  }
  Status loops = RestoreLoops(devfs_fresh);
  if (!loops.ok()) result = loops;
  Status nbd = nbd_->Restore();
  if (!nbd.ok()) result = nbd;
  if (Status moves = pvmoves_->ResumeInterrupted(); !moves.ok()) result = moves;
  return result;
}

Status Stack::Down(bool force) {
  const std::string devfs_dir = state_.devfs_dir();
  const auto loops = OurLoops(devfs_dir);
  if (!force) {
    for (const auto& loop : loops) {
      if (kernel_->IsMounted(loop.device)) {
        return Status::Busy(loop.device + " (" + loop.backing_file.substr(devfs_dir.size() + 1) +
                            ") is mounted; unmount it or use --force");
      }
    }
  }
  // A running pvmove stops at a checkpoint first rather than failing under a closing
  // stack; the next `up` resumes it.
  jobs_.StopAll();
  // Loop bindings and NBD listeners stay recorded (loops.json, nbd.json): the next `up`
  // restores them.
  for (const auto& loop : loops) kernel_->DetachLoop(loop.device).IgnoreError();
  if (devfs_) {
    if (Status s = devfs_->Unmount(); !s.ok() && !force) return s;
    devfs_.reset();
  }
  nbd_->StopAll();
  for (const auto& name : std::set<std::string>(registered_)) Unregister(name);
  Status result;
  for (auto& [name, p] : pools_) {
    if (Status s = p->Close(); !s.ok()) result = s;
  }
  pools_.clear();
  return result;
}

void Stack::Release(const std::vector<std::string>& names) {
  if (!live()) return;
  for (const auto& name : names) Unregister(name);
}

std::string Stack::devfs_dir() const { return devfs_ ? devfs_->dir() : ""; }
std::string Stack::devfs_transport() const { return devfs_ ? devfs_->transport() : ""; }
std::string Stack::devfs_transport_reason() const {
  return devfs_ ? devfs_->transport_reason() : "";
}

}  // namespace volstack::stack

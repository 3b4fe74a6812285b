// stack::Stack: one object that owns the live graph of a stack — the pools it has open, the
// registry of named devices (pool volumes, active LVs), devfs, loop bindings, NBD listeners
// and background jobs — and brings it up from the state dir, down, and back in line with it.
// docs/stack.md draws the graph and the state files.
//
// Two modes:
//   kDaemon   the daemon's stack (stack/daemon.h). Up() imports the pools in zpool.cache,
//             registers their volumes, activates the LVs in lvm/active, mounts devfs and
//             restores loop bindings, NBD listeners and interrupted pvmoves. Down() releases
//             in reverse order. A device name resolves to the registered device first.
//   kOneShot  a command's own stack, with no daemon running: nothing is registered or
//             mounted; a device opened by name keeps what it needs open (its pool, its PVs)
//             and releases it when the last reference drops.
// Each Up() step reports what it could not do and the rest still comes up: a missing vdev
// leaves its pool unavailable, not the whole stack.
//
// Reconcile. The state dir says what should exist (zpool.cache: pools; lvm/active: LVs); the
// stack holds what does. Commands change disks and state files exactly as they do offline;
// after each one, Reconcile() imports pools that appeared, drops pools that were exported,
// registers new volumes and LVs and unregisters removed ones. Devfs follows the registry, so
// a device shows up as a file the moment it is registered.
//
// Threads: Up, Down, Reconcile, Release and the opens run one at a time, on the daemon's
// request thread or a job holding the serialization (jobs.h); the registry and the pool table
// have locks of their own for the I/O threads of devfs and NBD.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bdev/device_registry.h"
#include "lvm/activations.h"
#include "lvm/lvm.h"
#include "pool/spa.h"
#include "stack/graph.h"
#include "stack/jobs.h"
#include "stack/kernel.h"
#include "stack/pool_cache.h"
#include "stack/state_dir.h"

namespace volstack::stack {

class NbdListeners;
class PvmoveJobs;

enum class Mode { kOneShot, kDaemon };
enum class Access { kReadOnly, kReadWrite };

class Stack {
 public:
  // Touches nothing: Up() does. `kernel` defaults to the real one (kernel.h); `open_path`,
  // when set, opens the names that are paths instead of the file opener (tests put
  // MemoryDevices behind it).
  struct Options {
    std::shared_ptr<Kernel> kernel;
    std::function<Result<bdev::BlockDevicePtr>(const std::string& path, bool read_only)> open_path;
  };
  static std::unique_ptr<Stack> Open(StateDir state, Mode mode, Options options = {});
  ~Stack();
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;

  const StateDir& state() const { return state_; }
  bool live() const { return mode_ == Mode::kDaemon; }
  bdev::DeviceRegistry& registry() { return registry_; }
  Kernel& kernel() { return *kernel_; }
  Jobs& jobs() { return jobs_; }
  NbdListeners& nbd() { return *nbd_; }
  PvmoveJobs& pvmoves() { return *pvmoves_; }
  // What the stack's LVM sessions share (live LVs, the mirror gate, running moves).
  lvm::Activations& activations() { return *activations_; }

  // Brings the stack up from the state dir (see above). The first problem is returned; the
  // rest of the stack is up regardless.
  Status Up();
  // Refuses (EBUSY) while a loop device bound to a devfs file is mounted, unless `force`.
  // Stops jobs, detaches this stack's loops (still recorded), unmounts devfs, stops NBD,
  // unregisters and flushes every device, closes the pools.
  Status Down(bool force);
  // Makes the live pools and LVs match the state dir (no-op for a one-shot stack).
  void Reconcile();
  // Drops `names` from the registry (flushed) so a command can destroy them once it found
  // them free; the next Reconcile registers what still exists.
  void Release(const std::vector<std::string>& names);

  // The device named `name` (stack/device_names.cc: paths, remote URIs, pool volumes, LVs).
  Result<bdev::BlockDevicePtr> OpenDevice(const std::string& name, Access access);
  // Every volstack device name (pool volumes, then LVs) known to the state dir.
  std::vector<std::string> ListDeviceNames();
  std::vector<std::string> ListPoolVolumeNames();
  // Imports the cached pool `name`, or returns the one open (ENOENT "no such pool").
  Result<std::shared_ptr<pool::Pool>> OpenPool(const std::string& name, bool read_only);
  // An LVM session over the devices file, the pool volumes and `extra` names.
  std::unique_ptr<lvm::Lvm> OpenLvm(bool read_only, const std::vector<std::string>& extra = {});

  // The stack as nodes and edges (graph.h; graph.cc): what status prints, what the busy
  // checks ask. Problems reading a record are in the graph, never a failure.
  StackGraph Graph(GraphDepth depth);
  // EBUSY "<name> is <its uses>" for the first of `names` in use (StackGraph::UsesOf).
  Status CheckNotInUse(const std::vector<std::string>& names) {
    return names.empty() ? Status::Ok() : Graph(GraphDepth::kUses).CheckNotInUse(names);
  }

  // The live view (empty for a one-shot stack): a pool held open by Up; pools it could not
  // import and why; the devfs mount point ("" when not mounted).
  std::shared_ptr<pool::Pool> FindLivePool(const std::string& name) const;
  std::map<std::string, std::string> UnavailablePools() const {
    std::map<std::string, std::string> out;
    for (const auto& [name, why] : unavailable_) out[name] = why.message();
    return out;
  }
  std::string devfs_dir() const;
  // The devfs mount's FUSE transport and why not the ring ("" when not mounted).
  std::string devfs_transport() const;
  std::string devfs_transport_reason() const;

  // Ends the daemon that holds this stack once the current request has answered.
  void RequestStop() { stop_requested_ = true; }
  bool stop_requested() const { return stop_requested_; }

 private:
  // Where a name is resolved (device_names.cc): inside an LVM session's scan, and for an LV
  // lookup. An LV may be a PV of another VG one level deep: the session opened to find an LV
  // never resolves an LV among its own PVs, and a session inside another does not list the
  // pool volumes again.
  // A pool's vdev named by path is opened O_DIRECT (docs/performance.md: the commit's writes
  // skip the host page cache's copy; the pool caches its own blocks).
  struct Lookup {
    bool in_session = false;
    bool for_lv = false;
    bool vdev = false;
  };
  Result<bdev::BlockDevicePtr> Resolve(const std::string& name, bool read_only, Lookup lookup);
  Result<bdev::BlockDevicePtr> OpenPath(const std::string& path, bool read_only,
                                        bool direct_io = false);
  Result<bdev::BlockDevicePtr> OpenPoolVolume(const std::string& name, bool read_only,
                                              Lookup lookup);
  Result<bdev::BlockDevicePtr> OpenLv(const std::string& name, bool read_only, Lookup lookup);
  std::unique_ptr<lvm::Lvm> OpenLvmAt(bool read_only, const std::vector<std::string>& extra,
                                      Lookup lookup);
  std::vector<std::string> ListPoolVolumeNamesAt(Lookup lookup);
  Result<std::shared_ptr<pool::Pool>> OpenPoolAt(const std::string& name, bool read_only,
                                                 Lookup lookup);
  Result<std::shared_ptr<pool::Pool>> ImportCachedPool(const std::string& name, bool read_only,
                                                       Lookup lookup);

  // stack.cc
  Stack(StateDir state, Mode mode, Options options);
  void Register(const std::string& name, bdev::BlockDevicePtr device);
  void Unregister(const std::string& name);
  void ReconcilePools();
  void ReconcileLvs();
  Status RestoreLoops(bool devfs_fresh);
  std::vector<exportfs::LoopInfo> OurLoops(const std::string& devfs_dir);

  const StateDir state_;
  const Mode mode_;
  const std::shared_ptr<Kernel> kernel_;
  const Options options_;
  bdev::DeviceRegistry registry_;
  OpenPools open_pools_;
  const std::shared_ptr<lvm::Activations> activations_ = std::make_shared<lvm::Activations>();
  class OpenFiles;  // device_names.cc
  struct OpenFilesDeleter {
    void operator()(OpenFiles* files) const;
  };
  std::unique_ptr<OpenFiles, OpenFilesDeleter> open_files_;  // created on first use

  // The live graph (kDaemon).
  std::map<std::string, std::shared_ptr<pool::Pool>> pools_;
  std::map<std::string, Status> unavailable_;  // pool name -> why it is not imported
  std::set<std::string> registered_;           // names this stack put in the registry
  std::unique_ptr<DevfsMount> devfs_;
  Jobs jobs_;
  std::unique_ptr<NbdListeners> nbd_;
  std::unique_ptr<PvmoveJobs> pvmoves_;
  std::atomic<bool> stop_requested_{false};
};

}  // namespace volstack::stack

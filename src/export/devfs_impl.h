// Devfs internals shared by devfs.cc (session lifecycle) and devfs_ops.cc (the FUSE request
// handlers). Not part of the public API.
#pragma once

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "export/devfs.h"
#include "export/devfs_stats.h"
#include "export/devfs_tree.h"
#include "export/devfs_writeback.h"

namespace volstack::exportfs {

class Devfs::Impl {
 public:
  Impl(std::string dir, bdev::DeviceRegistry& registry, const DevfsOptions& options)
      : dir_(std::move(dir)), registry_(registry), options_(options) {}
  ~Impl();

  Status Start();
  Status Unmount();
  // Lazy unmount + connection abort: used when a clean unmount is impossible.
  void ForceStop();

  // Registry listener: mirrors a change into the tree and invalidates kernel dentries.
  void OnChange(bdev::DeviceRegistry::Change change, const std::string& name,
                const bdev::BlockDevicePtr& device);

  static const fuse_lowlevel_ops& Ops();  // devfs_ops.cc

  const std::string dir_;
  bdev::DeviceRegistry& registry_;
  const DevfsOptions options_;
  DevfsTree tree_;
  // Request counters (VOLSTACK_DEVFS_STATS), or null; dumped when the session ends.
  std::unique_ptr<DevfsStats> stats_ = DevfsStats::FromEnvironment();
  // The write-behind thread (options_.write_behind), or null.
  std::unique_ptr<DevfsWriteBehind> write_behind_;

 private:
  // Stops the loop thread and frees the session; the mount must already be gone or
  // detached.
  void Join();
  // The resize watcher: every resize_poll_seconds, tells the kernel to drop the cached
  // attributes of files whose device changed size.
  void WatchSizes();
  void NotifyResized();

  fuse_session* session_ = nullptr;
  std::thread loop_thread_;
  int listener_id_ = 0;
  std::mutex notify_mu_;  // orders notifications against teardown
  bool live_ = false;     // GUARDED_BY(notify_mu_): session can take notifications
  bool mounted_ = false;
  std::thread watch_thread_;
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool watch_stop_ = false;  // GUARDED_BY(watch_mu_)
};

// An open file: the device's I/O object, held for as long as the file is open.
struct DevfsHandle {
  std::shared_ptr<DevfsFile> file;
  bool writable = false;
};

// errno for FUSE from a Status (Corruption reads as EIO to programs).
int FuseErrno(const Status& status);

}  // namespace volstack::exportfs

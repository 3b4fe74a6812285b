// Devfs internals shared by devfs.cc (session lifecycle, INIT, notifications), devfs_ops.cc
// (the request handlers) and the two transports (devfs_classic.cc, devfs_uring.cc). Not part
// of the public API.
#pragma once

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <linux/fuse.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "export/devfs.h"
#include "export/devfs_stats.h"
#include "export/devfs_tree.h"
#include "export/devfs_writeback.h"

namespace volstack::exportfs {

class DevfsClassicLoop;
class DevfsUringLoop;

// One FUSE request as a transport received it. `arg` is the opcode's fixed argument
// (fuse_write_in, ...), `data` what follows it (a name, the data of a WRITE). The classic
// transport finds both after the fuse_in_header in one buffer; a ring entry has the argument
// in its header and the rest in its payload buffer.
struct FuseRequest {
  const fuse_in_header* in = nullptr;
  const uint8_t* arg = nullptr;
  size_t arg_len = 0;
  const uint8_t* data = nullptr;
  size_t data_len = 0;
};

// What a handler answered: an errno (0: success) and the size of the reply's arguments it
// wrote to the out buffer, or no reply at all (FORGET, INTERRUPT).
struct FuseReply {
  int32_t error = 0;
  size_t size = 0;
  bool none = false;
  // An OPEN's new handle: if the reply cannot be delivered (the request was interrupted) no
  // RELEASE will come, so the transport frees it (Devfs::Impl::DropHandle).
  uint64_t opened = 0;
  // This was the INIT reply: the transport calls InitReplied() once it is written.
  bool init = false;
};

class Devfs::Impl {
 public:
  Impl(std::string dir, bdev::DeviceRegistry& registry, const DevfsOptions& options);
  ~Impl();

  Status Start();
  Status Unmount();
  // Lazy unmount + connection abort: used when a clean unmount is impossible.
  void ForceStop();

  // Registry listener: mirrors a change into the tree and invalidates kernel dentries.
  void OnChange(bdev::DeviceRegistry::Change change, const std::string& name,
                const bdev::BlockDevicePtr& device);

  // Serves one request (devfs_ops.cc) and writes the reply's arguments to `out`, which holds
  // at least max_write bytes. `out` may be the buffer req.data points into (a ring entry's
  // payload): a handler reads all of its request before it writes the reply. Never throws.
  FuseReply Dispatch(const FuseRequest& req, std::span<uint8_t> out);
  // Size of the fixed argument of `opcode` (0 when it has none or devfs does not serve it).
  static size_t ArgSize(uint32_t opcode);
  // Frees the handle of an OPEN whose reply was not delivered.
  static void DropHandle(uint64_t fh);
  // Called by the transport that wrote the INIT reply: Start() may go on.
  void InitReplied();

  // Largest READ/WRITE payload the kernel sends with the INIT reply devfs gives.
  size_t max_payload() const;

  const std::string dir_;
  bdev::DeviceRegistry& registry_;
  const DevfsOptions options_;
  DevfsTree tree_;
  // Request counters (VOLSTACK_DEVFS_STATS), or null; dumped when the session ends.
  std::unique_ptr<DevfsStats> stats_ = DevfsStats::FromEnvironment();
  // The write-behind thread (options_.write_behind), or null.
  std::unique_ptr<DevfsWriteBehind> write_behind_;

  // Set by the INIT handler: the transport asked for (options, environment) and whether the
  // kernel offered FUSE over io_uring and devfs took it.
  FuseTransport wanted_ = FuseTransport::kAuto;
  bool uring_probe_ok_ = false;
  std::atomic<bool> uring_negotiated_{false};
  // The transport serving requests once Start() succeeded, and why it is not io_uring.
  std::atomic<FuseTransport> transport_{FuseTransport::kClassic};
  std::string transport_reason_;

 private:
  // Starts the transport after INIT: the ring, else more classic threads.
  Status StartTransport();
  // Stops the transports and frees the session; the mount must already be gone or detached.
  void Join();
  // The resize watcher: every resize_poll_seconds, tells the kernel to drop the cached
  // attributes of files whose device changed size.
  void WatchSizes();
  void NotifyResized();
  // Notifications (unique 0 writes to /dev/fuse; the ring does not carry them). Errors
  // (ENOENT: the kernel holds nothing to drop) are expected and ignored.
  void NotifyLocked(int32_t code, const void* arg, size_t arg_len, const std::string& name);

  fuse_session* session_ = nullptr;  // only mounts and unmounts: devfs owns the loop
  int fd_ = -1;                      // the session's /dev/fuse fd
  std::unique_ptr<DevfsClassicLoop> classic_;
  std::unique_ptr<DevfsUringLoop> uring_;
  std::mutex init_mu_;
  std::condition_variable init_cv_;
  bool init_done_ = false;  // GUARDED_BY(init_mu_)
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

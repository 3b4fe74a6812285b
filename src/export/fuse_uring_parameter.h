// The fuse module's enable_uring parameter (Linux 6.14+), switched on for a while and then
// put back. The kernel offers FUSE over io_uring to a connection only if the parameter is on
// when the connection's INIT is sent, and the connection keeps the ring after it is turned
// off again, so a test or benchmark holds it on only while it mounts. The parameter is the
// machine's owner's setting: this never leaves it changed.
//
// Concurrency: holders in any process serialize on an flock (kLockFile), so each one reads
// the owner's value, not another holder's temporary one, and restores exactly that.
#pragma once

#include <memory>
#include <string>

#include "util/result.h"

namespace volstack::exportfs {

class FuseUringParameter {
 public:
  static constexpr const char* kPath = "/sys/module/fuse/parameters/enable_uring";
  static constexpr const char* kLockFile = "/tmp/volstack-fuse-enable-uring.lock";

  // Whether this kernel has the parameter and this process may write it.
  static bool Available();
  // Takes the lock (waiting up to `wait_seconds` for another holder), notes the value and
  // sets `on`. Errors: NotSupported without the parameter, TimedOut when the lock stays
  // held, the write's error.
  static Result<std::unique_ptr<FuseUringParameter>> Set(bool on, int wait_seconds = 60);
  // Puts the noted value back and releases the lock.
  ~FuseUringParameter();
  FuseUringParameter(const FuseUringParameter&) = delete;
  FuseUringParameter& operator=(const FuseUringParameter&) = delete;

 private:
  FuseUringParameter(int lock_fd, std::string old) : lock_fd_(lock_fd), old_(std::move(old)) {}
  int lock_fd_;
  std::string old_;
};

}  // namespace volstack::exportfs

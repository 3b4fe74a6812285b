// What the Stack asks of the kernel: mounting devfs, binding loop devices, reading mounts.
// The Stack reaches the kernel only through this boundary, so its unit tests run as a normal
// user with a fake (stack_test.cc) while the daemon uses SystemKernel (export/devfs.h,
// export/loop_device.h).
//
// Threads: the Stack calls it from its request thread, one call at a time.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bdev/device_registry.h"
#include "export/loop_device.h"

namespace volstack::stack {

// One line of /proc/self/mountinfo.
struct MountEntry {
  std::string source;       // "/dev/loop3"
  std::string mount_point;  // "/mnt/x"
  std::string fstype;       // "xfs"
};

// A mounted devfs: a file per device of the registry it serves.
class DevfsMount {
 public:
  virtual ~DevfsMount() = default;
  // EBUSY (still mounted) while a file is open, e.g. bound to a loop device.
  virtual Status Unmount() = 0;
  virtual const std::string& dir() const = 0;
  // How FUSE requests reach it ("uring", "classic"; "" when not FUSE) and, for classic, why
  // not the ring (export/devfs.h).
  virtual std::string transport() const { return ""; }
  virtual std::string transport_reason() const { return ""; }
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Mounts devfs on `dir` serving `registry`, first detaching a dead mount left there by a
  // daemon that was killed.
  virtual Result<std::unique_ptr<DevfsMount>> MountDevfs(const std::string& dir,
                                                         bdev::DeviceRegistry& registry) = 0;
  // Loop devices, as export/loop_device.h.
  virtual std::vector<exportfs::LoopInfo> ListLoops() = 0;
  virtual Result<exportfs::LoopInfo> GetLoopInfo(const std::string& device) = 0;
  virtual Result<exportfs::LoopInfo> AttachLoop(const std::string& device, const std::string& file,
                                                const exportfs::LoopConfig& config) = 0;
  virtual Status DetachLoop(const std::string& device) = 0;
  // Whether block device `device` is mounted (/proc/mounts).
  virtual bool IsMounted(const std::string& device) = 0;
  // The mounts of this process's namespace (/proc/self/mountinfo).
  virtual std::vector<MountEntry> ReadMounts() = 0;
  // Every file under `prefix` some other process holds open (/proc/*/fd, as fuser finds
  // them): path -> "pid N (comm)" per process.
  virtual std::map<std::string, std::vector<std::string>> OpenFilesUnder(
      const std::string& prefix) = 0;
};

// The real kernel.
std::shared_ptr<Kernel> SystemKernel();

}  // namespace volstack::stack

// Kernel loop devices: attach one to a file with LOOP_CONFIGURE, detach, inspect.
//
// Attach takes a free device from /dev/loop-control (LOOP_CTL_GET_FREE) and configures it in
// one atomic ioctl (backing fd, logical sector size, flags), retrying with another device
// when a concurrent losetup wins the race for the same one (EBUSY). What the kernel really
// did (it silently keeps buffered I/O when the file cannot do direct I/O) is read back from
// sysfs, as util-linux's `losetup -l` shows it.
//
// Threads: free functions without shared state; the kernel serialises the rest.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace volstack::exportfs {

struct LoopConfig {
  uint32_t sector_size = 512;  // the loop's logical block size
  bool read_only = false;
  bool direct_io = false;
  bool autoclear = false;
};

// One bound loop device, as `losetup -l` lists it.
struct LoopInfo {
  std::string device;  // /dev/loopN
  int number = -1;
  std::string backing_file;  // full path (sysfs), "(deleted)" suffix kept
  uint64_t offset = 0;
  uint64_t sizelimit = 0;
  bool autoclear = false;
  bool read_only = false;
  bool direct_io = false;  // what the kernel uses, not what was asked
  uint32_t sector_size = 512;
  uint64_t backing_dev = 0;  // st_dev and st_ino of the backing file (losetup -a)
  uint64_t backing_ino = 0;
};

// Attaches `file` to `device` ("/dev/loopN"), or to a free loop device when `device` is
// empty. EBUSY if a given device is already bound.
Result<LoopInfo> AttachLoop(const std::string& device, const std::string& file,
                            const LoopConfig& config);
// Detaches; a device still open (mounted) is set to autoclear by the kernel and goes away on
// last close, which counts as success (as util-linux does). ENXIO if it is not bound.
Status DetachLoop(const std::string& device);
// ENXIO if the device exists but is not bound; ENOENT if there is no such device.
Result<LoopInfo> GetLoopInfo(const std::string& device);
// Every bound loop device, in device-number order.
std::vector<LoopInfo> ListLoops();

// "/dev/loop7" -> 7; -1 if `device` does not name a loop device.
int LoopNumber(const std::string& device);

}  // namespace volstack::exportfs

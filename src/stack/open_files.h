// Files and block devices a stack has open (stack/device_names.cc opens paths through it).
#pragma once

#include <limits.h>
#include <stdlib.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "bdev/file_device.h"

namespace volstack::stack {

// One FileDevice per backing file per stack: the exclusive lock is per open file
// description, so a second open of a file this process already holds (an LV and pvs reading
// the same PV, a daemon request on a device it serves) must share the first.
class OpenFiles {
 public:
  Result<bdev::BlockDevicePtr> Open(const std::string& path, bool read_only) {
    char resolved[PATH_MAX];
    const std::string key = ::realpath(path.c_str(), resolved) ? resolved : path;
    std::lock_guard lock(mu_);
    if (auto it = open_.find(key); it != open_.end()) {
      if (auto device = it->second.lock()) {
        if (read_only || !device->read_only()) return device;
        return Status::Busy(path + " is open read-only in this process");
      }
    }
    bdev::FileDeviceOptions options;
    options.read_only = read_only;
    options.exclusive_lock = !read_only;
    VS_ASSIGN_OR_RETURN(auto device, bdev::FileDevice::Open(path, options));
    open_[key] = device;
    return bdev::BlockDevicePtr(std::move(device));
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::weak_ptr<bdev::BlockDevice>> open_;  // GUARDED_BY(mu_)
};

}  // namespace volstack::stack

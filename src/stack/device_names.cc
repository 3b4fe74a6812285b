// The one device-name resolver (Stack::OpenDevice; the names: cli/device_names.h), and the
// files a stack has open.
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <map>
#include <memory>
#include <mutex>

#include "bdev/file_device.h"
#include "remote/remote_device.h"
#include "stack/stack.h"

namespace volstack::stack {

// One FileDevice per backing file per stack: the exclusive lock is per open file
// description, so a second open of a file this process already holds (an LV and pvs reading
// the same PV, a daemon request on a device it serves) must share the first.
class Stack::OpenFiles {
 public:
  Result<bdev::BlockDevicePtr> Open(const std::string& path, bool read_only, bool direct_io) {
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
    options.direct_io = direct_io;
    auto opened = bdev::FileDevice::Open(path, options);
    if (!opened.ok() && direct_io && opened.status().code() == EINVAL) {
      options.direct_io = false;  // a file system without O_DIRECT (tmpfs before 6.6)
      opened = bdev::FileDevice::Open(path, options);
    }
    VS_ASSIGN_OR_RETURN(auto device, std::move(opened));
    open_[key] = device;
    return bdev::BlockDevicePtr(std::move(device));
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::weak_ptr<bdev::BlockDevice>> open_;  // GUARDED_BY(mu_)
};

void Stack::OpenFilesDeleter::operator()(OpenFiles* files) const { delete files; }

Result<bdev::BlockDevicePtr> Stack::OpenDevice(const std::string& name, Access access) {
  return Resolve(name, access == Access::kReadOnly, Lookup{});
}

Result<bdev::BlockDevicePtr> Stack::OpenPath(const std::string& path, bool read_only,
                                             bool direct_io) {
  if (options_.open_path) return options_.open_path(path, read_only);
  if (!open_files_) open_files_.reset(new OpenFiles);
  return open_files_->Open(path, read_only, direct_io);
}

Result<bdev::BlockDevicePtr> Stack::Resolve(const std::string& name, bool read_only,
                                            Lookup lookup) {
  if (name.empty()) return Status::InvalidArgument("empty device name");
  if (name.front() == '/' || name.front() == '.') return OpenPath(name, read_only, lookup.vdev);
  // Names with a scheme: devices elsewhere (NBD exports, RBD images; remote/remote_device.h).
  if (remote::IsRemoteDeviceName(name)) return remote::OpenRemoteDevice(name, read_only);
  // Inside the daemon, an active device is used as it is: it is already open and exported.
  if (live()) {
    if (auto device = registry_.Find(name)) return device;
  }
  auto device = OpenPoolVolume(name, read_only, lookup);
  if (device.ok() || !device.status().IsNotFound()) return device;
  device = OpenLv(name, read_only, lookup);
  if (device.ok() || !device.status().IsNotFound()) return device;
  struct stat st;
  if (::stat(name.c_str(), &st) == 0) return OpenPath(name, read_only, lookup.vdev);
  return Status::NotFound("no device, pool volume or LV named '" + name + "'");
}

}  // namespace volstack::stack

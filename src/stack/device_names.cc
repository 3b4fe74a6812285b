#include "cli/device_names.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <map>
#include <memory>
#include <mutex>

#include "bdev/file_device.h"
#include "remote/nbd_client_device.h"
#include "stack/daemon.h"

namespace volstack::cli {

namespace {

// One FileDevice per backing file per process: the exclusive lock is per open file
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

OpenFiles& TheOpenFiles() {
  static OpenFiles* files = new OpenFiles;  // never destroyed: devices may outlive main()
  return *files;
}

}  // namespace

Result<bdev::BlockDevicePtr> OpenDeviceByName(const Context& ctx, const std::string& name,
                                              bool read_only) {
  if (name.empty()) return Status::InvalidArgument("empty device name");
  if (name.front() == '/' || name.front() == '.') return TheOpenFiles().Open(name, read_only);
  if (remote::IsNbdUri(name)) {
    remote::NbdClientOptions options;
    options.read_only = read_only;
    VS_ASSIGN_OR_RETURN(auto device, remote::NbdClientDevice::Open(name, options));
    return bdev::BlockDevicePtr(std::move(device));
  }
  // Inside the daemon, an active device is used as it is: it is already open and exported.
  if (auto* daemon = stack::Daemon::Current()) {
    if (auto device = daemon->registry().Find(name)) return device;
  }
  for (auto* open : {&OpenPoolVolumeByName, &OpenLogicalVolumeByName}) {
    auto device = open(ctx, name, read_only);
    if (device.ok() || !device.status().IsNotFound()) return device;
  }
  struct stat st;
  if (::stat(name.c_str(), &st) == 0) return TheOpenFiles().Open(name, read_only);
  return Status::NotFound("no device, pool volume or LV named '" + name + "'");
}

std::vector<std::string> ListVolstackDeviceNames(const Context& ctx) {
  std::vector<std::string> names = ListPoolVolumeNames(ctx);
  for (auto& lv : ListLogicalVolumeNames(ctx)) names.push_back(std::move(lv));
  return names;
}

}  // namespace volstack::cli

#include "remote/remote_device.h"

#include <map>
#include <memory>
#include <mutex>

#include "remote/nbd_client_device.h"
#include "remote/rbd_device.h"

namespace volstack::remote {

bool IsRemoteDeviceName(const std::string& name) { return IsNbdUri(name) || IsRbdName(name); }

Result<bdev::BlockDevicePtr> OpenRemoteDevice(const std::string& name, bool read_only) {
  if (IsNbdUri(name)) {
    NbdClientOptions options;
    options.read_only = read_only;
    VS_ASSIGN_OR_RETURN(auto device, NbdClientDevice::Open(name, options));
    return bdev::BlockDevicePtr(std::move(device));
  }
  if (!IsRbdName(name)) return Status::InvalidArgument("'" + name + "' is not a remote device");
  static std::mutex mu;
  static auto* open = new std::map<std::string, std::weak_ptr<RbdDevice>>;  // GUARDED_BY(mu)
  std::lock_guard lock(mu);
  if (auto device = (*open)[name].lock()) {
    if (read_only || !device->read_only()) return bdev::BlockDevicePtr(device);
    return Status::Busy(name + " is open read-only in this process");
  }
  RbdOptions options;
  options.read_only = read_only;
  VS_ASSIGN_OR_RETURN(auto device, RbdDevice::Open(name, options));
  (*open)[name] = device;
  return bdev::BlockDevicePtr(std::move(device));
}

}  // namespace volstack::remote

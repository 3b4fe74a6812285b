#include "remote/remote_device.h"

#include <map>
#include <memory>
#include <mutex>

#include "remote/nbd_client_device.h"
#include "remote/rbd_device.h"

namespace volstack::remote {

bool IsRemoteDeviceName(const std::string& name) { return IsNbdUri(name) || IsRbdName(name); }

size_t RemoteNameEnd(const std::string& text) {
  auto is_range = [](const std::string& item) {
    size_t i = 0, digits = 0;
    while (i < item.size() && item[i] >= '0' && item[i] <= '9') i++, digits++;
    if (digits == 0) return false;
    if (i == item.size()) return true;
    if (item[i] != '-' && item[i] != '+') return false;
    return item.size() > i + 1 && item.find_first_not_of("0123456789", i + 1) == std::string::npos;
  };
  size_t end = std::string::npos;
  for (size_t colon = text.rfind(':'); colon != std::string::npos && colon > 0;
       colon = text.rfind(':', colon - 1)) {
    const size_t next = text.find(':', colon + 1);
    if (!is_range(text.substr(colon + 1, next == std::string::npos ? next : next - colon - 1))) {
      break;
    }
    end = colon;
  }
  return end;
}

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

#include "bdev/device_registry.h"

#include <cctype>

namespace volstack::bdev {

bool DeviceRegistry::IsValidName(const std::string& name) {
  if (name.empty() || name.size() > 255 || name.front() == '/' || name.back() == '/') {
    return false;
  }
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    const std::string part = name.substr(start, end - start);
    if (part.empty() || part == "." || part == ".." || part.front() == '-' || part.front() == '@') {
      return false;
    }
    for (char c : part) {
      // '@': a volume's snapshot, "pool/vol@snap" (stack/snapshot_devices.h).
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '+' &&
          c != ':' && c != '-' && c != '@') {
        return false;
      }
    }
    start = end + 1;
  }
  return true;
}

Status DeviceRegistry::Add(const std::string& name, BlockDevicePtr device) {
  if (!IsValidName(name)) return Status::InvalidArgument("invalid device name '" + name + "'");
  {
    std::lock_guard lock(mu_);
    if (!devices_.emplace(name, device).second) {
      return Status::Exists("device " + name + " is already active");
    }
  }
  Notify(Change::kAdded, name, device);
  return Status::Ok();
}

Result<BlockDevicePtr> DeviceRegistry::Remove(const std::string& name) {
  BlockDevicePtr device;
  {
    std::lock_guard lock(mu_);
    auto it = devices_.find(name);
    if (it == devices_.end()) return Status::NotFound("device " + name + " is not active");
    device = std::move(it->second);
    devices_.erase(it);
  }
  Notify(Change::kRemoved, name, device);
  return device;
}

BlockDevicePtr DeviceRegistry::Find(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = devices_.find(name);
  return it == devices_.end() ? nullptr : it->second;
}

std::vector<std::pair<std::string, BlockDevicePtr>> DeviceRegistry::List() const {
  std::lock_guard lock(mu_);
  return {devices_.begin(), devices_.end()};
}

int DeviceRegistry::Subscribe(Listener listener) {
  std::lock_guard lock(mu_);
  const int id = next_listener_id_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

void DeviceRegistry::Unsubscribe(int id) {
  std::lock_guard lock(mu_);
  listeners_.erase(id);
}

void DeviceRegistry::Notify(Change change, const std::string& name, const BlockDevicePtr& device) {
  std::vector<Listener> listeners;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, l] : listeners_) listeners.push_back(l);
  }
  for (const auto& l : listeners) l(change, name, device);
}

}  // namespace volstack::bdev

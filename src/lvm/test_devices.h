// Tests' stand-in for device names: an Lvm session opens PVs by name through a
// DeviceOpener, and tests hand it in-memory or fault-injecting devices under made-up names.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "lvm/lvm.h"

namespace volstack::lvm::testing {

struct Devices {
  std::map<std::string, bdev::BlockDevicePtr> map;
  DeviceOpener opener() {
    return [this](const std::string& name, bool) -> Result<bdev::BlockDevicePtr> {
      auto it = map.find(name);
      if (it == map.end()) return Status::NotFound(name);
      return it->second;
    };
  }
  std::vector<std::string> names() const {
    std::vector<std::string> n;
    for (const auto& [name, device] : map) n.push_back(name);
    return n;
  }
};

}  // namespace volstack::lvm::testing

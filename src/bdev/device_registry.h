// DeviceRegistry: the set of active, named devices of one stack ("trunk/funk", "vg0/lv0").
//
// The layer that assembles a stack adds the devices it activates (stack::Stack, stack/stack.cc,
// in the daemon; cli/export_devfs.cc and cli/export_nbd.cc fill a registry of their own for a
// one-shot devfs or NBD server; the pool and LVM engines never see a registry); exports (devfs,
// NBD) list them and subscribe to
// changes, so a device appears in devfs when activated and disappears when deactivated. Names are
// slash-separated paths of [A-Za-z0-9._+:@-] components, none starting with '-' or '@' (a
// snapshot device is "pool/vol@snap").
//
// Threads: all methods are safe from any thread. Listeners run on the thread that made the
// change, after the registry's lock is released; they must not block for long.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "bdev/block_device.h"

namespace volstack::bdev {

class DeviceRegistry {
 public:
  enum class Change { kAdded, kRemoved };
  using Listener = std::function<void(Change, const std::string& name, const BlockDevicePtr&)>;

  // EEXIST if the name is taken; EINVAL if it is not a valid device name.
  Status Add(const std::string& name, BlockDevicePtr device);
  // ENOENT if absent. Returns the device so the caller can flush it.
  Result<BlockDevicePtr> Remove(const std::string& name);
  // nullptr if absent.
  BlockDevicePtr Find(const std::string& name) const;
  std::vector<std::pair<std::string, BlockDevicePtr>> List() const;

  // Returns an id for Unsubscribe.
  int Subscribe(Listener listener);
  void Unsubscribe(int id);

  static bool IsValidName(const std::string& name);

 private:
  void Notify(Change change, const std::string& name, const BlockDevicePtr& device);

  mutable std::mutex mu_;
  std::map<std::string, BlockDevicePtr> devices_;  // GUARDED_BY(mu_)
  std::map<int, Listener> listeners_;              // GUARDED_BY(mu_)
  int next_listener_id_ = 1;                       // GUARDED_BY(mu_)
};

}  // namespace volstack::bdev

#include "stack/snapshot_devices.h"

#include <map>

namespace volstack::stack {

namespace {
bool Visible(pool::Pool& pool, const std::string& volume) {
  auto props = pool.StoredProperties(volume);
  if (!props.ok()) return false;
  auto it = props->find("snapdev");
  return it != props->end() && it->second == "visible";
}
}  // namespace

std::vector<std::string> VisibleSnapshotNames(pool::Pool& pool) {
  std::vector<std::string> out;
  std::map<std::string, bool> visible;  // volume -> snapdev=visible
  for (auto& name : pool.SnapshotNames()) {
    const std::string volume = name.substr(0, name.find('@'));
    auto [it, fresh] = visible.try_emplace(volume, false);
    if (fresh) it->second = Visible(pool, volume);
    if (it->second) out.push_back(std::move(name));
  }
  return out;
}

Status CheckSnapshotDevice(pool::Pool& pool, const std::string& name) {
  const size_t at = name.find('@');
  if (at == std::string::npos) return Status::Ok();
  const std::string volume = name.substr(0, at);
  if (!pool.StoredProperties(volume).ok()) {
    return Status::NotFound("no pool volume '" + volume + "'");
  }
  if (!Visible(pool, volume)) {
    return Status::FromErrno(ENODEV, "snapshot '" + name + "' is not a device: the snapshots of '" +
                                         volume + "' are hidden (zfs set snapdev=visible " +
                                         volume + ")");
  }
  return Status::Ok();
}

}  // namespace volstack::stack

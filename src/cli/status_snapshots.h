// The snapshots in `volstack status` (status.cc): under each volume, its snapshots oldest
// first with their space, and, for a volume with snapdev=visible, each snapshot's exports
// like any device's (devfs file, loop devices, NBD). The data: stack/requests.cc's tree,
// [{"name", "used", "referenced", "written", "device", "exports"}...].
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

namespace volstack::cli {

// "snapshots N" for the volume's line ("" with none), then a line per snapshot, its exports
// below it, with `indent`. `print_exports` prints an exports object (status.cc's).
std::string SnapshotCount(const nlohmann::json& snapshots);
void PrintSnapshots(
    const nlohmann::json& snapshots, const std::string& indent,
    const std::function<void(const nlohmann::json&, const std::string&)>& print_exports);

}  // namespace volstack::cli

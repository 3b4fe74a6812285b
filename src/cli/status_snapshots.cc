#include "cli/status_snapshots.h"

#include <cstdio>

#include "cli/pool_common.h"
#include "util/request_io.h"

namespace volstack::cli {

std::string SnapshotCount(const nlohmann::json& snapshots) {
  if (!snapshots.is_array() || snapshots.empty()) return "";
  return "  snapshots " + std::to_string(snapshots.size());
}

void PrintSnapshots(
    const nlohmann::json& snapshots, const std::string& indent,
    const std::function<void(const nlohmann::json&, const std::string&)>& print_exports) {
  if (!snapshots.is_array()) return;
  for (const auto& s : snapshots) {
    std::fprintf(Out(), "%ssnapshot %s  used %s  refer %s%s\n", indent.c_str(),
                 s["name"].get<std::string>().c_str(),
                 poolcli::Bytes(s["used"].get<uint64_t>(), false).c_str(),
                 poolcli::Bytes(s["referenced"].get<uint64_t>(), false).c_str(),
                 s["device"].get<bool>() ? "  device (read-only)" : "");
    if (s.contains("exports")) print_exports(s["exports"], indent + "  ");
  }
}

}  // namespace volstack::cli

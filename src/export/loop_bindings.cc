#include "export/loop_bindings.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/file_util.h"

namespace volstack::exportfs {

std::string LoopBindingsPath(const std::string& state_dir) { return state_dir + "/loops.json"; }

Result<std::vector<LoopBinding>> LoadLoopBindings(const std::string& state_dir) {
  const std::string path = LoopBindingsPath(state_dir);
  std::ifstream in(path);
  std::vector<LoopBinding> loops;
  if (!in) {
    if (errno == ENOENT) return loops;
    return ErrnoStatus("open " + path);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const auto doc = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("loops") ||
      !doc["loops"].is_array()) {
    return Status::Corruption(path + ": not a loop bindings file");
  }
  for (const auto& j : doc["loops"]) {
    if (!j.is_object() || !j.contains("device") || !j["device"].is_string() ||
        !j.contains("file") || !j["file"].is_string()) {
      return Status::Corruption(path + ": a binding lacks its device or file");
    }
    LoopBinding b;
    b.device = j["device"].get<std::string>();
    b.file = j["file"].get<std::string>();
    b.name = j.value("name", std::string());
    b.sector_size = j.value("sector_size", 512u);
    b.direct_io = j.value("direct_io", false);
    b.read_only = j.value("read_only", false);
    loops.push_back(std::move(b));
  }
  return loops;
}

Status SaveLoopBindings(const std::string& state_dir, const std::vector<LoopBinding>& loops) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& b : loops) {
    arr.push_back({{"device", b.device},
                   {"name", b.name},
                   {"file", b.file},
                   {"sector_size", b.sector_size},
                   {"direct_io", b.direct_io},
                   {"read_only", b.read_only}});
  }
  return volstack::WriteFileAtomically(LoopBindingsPath(state_dir),
                                       nlohmann::json{{"loops", arr}}.dump(2) + "\n");
}

}  // namespace volstack::exportfs

#include "export/loop_bindings.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "util/file_util.h"
#include "util/format_version.h"
#include "util/state_file.h"

namespace volstack::exportfs {

std::string LoopBindingsPath(const std::string& state_dir) { return state_dir + "/loops.json"; }

namespace {

constexpr uint64_t kLoopBindingsVersion = 1;

Result<std::vector<LoopBinding>> ParseLoopBindings(const std::string& path,
                                                   const std::string& text) {
  std::vector<LoopBinding> loops;
  const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status::Corruption(path + ": not a loop bindings file");
  }
  std::optional<uint64_t> version;  // none in a file from before versions were written
  if (doc.contains("version")) {
    if (!doc["version"].is_number_unsigned()) {
      return Status::Corruption(path + ": field 'version' is not a number");
    }
    version = doc["version"].get<uint64_t>();
  }
  VS_RETURN_IF_ERROR(CheckFormatVersion(path, version, kLoopBindingsVersion));
  if (!doc.contains("loops") || !doc["loops"].is_array()) {
    return Status::Corruption(path + ": field 'loops' is missing or not a list");
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

std::string FormatLoopBindings(const std::vector<LoopBinding>& loops) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& b : loops) {
    arr.push_back({{"device", b.device},
                   {"name", b.name},
                   {"file", b.file},
                   {"sector_size", b.sector_size},
                   {"direct_io", b.direct_io},
                   {"read_only", b.read_only}});
  }
  return nlohmann::json{{"version", kLoopBindingsVersion}, {"loops", arr}}.dump(2) + "\n";
}

}  // namespace

Result<std::vector<LoopBinding>> LoadLoopBindings(const std::string& state_dir) {
  const std::string path = LoopBindingsPath(state_dir);
  auto text = ReadWholeFile(path);
  if (!text.ok()) {
    if (text.status().IsNotFound()) return std::vector<LoopBinding>{};
    return text.status();
  }
  return ParseLoopBindings(path, *text);
}

Status UpdateLoopBindings(const std::string& state_dir,
                          const std::function<Status(std::vector<LoopBinding>& loops)>& modify) {
  const std::string path = LoopBindingsPath(state_dir);
  return UpdateStateFile(
      state_dir, path,
      [&](const std::optional<std::string>& old) -> Result<std::optional<std::string>> {
        std::vector<LoopBinding> loops;
        if (old) {
          VS_ASSIGN_OR_RETURN(loops, ParseLoopBindings(path, *old));
        }
        VS_RETURN_IF_ERROR(modify(loops));
        return std::optional<std::string>(FormatLoopBindings(loops));
      });
}

}  // namespace volstack::exportfs

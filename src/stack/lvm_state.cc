#include "stack/lvm_state.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "util/state_file.h"

namespace volstack::stack {

std::vector<std::string> ReadListFile(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  return out;
}

namespace {
std::vector<std::string> ParseList(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  return out;
}

std::string FormatList(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  return text;
}
}  // namespace

Status UpdateListFile(const std::string& state_dir, const std::string& path,
                      const std::function<bool(std::vector<std::string>& lines)>& modify) {
  return UpdateStateFile(
      state_dir, path,
      [&](const std::optional<std::string>& old) -> Result<std::optional<std::string>> {
        auto lines = old ? ParseList(*old) : std::vector<std::string>{};
        if (!modify(lines)) return std::optional<std::string>();
        return std::optional<std::string>(FormatList(lines));
      });
}

Status WriteListFile(const std::string& state_dir, const std::string& path,
                     const std::vector<std::string>& lines) {
  return ReplaceStateFile(state_dir, path, FormatList(lines));
}

std::string LvmDevicesPath(const std::string& state_dir) { return state_dir + "/lvm/devices"; }
std::string LvmActivePath(const std::string& state_dir) { return state_dir + "/lvm/active"; }

Status AddToList(const std::string& state_dir, const std::string& path,
                 const std::vector<std::string>& names) {
  return UpdateListFile(state_dir, path, [&](std::vector<std::string>& lines) {
    bool changed = false;
    for (const auto& n : names) {
      if (std::find(lines.begin(), lines.end(), n) == lines.end()) {
        lines.push_back(n);
        changed = true;
      }
    }
    return changed;
  });
}

Status RemoveFromList(const std::string& state_dir, const std::string& path,
                      const std::vector<std::string>& names) {
  return UpdateListFile(state_dir, path, [&](std::vector<std::string>& lines) {
    auto end = std::remove_if(lines.begin(), lines.end(), [&](const std::string& l) {
      return std::find(names.begin(), names.end(), l) != names.end();
    });
    if (end == lines.end()) return false;
    lines.erase(end, lines.end());
    return true;
  });
}

std::string NormalizeDeviceName(const std::string& name) {
  if (name.empty() || name[0] == '/') return name;
  struct stat st;
  if (name[0] == '.' || (name.find('/') == std::string::npos && ::stat(name.c_str(), &st) == 0) ||
      ::stat(name.c_str(), &st) == 0) {
    char buf[PATH_MAX];
    if (::realpath(name.c_str(), buf)) return buf;
  }
  return name;
}

std::pair<std::string, std::string> SplitLvName(const std::string& name) {
  std::string n = name;
  if (n.starts_with("/dev/")) n = n.substr(5);
  if (n.starts_with("mapper/")) n = n.substr(7);
  size_t slash = n.find('/');
  if (slash == std::string::npos) return {n, ""};
  return {n.substr(0, slash), n.substr(slash + 1)};
}

}  // namespace volstack::stack

#include "stack/lvm_state.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <string_view>

#include "util/file_util.h"
#include "util/format_version.h"
#include "util/state_file.h"

namespace volstack::stack {

namespace {

constexpr uint64_t kListFormat = 1;
constexpr std::string_view kFormatLine = "# volstack list format ";

Result<std::vector<std::string>> ParseList(const std::string& path, const std::string& text) {
  std::vector<std::string> out;
  std::optional<uint64_t> version;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(kFormatLine, 0) == 0) {
      const std::string n = line.substr(kFormatLine.size());
      char* end = nullptr;
      const unsigned long long v = std::strtoull(n.c_str(), &end, 10);
      if (n.empty() || *end != '\0') {
        return Status::Corruption(path + ": field 'format' is not a number: '" + n + "'");
      }
      version = v;
      continue;
    }
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  VS_RETURN_IF_ERROR(CheckFormatVersion(path, version, kListFormat));
  return out;
}

std::string FormatList(const std::vector<std::string>& lines) {
  std::string text = std::string(kFormatLine) + std::to_string(kListFormat) + "\n";
  for (const auto& l : lines) text += l + "\n";
  return text;
}

}  // namespace

Result<std::vector<std::string>> ReadListFile(const std::string& path) {
  auto text = ReadWholeFile(path);
  if (!text.ok()) {
    if (text.status().IsNotFound()) return std::vector<std::string>{};
    return text.status();
  }
  return ParseList(path, *text);
}

Status UpdateListFile(const std::string& state_dir, const std::string& path,
                      const std::function<bool(std::vector<std::string>& lines)>& modify) {
  return UpdateStateFile(
      state_dir, path,
      [&](const std::optional<std::string>& old) -> Result<std::optional<std::string>> {
        std::vector<std::string> lines;
        if (old) {
          VS_ASSIGN_OR_RETURN(lines, ParseList(path, *old));
        }
        if (!modify(lines)) return std::optional<std::string>();
        return std::optional<std::string>(FormatList(lines));
      });
}

Status WriteListFile(const std::string& state_dir, const std::string& path,
                     const std::vector<std::string>& lines) {
  return UpdateStateFile(
      state_dir, path,
      [&](const std::optional<std::string>& old) -> Result<std::optional<std::string>> {
        if (old) {
          VS_RETURN_IF_ERROR(ParseList(path, *old).status());  // never over a newer format
        }
        return std::optional<std::string>(FormatList(lines));
      });
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

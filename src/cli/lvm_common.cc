#include "cli/lvm_common.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli/device_names.h"
#include "util/size.h"
#include "util/state_file.h"

namespace volstack::cli::lvmcli {

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "  %s\n", message.c_str());
  return code;
}

int Fail(const Status& status, int code) { return Fail(status.message(), code); }

void Say(const std::string& message) { std::printf("  %s\n", message.c_str()); }

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

Status UpdateListFile(const Context& ctx, const std::string& path,
                      const std::function<bool(std::vector<std::string>& lines)>& modify) {
  return UpdateStateFile(
      ctx.global.state_dir, path,
      [&](const std::optional<std::string>& old) -> Result<std::optional<std::string>> {
        auto lines = old ? ParseList(*old) : std::vector<std::string>{};
        if (!modify(lines)) return std::optional<std::string>();
        return std::optional<std::string>(FormatList(lines));
      });
}

Status WriteListFile(const Context& ctx, const std::string& path,
                     const std::vector<std::string>& lines) {
  return ReplaceStateFile(ctx.global.state_dir, path, FormatList(lines));
}

std::string DevicesFile(const Context& ctx) { return ctx.global.state_dir + "/lvm/devices"; }
std::string ActiveFile(const Context& ctx) { return ctx.global.state_dir + "/lvm/active"; }

Status AddToList(const Context& ctx, const std::string& path,
                 const std::vector<std::string>& names) {
  return UpdateListFile(ctx, path, [&](std::vector<std::string>& lines) {
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

Status RemoveFromList(const Context& ctx, const std::string& path,
                      const std::vector<std::string>& names) {
  return UpdateListFile(ctx, path, [&](std::vector<std::string>& lines) {
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

namespace {
thread_local int session_depth = 0;
}  // namespace

std::unique_ptr<lvm::Lvm> OpenSession(const Context& ctx, bool read_only,
                                      const std::vector<std::string>& extra) {
  std::vector<std::string> names;
  auto add = [&](const std::string& n) {
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  };
  for (const auto& n : extra) add(NormalizeDeviceName(n));
  for (const auto& n : ReadListFile(DevicesFile(ctx))) add(n);
  if (session_depth == 0) {
    for (const auto& n : ListPoolVolumeNames(ctx)) add(n);
  }
  auto opener = [&ctx](const std::string& name, bool ro) -> Result<bdev::BlockDevicePtr> {
    session_depth++;
    auto dev = OpenDeviceByName(ctx, name, ro);
    session_depth--;
    return dev;
  };
  auto lvm = std::make_unique<lvm::Lvm>(opener, read_only);
  lvm->Scan(names);
  return lvm;
}

void WarnScan(lvm::Lvm& lvm) {
  for (const auto& e : lvm.scan_errors()) {
    if (e.status.code() == ENOENT || e.status.code() == ENXIO) continue;
    std::fprintf(stderr, "  WARNING: %s: %s\n", e.device.c_str(), e.status.message().c_str());
  }
  for (const auto& h : lvm.vgs()) {
    for (const auto& w : h.warnings) std::fprintf(stderr, "  WARNING: %s\n", w.c_str());
  }
}

std::string Description(const std::string& verb, const std::vector<std::string>& args) {
  std::string d = "Write from " + verb;
  for (const auto& a : args) d += " " + a;
  return d + ".";
}

bool IsValidUnits(const std::string& units) {
  return units.size() == 1 &&
         std::string("hHbBsSkKmMgGtTpPeErR").find(units[0]) != std::string::npos;
}

std::string FormatSize(uint64_t bytes, char units, bool suffix) {
  static const char kLower[] = "bkmgtpe";
  static const char kUpper[] = "BKMGTPE";
  // r/R: human units that mark a value rounded down with '<' (lvm2's default, units = "r");
  // h/H: human units rounded to nearest; both keep their suffix under --nosuffix.
  const bool marked = units == 'r' || units == 'R';
  if (marked) units = units == 'r' ? 'h' : 'H';
  const bool human = units == 'h' || units == 'H';
  const bool zero_suffix = suffix;  // lvm2: "0 " in human units, "0" with --nosuffix
  suffix |= human;
  if (units == 'b' || units == 'B') return std::to_string(bytes) + (suffix ? "B" : "");
  if (units == 's' || units == 'S') return std::to_string(bytes / 512) + (suffix ? "S" : "");
  const bool si = std::isupper(static_cast<unsigned char>(units));
  const double base = si ? 1000.0 : 1024.0;
  int power = 0;
  if (human) {
    if (bytes == 0) return zero_suffix ? "0 " : "0";
    double v = static_cast<double>(bytes);
    while (power < 6 && v >= base) {
      v /= base;
      power++;
    }
  } else {
    const char* p = std::strchr(si ? kUpper : kLower, units);
    power = p ? static_cast<int>(p - (si ? kUpper : kLower)) : 0;
    if (bytes == 0) return std::string("0") + (suffix ? std::string(1, units) : "");
  }
  const double unit = std::pow(base, power);
  const double exact = static_cast<double>(bytes) / unit;
  char buf[64];
  if (marked) {
    const double floored = std::floor(exact * 100.0 + 1e-9) / 100.0;
    const bool inexact = std::fabs(floored - exact) * unit >= 0.5;
    std::snprintf(buf, sizeof(buf), "%s%.2f", inexact ? "<" : "", floored);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f", exact);
  }
  std::string s = buf;
  if (suffix) s += (si ? kUpper : kLower)[power];
  return s;
}

std::string FormatSizeLong(uint64_t bytes) {
  static const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes == 0) return "0   ";
  double v = static_cast<double>(bytes);
  int p = 0;
  while (p < 6 && v >= 1024.0) {
    v /= 1024.0;
    p++;
  }
  const double floored = std::floor(v * 100.0 + 1e-9) / 100.0;
  const bool inexact = std::fabs(floored - v) * std::pow(1024.0, p) >= 0.5;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s%.2f %s", inexact ? "<" : "", floored, kNames[p]);
  return buf;
}

Result<uint64_t> ParseLvmSize(const std::string& text) {
  if (text.empty()) return Status::InvalidArgument("empty size");
  return ParseSize(text, uint64_t{1} << 20);
}

std::pair<std::string, std::string> SplitLvName(const std::string& name) {
  std::string n = name;
  if (n.starts_with("/dev/")) n = n.substr(5);
  if (n.starts_with("mapper/")) n = n.substr(7);
  size_t slash = n.find('/');
  if (slash == std::string::npos) return {n, ""};
  return {n.substr(0, slash), n.substr(slash + 1)};
}

bool IsActive(const Context& ctx, const std::string& vg, const std::string& lv) {
  auto lines = ReadListFile(ActiveFile(ctx));
  return std::find(lines.begin(), lines.end(), vg + "/" + lv) != lines.end();
}

}  // namespace volstack::cli::lvmcli

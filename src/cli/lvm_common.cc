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

#include "stack/lvm_state.h"
#include "stack/stack.h"
#include "util/request_io.h"
#include "util/size.h"

namespace volstack::cli::lvmcli {

int Fail(const std::string& message, int code) {
  std::fprintf(Err(), "  %s\n", message.c_str());
  return code;
}

int Fail(const Status& status, int code) { return Fail(status.message(), code); }

std::string VgNotFound(const lvm::Lvm& session, const std::string& vg) {
  std::string busy;
  for (const auto& e : session.scan_errors()) {
    if (e.status.code() == EBUSY) busy += (busy.empty() ? "" : ", ") + e.device;
  }
  if (busy.empty()) return "Volume group \"" + vg + "\" not found";
  return "Volume group \"" + vg + "\" is busy: " + busy +
         ", which may hold its PVs, is in use by another process";
}

void Say(const std::string& message) { std::fprintf(Out(), "  %s\n", message.c_str()); }

std::vector<std::string> ReadListFile(const std::string& path) {
  auto lines = stack::ReadListFile(path);
  if (lines.ok()) return *lines;
  std::fprintf(Err(), "volstack: %s\n", lines.status().ToString().c_str());
  return {};
}

Status UpdateListFile(const Context& ctx, const std::string& path,
                      const std::function<bool(std::vector<std::string>& lines)>& modify) {
  return stack::UpdateListFile(ctx.global.state_dir, path, modify);
}

Status WriteListFile(const Context& ctx, const std::string& path,
                     const std::vector<std::string>& lines) {
  return stack::WriteListFile(ctx.global.state_dir, path, lines);
}

std::string DevicesFile(const Context& ctx) { return stack::LvmDevicesPath(ctx.global.state_dir); }
std::string ActiveFile(const Context& ctx) { return stack::LvmActivePath(ctx.global.state_dir); }

Status AddToList(const Context& ctx, const std::string& path,
                 const std::vector<std::string>& names) {
  return stack::AddToList(ctx.global.state_dir, path, names);
}

Status RemoveFromList(const Context& ctx, const std::string& path,
                      const std::vector<std::string>& names) {
  return stack::RemoveFromList(ctx.global.state_dir, path, names);
}

std::string NormalizeDeviceName(const std::string& name) {
  return stack::NormalizeDeviceName(name);
}

std::unique_ptr<lvm::Lvm> OpenSession(const Context& ctx, bool read_only,
                                      const std::vector<std::string>& extra) {
  return ctx.stack().OpenLvm(read_only, extra);
}

void WarnScan(lvm::Lvm& lvm) {
  for (const auto& e : lvm.scan_errors()) {
    if (e.status.code() == ENOENT || e.status.code() == ENXIO) continue;
    std::fprintf(Err(), "  WARNING: %s: %s\n", e.device.c_str(), e.status.message().c_str());
  }
  for (const auto& h : lvm.vgs()) {
    for (const auto& w : h.warnings) std::fprintf(Err(), "  WARNING: %s\n", w.c_str());
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
  return stack::SplitLvName(name);
}

bool IsActive(const Context& ctx, const std::string& vg, const std::string& lv) {
  auto lines = ReadListFile(ActiveFile(ctx));
  return std::find(lines.begin(), lines.end(), vg + "/" + lv) != lines.end();
}

}  // namespace volstack::cli::lvmcli

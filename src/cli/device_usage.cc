#include "cli/device_usage.h"

#include <dirent.h>
#include <limits.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "cli/lvm_common.h"
#include "cli/pool_common.h"
#include "export/loop_bindings.h"
#include "stack/lvm_state.h"
#include "stack/nbd_listeners.h"
#include "stack/nbd_state.h"
#include "stack/stack.h"
#include "stack/state_dir.h"

namespace volstack::cli {

namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(s[i + 1]) && std::isdigit(s[i + 2]) &&
        std::isdigit(s[i + 3])) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string Comm(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/comm");
  std::string comm;
  std::getline(in, comm);
  return comm;
}

// devfs path -> the processes holding it open, for every fd under `prefix`.
std::map<std::string, std::vector<std::string>> OpenFilesUnder(const std::string& prefix) {
  std::map<std::string, std::vector<std::string>> out;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  const std::string self = std::to_string(::getpid());
  while (dirent* p = ::readdir(proc)) {
    const std::string pid = p->d_name;
    if (pid.empty() || !std::isdigit(pid[0]) || pid == self) continue;
    const std::string fd_dir = "/proc/" + pid + "/fd";
    DIR* fds = ::opendir(fd_dir.c_str());
    if (fds == nullptr) continue;
    std::set<std::string> seen;
    while (dirent* f = ::readdir(fds)) {
      if (f->d_name[0] == '.') continue;
      char target[PATH_MAX];
      const ssize_t n = ::readlink((fd_dir + "/" + f->d_name).c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      const std::string path(target, static_cast<size_t>(n));
      if (path.rfind(prefix, 0) != 0 || !seen.insert(path).second) continue;
      out[path].push_back("pid " + pid + " (" + Comm(pid) + ")");
    }
    ::closedir(fds);
  }
  ::closedir(proc);
  return out;
}

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

}  // namespace

std::vector<MountEntry> ReadMounts() {
  std::vector<MountEntry> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // id parent maj:min root mount-point options [optional...] - fstype source super-options
    std::istringstream ss(line);
    std::vector<std::string> f;
    std::string w;
    while (ss >> w) f.push_back(w);
    size_t dash = 0;
    while (dash < f.size() && f[dash] != "-") dash++;
    if (f.size() < 5 || dash + 2 >= f.size()) continue;
    out.push_back({Unescape(f[dash + 2]), Unescape(f[4]), f[dash + 1]});
  }
  return out;
}

DeviceUsage DeviceUsage::Snapshot(const Context& ctx) {
  DeviceUsage u;
  const stack::StateDir state{ctx.global.state_dir};
  u.devfs_dir_ = state.devfs_dir();
  u.nbd_ = &ctx.stack().nbd();
  for (auto& l : exportfs::ListLoops()) {
    if (l.backing_file.rfind(u.devfs_dir_ + "/", 0) == 0) u.loops_.push_back(std::move(l));
  }
  u.mounts_ = ReadMounts();
  u.open_by_ = OpenFilesUnder(u.devfs_dir_ + "/");
  if (auto loops = exportfs::LoadLoopBindings(ctx.global.state_dir); loops.ok()) {
    for (const auto& b : *loops) {
      u.recorded_[b.name].push_back({b.device, "recorded for `up` as bound to " + b.device +
                                                   " (`volstack losetup -d " + b.device +
                                                   "` first)"});
    }
  }
  if (auto nbd = stack::LoadNbdState(state.nbd_path()); nbd.ok()) {
    for (const auto& l : *nbd) {
      for (const auto& e : l.exports) {
        u.recorded_[e.device].push_back({l.address(), "recorded for `up` as served over NBD on " +
                                                          l.address() + " (`volstack nbd stop " +
                                                          l.address() + "` first)"});
      }
    }
  }
  if (auto pools = poolcli::ReadCache(ctx); pools.ok()) {
    for (const auto& p : *pools) {
      for (const auto& v : p.vdevs) u.vdev_of_[v] = p.name;
    }
  }
  // An activation record this volstack cannot read (a newer format) counts every PV as in
  // use: refusing a destroy is safe, allowing one is not.
  const auto active = stack::ReadListFile(lvmcli::ActiveFile(ctx));
  if (!active.ok() || !active->empty()) {
    if (active.ok()) {
      for (const auto& lv : *active) u.vg_active_[lvmcli::SplitLvName(lv).first] = true;
    }
    auto session = lvmcli::OpenSession(ctx, /*read_only=*/true);
    for (const auto& h : session->vgs()) {
      if (!active.ok()) u.vg_active_[h.vg.name] = true;
      for (const lvm::Pv* pv : h.pvs) {
        if (pv != nullptr) u.pv_of_[pv->name()] = h.vg.name;
      }
    }
  }
  return u;
}

std::vector<exportfs::LoopInfo> DeviceUsage::LoopsOf(const std::string& name) const {
  std::vector<exportfs::LoopInfo> out;
  for (const auto& l : loops_) {
    if (l.backing_file == devfs_dir_ + "/" + name) out.push_back(l);
  }
  return out;
}

std::vector<MountEntry> DeviceUsage::MountsOf(const std::string& source) const {
  std::vector<MountEntry> out;
  for (const auto& m : mounts_) {
    if (m.source == source) out.push_back(m);
  }
  return out;
}

std::string DeviceUsage::VgOfPv(const std::string& name) const {
  auto it = pv_of_.find(name);
  return it == pv_of_.end() ? "" : it->second;
}

std::vector<std::string> DeviceUsage::UsesOf(const std::string& name) const {
  std::vector<std::string> uses;
  std::set<std::string> live;  // loop devices and NBD addresses in use now
  for (const auto& l : LoopsOf(name)) {
    live.insert(l.device);
    std::string use = "bound to " + l.device;
    for (const auto& m : MountsOf(l.device)) use += ", mounted on " + m.mount_point;
    uses.push_back(use);
  }
  if (auto it = open_by_.find(devfs_dir_ + "/" + name); it != open_by_.end()) {
    uses.push_back("open by " + Join(it->second, ", "));
  }
  for (const auto& address : nbd_->ListenersOf(name)) {
    live.insert(address);
    uses.push_back("served over NBD on " + address);
  }
  if (auto it = recorded_.find(name); it != recorded_.end()) {
    for (const auto& [key, text] : it->second) {
      if (!live.count(key)) uses.push_back(text);  // a live one is said already
    }
  }
  if (auto it = vdev_of_.find(name); it != vdev_of_.end()) {
    uses.push_back("a vdev of pool " + it->second);
  }
  if (auto it = pv_of_.find(name); it != pv_of_.end() && vg_active_.count(it->second)) {
    uses.push_back("a PV of VG " + it->second + ", which has active LVs");
  }
  return uses;
}

Status CheckNotInUse(const Context& ctx, const std::vector<std::string>& names) {
  if (names.empty()) return Status::Ok();
  const DeviceUsage usage = DeviceUsage::Snapshot(ctx);
  for (const auto& name : names) {
    const auto uses = usage.UsesOf(name);
    if (!uses.empty()) return Status::Busy(name + " is " + Join(uses, "; "));
  }
  return Status::Ok();
}

}  // namespace volstack::cli

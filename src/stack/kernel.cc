#include "stack/kernel.h"

#include <dirent.h>
#include <limits.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <fstream>
#include <set>
#include <sstream>

#include "export/devfs.h"

namespace volstack::stack {

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

class SystemDevfs : public DevfsMount {
 public:
  explicit SystemDevfs(std::unique_ptr<exportfs::Devfs> devfs) : devfs_(std::move(devfs)) {}
  Status Unmount() override { return devfs_->Unmount(); }
  const std::string& dir() const override { return devfs_->dir(); }
  std::string transport() const override {
    return exportfs::FuseTransportName(devfs_->transport());
  }
  std::string transport_reason() const override { return devfs_->transport_reason(); }

 private:
  std::unique_ptr<exportfs::Devfs> devfs_;
};

class System : public Kernel {
 public:
  Result<std::unique_ptr<DevfsMount>> MountDevfs(const std::string& dir,
                                                 bdev::DeviceRegistry& registry) override {
    // After a kill -9 the old mount point is left as a dead FUSE connection ("Transport
    // endpoint is not connected"); it must be detached before devfs can mount there again.
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0 && errno == ENOTCONN) ::umount2(dir.c_str(), MNT_DETACH);
    VS_ASSIGN_OR_RETURN(auto devfs, exportfs::Devfs::Mount(dir, registry));
    return std::unique_ptr<DevfsMount>(std::make_unique<SystemDevfs>(std::move(devfs)));
  }
  std::vector<exportfs::LoopInfo> ListLoops() override { return exportfs::ListLoops(); }
  Result<exportfs::LoopInfo> GetLoopInfo(const std::string& device) override {
    return exportfs::GetLoopInfo(device);
  }
  Result<exportfs::LoopInfo> AttachLoop(const std::string& device, const std::string& file,
                                        const exportfs::LoopConfig& config) override {
    return exportfs::AttachLoop(device, file, config);
  }
  Status DetachLoop(const std::string& device) override { return exportfs::DetachLoop(device); }
  bool IsMounted(const std::string& device) override {
    std::ifstream mounts("/proc/mounts");
    std::string source, rest;
    while (mounts >> source && std::getline(mounts, rest)) {
      if (source == device) return true;
    }
    return false;
  }

  std::vector<MountEntry> ReadMounts() override {
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

  std::map<std::string, std::vector<std::string>> OpenFilesUnder(
      const std::string& prefix) override {
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
        const ssize_t n =
            ::readlink((fd_dir + "/" + f->d_name).c_str(), target, sizeof(target) - 1);
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
};

}  // namespace

std::shared_ptr<Kernel> SystemKernel() { return std::make_shared<System>(); }

}  // namespace volstack::stack

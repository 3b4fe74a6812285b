// A Kernel for unit tests (kernel.h): devfs "mounts" record the registry they serve, loop
// devices are entries in a table, nothing needs root.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "stack/kernel.h"

namespace volstack::stack {

class TestKernel : public Kernel {
 public:
  class Mount : public DevfsMount {
   public:
    Mount(TestKernel& kernel, std::string dir) : kernel_(kernel), dir_(std::move(dir)) {}
    ~Mount() override { kernel_.mounted.erase(dir_); }
    Status Unmount() override {
      if (kernel_.busy_unmount) return Status::Busy(dir_ + " is busy");
      kernel_.mounted.erase(dir_);
      return Status::Ok();
    }
    const std::string& dir() const override { return dir_; }

   private:
    TestKernel& kernel_;
    const std::string dir_;
  };

  Result<std::unique_ptr<DevfsMount>> MountDevfs(const std::string& dir,
                                                 bdev::DeviceRegistry& registry) override {
    if (mounted.count(dir)) return Status::Busy(dir + " is mounted already");
    mounted.insert(dir);
    return std::unique_ptr<DevfsMount>(std::make_unique<Mount>(*this, dir));
  }
  std::vector<exportfs::LoopInfo> ListLoops() override {
    std::vector<exportfs::LoopInfo> out;
    for (const auto& [device, info] : loops) out.push_back(info);
    return out;
  }
  Result<exportfs::LoopInfo> GetLoopInfo(const std::string& device) override {
    auto it = loops.find(device);
    if (it == loops.end()) return Status::FromErrno(ENXIO, device + " is not bound");
    return it->second;
  }
  Result<exportfs::LoopInfo> AttachLoop(const std::string& device, const std::string& file,
                                        const exportfs::LoopConfig& config) override {
    std::string name = device;
    for (int n = 0; name.empty(); n++) {
      if (!loops.count("/dev/loop" + std::to_string(n))) name = "/dev/loop" + std::to_string(n);
    }
    if (loops.count(name)) return Status::Busy(name + " is bound");
    exportfs::LoopInfo info;
    info.device = name;
    info.backing_file = file;
    info.sector_size = config.sector_size;
    info.read_only = config.read_only;
    loops[name] = info;
    return info;
  }
  Status DetachLoop(const std::string& device) override {
    return loops.erase(device) ? Status::Ok() : Status::FromErrno(ENXIO, device + " is not bound");
  }
  bool IsMounted(const std::string& device) override { return mounted_loops.count(device) > 0; }
  std::vector<MountEntry> ReadMounts() override { return mounts; }
  std::map<std::string, std::vector<std::string>> OpenFilesUnder(
      const std::string& prefix) override {
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& [path, who] : open_files) {
      if (path.rfind(prefix, 0) == 0) out[path] = who;
    }
    return out;
  }

  std::set<std::string> mounted;                    // devfs mount points
  std::map<std::string, exportfs::LoopInfo> loops;  // by /dev/loopN
  std::set<std::string> mounted_loops;              // loops a filesystem is mounted from
  bool busy_unmount = false;
  std::vector<MountEntry> mounts;                              // what ReadMounts returns
  std::map<std::string, std::vector<std::string>> open_files;  // path -> holders
};

}  // namespace volstack::stack

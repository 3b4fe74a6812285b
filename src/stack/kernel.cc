#include "stack/kernel.h"

#include <sys/mount.h>
#include <sys/stat.h>

#include <cerrno>
#include <fstream>

#include "export/devfs.h"

namespace volstack::stack {

namespace {

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
};

}  // namespace

std::shared_ptr<Kernel> SystemKernel() { return std::make_shared<System>(); }

}  // namespace volstack::stack

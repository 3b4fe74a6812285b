// The stacks (see stack_builder.h for the pictures). Sizes: the device mkfs.xfs sees is
// run.size_bytes; the layers below get what they need on top (LVM's metadata and extent
// rounding, the pool's copy-on-write headroom), all as sparse files, so only what the run
// writes takes space.
#include <fmt/format.h>

#include "bench/stack_builder.h"
#include "bench/stack_steps.h"
#include "export/fuse_uring_parameter.h"

namespace volstack::bench {

namespace {

constexpr const char* kPool = "benchpool";
constexpr const char* kVolume = "benchpool/vol";
constexpr const char* kVg = "benchvg";
constexpr const char* kLv = "lv";
constexpr const char* kLvPath = "benchvg/lv";
// One PV holding an LV of run.size_bytes: 1 MiB pe_start plus extent rounding, with room.
constexpr uint64_t kLvmOverhead = 64ull << 20;

// A copy-on-write pool needs free space to write new blocks before old ones are freed, plus
// its own metadata: give it twice the volume (sparse, so it costs only what is written).
uint64_t PoolFileSize(uint64_t volume_size) { return 2 * volume_size + (256ull << 20); }

Status NeedKernel(const Environment& env, bool devfs) {
  if (!env.root) return Status::NotSupported("needs root");
  if (!env.loop_devices) return Status::NotSupported("no loop devices");
  if (devfs && !env.fuse) return Status::NotSupported("no /dev/fuse");
  return Status::Ok();
}

class FileStack final : public StackBuilder {
 public:
  std::string name() const override { return "file"; }
  std::string description() const override {
    return "XFS on a direct-I/O loop device (4096-byte sectors) over a plain sparse file: the "
           "machine's limit";
  }
  Status Available(const Environment& env) const override {
    VS_RETURN_IF_ERROR(NeedKernel(env, false));
    if (!env.losetup) return Status::NotSupported("no losetup");
    return Status::Ok();
  }
  Result<std::string> Setup(StackRun& run) const override {
    VS_ASSIGN_OR_RETURN(std::string file, CreateSparseFile(run, "store", run.size_bytes));
    return AttachLoop(run, file, 4096);
  }
};

class ZvolStack final : public StackBuilder {
 public:
  enum class Transport { kDefault, kUring };
  explicit ZvolStack(uint32_t sector_size, Transport transport = Transport::kDefault,
                     std::string compression = "")
      : sector_size_(sector_size),
        uring_(transport == Transport::kUring),
        compression_(std::move(compression)) {}
  std::string name() const override {
    if (uring_) return "zvol-uring";
    if (!compression_.empty()) return "zvol-" + compression_;
    return sector_size_ == 0 ? "zvol" : "zvol-512";
  }
  std::string description() const override {
    if (uring_) return "zvol with devfs served through FUSE over io_uring (the other transport)";
    if (!compression_.empty()) {
      return "the zvol stack with compression=" + compression_ + " (XFS's data and metadata)";
    }
    if (sector_size_ == 0) {
      return "XFS on a loop device (sector size: the volume's block size) over devfs over a pool "
             "volume";
    }
    return fmt::format("zvol with a {}-byte-sector loop device: the seed's sector-size suspicion",
                       sector_size_);
  }
  Status Available(const Environment& env) const override {
    VS_RETURN_IF_ERROR(NeedKernel(env, true));
    if (uring_ && !exportfs::FuseUringParameter::Available()) {
      return Status::NotSupported("this kernel has no FUSE over io_uring");
    }
    return Status::Ok();
  }
  Result<std::string> Setup(StackRun& run) const override {
    VS_RETURN_IF_ERROR(CreatePool(run, kPool, PoolFileSize(run.size_bytes)));
    VS_RETURN_IF_ERROR(CreateVolume(
        run, kVolume, run.size_bytes,
        compression_.empty() ? std::vector<std::string>{}
                             : std::vector<std::string>{"-o", "compression=" + compression_}));
    std::string devfs;
    if (uring_) {
      // The kernel offers the ring only while the parameter is on, at INIT; the connection
      // keeps it after the parameter is put back.
      VS_ASSIGN_OR_RETURN(auto param, exportfs::FuseUringParameter::Set(true));
      VS_ASSIGN_OR_RETURN(devfs, StartDevfs(run, "devfs", {kVolume}, {"--fuse-transport=uring"}));
    } else {
      VS_ASSIGN_OR_RETURN(devfs, StartDevfs(run, "devfs", {kVolume}));
    }
    return VolstackLosetup(run, devfs, kVolume, sector_size_);
  }

 private:
  const uint32_t sector_size_;  // 0: volstack's choice (the volume's physical block size)
  const bool uring_;
  const std::string compression_;  // empty: the pool's default
};

class LvmOnZvolStack final : public StackBuilder {
 public:
  std::string name() const override { return "lvm-on-zvol"; }
  std::string description() const override {
    return "pool volume as an LVM PV in-process, an LV on it, devfs, loop, XFS: volstack's way";
  }
  Status Available(const Environment& env) const override { return NeedKernel(env, true); }
  Result<std::string> Setup(StackRun& run) const override {
    uint64_t volume = run.size_bytes + kLvmOverhead;
    VS_RETURN_IF_ERROR(CreatePool(run, kPool, PoolFileSize(volume)));
    VS_RETURN_IF_ERROR(CreateVolume(run, kVolume, volume));
    VS_RETURN_IF_ERROR(CreateLogicalVolume(run, kVolume, kVg, kLv, run.size_bytes));
    VS_ASSIGN_OR_RETURN(std::string devfs, StartDevfs(run, "devfs", {kLvPath}));
    return VolstackLosetup(run, devfs, kLvPath, 0);
  }
};

class LvmOnLoopOnZvolStack final : public StackBuilder {
 public:
  std::string name() const override { return "lvm-on-loop-on-zvol"; }
  std::string description() const override {
    return "the seed's way: pool volume, devfs, loop, PV on /dev/loopN, LV, devfs, loop, XFS";
  }
  Status Available(const Environment& env) const override { return NeedKernel(env, true); }
  Result<std::string> Setup(StackRun& run) const override {
    uint64_t volume = run.size_bytes + kLvmOverhead;
    VS_RETURN_IF_ERROR(CreatePool(run, kPool, PoolFileSize(volume)));
    VS_RETURN_IF_ERROR(CreateVolume(run, kVolume, volume));
    VS_ASSIGN_OR_RETURN(std::string devfs1, StartDevfs(run, "devfs1", {kVolume}));
    VS_ASSIGN_OR_RETURN(std::string loop1, VolstackLosetup(run, devfs1, kVolume, 0));
    VS_RETURN_IF_ERROR(CreateLogicalVolume(run, loop1, kVg, kLv, run.size_bytes));
    VS_ASSIGN_OR_RETURN(std::string devfs2, StartDevfs(run, "devfs2", {kLvPath}));
    return VolstackLosetup(run, devfs2, kLvPath, 0);
  }
};

class LvmOnFileStack final : public StackBuilder {
 public:
  std::string name() const override { return "lvm-on-file"; }
  std::string description() const override {
    return "a plain sparse file as an LVM PV, an LV on it, devfs, loop, XFS";
  }
  Status Available(const Environment& env) const override { return NeedKernel(env, true); }
  Result<std::string> Setup(StackRun& run) const override {
    VS_ASSIGN_OR_RETURN(std::string file,
                        CreateSparseFile(run, "pv", run.size_bytes + kLvmOverhead));
    VS_RETURN_IF_ERROR(CreateLogicalVolume(run, file, kVg, kLv, run.size_bytes));
    VS_ASSIGN_OR_RETURN(std::string devfs, StartDevfs(run, "devfs", {kLvPath}));
    return VolstackLosetup(run, devfs, kLvPath, 0);
  }
};

}  // namespace

std::vector<std::unique_ptr<StackBuilder>> AllStackBuilders() {
  std::vector<std::unique_ptr<StackBuilder>> all;
  all.push_back(std::make_unique<FileStack>());
  all.push_back(std::make_unique<ZvolStack>(0));
  all.push_back(std::make_unique<LvmOnZvolStack>());
  all.push_back(std::make_unique<LvmOnLoopOnZvolStack>());
  all.push_back(std::make_unique<LvmOnFileStack>());
  all.push_back(std::make_unique<ZvolStack>(512));
  all.push_back(std::make_unique<ZvolStack>(0, ZvolStack::Transport::kUring));
  all.push_back(std::make_unique<ZvolStack>(0, ZvolStack::Transport::kDefault, "lz4"));
  all.push_back(std::make_unique<ZvolStack>(0, ZvolStack::Transport::kDefault, "zstd"));
  return all;
}

std::vector<std::string> AllStackNames() {
  std::vector<std::string> names;
  for (const auto& b : AllStackBuilders()) names.push_back(b->name());
  return names;
}

}  // namespace volstack::bench

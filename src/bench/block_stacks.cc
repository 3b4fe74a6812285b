#include "bench/block_stacks.h"

#include <unistd.h>

#include "bdev/file_device.h"
#include "lvm/activations.h"
#include "lvm/lvm.h"
#include "lvm/vg_ops.h"
#include "pool/spa.h"

namespace volstack::bench {

namespace {

// The file stack: a sparse file opened as a FileDevice with 4 KiB blocks, like the kernel
// stack's 4K loop device.
Result<bdev::BlockDevicePtr> BuildFile(const BlockStackParams& p) {
  std::string path = p.dir + "/store";
  p.teardown->Add("rm " + path, [path]() -> Status {
    if (unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("unlink " + path);
    return Status::Ok();
  });
  bdev::FileDeviceOptions options;
  options.logical_block_size = 4096;
  options.physical_block_size = 4096;
  VS_ASSIGN_OR_RETURN(auto device, bdev::FileDevice::Create(path, p.size_bytes, options));
  return bdev::BlockDevicePtr(std::move(device));
}

constexpr uint64_t kLvmOverhead = 64ull << 20;  // as the kernel stacks (stacks.cc)
constexpr uint32_t kExtentSectors = 8192;       // 4 MiB, lvm2's default

Result<bdev::BlockDevicePtr> SparseFile(const BlockStackParams& p, const std::string& name,
                                        uint64_t size) {
  std::string path = p.dir + "/" + name;
  p.teardown->Add("rm " + path, [path]() -> Status {
    if (unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("unlink " + path);
    return Status::Ok();
  });
  VS_ASSIGN_OR_RETURN(auto device, bdev::FileDevice::Create(path, size));
  return bdev::BlockDevicePtr(std::move(device));
}

// A pool on a sparse file (twice the volume, for copy-on-write) and one volume in it. The
// volume device keeps the pool alive; the pool closes when the last reference drops.
Result<bdev::BlockDevicePtr> PoolVolume(const BlockStackParams& p, uint64_t volsize,
                                        const std::string& compression = "") {
  VS_ASSIGN_OR_RETURN(auto vdev, SparseFile(p, "benchpool.vdev", 2 * volsize + (256ull << 20)));
  VS_ASSIGN_OR_RETURN(auto pool, pool::Pool::Create("benchpool", {vdev}));
  pool::VolumeOptions vo;
  vo.volsize = volsize;
  if (!compression.empty()) vo.props["compression"] = compression;
  VS_ASSIGN_OR_RETURN(auto info, pool->CreateVolume("benchpool/vol", vo));
  (void)info;
  pool::OpenVolumeOptions oo;
  oo.logical_block_size = 4096;
  return pool->OpenVolume("benchpool/vol", oo);
}

// One PV on `pv_device`, a VG on it, an LV of `lv_size` bytes, activated: what pvcreate,
// vgcreate and lvcreate do, in-process.
Result<bdev::BlockDevicePtr> LogicalVolume(bdev::BlockDevicePtr pv_device, uint64_t lv_size) {
  // Activations of its own, as a stack's: nothing process-wide is shared with another stack.
  lvm::Lvm session([pv_device](const std::string&, bool) { return Result(pv_device); }, false,
                   std::make_shared<lvm::Activations>());
  VS_ASSIGN_OR_RETURN(lvm::Pv * pv, session.CreatePv("pv", {}));
  VS_ASSIGN_OR_RETURN(lvm::VolumeGroup vg, lvm::NewVg("benchvg", kExtentSectors, {pv}));
  VS_RETURN_IF_ERROR(session.Commit(vg, "vgcreate benchvg"));
  lvm::VgHandle* h = session.FindVg("benchvg");
  if (h == nullptr) return Status::NotFound("benchvg vanished after its commit");
  lvm::VolumeGroup copy = h->vg;
  lvm::NewLvOptions lo;
  lo.name = "lv";
  lo.alloc.extents = static_cast<uint32_t>(lv_size / (kExtentSectors * 512ull));
  VS_RETURN_IF_ERROR(lvm::CreateLv(copy, lo));
  VS_RETURN_IF_ERROR(session.Commit(copy, "lvcreate -n lv benchvg"));
  h = session.FindVg("benchvg");
  if (h == nullptr) return Status::NotFound("benchvg vanished after its commit");
  return session.Activate(*h, "lv");
}

Result<bdev::BlockDevicePtr> BuildZvol(const BlockStackParams& p) {
  return PoolVolume(p, p.size_bytes);
}

Result<bdev::BlockDevicePtr> BuildZvolLz4(const BlockStackParams& p) {
  return PoolVolume(p, p.size_bytes, "lz4");
}

Result<bdev::BlockDevicePtr> BuildZvolZstd(const BlockStackParams& p) {
  return PoolVolume(p, p.size_bytes, "zstd");
}

Result<bdev::BlockDevicePtr> BuildLvmOnZvol(const BlockStackParams& p) {
  VS_ASSIGN_OR_RETURN(auto volume, PoolVolume(p, p.size_bytes + kLvmOverhead));
  return LogicalVolume(volume, p.size_bytes);
}

Result<bdev::BlockDevicePtr> BuildLvmOnFile(const BlockStackParams& p) {
  VS_ASSIGN_OR_RETURN(auto file, SparseFile(p, "pv", p.size_bytes + kLvmOverhead));
  return LogicalVolume(file, p.size_bytes);
}

Result<bdev::BlockDevicePtr> NotBuilt(const BlockStackParams&) {
  return Status::NotSupported("not available in-process");
}

}  // namespace

std::vector<BlockStack> AllBlockStacks() {
  const Status needs_loop =
      Status::NotSupported("needs a kernel loop device in the middle (dbench mode only)");
  return {
      {"file", "a plain sparse file (FileDevice, 4 KiB blocks)", Status::Ok(), BuildFile},
      {"zvol", "a pool volume (4 KiB blocks) on a sparse file", Status::Ok(), BuildZvol},
      {"lvm-on-zvol", "an LV on a pool volume as PV, in-process", Status::Ok(), BuildLvmOnZvol},
      {"lvm-on-loop-on-zvol", "the seed's stack", needs_loop, NotBuilt},
      {"lvm-on-file", "an LV on a sparse file as PV", Status::Ok(), BuildLvmOnFile},
      {"zvol-512", "zvol behind a 512-byte-sector loop", needs_loop, NotBuilt},
      {"zvol-uring", "zvol through devfs over FUSE io_uring", needs_loop, NotBuilt},
      {"zvol-lz4", "the zvol stack with compression=lz4", Status::Ok(), BuildZvolLz4},
      {"zvol-zstd", "the zvol stack with compression=zstd", Status::Ok(), BuildZvolZstd},
  };
}

}  // namespace volstack::bench

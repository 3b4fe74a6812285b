// ZvolDevice passes the BlockDevice conformance suite, at 512 and 4096 logical blocks and
// with 4K and 16K volblocksize.
#include "bdev/block_device_conformance.h"
#include "bdev/memory_device.h"
#include "pool/spa.h"

namespace volstack::pool {
namespace {

bdev::BlockDevicePtr MakeZvol(uint32_t vbs, uint32_t lbs, bool read_only) {
  auto mem = bdev::MemoryDevice::Create(128ull << 20);
  PoolCreateOptions o;
  o.tuning.sync_thread = false;
  auto pool = Pool::Create("conf", {mem}, o);
  if (!pool.ok()) return nullptr;
  VolumeOptions vo;
  vo.volsize = 16ull << 20;
  vo.volblocksize = vbs;
  if (!(*pool)->CreateVolume("conf/v", vo).ok()) return nullptr;
  OpenVolumeOptions oo;
  oo.read_only = read_only;
  oo.logical_block_size = lbs;
  auto dev = (*pool)->OpenVolume("conf/v", oo);
  return dev.ok() ? *dev : nullptr;
}

struct Zvol16K512 {
  static bdev::BlockDevicePtr Make() { return MakeZvol(16384, 512, false); }
  static bdev::BlockDevicePtr MakeReadOnly() { return MakeZvol(16384, 512, true); }
};
struct Zvol4K4096 {
  static bdev::BlockDevicePtr Make() { return MakeZvol(4096, 4096, false); }
  static bdev::BlockDevicePtr MakeReadOnly() { return MakeZvol(4096, 4096, true); }
};

using ZvolTypes = ::testing::Types<Zvol16K512, Zvol4K4096>;
INSTANTIATE_TYPED_TEST_SUITE_P(Zvol, BlockDeviceConformance, ZvolTypes);

}  // namespace
}  // namespace volstack::pool

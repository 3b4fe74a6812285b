#include "pool/memory_bounds.h"

#include <gtest/gtest.h>

#include "bdev/memory_device.h"
#include "pool/block_cache.h"
#include "pool/pool_impl.h"
#include "pool/test_util.h"
#include "pool/vdev.h"

namespace volstack::pool {
namespace {

using testing::kMiB;
using testing::Pattern;
using testing::TestTuning;

TEST(MemoryBoundsTest, StoredAsBytesWithinTheirRanges) {
  EXPECT_EQ(*StoredMemoryBound("cachemax", "64M"), "67108864");
  EXPECT_EQ(*StoredMemoryBound("cachemax", "16m"), "16777216");
  const uint64_t most = MaxMemoryBound("dirtymax");
  EXPECT_EQ(*StoredMemoryBound("dirtymax", std::to_string(most)), std::to_string(most));
  EXPECT_EQ(StoredMemoryBound("dirtymax", std::to_string(most + 1)).status().code(), EINVAL);
  for (const char* bad : {"", "lots", "-1", "15M", "1E", "12Q"}) {
    EXPECT_EQ(StoredMemoryBound("cachemax", bad).status().code(), EINVAL) << bad;
  }
  EXPECT_EQ(StoredMemoryBound("comment", "1G").status().code(), EINVAL);
  EXPECT_EQ(*StoredPoolProperty("dirtymax", "32M"), "33554432");
}

TEST(MemoryBoundsTest, UnsetOrUnreadableTheImportersTuningStands) {
  PoolTuning t;
  t.cache_max_bytes = 48 * kMiB;
  t.dirty_max_bytes = 24 * kMiB;
  EXPECT_EQ(MemoryBound({}, "cachemax", t), 48 * kMiB);
  EXPECT_EQ(MemoryBound({{"cachemax", "x"}}, "cachemax", t), 48 * kMiB);
  EXPECT_EQ(MemoryBound({{"cachemax", "1024"}}, "cachemax", t), 48 * kMiB);
  EXPECT_EQ(MemoryBound({{"cachemax", "33554432"}}, "cachemax", t), 32 * kMiB);
  EXPECT_EQ(MemoryBound({}, "dirtymax"), PoolTuning{}.dirty_max_bytes);
  // A bound set on a larger machine is shown as set and held to this one's memory.
  const std::map<std::string, std::string> big = {{"dirtymax", "99999999999999"}};
  EXPECT_EQ(StoredBytes(big, "dirtymax"), 99999999999999u);
  EXPECT_EQ(MemoryBound(big, "dirtymax"), MaxMemoryBound("dirtymax"));
  EXPECT_LE(MaxMemoryBound("dirtymax"), uint64_t{16} << 30);
  EXPECT_EQ(StoredBytes({{"cachemax", "x"}}, "cachemax"), std::nullopt);
  ApplyMemoryBounds({{"dirtymax", "33554432"}}, t);
  EXPECT_EQ(t.dirty_max_bytes, 32 * kMiB);
  EXPECT_EQ(t.cache_max_bytes, 48 * kMiB);
}

// A pool created with cachemax=16M caches no more than 16 MiB of a 64 MiB volume read twice,
// where the importer's tuning would have let it keep all of it; a new value waits for the
// next import, and a bad one changes nothing.
TEST(MemoryBoundsTest, APoolsBoundsHoldItsCacheAndComeBackOnImport) {
  std::vector<bdev::BlockDevicePtr> devs = {bdev::MemoryDevice::Create(256 * kMiB)};
  PoolCreateOptions o;
  o.tuning = TestTuning();
  o.tuning.cache_reserve = false;
  o.props = {{"cachemax", "16M"}, {"dirtymax", "32M"}};
  auto p = Pool::Create("trunk", devs, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  PoolImpl& impl = *(*p)->impl();
  EXPECT_EQ(impl.tuning.cache_max_bytes, 16 * kMiB);
  EXPECT_EQ(impl.tuning.dirty_max_bytes, 32 * kMiB);

  VolumeOptions vo;
  vo.volsize = 64 * kMiB;
  vo.volblocksize = 4096;
  ASSERT_TRUE((*p)->CreateVolume("trunk/funk", vo).ok());
  auto dev = (*p)->OpenVolume("trunk/funk");
  ASSERT_TRUE(dev.ok());
  const auto data = Pattern(vo.volsize, 7);
  ASSERT_TRUE((*dev)->Write(0, data).ok());
  ASSERT_TRUE((*p)->Sync().ok());
  std::vector<uint8_t> block(4096);
  for (int pass = 0; pass < 2; pass++) {
    for (uint64_t off = 0; off < vo.volsize; off += block.size()) {
      ASSERT_TRUE((*dev)->Read(off, block).ok());
    }
  }
  impl.FinishCacheFills();
  ASSERT_NE(impl.block_cache, nullptr);
  const uint64_t cached = impl.block_cache->bytes() + impl.cache_bytes.load();
  EXPECT_LE(cached, 16 * kMiB);
  EXPECT_GE(cached, 8 * kMiB);

  EXPECT_EQ((*p)->SetPoolProperty("cachemax", "1K").code(), EINVAL);
  EXPECT_EQ((*p)->Info().props.at("cachemax"), "16777216");
  ASSERT_TRUE((*p)->SetPoolProperty("cachemax", "32M").ok());
  EXPECT_LE(impl.block_cache->capacity(), 16 * kMiB);  // until the next import
  dev->reset();
  ASSERT_TRUE((*p)->Export().ok());
  p->reset();

  PoolImportOptions io;
  io.tuning = TestTuning();
  auto q = Pool::Import(devs, io);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ((*q)->impl()->tuning.cache_max_bytes, 32 * kMiB);
  EXPECT_EQ((*q)->impl()->tuning.dirty_max_bytes, 32 * kMiB);
  ASSERT_NE((*q)->impl()->block_cache, nullptr);
  EXPECT_GT((*q)->impl()->block_cache->capacity(), 16 * kMiB);
  EXPECT_LE((*q)->impl()->block_cache->capacity(), 32 * kMiB);
}

// Tables the process cannot map (here: more than its address space) leave the pool without
// a data cache, reading from its vdevs, rather than stopping it.
TEST(MemoryBoundsTest, APoolWhoseCacheCannotBeMappedGoesWithout) {
  EXPECT_FALSE(BlockCache(uint64_t{1} << 62, nullptr).usable());
  EXPECT_TRUE(BlockCache(16 * kMiB, nullptr).usable());
  std::vector<bdev::BlockDevicePtr> devs = {bdev::MemoryDevice::Create(128 * kMiB)};
  PoolCreateOptions o;
  o.tuning = TestTuning();
  o.tuning.cache_max_bytes = uint64_t{1} << 62;
  auto p = Pool::Create("trunk", devs, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)->impl()->block_cache, nullptr);
  VolumeOptions vo;
  vo.volsize = 4 * kMiB;
  ASSERT_TRUE((*p)->CreateVolume("trunk/funk", vo).ok());
  auto dev = (*p)->OpenVolume("trunk/funk");
  ASSERT_TRUE(dev.ok());
  const auto data = Pattern(vo.volsize, 9);
  ASSERT_TRUE((*dev)->Write(0, data).ok());
  ASSERT_TRUE((*p)->Sync().ok());
  std::vector<uint8_t> back(vo.volsize);
  ASSERT_TRUE((*dev)->Read(0, back).ok());
  EXPECT_EQ(back, data);
}

TEST(MemoryBoundsTest, ACreateWithABadBoundWritesNothing) {
  std::vector<bdev::BlockDevicePtr> devs = {bdev::MemoryDevice::Create(128 * kMiB)};
  PoolCreateOptions o;
  o.tuning = TestTuning();
  o.props = {{"dirtymax", "1E"}};
  EXPECT_EQ(Pool::Create("trunk", devs, o).status().code(), EINVAL);
  EXPECT_FALSE(Vdev::ReadLabelConfig(*devs[0]).ok());
}

}  // namespace
}  // namespace volstack::pool

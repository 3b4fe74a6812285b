// IndirectPointers (indirect_pointers.h): every pointer comes back exactly, from its packed
// line alone when its extras are empty; the first pointer with extras gives its block the
// extras array; a volume charges the pool's cache bound what its cached indirect blocks
// cost, extras included, and gives it all back when they go.
#include "pool/indirect_pointers.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <limits>
#include <random>

#include "bdev/memory_device.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"
#include "pool/test_util.h"

namespace volstack::pool {
namespace {

using testing::kMiB;
using testing::Pattern;
using testing::TestTuning;

// A pointer such as a volume writes: one DVA, no phys_birth, a checksum of 16 bytes (XXH3-128,
// or a SHA-256 whose tail happens to be zero); every field at random.
BlockPtr WithoutExtras(std::mt19937_64& rng) {
  BlockPtr bp;
  bp.dva[0] = Dva{static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()), rng()};
  bp.lsize = static_cast<uint32_t>(rng());
  bp.psize = static_cast<uint32_t>(rng());
  bp.comp = static_cast<Compression>(rng() % 3);
  bp.cksum = static_cast<ChecksumType>(1 + rng() % 2);
  bp.type = static_cast<BlockType>(rng() % 5);
  bp.level = static_cast<uint8_t>(rng());
  bp.fill = rng();
  bp.birth = rng();
  for (size_t i = 0; i < 16; i++) bp.checksum.bytes[i] = static_cast<uint8_t>(rng());
  return bp;
}

// Any pointer: every field of a BlockPtr at random.
BlockPtr Any(std::mt19937_64& rng) {
  BlockPtr bp = WithoutExtras(rng);
  for (int d = 1; d < kMaxDvas; d++) {
    if (rng() % 2) {
      bp.dva[d] = Dva{static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()), rng()};
    }
  }
  if (rng() % 2) bp.phys_birth = rng();
  if (rng() % 2) {
    for (size_t i = 16; i < 32; i++) bp.checksum.bytes[i] = static_cast<uint8_t>(rng());
  }
  return bp;
}

TEST(IndirectPointersTest, APointerWithoutExtrasComesBackFromItsLineAlone) {
  std::mt19937_64 rng(5);
  for (int i = 0; i < 1000; i++) {
    const BlockPtr bp = WithoutExtras(rng);
    EXPECT_TRUE(BlockPtrExtras::Of(bp).empty()) << bp.ToString();
    EXPECT_EQ(PackedBlockPtr::Of(bp).Unpack(), bp) << bp.ToString();
  }
  BlockPtr widest;
  constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();
  constexpr uint32_t kMax32 = std::numeric_limits<uint32_t>::max();
  widest.dva[0] = Dva{kMax32, kMax32, kMax64};
  widest.lsize = widest.psize = kMax32;
  widest.fill = widest.birth = kMax64;
  widest.level = 255;
  for (size_t i = 0; i < 16; i++) widest.checksum.bytes[i] = 0xff;
  EXPECT_EQ(PackedBlockPtr::Of(widest).Unpack(), widest);
  EXPECT_EQ(PackedBlockPtr::Of(BlockPtr{}).Unpack(), BlockPtr{});  // a hole
}

TEST(IndirectPointersTest, EachFieldPastTheLineIsAnExtra) {
  std::mt19937_64 rng(6);
  const BlockPtr base = WithoutExtras(rng);
  BlockPtr mirrored = base, ditto = base, reborn = base, sha = base, dva1_vdev_only = base;
  mirrored.dva[1] = Dva{1, 8, 4096};
  ditto.dva[2] = Dva{0, 8, 8192};
  reborn.phys_birth = 3;
  sha.checksum.bytes[31] = 1;
  dva1_vdev_only.dva[1].vdev = 2;  // empty by its size, yet not all zero: kept exactly
  for (const BlockPtr& bp : {mirrored, ditto, reborn, sha, dva1_vdev_only}) {
    const BlockPtrExtras x = BlockPtrExtras::Of(bp);
    EXPECT_FALSE(x.empty()) << bp.ToString();
    BlockPtr back = PackedBlockPtr::Of(bp).Unpack();
    EXPECT_NE(back, bp);
    x.ApplyTo(back);
    EXPECT_EQ(back, bp);
  }
}

TEST(IndirectPointersTest, EveryPointerComesBackExactly) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 20; round++) {
    IndirectPointers ptrs;
    std::vector<BlockPtr> want(kBpsPerIndirect);
    for (uint32_t i = 0; i < kBpsPerIndirect; i++) {
      want[i] = round % 2 ? Any(rng) : WithoutExtras(rng);
      ptrs.Set(i, want[i]);
    }
    for (int k = 0; k < 64; k++) {  // overwrites, with and without extras
      const uint32_t i = rng() % kBpsPerIndirect;
      want[i] = k % 2 ? Any(rng) : WithoutExtras(rng);
      ptrs.Set(i, want[i]);
    }
    for (uint32_t i = 0; i < kBpsPerIndirect; i++) ASSERT_EQ(ptrs.Get(i), want[i]) << i;
  }
}

TEST(IndirectPointersTest, TheFirstPointerWithExtrasGivesTheBlockItsExtras) {
  std::mt19937_64 rng(8);
  IndirectPointers ptrs;
  const uint64_t bare = ptrs.Bytes();
  EXPECT_LE(bare, kBpsPerIndirect * 64 + 64);
  std::vector<BlockPtr> want(kBpsPerIndirect);
  for (uint32_t i = 0; i < kBpsPerIndirect; i++) {
    want[i] = WithoutExtras(rng);
    ptrs.Set(i, want[i]);
  }
  EXPECT_EQ(ptrs.Bytes(), bare);  // no extras yet
  EXPECT_EQ(ptrs.PackedAt(9)->Unpack(), want[9]);
  want[9].phys_birth = 2;
  ptrs.Set(9, want[9]);
  EXPECT_EQ(ptrs.Bytes(), bare + kBpsPerIndirect * sizeof(BlockPtrExtras));
  want[9] = WithoutExtras(rng);  // its extras now empty again: none left behind
  ptrs.Set(9, want[9]);
  for (uint32_t i = 0; i < kBpsPerIndirect; i++) EXPECT_EQ(ptrs.Get(i), want[i]) << i;
}

// A pool on memory with one sparse 1 GiB volume of 4 KiB blocks (three levels of indirect
// blocks: L1, L2 and the root's L3).
struct VolumeSetup {
  std::shared_ptr<Pool> pool;
  bdev::BlockDevicePtr dev;
  std::shared_ptr<Volume> vol;
};

void Make(uint64_t pool_bytes, PoolTuning tuning, VolumeSetup* s) {
  PoolCreateOptions o;
  o.tuning = tuning;
  auto pool = Pool::Create("trunk", {bdev::MemoryDevice::Create(pool_bytes)}, o);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  s->pool = *pool;
  VolumeOptions vo;
  vo.volsize = 1024 * kMiB;
  vo.volblocksize = 4096;
  vo.sparse = true;
  ASSERT_TRUE(s->pool->CreateVolume("trunk/v", vo).ok());
  auto dev = s->pool->OpenVolume("trunk/v");
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  s->dev = *dev;
  std::lock_guard l(s->pool->impl()->mu);
  s->vol = s->pool->impl()->volumes.at("trunk/v");
}

// The volume's indirect cache counts in PoolImpl::cache_bytes exactly what its blocks cost:
// the packed lines, then the extras too once a SHA-256 pointer goes in, and nothing once
// they are evicted.
TEST(IndirectPointersTest, AVolumeChargesItsCachedIndirectBlocksWhatTheyCost) {
  VolumeSetup s;
  ASSERT_NO_FATAL_FAILURE(Make(64 * kMiB, TestTuning(), &s));
  auto& [pool, dev, vol] = s;
  const auto d = Pattern(8 * 4096, 3);
  ASSERT_TRUE(dev->Write(0, d).ok());
  ASSERT_TRUE(pool->Sync().ok());
  std::atomic<uint64_t>& charged = pool->impl()->cache_bytes;
  IndirectPointers ptrs;
  const uint64_t bare = Volume::CachedIndirectBytes(ptrs);
  BlockPtr wide;
  wide.phys_birth = 1;
  ptrs.Set(0, wide);
  const uint64_t with_extras = Volume::CachedIndirectBytes(ptrs);
  EXPECT_EQ(with_extras, bare + kBpsPerIndirect * sizeof(BlockPtrExtras));
  vol->EvictClean();
  EXPECT_EQ(charged.load(), 0u);
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE(dev->Read(4096, back).ok());
  EXPECT_EQ(charged.load(), 3 * bare);
  ASSERT_TRUE(pool->SetProperty("trunk/v", "checksum", "sha256").ok());
  auto model = d;
  std::copy_n(d.begin(), 4096, model.begin() + 2 * 4096);
  ASSERT_TRUE(dev->Write(2 * 4096, std::span(d).first(4096)).ok());
  ASSERT_TRUE(pool->Sync().ok());  // a SHA-256 pointer into each level
  EXPECT_EQ(charged.load(), 3 * with_extras);
  vol->EvictClean();
  EXPECT_EQ(charged.load(), 0u);
  // Loaded again from disk, their SHA-256 pointers give them extras again.
  std::vector<uint8_t> all(d.size());
  ASSERT_TRUE(dev->Read(0, all).ok());
  EXPECT_EQ(all, model);
  EXPECT_EQ(charged.load(), 3 * with_extras);
  dev.reset();
  vol.reset();
  ASSERT_TRUE(pool->DestroyVolume("trunk/v").ok());
  EXPECT_EQ(charged.load(), 0u);
}

void* volatile probe_sink;  // keeps a probe allocation from being elided

// The charge is what the heap really holds for a cached indirect block, within 5 %: more
// held than charged would let the process outgrow the bound, more charged than held would
// leave the block cache memory it could use.
TEST(IndirectPointersTest, TheChargeIsWhatTheHeapHolds) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator is not malloc's: mallinfo2 does not see it";
#endif
  auto heap = [] {
    const struct mallinfo2 m = mallinfo2();
    return static_cast<int64_t>(m.uordblks + m.hblkhd);
  };
  {
    const int64_t before = heap();
    auto probe = std::make_unique<std::array<uint8_t, 8192>>();
    probe_sink = probe.get();
    if (heap() - before < 8192) GTEST_SKIP() << "mallinfo2 does not see this allocator";
  }
  PoolTuning t = TestTuning();
  t.cache_max_bytes = 64 * kMiB;  // every block below stays cached
  t.cache_data = false;           // no block cache, whose threads allocate as they run
  VolumeSetup s;
  ASSERT_NO_FATAL_FAILURE(Make(128 * kMiB, t, &s));
  auto& [pool, dev, vol] = s;
  constexpr uint64_t kL1s = 2000;
  const auto block = Pattern(4096, 4);
  for (uint64_t i = 0; i < kL1s; i++) {
    ASSERT_TRUE(dev->Write(i * kBpsPerIndirect * 4096, block).ok());
  }
  ASSERT_TRUE(pool->Sync().ok());
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE(dev->Read(0, back).ok());  // the read path's own first allocations
  vol->EvictClean();
  const uint64_t charged_before = pool->impl()->cache_bytes.load();
  const int64_t heap_before = heap();
  for (uint64_t i = 0; i < kL1s; i++) {
    ASSERT_TRUE(dev->Read(i * kBpsPerIndirect * 4096, back).ok());
  }
  const double charged = double(pool->impl()->cache_bytes.load() - charged_before);
  const double held = double(heap() - heap_before);
  EXPECT_GE(charged, kL1s * Volume::CachedIndirectBytes(IndirectPointers()));
  EXPECT_LE(held, charged);
  EXPECT_GE(held, 0.95 * charged);
}

}  // namespace
}  // namespace volstack::pool

// IndirectPointers (indirect_pointers.h): a pointer that packs comes back exactly, one that
// does not is refused and moves its block to the full form with every pointer intact; a
// volume charges the pool's cache bound what its cached indirect blocks cost, a change of
// form included, and gives it all back when they go.
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

// A pointer such as a volume writes: one DVA, XXH3-128, no phys_birth; fields at random.
BlockPtr Packable(std::mt19937_64& rng) {
  BlockPtr bp;
  bp.dva[0] = Dva{static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()), rng()};
  bp.lsize = static_cast<uint32_t>(rng());
  bp.psize = static_cast<uint32_t>(rng());
  bp.comp = static_cast<Compression>(rng() % 3);
  bp.type = static_cast<BlockType>(rng() % 5);
  bp.level = static_cast<uint8_t>(rng());
  bp.fill = rng();
  bp.birth = rng();
  for (size_t i = 0; i < 16; i++) bp.checksum.bytes[i] = static_cast<uint8_t>(rng());
  return bp;
}

TEST(IndirectPointersTest, APointerThatPacksComesBackExactly) {
  std::mt19937_64 rng(5);
  for (int i = 0; i < 1000; i++) {
    const BlockPtr bp = Packable(rng);
    const auto p = PackedBlockPtr::Pack(bp);
    ASSERT_TRUE(p.has_value()) << bp.ToString();
    EXPECT_EQ(p->Unpack(), bp) << bp.ToString();
  }
  BlockPtr widest;
  constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();
  constexpr uint32_t kMax32 = std::numeric_limits<uint32_t>::max();
  widest.dva[0] = Dva{kMax32, kMax32, kMax64};
  widest.lsize = widest.psize = kMax32;
  widest.fill = widest.birth = kMax64;
  widest.level = 255;
  widest.checksum.bytes.fill(0);
  for (size_t i = 0; i < 16; i++) widest.checksum.bytes[i] = 0xff;
  EXPECT_EQ(PackedBlockPtr::Pack(widest)->Unpack(), widest);
  EXPECT_EQ(PackedBlockPtr::Pack(BlockPtr{})->Unpack(), BlockPtr{});  // a hole
}

TEST(IndirectPointersTest, APointerWithMoreThanTheFormHoldsDoesNotPack) {
  std::mt19937_64 rng(6);
  const BlockPtr base = Packable(rng);
  BlockPtr mirrored = base, ditto = base, reborn = base, sha = base, dva1_vdev_only = base;
  mirrored.dva[1] = Dva{1, 8, 4096};
  ditto.dva[2] = Dva{0, 8, 8192};
  reborn.phys_birth = 3;
  sha.cksum = ChecksumType::kSha256;
  sha.checksum.bytes[31] = 1;
  dva1_vdev_only.dva[1].vdev = 2;  // empty by its size, yet not all zero: kept exactly
  for (const BlockPtr& bp : {mirrored, ditto, reborn, sha, dva1_vdev_only}) {
    EXPECT_FALSE(PackedBlockPtr::Pack(bp).has_value()) << bp.ToString();
  }
}

TEST(IndirectPointersTest, OnePointerThatDoesNotPackMovesTheBlockToTheFullForm) {
  std::mt19937_64 rng(7);
  IndirectPointers ptrs;
  const uint64_t packed_bytes = ptrs.Bytes();
  EXPECT_LE(packed_bytes, kBpsPerIndirect * 64 + 64);
  std::vector<BlockPtr> want(kBpsPerIndirect);
  for (uint32_t i = 0; i < kBpsPerIndirect; i++) {
    want[i] = Packable(rng);
    ptrs.Set(i, want[i]);
  }
  EXPECT_TRUE(ptrs.packed());
  EXPECT_EQ(ptrs.Bytes(), packed_bytes);
  EXPECT_EQ(ptrs.PackedAt(9)->Unpack(), want[9]);
  want[9].phys_birth = 2;
  ptrs.Set(9, want[9]);
  EXPECT_FALSE(ptrs.packed());
  EXPECT_EQ(ptrs.Bytes(), packed_bytes + kBpsPerIndirect * sizeof(BlockPtr));
  want[10] = Packable(rng);  // the full form takes any pointer from now on
  ptrs.Set(10, want[10]);
  for (uint32_t i = 0; i < kBpsPerIndirect; i++) EXPECT_EQ(ptrs.Get(i), want[i]) << i;
}

// A pool on memory with one sparse 1 GiB volume of 4 KiB blocks (three levels of indirect
// blocks: L1, L2 and the root's L3).
struct Setup {
  std::shared_ptr<Pool> pool;
  bdev::BlockDevicePtr dev;
  std::shared_ptr<Volume> vol;
};

Setup Make(uint64_t pool_bytes, PoolTuning tuning) {
  Setup s;
  PoolCreateOptions o;
  o.tuning = tuning;
  s.pool = *Pool::Create("trunk", {bdev::MemoryDevice::Create(pool_bytes)}, o);
  VolumeOptions vo;
  vo.volsize = 1024 * kMiB;
  vo.volblocksize = 4096;
  vo.sparse = true;
  EXPECT_TRUE(s.pool->CreateVolume("trunk/v", vo).ok());
  s.dev = *s.pool->OpenVolume("trunk/v");
  std::lock_guard l(s.pool->impl()->mu);
  s.vol = s.pool->impl()->volumes.at("trunk/v");
  return s;
}

// The volume's indirect cache counts in PoolImpl::cache_bytes exactly what its blocks cost:
// the packed form, then the full form once a SHA-256 pointer goes in, and nothing once
// they are evicted.
TEST(IndirectPointersTest, AVolumeChargesItsCachedIndirectBlocksWhatTheyCost) {
  auto [pool, dev, vol] = Make(64 * kMiB, TestTuning());
  const auto d = Pattern(8 * 4096, 3);
  ASSERT_TRUE(dev->Write(0, d).ok());
  ASSERT_TRUE(pool->Sync().ok());
  std::atomic<uint64_t>& charged = pool->impl()->cache_bytes;
  IndirectPointers ptrs;
  const uint64_t packed = Volume::CachedIndirectBytes(ptrs);
  BlockPtr wide;
  wide.phys_birth = 1;
  ptrs.Set(0, wide);
  const uint64_t full = Volume::CachedIndirectBytes(ptrs);
  EXPECT_EQ(full, packed + kBpsPerIndirect * sizeof(BlockPtr));
  vol->EvictClean();
  EXPECT_EQ(charged.load(), 0u);
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE(dev->Read(4096, back).ok());
  EXPECT_EQ(charged.load(), 3 * packed);
  ASSERT_TRUE(pool->SetProperty("trunk/v", "checksum", "sha256").ok());
  auto model = d;
  std::copy_n(d.begin(), 4096, model.begin() + 2 * 4096);
  ASSERT_TRUE(dev->Write(2 * 4096, std::span(d).first(4096)).ok());
  ASSERT_TRUE(pool->Sync().ok());  // a SHA-256 pointer into each level
  EXPECT_EQ(charged.load(), 3 * full);
  vol->EvictClean();
  EXPECT_EQ(charged.load(), 0u);
  // Loaded again, the full form is what the blocks on disk need.
  std::vector<uint8_t> all(d.size());
  ASSERT_TRUE(dev->Read(0, all).ok());
  EXPECT_EQ(all, model);
  EXPECT_EQ(charged.load(), 3 * full);
  dev.reset();
  vol.reset();
  ASSERT_TRUE(pool->DestroyVolume("trunk/v").ok());
  EXPECT_EQ(charged.load(), 0u);
}

// The charge is what the heap really holds for a cached indirect block, within 5 %: more
// held than charged would let the process outgrow the bound, more charged than held would
// leave the block cache memory it could use.
TEST(IndirectPointersTest, TheChargeIsWhatTheHeapHolds) {
  PoolTuning t = TestTuning();
  t.cache_max_bytes = 64 * kMiB;  // every block below stays cached
  auto [pool, dev, vol] = Make(128 * kMiB, t);
  constexpr uint64_t kL1s = 2000;
  const auto block = Pattern(4096, 4);
  for (uint64_t i = 0; i < kL1s; i++) {
    ASSERT_TRUE(dev->Write(i * kBpsPerIndirect * 4096, block).ok());
  }
  ASSERT_TRUE(pool->Sync().ok());
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE(dev->Read(0, back).ok());  // the read path's own first allocations
  vol->EvictClean();
  auto heap = [] {
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
  };
  const uint64_t charged_before = pool->impl()->cache_bytes.load(), heap_before = heap();
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

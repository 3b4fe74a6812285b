// Free space cut into holes smaller than an indirect block (a 4 KiB volume's frees): the
// bytes are there, the runs a 16 KiB block needs are not. A write that the commit could not
// place is refused up front (ENOSPC, nothing changed) instead of being admitted and failing
// the commit, which would suspend the pool (PoolImpl::ReserveDirty, free_run_bytes).
#include <gtest/gtest.h>

#include "bdev/memory_device.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"
#include "pool/test_util.h"

namespace volstack::pool {
namespace {

using testing::ExpectConsistent;
using testing::kMiB;
using testing::Pattern;
using testing::TestTuning;

bdev::BlockDevicePtr Create(Pool& pool, const std::string& name, uint64_t volsize, uint32_t vbs) {
  VolumeOptions vo;
  vo.volsize = volsize;
  vo.volblocksize = vbs;
  vo.sparse = true;
  vo.props["logbias"] = "throughput";  // a flush commits; no log reserve moves space
  EXPECT_TRUE(pool.CreateVolume(name, vo).ok());
  return *pool.OpenVolume(name);
}

TEST(FragmentedSpaceTest, LargeBlocksFindNoRunsAndAreRefusedBeforeTheCommit) {
  auto pool = *Pool::Create("trunk", {bdev::MemoryDevice::Create(64 * kMiB)}, [] {
    PoolCreateOptions o;
    o.tuning = TestTuning();
    return o;
  }());
  // A 4 KiB volume fills most of the pool, then gives back every other block: a third of
  // the pool free, in 4 KiB holes.
  constexpr uint64_t kSmall = 52 * kMiB;
  auto small = Create(*pool, "trunk/small", kSmall, 4096);
  ASSERT_TRUE(small->Write(0, Pattern(kSmall, 1)).ok());
  ASSERT_TRUE(small->Flush().ok());
  for (uint64_t off = 0; off < kSmall; off += 8192) {
    ASSERT_TRUE(small->Discard(off, 4096).ok());
  }
  ASSERT_TRUE(pool->Sync().ok());
  PoolImpl& p = *pool->impl();
  for (uint64_t i = 0; i < kTxgDefer; i++) ASSERT_TRUE(p.SyncOnTimer().ok());  // frees back
  ASSERT_GT(p.free_bytes.load(), 24 * kMiB);
  ASSERT_LT(p.free_run_bytes.load(), 12 * kMiB);
  // A 16 KiB volume writes until it is refused; every write it was allowed commits.
  auto large = Create(*pool, "trunk/large", 32 * kMiB, 16384);
  const auto mib = Pattern(kMiB, 2);
  uint64_t written = 0;
  Status st;
  for (; written < 32 * kMiB; written += kMiB) {
    st = large->Write(written, mib);
    if (!st.ok()) break;
    ASSERT_TRUE(large->Flush().ok()) << "after " << written / kMiB << " MiB";
  }
  EXPECT_EQ(st.code(), ENOSPC) << st.ToString();
  EXPECT_LT(written, 24 * kMiB);  // refused while the bytes were there
  ASSERT_TRUE(p.CheckUsable().ok());
  // The small volume still takes 4 KiB writes into the holes.
  ASSERT_TRUE(small->Write(4096, Pattern(4096, 3)).ok());
  ASSERT_TRUE(small->Flush().ok());
  std::vector<uint8_t> back(written);
  ASSERT_TRUE(large->Read(0, back).ok());
  for (uint64_t off = 0; off < written; off += kMiB) {
    ASSERT_TRUE(std::equal(mib.begin(), mib.end(), back.begin() + off)) << off;
  }
  small.reset();
  large.reset();
  ExpectConsistent(*pool);
}

// The largest free run of the pool (one vdev).
uint64_t LargestRun(PoolImpl& p) {
  std::lock_guard l(p.sync_mu);
  uint64_t largest = 0;
  for (auto [s, e] : p.free[0].ranges()) largest = std::max(largest, e - s);
  return largest;
}

// A commit's space map must never need a run longer than the ones ReserveDirty counts
// (kIndirectBlockSize). Free space left only in 16-32 KiB holes between live 16 KiB blocks,
// and a condensed space map of more records than such a hole could hold as one block: the
// commit must write it in blocks that each fit a hole, not fail with ENOSPC and suspend the
// pool (it did while a space-map block took up to 128 KiB).
TEST(FragmentedSpaceTest, SpaceMapBlocksFitTheRunsLeftBetweenLiveBlocks) {
  auto pool = *Pool::Create("trunk", {bdev::MemoryDevice::Create(128 * kMiB)}, [] {
    PoolCreateOptions o;
    o.tuning = TestTuning();
    return o;
  }());
  PoolImpl& p = *pool->impl();
  // A 16 KiB volume written until the pool refuses more, then every other block given back.
  auto vol = Create(*pool, "trunk/vol", 124 * kMiB, 16384);
  const auto mib = Pattern(kMiB, 1);
  uint64_t filled = 0;
  while (filled < 124 * kMiB && vol->Write(filled, mib).ok()) {
    ASSERT_TRUE(vol->Flush().ok());
    filled += kMiB;
  }
  ASSERT_GT(filled, 96 * kMiB);
  for (uint64_t off = 0; off < filled; off += 32768) ASSERT_TRUE(vol->Discard(off, 16384).ok());
  ASSERT_TRUE(vol->Flush().ok());
  for (uint64_t i = 0; i < kTxgDefer; i++) ASSERT_TRUE(p.SyncOnTimer().ok());  // frees back
  // A condensed space map as one block: 16 bytes a live extent.
  auto condensed_bytes = [&p] {
    std::lock_guard l(p.sync_mu);
    return 16 + 16 * p.live[0].extents();
  };
  // The free runs of 48 KiB and more (the end of the pool, left for the slop) are taken
  // out of the free set here, as another volume's blocks would hold them, so the free space
  // is the 16 KiB holes (and 32 KiB ones where an old indirect block was freed beside one)
  // and what each commit frees of the previous one's metadata (runs of up to 40 KiB).
  std::vector<std::pair<uint64_t, uint64_t>> taken;
  {
    std::lock_guard l(p.sync_mu);
    for (auto [s, e] : std::map<uint64_t, uint64_t>(p.free[0].ranges())) {
      if (e - s < 48 * 1024) continue;
      ASSERT_TRUE(p.free[0].Remove(s, e - s));
      p.free_bytes -= e - s;
      taken.emplace_back(s, e - s);
    }
    p.NoteFreeRunsLocked();
  }
  const auto block = Pattern(16384, 2);
  ASSERT_LT(LargestRun(p), condensed_bytes());
  ASSERT_GT(condensed_bytes(), kIndirectBlockSize);
  ASSERT_GT(p.free_run_bytes.load(), 8 * kMiB);
  // Commits until one condenses (the log shrinks): at most twice the condensed map's blocks.
  p.tuning.condense_blocks = 1;
  bool condensed = false;
  for (int i = 0; i < 20 && !condensed; i++) {
    const size_t before = p.sm_bps.size();
    ASSERT_TRUE(vol->Write(16384, block).ok());
    ASSERT_TRUE(vol->Flush().ok()) << "a commit failed: the pool is suspended";
    condensed = p.sm_bps.size() <= before;
  }
  ASSERT_TRUE(p.CheckUsable().ok());
  EXPECT_TRUE(condensed);
  EXPECT_GT(p.sm_bps.size(), 1u);
  for (const BlockPtr& bp : p.sm_bps) EXPECT_LE(bp.lsize, kIndirectBlockSize);
  // Appended (not condensed) space maps too.
  p.tuning.condense_blocks = 1000;
  for (uint64_t off = 0; off < filled / 2; off += 65536) {
    ASSERT_TRUE(vol->Write(off + 16384, block).ok());
  }
  ASSERT_TRUE(vol->Flush().ok());
  ASSERT_TRUE(p.CheckUsable().ok());
  std::vector<uint8_t> back(16384);
  ASSERT_TRUE(vol->Read(16384, back).ok());
  EXPECT_EQ(back, block);
  {
    std::lock_guard l(p.sync_mu);
    for (auto [off, len] : taken) {
      ASSERT_TRUE(p.free[0].Add(off, len));
      p.free_bytes += len;
    }
    p.NoteFreeRunsLocked();
  }
  vol.reset();
  ExpectConsistent(*pool);
}

}  // namespace
}  // namespace volstack::pool

// zfs destroy of several snapshots at once (destroy_snapshots.cc): what a set frees
// together (more than the sum of their `used` when they share blocks no survivor holds),
// that space coming back to the pool, one txg for them all, and nothing destroyed when any
// one cannot go (held, open, cloned, missing).
#include <gtest/gtest.h>

#include <cstring>

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

struct Fixture {
  std::shared_ptr<Pool> pool;
  bdev::BlockDevicePtr dev;  // trunk/vol
  std::vector<uint8_t> model = std::vector<uint8_t>(8 * kMiB, 0);
  void Put(uint64_t off, uint64_t len, uint64_t seed) {
    auto data = Pattern(len, seed);
    ASSERT_TRUE(dev->Write(off, data).ok());
    std::memcpy(model.data() + off, data.data(), len);
  }
};

// trunk/vol (4 KiB blocks) with @1, @2, @3, @4. [2M,3M) is written before @1 and
// overwritten after @2: @1 and @2 share it, no other tree names it, so neither's `used`
// counts it, but destroying both frees it.
Fixture MakeFour() {
  Fixture f;
  PoolCreateOptions o;
  o.tuning = TestTuning();
  auto p = Pool::Create("trunk", {bdev::MemoryDevice::Create(128 * kMiB)}, o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  f.pool = *p;
  VolumeOptions vo;
  vo.volsize = 8 * kMiB;
  vo.volblocksize = 4096;
  vo.sparse = true;
  vo.props["logbias"] = "throughput";
  EXPECT_TRUE(f.pool->CreateVolume("trunk/vol", vo).ok());
  f.dev = *f.pool->OpenVolume("trunk/vol");
  f.Put(0, 4 * kMiB, 1);
  EXPECT_TRUE(f.pool->Snapshot({"trunk/vol@1"}).ok());
  f.Put(0, kMiB, 2);  // @2's alone
  EXPECT_TRUE(f.pool->Snapshot({"trunk/vol@2"}).ok());
  f.Put(0, kMiB, 3);
  f.Put(2 * kMiB, kMiB, 4);  // [2M,3M) of pattern 1 now only in @1 and @2
  EXPECT_TRUE(f.pool->Snapshot({"trunk/vol@3"}).ok());
  f.Put(4 * kMiB, kMiB, 5);
  EXPECT_TRUE(f.pool->Snapshot({"trunk/vol@4"}).ok());
  f.Put(0, kMiB, 6);
  EXPECT_TRUE(f.pool->Sync().ok());
  return f;
}

uint64_t Used(Pool& pool, const std::string& name) {
  auto d = pool.GetDataset(name);
  EXPECT_TRUE(d.ok()) << name;
  return d.ok() ? d->used : 0;
}

std::vector<std::string> Names(Pool& pool) { return pool.SnapshotNames("trunk/vol"); }

// Commits until the frees of the last commit are back in the pool's free space.
void DrainDeferred(Pool& pool) {
  std::lock_guard l(pool.impl()->sync_mu);
  for (int i = 0; i < 3; i++) ASSERT_TRUE(pool.impl()->SyncLocked(true).ok());
}

TEST(DestroySnapshotsTest, ASetFreesWhatItsSnapshotsHoldTogether) {
  auto f = MakeFour();
  const uint64_t used1 = Used(*f.pool, "trunk/vol@1"), used2 = Used(*f.pool, "trunk/vol@2");
  uint64_t would = 0;
  ASSERT_TRUE(f.pool->DestroySnapshots({"trunk/vol@1", "trunk/vol@2"}, true, &would).ok());
  // The shared MiB (256 data blocks, plus the indirect blocks above it that only they name).
  EXPECT_GE(would, used1 + used2 + kMiB);
  EXPECT_LE(would, used1 + used2 + kMiB + 4 * 16384);
  // A single name gives its own `used`, and a name given twice counts once.
  uint64_t one = 0;
  ASSERT_TRUE(f.pool->DestroySnapshots({"trunk/vol@2", "trunk/vol@2"}, true, &one).ok());
  EXPECT_EQ(one, used2);
  EXPECT_EQ(Names(*f.pool).size(), 4u);  // dry runs change nothing
  DrainDeferred(*f.pool);
  const uint64_t free_before = f.pool->Info().free;
  const uint64_t txg_before = f.pool->Info().txg;
  uint64_t freed = 0;
  ASSERT_TRUE(f.pool->DestroySnapshots({"trunk/vol@2", "trunk/vol@1"}, false, &freed).ok());
  EXPECT_EQ(freed, would);
  EXPECT_EQ(f.pool->Info().txg, txg_before + 1);  // both in one txg
  EXPECT_EQ(Names(*f.pool), (std::vector<std::string>{"trunk/vol@3", "trunk/vol@4"}));
  DrainDeferred(*f.pool);
  // Give or take the space map and MOS blocks, which change size every commit.
  EXPECT_NEAR(static_cast<double>(f.pool->Info().free), static_cast<double>(free_before + freed),
              128 * 1024);
  auto d = *f.pool->OpenVolume("trunk/vol");
  std::vector<uint8_t> got(f.model.size());
  ASSERT_TRUE(d->Read(0, got).ok());
  EXPECT_EQ(got, f.model);
  ExpectConsistent(*f.pool);
}

TEST(DestroySnapshotsTest, ARunBetweenSurvivorsAndTheNewestAgainstTheHead) {
  auto f = MakeFour();
  // Non-adjacent members: @2 (survivors @1 and @3 around it) and @4 (the head after it).
  const uint64_t used2 = Used(*f.pool, "trunk/vol@2"), used4 = Used(*f.pool, "trunk/vol@4");
  uint64_t would = 0;
  ASSERT_TRUE(f.pool->DestroySnapshots({"trunk/vol@4", "trunk/vol@2"}, true, &would).ok());
  EXPECT_EQ(would, used2 + used4);
  uint64_t freed = 0;
  ASSERT_TRUE(f.pool->DestroySnapshots({"trunk/vol@4", "trunk/vol@2"}, false, &freed).ok());
  EXPECT_EQ(freed, would);
  // The rest together: all that is left of the snapshots' space.
  auto v = f.pool->GetDataset("trunk/vol");
  ASSERT_TRUE(v.ok());
  uint64_t rest = 0;
  ASSERT_TRUE(f.pool->DestroySnapshots({"trunk/vol@1", "trunk/vol@3"}, true, &rest).ok());
  EXPECT_EQ(rest, v->usedbysnapshots);
  ExpectConsistent(*f.pool);
}

TEST(DestroySnapshotsTest, OneThatCannotGoKeepsThemAll) {
  auto f = MakeFour();
  const std::vector<std::string> all = Names(*f.pool);
  const uint64_t txg = f.pool->Info().txg;
  // Held.
  ASSERT_TRUE(f.pool->Hold("trunk/vol@3", "keep").ok());
  Status st = f.pool->DestroySnapshots(all);
  EXPECT_EQ(st.code(), EBUSY) << st.ToString();
  EXPECT_EQ(Names(*f.pool), all);
  uint64_t would = 0;  // a dry run still says what they would free
  EXPECT_TRUE(f.pool->DestroySnapshots(all, true, &would).ok());
  EXPECT_GT(would, 0u);
  ASSERT_TRUE(f.pool->Release("trunk/vol@3", "keep").ok());
  // Open.
  {
    auto open = f.pool->OpenVolume("trunk/vol@4");
    ASSERT_TRUE(open.ok());
    EXPECT_EQ(f.pool->DestroySnapshots(all).code(), EBUSY);
    EXPECT_EQ(Names(*f.pool), all);
  }
  // With a clone.
  ASSERT_TRUE(f.pool->Clone("trunk/vol@2", "trunk/c").ok());
  EXPECT_EQ(f.pool->DestroySnapshots(all).code(), EEXIST);
  EXPECT_EQ(Names(*f.pool), all);
  // Missing.
  EXPECT_EQ(f.pool->DestroySnapshots({"trunk/vol@1", "trunk/vol@nope"}).code(), ENOENT);
  EXPECT_EQ(f.pool->DestroySnapshots({"trunk/vol@1", "trunk/vol@bad@name"}).code(), EINVAL);
  EXPECT_EQ(Names(*f.pool), all);
  // The clone and the hold/release each committed; nothing else did.
  EXPECT_EQ(f.pool->Info().txg, txg + 3);
  ASSERT_TRUE(f.pool->DestroyVolume("trunk/c").ok());
  ASSERT_TRUE(f.pool->DestroySnapshots(all).ok());
  EXPECT_TRUE(Names(*f.pool).empty());
  EXPECT_EQ(f.pool->GetDataset("trunk/vol")->usedbysnapshots, 0u);
  ExpectConsistent(*f.pool);
}

}  // namespace
}  // namespace volstack::pool

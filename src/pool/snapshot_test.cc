// Volume snapshots, clones and rollback (snapshot.cc) on memory devices: each snapshot
// reads back its txg's data before and after import, space accounting (a snapshot's used
// is what destroying it frees; the checker proves it against the trees after every
// scenario), rollback, clones, the format version, and bad input changing nothing.
#include <gtest/gtest.h>

#include <cstring>

#include "bdev/memory_device.h"
#include "pool/checker.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"
#include "pool/test_util.h"
#include "util/coding.h"

namespace volstack::pool {
namespace {

using testing::ExpectConsistent;
using testing::kMiB;
using testing::Pattern;
using testing::TestTuning;

struct Fixture {
  std::vector<bdev::BlockDevicePtr> devs;
  std::shared_ptr<Pool> pool;
  bdev::BlockDevicePtr dev;  // trunk/vol
};

Fixture MakePool(uint64_t volsize = 8 * kMiB, uint32_t vbs = 4096) {
  Fixture f;
  f.devs.push_back(bdev::MemoryDevice::Create(128 * kMiB));
  PoolCreateOptions o;
  o.tuning = TestTuning();
  auto p = Pool::Create("trunk", f.devs, o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  f.pool = *p;
  VolumeOptions vo;
  vo.volsize = volsize;
  vo.volblocksize = vbs;
  vo.sparse = true;
  vo.props["logbias"] = "throughput";
  EXPECT_TRUE(f.pool->CreateVolume("trunk/vol", vo).ok());
  f.dev = *f.pool->OpenVolume("trunk/vol");
  return f;
}

std::vector<uint8_t> ReadAll(Pool& pool, const std::string& name) {
  auto d = pool.OpenVolume(name);
  EXPECT_TRUE(d.ok()) << name << ": " << d.status().ToString();
  if (!d.ok()) return {};
  std::vector<uint8_t> out((*d)->size());
  EXPECT_TRUE((*d)->Read(0, out).ok());
  return out;
}

void Put(bdev::BlockDevice& dev, uint64_t off, const std::vector<uint8_t>& data,
         std::vector<uint8_t>* model) {
  ASSERT_TRUE(dev.Write(off, data).ok());
  std::memcpy(model->data() + off, data.data(), data.size());
}

DatasetInfo Get(Pool& pool, const std::string& name) {
  auto d = pool.GetDataset(name);
  EXPECT_TRUE(d.ok()) << name << ": " << d.status().ToString();
  return d.ok() ? *d : DatasetInfo{};
}

uint64_t MosVersion(Pool& pool) {
  PoolImpl& p = *pool.impl();
  std::lock_guard l(p.sync_mu);
  std::vector<uint8_t> buf(p.mos_bp.lsize);
  EXPECT_TRUE(p.ReadBlock(p.mos_bp, buf.data()).ok());
  return DecodeLE64(buf.data()) >> 56;
}

TEST(SnapshotTest, EachSnapshotReadsItsTxgBeforeAndAfterImport) {
  auto f = MakePool();
  std::vector<uint8_t> model(8 * kMiB, 0);
  Put(*f.dev, 0, Pattern(4 * kMiB, 1), &model);
  ASSERT_TRUE(f.pool->Sync().ok());
  Put(*f.dev, 6 * kMiB, Pattern(kMiB, 2), &model);  // dirty when the snapshot is taken
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@a"}).ok());
  const auto at_a = model;
  Put(*f.dev, kMiB, Pattern(2 * kMiB, 3), &model);
  ASSERT_TRUE(f.dev->Discard(3 * kMiB, kMiB).ok());
  std::fill(model.begin() + 3 * kMiB, model.begin() + 4 * kMiB, 0);
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@b"}).ok());
  const auto at_b = model;
  Put(*f.dev, 0, Pattern(8 * kMiB, 4), &model);
  ASSERT_TRUE(f.pool->Sync().ok());
  EXPECT_EQ(ReadAll(*f.pool, "trunk/vol@a"), at_a);
  EXPECT_EQ(ReadAll(*f.pool, "trunk/vol@b"), at_b);
  EXPECT_EQ(ReadAll(*f.pool, "trunk/vol"), model);
  ExpectConsistent(*f.pool);
  // Snapshots are read-only devices.
  auto s = *f.pool->OpenVolume("trunk/vol@a");
  EXPECT_EQ(s->Write(0, Pattern(4096, 5)).code(), EROFS);
  EXPECT_TRUE(s->Flush().ok());
  s.reset();
  // 6, not 3: the deferred frees (defer_map.h) are listed from a pool's second txg on.
  EXPECT_EQ(MosVersion(*f.pool), 6u);

  f.dev.reset();
  ASSERT_TRUE(f.pool->Export().ok());
  f.pool.reset();
  PoolImportOptions io;
  io.tuning = TestTuning();
  auto p = Pool::Import(f.devs, io);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(ReadAll(**p, "trunk/vol@a"), at_a);
  EXPECT_EQ(ReadAll(**p, "trunk/vol@b"), at_b);
  EXPECT_EQ(ReadAll(**p, "trunk/vol"), model);
  ExpectConsistent(**p);
  // The born-after rule survives import: overwriting again frees nothing @b holds.
  auto dev = *(*p)->OpenVolume("trunk/vol");
  ASSERT_TRUE(dev->Write(0, Pattern(8 * kMiB, 6)).ok());
  ASSERT_TRUE((*p)->Sync().ok());
  EXPECT_EQ(ReadAll(**p, "trunk/vol@b"), at_b);
  ExpectConsistent(**p);
}

TEST(SnapshotTest, UsedIsWhatDestroyFreesAndDestroyGivesItBack) {
  auto f = MakePool();
  const uint64_t n = 4 * kMiB;
  ASSERT_TRUE(f.dev->Write(0, Pattern(n, 1)).ok());
  ASSERT_TRUE(f.pool->Sync().ok());
  const uint64_t free_before = f.pool->Info().free;
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@s"}).ok());
  // Taking it allocates nothing (only the MOS, which every commit replaces).
  EXPECT_EQ(Get(*f.pool, "trunk/vol@s").used, 0u);
  ASSERT_TRUE(f.dev->Write(0, Pattern(n, 2)).ok());
  ASSERT_TRUE(f.pool->Sync().ok());
  const DatasetInfo s = Get(*f.pool, "trunk/vol@s");
  const DatasetInfo v = Get(*f.pool, "trunk/vol");
  // The snapshot alone holds the old data and the indirect blocks above it: N MiB plus at
  // most one 16 KiB indirect block per 128 data blocks, and the root.
  EXPECT_GE(s.used, n);
  EXPECT_LE(s.used, n + (n / 4096 / 128 + 2) * 16384);
  EXPECT_EQ(v.usedbysnapshots, s.used);
  EXPECT_EQ(v.written, v.referenced);  // all rewritten since @s
  EXPECT_EQ(s.written, s.referenced);  // all born before it, after nothing
  ExpectConsistent(*f.pool);
  uint64_t would = 0;
  ASSERT_TRUE(f.pool->DestroySnapshot("trunk/vol@s", /*dry_run=*/true, &would).ok());
  EXPECT_EQ(would, s.used);
  EXPECT_TRUE(f.pool->GetDataset("trunk/vol@s").ok());  // a dry run changes nothing
  const uint64_t free_mid = f.pool->Info().free;
  uint64_t freed = 0;
  ASSERT_TRUE(f.pool->DestroySnapshot("trunk/vol@s", false, &freed).ok());
  EXPECT_EQ(freed, would);
  {
    // Frees come back kTxgDefer txgs later.
    std::lock_guard l(f.pool->impl()->sync_mu);
    for (int i = 0; i < 3; i++) ASSERT_TRUE(f.pool->impl()->SyncLocked(true).ok());
  }
  // Give or take the space map and MOS blocks, which change size every commit.
  EXPECT_GE(f.pool->Info().free + 64 * 1024, free_mid + freed);
  // The head's new data took the place of the old: the pool is back where it was.
  EXPECT_NEAR(static_cast<double>(f.pool->Info().free), static_cast<double>(free_before),
              256 * 1024);
  EXPECT_EQ(Get(*f.pool, "trunk/vol").usedbysnapshots, 0u);
  ExpectConsistent(*f.pool);
  EXPECT_EQ(MosVersion(*f.pool), 6u);  // the deferred frees' version (defer_map.h)
}

TEST(SnapshotTest, DestroyingTheMiddleSnapshotFreesOnlyItsOwnBlocks) {
  auto f = MakePool(8 * kMiB, 4096);
  std::vector<uint8_t> model(8 * kMiB, 0);
  Put(*f.dev, 0, Pattern(8 * kMiB, 1), &model);
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@1"}).ok());
  const auto at1 = model;
  Put(*f.dev, 0, Pattern(2 * kMiB, 2), &model);     // born in @2's interval, overwritten later
  Put(*f.dev, 4 * kMiB, Pattern(kMiB, 3), &model);  // born there, still the head's
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@2"}).ok());
  Put(*f.dev, kMiB, Pattern(2 * kMiB, 4), &model);
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@3"}).ok());
  const auto at3 = model;
  Put(*f.dev, 0, Pattern(kMiB, 5), &model);
  ASSERT_TRUE(f.pool->Sync().ok());
  ExpectConsistent(*f.pool);
  const uint64_t used2 = Get(*f.pool, "trunk/vol@2").used;
  // @2 alone holds [0,1M) of pattern 2 (overwritten in @3's interval by pattern 4 only from
  // 1M on; [0,1M) by the head after @3, so @3 holds it too) and [1M,2M) of pattern 2.
  EXPECT_GE(used2, kMiB);
  uint64_t freed = 0;
  ASSERT_TRUE(f.pool->DestroySnapshot("trunk/vol@2", false, &freed).ok());
  EXPECT_EQ(freed, used2);
  EXPECT_EQ(ReadAll(*f.pool, "trunk/vol@1"), at1);
  EXPECT_EQ(ReadAll(*f.pool, "trunk/vol@3"), at3);
  EXPECT_EQ(ReadAll(*f.pool, "trunk/vol"), model);
  ExpectConsistent(*f.pool);
  // Then the oldest, then the newest: every block ends up freed exactly once.
  ASSERT_TRUE(f.pool->DestroySnapshot("trunk/vol@1").ok());
  ExpectConsistent(*f.pool);
  ASSERT_TRUE(f.pool->DestroySnapshot("trunk/vol@3").ok());
  EXPECT_EQ(ReadAll(*f.pool, "trunk/vol"), model);
  ExpectConsistent(*f.pool);
}

TEST(SnapshotTest, RollbackRefusedWhileBusyAndDestroysLaterWithR) {
  auto f = MakePool();
  std::vector<uint8_t> model(8 * kMiB, 0);
  Put(*f.dev, 0, Pattern(3 * kMiB, 1), &model);
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@a"}).ok());
  const auto at_a = model;
  Put(*f.dev, kMiB, Pattern(3 * kMiB, 2), &model);
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@b"}).ok());
  Put(*f.dev, 5 * kMiB, Pattern(kMiB, 3), &model);
  EXPECT_EQ(f.pool->Rollback("trunk/vol@b").code(), EBUSY);  // open
  f.dev.reset();                                             // its dirty data goes too
  Status st = f.pool->Rollback("trunk/vol@a");
  EXPECT_EQ(st.code(), EEXIST) << st.ToString();
  EXPECT_NE(st.message().find("trunk/vol@b"), std::string::npos);
  EXPECT_TRUE(f.pool->GetDataset("trunk/vol@b").ok());
  ASSERT_TRUE(f.pool->Rollback("trunk/vol@a", /*destroy_later=*/true).ok());
  EXPECT_FALSE(f.pool->GetDataset("trunk/vol@b").ok());
  EXPECT_EQ(ReadAll(*f.pool, "trunk/vol"), at_a);
  EXPECT_EQ(Get(*f.pool, "trunk/vol").written, 0u);
  ExpectConsistent(*f.pool);
  // Write again and roll back again: the head's new blocks are freed, @a's kept.
  f.dev = *f.pool->OpenVolume("trunk/vol");
  ASSERT_TRUE(f.dev->Write(0, Pattern(8 * kMiB, 4)).ok());
  ASSERT_TRUE(f.pool->Sync().ok());
  f.dev.reset();
  ASSERT_TRUE(f.pool->Rollback("trunk/vol@a").ok());
  EXPECT_EQ(ReadAll(*f.pool, "trunk/vol"), at_a);
  EXPECT_EQ(ReadAll(*f.pool, "trunk/vol@a"), at_a);
  ExpectConsistent(*f.pool);
}

TEST(SnapshotTest, RollbackAcrossAGrowRestoresTheSize) {
  auto f = MakePool(4 * kMiB, 4096);  // 1024 blocks: 2 levels
  ASSERT_TRUE(f.dev->Write(0, Pattern(4 * kMiB, 1)).ok());
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@small"}).ok());
  ASSERT_TRUE(f.pool->SetProperty("trunk/vol", "volsize", "128M").ok());  // 3 levels
  ASSERT_TRUE(f.dev->Write(0, Pattern(kMiB, 2)).ok());
  ASSERT_TRUE(f.dev->Write(100 * kMiB, Pattern(kMiB, 3)).ok());
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@big"}).ok());
  ASSERT_TRUE(f.dev->Write(kMiB, Pattern(kMiB, 4)).ok());
  ASSERT_TRUE(f.pool->Sync().ok());
  ExpectConsistent(*f.pool);
  ASSERT_TRUE(f.pool->DestroySnapshot("trunk/vol@small").ok());  // next tree is taller
  ExpectConsistent(*f.pool);
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@c"}).ok());
  f.dev.reset();
  ASSERT_TRUE(f.pool->Rollback("trunk/vol@big", true).ok());
  EXPECT_EQ(Get(*f.pool, "trunk/vol").volsize, 128 * kMiB);
  ExpectConsistent(*f.pool);
}

TEST(SnapshotTest, ClonesShareBlocksAndPinTheirOrigin) {
  auto f = MakePool();
  std::vector<uint8_t> model(8 * kMiB, 0);
  Put(*f.dev, 0, Pattern(4 * kMiB, 1), &model);
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@s"}).ok());
  const auto at_s = model;
  const uint64_t alloc = f.pool->Info().allocated;
  auto c = f.pool->Clone("trunk/vol@s", "trunk/clone");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->origin, "trunk/vol@s");
  EXPECT_LE(f.pool->Info().allocated, alloc + 64 * 1024);  // shares every block
  EXPECT_EQ(ReadAll(*f.pool, "trunk/clone"), at_s);
  auto cd = *f.pool->OpenVolume("trunk/clone");
  ASSERT_TRUE(cd->Write(0, Pattern(8 * kMiB, 2)).ok());
  ASSERT_TRUE(f.pool->Sync().ok());
  Put(*f.dev, 0, Pattern(2 * kMiB, 3), &model);
  ASSERT_TRUE(f.pool->Sync().ok());
  EXPECT_EQ(ReadAll(*f.pool, "trunk/vol@s"), at_s);
  EXPECT_EQ(ReadAll(*f.pool, "trunk/vol"), model);
  ExpectConsistent(*f.pool);
  auto snaps = f.pool->ListSnapshots("trunk/vol");
  ASSERT_EQ(snaps.size(), 1u);
  EXPECT_EQ(snaps[0].clones, std::vector<std::string>{"trunk/clone"});
  Status st = f.pool->DestroySnapshot("trunk/vol@s");
  EXPECT_EQ(st.code(), EEXIST) << st.ToString();
  // A snapshot of the clone, and rollback of the clone to it.
  ASSERT_TRUE(f.pool->Snapshot({"trunk/clone@c"}).ok());
  ASSERT_TRUE(cd->Write(kMiB, Pattern(kMiB, 4)).ok());
  ASSERT_TRUE(f.pool->Sync().ok());
  ExpectConsistent(*f.pool);
  cd.reset();
  ASSERT_TRUE(f.pool->Rollback("trunk/clone@c").ok());
  ExpectConsistent(*f.pool);
  ASSERT_TRUE(f.pool->DestroySnapshot("trunk/clone@c").ok());
  ASSERT_TRUE(f.pool->DestroyVolume("trunk/clone").ok());
  ExpectConsistent(*f.pool);
  EXPECT_EQ(ReadAll(*f.pool, "trunk/vol@s"), at_s);
  ASSERT_TRUE(f.pool->DestroySnapshot("trunk/vol@s").ok());
  EXPECT_EQ(ReadAll(*f.pool, "trunk/vol"), model);
  ExpectConsistent(*f.pool);
}

TEST(SnapshotTest, BadInputChangesNothing) {
  auto f = MakePool();
  ASSERT_TRUE(f.dev->Write(0, Pattern(kMiB, 1)).ok());
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@a"}).ok());
  VolumeOptions vo;
  vo.volsize = 4 * kMiB;
  vo.sparse = true;
  ASSERT_TRUE(f.pool->CreateVolume("trunk/other", vo).ok());
  ASSERT_TRUE(f.pool->Snapshot({"trunk/other@o"}).ok());
  const uint64_t txg = f.pool->Info().txg;
  const std::string long_name = "trunk/vol@" + std::string(250, 'x');
  struct Case {
    std::vector<std::string> names;
    int code;
  };
  for (const Case& c : std::vector<Case>{
           {{"trunk/vol"}, EINVAL},                     // no @
           {{"trunk/vol@"}, EINVAL},                    // empty snapshot name
           {{"trunk@x"}, EINVAL},                       // the root dataset
           {{"trunk/vol@a@b"}, EINVAL},                 // snapshot of a snapshot
           {{"trunk/v@l/x"}, EINVAL},                   // @ in the wrong place
           {{long_name}, EINVAL},                       // 256+ characters
           {{"trunk/nope@x"}, ENOENT},                  // no such volume
           {{"other/vol@x"}, ENOENT},                   // another pool
           {{"trunk/vol@a"}, EEXIST},                   // taken
           {{"trunk/vol@x", "trunk/vol@y"}, EINVAL},    // two of one volume in one txg
           {{"trunk/other@x", "trunk/vol@a"}, EEXIST},  // atomic: @x is not taken either
       }) {
    Status st = f.pool->Snapshot(c.names);
    EXPECT_EQ(st.code(), c.code) << c.names[0] << ": " << st.ToString();
  }
  EXPECT_FALSE(f.pool->GetDataset("trunk/other@x").ok());
  EXPECT_EQ(f.pool->Rollback("trunk/vol@o").code(), ENOENT);  // another volume's snapshot
  EXPECT_EQ(f.pool->Rollback("trunk/vol").code(), EINVAL);
  EXPECT_EQ(f.pool->DestroySnapshot("trunk/vol@nope").code(), ENOENT);
  EXPECT_EQ(f.pool->Clone("trunk/vol@nope", "trunk/c").status().code(), ENOENT);
  EXPECT_EQ(f.pool->Clone("trunk/vol@a", "trunk/other").status().code(), EEXIST);
  auto busy = *f.pool->OpenVolume("trunk/vol@a");
  EXPECT_EQ(f.pool->DestroySnapshot("trunk/vol@a").code(), EBUSY);
  busy.reset();
  EXPECT_EQ(f.pool->DestroyVolume("trunk/other").code(), EEXIST);  // has a snapshot
  EXPECT_EQ(f.pool->Info().txg, txg);                              // nothing committed
  EXPECT_EQ(f.pool->ListSnapshots().size(), 2u);
  ExpectConsistent(*f.pool);
}

TEST(SnapshotTest, AHeldSnapshotIsNotDestroyedAndHoldsSurviveImport) {
  auto f = MakePool();
  ASSERT_TRUE(f.dev->Write(0, Pattern(kMiB, 1)).ok());
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@a"}).ok());
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@b"}).ok());
  ASSERT_TRUE(f.pool->Hold("trunk/vol@b", "keep").ok());
  EXPECT_EQ(f.pool->Hold("trunk/vol@b", "keep").code(), EEXIST);
  EXPECT_EQ(f.pool->Hold("trunk/vol@nope", "keep").code(), ENOENT);
  EXPECT_EQ(f.pool->DestroySnapshot("trunk/vol@b").code(), EBUSY);
  f.dev.reset();
  EXPECT_EQ(f.pool->Rollback("trunk/vol@a", true).code(), EBUSY);  // would destroy @b
  EXPECT_EQ(Get(*f.pool, "trunk/vol@b").props["userrefs"], "1");
  ASSERT_TRUE(f.pool->Export().ok());
  f.pool.reset();
  PoolImportOptions io;
  io.tuning = TestTuning();
  auto p = Pool::Import(f.devs, io);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto holds = (*p)->Holds("trunk/vol@b");
  ASSERT_TRUE(holds.ok());
  ASSERT_EQ(holds->size(), 1u);
  EXPECT_EQ(holds->begin()->first, "keep");
  EXPECT_EQ((*p)->DestroySnapshot("trunk/vol@b").code(), EBUSY);
  EXPECT_EQ((*p)->Release("trunk/vol@b", "other").code(), ENOENT);
  ASSERT_TRUE((*p)->Release("trunk/vol@b", "keep").ok());
  ASSERT_TRUE((*p)->DestroySnapshot("trunk/vol@b").ok());
  ExpectConsistent(**p);
}

TEST(SnapshotTest, TakingOneReadsAndWritesNoBlockOfTheVolume) {
  // O(1): a 64 GiB sparse volume with data in a few places costs what a 4 MiB one does.
  auto f = MakePool(64ull << 30, 16384);
  for (uint64_t off : {0ull, 1ull << 30, 40ull << 30, (64ull << 30) - kMiB}) {
    ASSERT_TRUE(f.dev->Write(off, Pattern(kMiB, off)).ok());
  }
  ASSERT_TRUE(f.pool->Sync().ok());
  const uint64_t data_before = f.pool->impl()->TxgStatsSnapshot().data_bytes;
  const uint64_t alloc_before = f.pool->Info().allocated;
  ASSERT_TRUE(f.pool->Snapshot({"trunk/vol@s"}).ok());
  EXPECT_EQ(f.pool->impl()->TxgStatsSnapshot().data_bytes, data_before);
  EXPECT_LE(f.pool->Info().allocated, alloc_before + 64 * 1024);  // a MOS block at most
  ExpectConsistent(*f.pool, false);
}

}  // namespace
}  // namespace volstack::pool

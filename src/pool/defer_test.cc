// Deferred frees stored with the MOS (defer_map.h): import -F rewinds kTxgDefer txgs even
// when each txg was written by a fresh import (as by separate CLI commands without a
// daemon), the space accounting stays exact across imports, and the MOS format carries the
// lists as version 6.
#include <gtest/gtest.h>

#include "bdev/memory_device.h"
#include "pool/checker.h"
#include "pool/defer_map.h"
#include "pool/pool_impl.h"
#include "pool/test_util.h"

namespace volstack::pool {
namespace {

using testing::ExpectConsistent;
using testing::kMiB;
using testing::Pattern;
using testing::TestTuning;

constexpr uint64_t kData = 1 * kMiB;

PoolImportOptions Opts(bool rewind = false) {
  PoolImportOptions io;
  io.tuning = TestTuning();
  io.rewind = rewind;
  return io;
}

struct Session {
  uint64_t txg = 0;
  BlockPtr mos;
};

// One "command": a fresh import that overwrites the volume with pattern `seed` and exports
// (one txg). Returns that txg and its MOS.
Session WriteSession(const bdev::BlockDevicePtr& dev, uint64_t seed) {
  Session s;
  auto p = Pool::Import({dev}, Opts());
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  if (!p.ok()) return s;
  auto vol = (*p)->OpenVolume("trunk/v");
  EXPECT_TRUE(vol.ok());
  EXPECT_TRUE((*vol)->Write(0, Pattern(kData, seed)).ok());
  vol->reset();
  EXPECT_TRUE((*p)->Export().ok());
  s.txg = (*p)->impl()->synced_txg;
  s.mos = (*p)->impl()->mos_bp;
  return s;
}

TEST(DeferTest, RewindsEachOfTheLastTxgsWrittenByFreshImports) {
  auto mem = bdev::MemoryDevice::Create(96 * kMiB);
  const bdev::BlockDevicePtr dev = mem;
  {
    PoolCreateOptions o;
    o.tuning = TestTuning();
    auto p = *Pool::Create("trunk", {dev}, o);
    VolumeOptions vo;
    vo.volsize = 4 * kMiB;
    vo.sparse = true;
    ASSERT_TRUE(p->CreateVolume("trunk/v", vo).ok());
    ASSERT_TRUE(p->Export().ok());
  }
  // Sessions 0..kTxgDefer, one txg each; session i writes pattern 100 + i over the last.
  std::vector<Session> sessions;
  for (uint64_t i = 0; i <= kTxgDefer; i++) {
    sessions.push_back(WriteSession(dev, 100 + i));
    ASSERT_FALSE(HasFailure());
    if (i > 0) {
      ASSERT_EQ(sessions[i].txg, sessions[i - 1].txg + 1) << "one txg per session";
    }
  }
  const uint64_t newest = sessions.back().txg;
  for (uint64_t back = 1; back <= kTxgDefer; back++) {
    SCOPED_TRACE("rewind " + std::to_string(back) + " txg(s)");
    bdev::BlockDevicePtr copy = mem->Clone();
    // The MOS blocks of the newest `back` txgs are damaged.
    for (uint64_t k = 0; k < back; k++) {
      const Dva& d = sessions[kTxgDefer - k].mos.dva[0];
      ASSERT_TRUE(copy->Write(d.offset, std::vector<uint8_t>(512, 0xa5)).ok());
    }
    auto refused = Pool::Import({copy}, Opts());
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("would discard " + std::to_string(back) +
                                              " committed txg(s)"),
              std::string::npos)
        << refused.status().message();
    auto p = Pool::Import({copy}, Opts(/*rewind=*/true));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ((*p)->import_report().newest_txg, newest);
    EXPECT_EQ((*p)->import_report().imported_txg, newest - back);
    std::vector<uint8_t> got(kData);
    ASSERT_TRUE((*(*p)->OpenVolume("trunk/v"))->Read(0, got).ok());
    EXPECT_TRUE(got == Pattern(kData, 100 + kTxgDefer - back)) << "not the data of that txg";
    ExpectConsistent(**p);  // every block read back and verified, the space exact
    ASSERT_TRUE((*p)->Export().ok());
  }
}

// The space a txg frees counts as free at once (Info().free, as zfs's `available`), is
// allocatable kTxgDefer txgs later, and both hold across an export and import.
TEST(DeferTest, DeferredFreesSurviveImportAndAreReleasedKTxgsLater) {
  bdev::BlockDevicePtr mem = bdev::MemoryDevice::Create(96 * kMiB);
  PoolCreateOptions o;
  o.tuning = TestTuning();
  auto p = *Pool::Create("trunk", {mem}, o);
  VolumeOptions vo;
  vo.volsize = 16 * kMiB;
  vo.sparse = true;
  ASSERT_TRUE(p->CreateVolume("trunk/v", vo).ok());
  {
    auto vol = *p->OpenVolume("trunk/v");
    ASSERT_TRUE(vol->Write(0, Pattern(16 * kMiB, 7)).ok());
  }
  ASSERT_TRUE(p->Sync().ok());
  const uint64_t full_free = p->Info().free;
  ASSERT_TRUE(p->DestroyVolume("trunk/v").ok());
  const PoolInfo after_destroy = p->Info();
  EXPECT_GE(after_destroy.free, full_free + 16 * kMiB);  // counted free at once
  const uint64_t allocatable = p->impl()->free_bytes.load();
  EXPECT_GE(p->impl()->deferred_bytes.load(), 16 * kMiB);  // but not allocatable yet
  ASSERT_TRUE(p->Export().ok());
  p.reset();

  auto q = *Pool::Import({mem}, Opts());
  PoolImpl& impl = *q->impl();
  EXPECT_EQ(q->Info().free, after_destroy.free);
  EXPECT_EQ(q->Info().allocated, after_destroy.allocated);
  EXPECT_EQ(impl.free_bytes.load(), allocatable) << "the deferred frees were not kept";
  EXPECT_GE(impl.deferred_bytes.load(), 16 * kMiB);
  uint64_t vdev_alloc = 0;
  for (const auto& v : q->Info().vdevs) vdev_alloc += v.allocated;
  EXPECT_EQ(vdev_alloc, q->Info().allocated);
  ExpectConsistent(*q);
  // kTxgDefer commits release them (the destroy was in the txg before the export's).
  for (uint64_t i = 0; i < kTxgDefer; i++) ASSERT_TRUE(impl.SyncOnTimer().ok());
  EXPECT_GE(impl.free_bytes.load(), allocatable + 16 * kMiB);
  ExpectConsistent(*q);
  ASSERT_TRUE(q->Export().ok());
}

// A write that needs the space a previous import freed waits for its release instead of
// failing: the deferred frees loaded at import keep the commits for space coming.
TEST(DeferTest, AWriteAfterImportWaitsForTheFreesOfThePreviousSession) {
  bdev::BlockDevicePtr mem = bdev::MemoryDevice::Create(64 * kMiB);
  PoolCreateOptions o;
  o.tuning = TestTuning();
  auto p = *Pool::Create("trunk", {mem}, o);
  VolumeOptions vo;
  vo.volsize = 36 * kMiB;
  vo.sparse = true;
  ASSERT_TRUE(p->CreateVolume("trunk/a", vo).ok());
  {
    auto vol = *p->OpenVolume("trunk/a");
    ASSERT_TRUE(vol->Write(0, Pattern(36 * kMiB, 8)).ok());
  }
  ASSERT_TRUE(p->DestroyVolume("trunk/a").ok());
  ASSERT_TRUE(p->Export().ok());
  p.reset();
  auto q = *Pool::Import({mem}, Opts());
  ASSERT_LT(q->impl()->free_bytes.load(), 36 * kMiB);
  ASSERT_TRUE(q->CreateVolume("trunk/b", vo).ok());
  auto vol = *q->OpenVolume("trunk/b");
  for (uint64_t off = 0; off < 36 * kMiB; off += kMiB) {
    ASSERT_TRUE(vol->Write(off, Pattern(kMiB, off)).ok()) << off;
  }
  ASSERT_TRUE(vol->Flush().ok());
  vol.reset();
  ExpectConsistent(*q);
}

TEST(DeferTest, MosVersionSixCarriesTheLists) {
  MosPhys mos;
  mos.txg = 9;
  BlockPtr bp;
  bp.dva[0] = Dva{0, 8, 4 << 20};
  bp.lsize = bp.psize = 4096;
  bp.cksum = ChecksumType::kXxh3_128;
  bp.type = BlockType::kSpaceMap;
  bp.fill = 1;
  bp.birth = 8;
  mos.space_map = {bp};
  BlockPtr d1 = bp, d2 = bp;
  d1.dva[0].offset = 5 << 20;
  d2.dva[0].offset = 6 << 20;
  mos.deferred = {{7, {d1}}, {9, {d2}}};
  auto block = EncodeMos(mos);
  EXPECT_EQ(block[7], 6);  // version 6 while lists exist
  auto back = DecodeMos(block);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, mos);
  mos.compressed = true;  // another feature's state does not lower it
  block = EncodeMos(mos);
  EXPECT_EQ(block[7], 6);
  EXPECT_EQ(*DecodeMos(block), mos);
  mos.deferred.clear();
  block = EncodeMos(mos);
  EXPECT_EQ(block[7], 5);
  block[7] = 6;  // version 6 without lists
  EXPECT_TRUE(DecodeMos(block).status().IsCorruption());
  // Records merge adjacent extents and split back into DVAs.
  const std::vector<Dva> freed = {{0, 8, 1 << 20}, {0, 8, (1 << 20) + 4096}, {1, 16, 1 << 20}};
  auto recs = DeferBlockRecords(freed, 2);
  ASSERT_EQ(recs.size(), 1u);
  ASSERT_EQ(recs[0].size(), 2u);
  EXPECT_EQ(recs[0][0], (SpaceMapEntry{true, 0, 1 << 20, 8192}));
  EXPECT_EQ(DeferRecordDvas(recs[0]), (std::vector<Dva>{{0, 16, 1 << 20}, {1, 16, 1 << 20}}));
}

}  // namespace
}  // namespace volstack::pool

// The reservation and logical space columns of volumes and snapshots (zfs list -o / zfs
// get): refreservation, usedbyrefreservation, used, available and logicalreferenced, each
// checked against what the data and the pool's own reservation accounting say.
//
// volstack's refreservation (docs/snapshots.md): a thick volume reserves refreservation
// minus what it references, as the pool's write admission counts it (unused_reservation);
// zfs counts its unique bytes instead, so there a snapshot re-reserves the whole
// refreservation. usedbyrefreservation reports volstack's number, the one that holds.
#include <gtest/gtest.h>

#include "bdev/memory_device.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"
#include "pool/test_util.h"

namespace volstack::pool {
namespace {

using testing::kMiB;
using testing::Pattern;
using testing::TestTuning;

uint64_t Num(const DatasetInfo& d, const std::string& prop) {
  auto it = d.props.find(prop);
  EXPECT_NE(it, d.props.end()) << d.name << " has no " << prop;
  return it == d.props.end() ? 0 : std::strtoull(it->second.c_str(), nullptr, 10);
}

DatasetInfo Get(Pool& pool, const std::string& name) {
  auto d = pool.GetDataset(name);
  EXPECT_TRUE(d.ok()) << name;
  return d.ok() ? *d : DatasetInfo{};
}

std::shared_ptr<Pool> MakePool() {
  PoolCreateOptions o;
  o.tuning = TestTuning();
  auto p = Pool::Create("trunk", {bdev::MemoryDevice::Create(256 * kMiB)}, o);
  EXPECT_TRUE(p.ok());
  return *p;
}

TEST(SpacePropsTest, AThickVolumesReservationIsWhatThePoolHoldsBack) {
  auto pool = MakePool();
  VolumeOptions vo;
  vo.volsize = 16 * kMiB;
  vo.volblocksize = 4096;
  vo.props["logbias"] = "throughput";
  ASSERT_TRUE(pool->CreateVolume("trunk/thick", vo).ok());
  auto check = [&](const char* when) {
    SCOPED_TRACE(when);
    const DatasetInfo d = Get(*pool, "trunk/thick");
    const uint64_t refres = Num(d, "refreservation"), ubr = Num(d, "usedbyrefreservation");
    // The volume and its indirect blocks, whole: at least volsize.
    EXPECT_GE(refres, 16 * kMiB);
    EXPECT_EQ(ubr, refres - d.referenced);
    EXPECT_EQ(ubr, pool->impl()->unused_reservation.load());
    EXPECT_EQ(Num(d, "used"), d.referenced + Num(d, "usedbysnapshots") + ubr);
    const DatasetInfo root = Get(*pool, "trunk");
    EXPECT_EQ(d.available, root.available + ubr);
  };
  check("empty");
  auto dev = *pool->OpenVolume("trunk/thick");
  ASSERT_TRUE(dev->Write(0, Pattern(4 * kMiB, 1)).ok());
  ASSERT_TRUE(pool->Sync().ok());
  check("4 MiB written");
  const uint64_t refer4 = Get(*pool, "trunk/thick").referenced;
  EXPECT_GE(refer4, 4 * kMiB);
  // A snapshot and an overwrite of what it holds: the volume references the same amount,
  // so (unlike zfs, which would re-reserve the whole refreservation) the reservation left
  // is unchanged, and it is still exactly what the pool holds back.
  ASSERT_TRUE(pool->Snapshot({"trunk/thick@s"}).ok());
  ASSERT_TRUE(dev->Write(0, Pattern(4 * kMiB, 2)).ok());
  ASSERT_TRUE(pool->Sync().ok());
  check("snapshot and overwrite");
  EXPECT_EQ(Get(*pool, "trunk/thick").referenced, refer4);
  EXPECT_GE(Num(Get(*pool, "trunk/thick"), "usedbysnapshots"), 4 * kMiB);
  // zfs set refreservation=none: nothing held back.
  ASSERT_TRUE(pool->SetProperty("trunk/thick", "refreservation", "none").ok());
  EXPECT_EQ(Num(Get(*pool, "trunk/thick"), "usedbyrefreservation"), 0u);
  EXPECT_EQ(pool->impl()->unused_reservation.load(), 0u);
}

TEST(SpacePropsTest, ASparseVolumeAndItsClonesReserveNothing) {
  auto pool = MakePool();
  VolumeOptions vo;
  vo.volsize = 16 * kMiB;
  vo.sparse = true;
  ASSERT_TRUE(pool->CreateVolume("trunk/sparse", vo).ok());
  ASSERT_TRUE(pool->Snapshot({"trunk/sparse@s"}).ok());
  ASSERT_TRUE(pool->Clone("trunk/sparse@s", "trunk/c").ok());
  for (const char* n : {"trunk/sparse", "trunk/c"}) {
    const DatasetInfo d = Get(*pool, n);
    EXPECT_EQ(Num(d, "refreservation"), 0u) << n;
    EXPECT_EQ(Num(d, "usedbyrefreservation"), 0u) << n;
  }
  // A snapshot has no reservation columns (zfs shows "-").
  const DatasetInfo s = Get(*pool, "trunk/sparse@s");
  EXPECT_EQ(s.props.count("usedbyrefreservation"), 0u);
  EXPECT_EQ(s.props.count("refreservation"), 0u);
}

TEST(SpacePropsTest, LogicalReferencedCountsTheDataAsWritten) {
  auto pool = MakePool();
  VolumeOptions vo;
  vo.volsize = 16 * kMiB;
  vo.volblocksize = 16384;
  vo.sparse = true;
  vo.props["compression"] = "lz4";
  ASSERT_TRUE(pool->CreateVolume("trunk/z", vo).ok());
  auto dev = *pool->OpenVolume("trunk/z");
  // 2 MiB that lz4 halves at least, 2 MiB it cannot shrink.
  ASSERT_TRUE(dev->Write(0, testing::Text(2 * kMiB, 1)).ok());
  ASSERT_TRUE(dev->Write(2 * kMiB, testing::Random(2 * kMiB, 2)).ok());
  ASSERT_TRUE(pool->Sync().ok());
  ASSERT_TRUE(pool->Snapshot({"trunk/z@s"}).ok());
  const DatasetInfo d = Get(*pool, "trunk/z"), s = Get(*pool, "trunk/z@s");
  const uint64_t lref = Num(d, "logicalreferenced");
  // 4 MiB of data and the indirect blocks above it (one, plus the root's path).
  EXPECT_GE(lref, 4 * kMiB);
  EXPECT_LE(lref, 4 * kMiB + 4 * 16384);
  EXPECT_LE(d.referenced, lref - kMiB);          // the text took half its size or less
  EXPECT_EQ(Num(s, "logicalreferenced"), lref);  // the snapshot: the same tree
  // A discard takes the blocks out of the head's count, not the snapshot's.
  ASSERT_TRUE(dev->Discard(0, 2 * kMiB).ok());
  ASSERT_TRUE(pool->Sync().ok());
  EXPECT_LE(Num(Get(*pool, "trunk/z"), "logicalreferenced"), 2 * kMiB + 4 * 16384);
  EXPECT_EQ(Num(Get(*pool, "trunk/z@s"), "logicalreferenced"), lref);
}

}  // namespace
}  // namespace volstack::pool

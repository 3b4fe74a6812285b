// written@snap (written.cc): the bytes a dataset holds born after an earlier snapshot of its
// lineage. Checked against the `written` columns (the same walk from the previous snapshot
// or origin), and bad input: a later snapshot, one of another lineage, a missing one.
#include <gtest/gtest.h>

#include "bdev/memory_device.h"
#include "pool/spa.h"
#include "pool/test_util.h"

namespace volstack::pool {
namespace {

using testing::kMiB;
using testing::Pattern;
using testing::TestTuning;

TEST(WrittenTest, WrittenAtFollowsTheLineage) {
  std::vector<bdev::BlockDevicePtr> devs{bdev::MemoryDevice::Create(128 * kMiB)};
  PoolCreateOptions o;
  o.tuning = TestTuning();
  auto pool = *Pool::Create("trunk", devs, o);
  VolumeOptions vo;
  vo.volsize = 8 * kMiB;
  vo.volblocksize = 4096;
  vo.sparse = true;
  ASSERT_TRUE(pool->CreateVolume("trunk/vol", vo).ok());
  {
    auto dev = *pool->OpenVolume("trunk/vol");
    ASSERT_TRUE(dev->Write(0, Pattern(4 * kMiB, 1)).ok());
    ASSERT_TRUE(pool->Snapshot({"trunk/vol@a"}).ok());
    ASSERT_TRUE(dev->Write(4 * kMiB, Pattern(kMiB, 2)).ok());
    ASSERT_TRUE(pool->Snapshot({"trunk/vol@b"}).ok());
    ASSERT_TRUE(dev->Write(6 * kMiB, Pattern(2 * kMiB, 3)).ok());
  }
  ASSERT_TRUE(pool->Sync().ok());
  auto written = [&](const std::string& d, const std::string& s) {
    auto w = pool->WrittenSince(d, s);
    EXPECT_TRUE(w.ok()) << d << " written@" << s << ": " << w.status().ToString();
    return w.ok() ? *w : 0;
  };
  // Since the newest snapshot: the volume's `written`; a snapshot since the one before it:
  // its own `written`.
  EXPECT_EQ(written("trunk/vol", "b"), pool->GetDataset("trunk/vol")->written);
  EXPECT_EQ(written("trunk/vol", "@b"), written("trunk/vol", "trunk/vol@b"));
  EXPECT_EQ(written("trunk/vol@b", "a"), pool->GetDataset("trunk/vol@b")->written);
  // Since @a: the 3 MiB written after it and the indirect blocks above them.
  const uint64_t since_a = written("trunk/vol", "a");
  EXPECT_GE(since_a, 3 * kMiB);
  EXPECT_LE(since_a, 3 * kMiB + 8 * 16384);
  EXPECT_GT(since_a, written("trunk/vol", "b"));
  // A clone: its origin's snapshots up to the origin are its lineage.
  ASSERT_TRUE(pool->Clone("trunk/vol@b", "trunk/clone").ok());
  {
    auto dev = *pool->OpenVolume("trunk/clone");
    ASSERT_TRUE(dev->Write(0, Pattern(kMiB / 2, 4)).ok());
  }
  ASSERT_TRUE(pool->Sync().ok());
  EXPECT_EQ(written("trunk/clone", "trunk/vol@b"), pool->GetDataset("trunk/clone")->written);
  EXPECT_GT(written("trunk/clone", "trunk/vol@a"), written("trunk/clone", "trunk/vol@b"));
  // Not earlier, not of the lineage, not there.
  EXPECT_EQ(pool->WrittenSince("trunk/vol@a", "b").status().code(), EINVAL);
  EXPECT_EQ(pool->WrittenSince("trunk/vol@a", "a").status().code(), EINVAL);
  ASSERT_TRUE(pool->Snapshot({"trunk/clone@x"}).ok());
  EXPECT_EQ(pool->WrittenSince("trunk/vol", "trunk/clone@x").status().code(), EINVAL);
  EXPECT_EQ(pool->WrittenSince("trunk/vol", "nope").status().code(), ENOENT);
  EXPECT_EQ(pool->WrittenSince("trunk/nope", "a").status().code(), ENOENT);
}

}  // namespace
}  // namespace volstack::pool

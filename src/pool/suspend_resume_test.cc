// A pool whose commit failed suspends; `zpool clear` (Pool::Clear) refuses while the device
// still fails and resumes once it answers, committing the same dirty data again
// (commit_undo.cc). Checked for a commit failing at each step (data writes, the flush
// before the uberblocks, the uberblock writes), and for a device that also lost its
// unflushed writes: everything acknowledged before the failure and written after the
// resume reads back after a power cut and a re-import, and the pool checks clean.
#include <gtest/gtest.h>

#include "bdev/fault_device.h"
#include "pool/checker.h"
#include "pool/pool_impl.h"
#include "pool/test_util.h"

namespace volstack::pool {
namespace {

using namespace testing;  // NOLINT

enum class FailAt { kDataWrite, kFlush, kUberblock, kFlushAndLoseCache };

class SuspendResumeTest : public ::testing::TestWithParam<FailAt> {};

std::vector<uint8_t> ReadBack(bdev::BlockDevice& dev, uint64_t offset, size_t n) {
  std::vector<uint8_t> out(n);
  EXPECT_TRUE(dev.Read(offset, out).ok());
  return out;
}

TEST_P(SuspendResumeTest, ClearRefusesWhileFailingThenResumesWithNothingLost) {
  auto fault = bdev::FaultDevice::CreateInMemory(128 * kMiB);
  PoolCreateOptions o;
  o.tuning = TestTuning();
  auto created = Pool::Create("p", {fault}, o);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::shared_ptr<Pool> pool = *created;
  VolumeOptions vo;
  vo.volsize = 32 * kMiB;
  vo.sparse = true;
  vo.props["logbias"] = "throughput";  // Flush() commits a txg
  ASSERT_TRUE(pool->CreateVolume("p/v", vo).ok());
  auto dev = pool->OpenVolume("p/v");
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  bdev::BlockDevice& v = **dev;

  // Acknowledged before the failure: A, then part of it overwritten (the failed commit
  // frees old blocks too).
  const auto a = Pattern(4 * kMiB, 1), a2 = Pattern(256 << 10, 2), b = Pattern(2 * kMiB, 3);
  ASSERT_TRUE(v.Write(0, a).ok());
  ASSERT_TRUE(v.Flush().ok());
  ASSERT_TRUE(v.Write(kMiB, a2).ok());
  ASSERT_TRUE(v.Write(8 * kMiB, b).ok());

  switch (GetParam()) {
    case FailAt::kDataWrite:
      fault->FailOps(bdev::OpBit(bdev::OpType::kWrite));
      break;
    case FailAt::kFlush:
    case FailAt::kFlushAndLoseCache:
      fault->FailOps(bdev::OpBit(bdev::OpType::kFlush));
      break;
    case FailAt::kUberblock: {
      bdev::FaultRule r;  // the first two labels, where the uberblock ring is written first
      r.ops = bdev::OpBit(bdev::OpType::kWrite);
      r.offset = 0;
      r.length = 2 * kLabelSize;
      fault->AddFailRule(r);
      break;
    }
  }
  Status st = v.Flush();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), EIO);
  std::vector<uint8_t> block(4096);
  EXPECT_FALSE(v.Read(0, block).ok()) << "a suspended pool serves no reads";
  if (GetParam() == FailAt::kFlushAndLoseCache) {
    // The device loses what it had not made durable, and is off for a while.
    ASSERT_TRUE(fault->CutPower(bdev::CrashMode::kDropAll).ok());
    fault->ClearFailRules();
  }
  EXPECT_EQ(pool->Info().health, "SUSPENDED");

  // Still failing: one error, and the pool stays suspended.
  Status refused = pool->Clear();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("still suspended"), std::string::npos) << refused.ToString();
  EXPECT_EQ(pool->Info().health, "SUSPENDED");
  EXPECT_FALSE(v.Write(16 * kMiB, b).ok());

  // Healed: clear resumes, the dirty data is committed, I/O goes on.
  if (GetParam() == FailAt::kFlushAndLoseCache) {
    ASSERT_TRUE(fault->Recover().ok());
  }
  fault->ClearFailRules();
  Status resumed = pool->Clear();
  ASSERT_TRUE(resumed.ok()) << resumed.ToString();
  EXPECT_EQ(pool->Info().health, "ONLINE");
  auto expect_a = a;
  std::copy(a2.begin(), a2.end(), expect_a.begin() + kMiB);
  EXPECT_EQ(ReadBack(v, 0, a.size()), expect_a);
  EXPECT_EQ(ReadBack(v, 8 * kMiB, b.size()), b);
  const auto c = Pattern(kMiB, 4);
  ASSERT_TRUE(v.Write(16 * kMiB, c).ok());
  ASSERT_TRUE(v.Flush().ok());
  if (GetParam() != FailAt::kUberblock) {
    // Everything the failed commit took was given back (after the uberblock writes began,
    // its blocks stay out of use until the next import instead).
    ExpectConsistent(*pool);
  }

  // A power cut now keeps only what was flushed: all of it is there after an import.
  ASSERT_TRUE(fault->CutPower(bdev::CrashMode::kDropAll).ok());
  dev->reset();
  pool.reset();
  auto again = fault->Reopen();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  PoolImportOptions io;
  io.tuning = TestTuning();
  auto imported = Pool::Import({*again}, io);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  auto dev2 = (*imported)->OpenVolume("p/v");
  ASSERT_TRUE(dev2.ok()) << dev2.status().ToString();
  EXPECT_EQ(ReadBack(**dev2, 0, a.size()), expect_a);
  EXPECT_EQ(ReadBack(**dev2, 8 * kMiB, b.size()), b);
  EXPECT_EQ(ReadBack(**dev2, 16 * kMiB, c.size()), c);
  ExpectConsistent(**imported);
}

INSTANTIATE_TEST_SUITE_P(Steps, SuspendResumeTest,
                         ::testing::Values(FailAt::kDataWrite, FailAt::kFlush, FailAt::kUberblock,
                                           FailAt::kFlushAndLoseCache),
                         [](const auto& info) {
                           switch (info.param) {
                             case FailAt::kDataWrite:
                               return "DataWrite";
                             case FailAt::kFlush:
                               return "Flush";
                             case FailAt::kUberblock:
                               return "Uberblock";
                             case FailAt::kFlushAndLoseCache:
                               return "FlushAndLoseCache";
                           }
                           return "";
                         });

// A commit that also carried a snapshot cannot be undone: clear says so and the pool stays
// suspended (an import finds the previous txg).
TEST(SuspendResumeTest2, AFailedCommitWithASnapshotIsNotResumed) {
  auto fault = bdev::FaultDevice::CreateInMemory(64 * kMiB);
  PoolCreateOptions o;
  o.tuning = TestTuning();
  auto pool = Pool::Create("p", {fault}, o);
  ASSERT_TRUE(pool.ok());
  VolumeOptions vo;
  vo.volsize = 8 * kMiB;
  vo.sparse = true;
  ASSERT_TRUE((*pool)->CreateVolume("p/v", vo).ok());
  fault->FailOps(bdev::OpBit(bdev::OpType::kWrite));
  EXPECT_FALSE((*pool)->Snapshot({"p/v@s"}).ok());
  fault->ClearFailRules();
  Status st = (*pool)->Clear();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot resume"), std::string::npos) << st.ToString();
  EXPECT_EQ((*pool)->Info().health, "SUSPENDED");
}

}  // namespace
}  // namespace volstack::pool

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

}  // namespace
}  // namespace volstack::pool

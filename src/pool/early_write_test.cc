// Early writes (early_write.cc): a run of whole blocks goes out before its commit, which
// adopts it instead of writing it again; a block changed or dropped after its early copy
// is committed from its latest bytes, and the early copy's space comes back; a buffer an
// early write is reading is never changed under it; short runs wait for the commit.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "bdev/forwarding_device.h"
#include "bdev/memory_device.h"
#include "pool/gated_pool.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"
#include "pool/test_util.h"

namespace volstack::pool {
namespace {

using testing::ExpectConsistent;
using testing::GateDevice;
using testing::GatedPool;
using testing::kMiB;
using testing::MakeGatedPool;
using testing::Pattern;
using testing::TestTuning;

struct Fixture : GatedPool {
  uint64_t EarlyBytes() {
    std::lock_guard l(impl().sync_mu);
    uint64_t n = 0;
    for (const auto& e : impl().early) n += e.total();
    return n;
  }
};

// Runs of 256 KiB go early when WriteEarlyNow asks.
Fixture MakeFixture() {
  PoolTuning t = TestTuning();
  t.early_write_run_bytes = 256 * 1024;
  Fixture f{MakeGatedPool(t)};
  EXPECT_TRUE(f.pool->Sync().ok());
  return f;
}

std::vector<uint8_t> ReadBack(Fixture& f, uint64_t offset, size_t n) {
  std::vector<uint8_t> got(n);
  EXPECT_TRUE(f.vol->Read(offset, got).ok());
  return got;
}

// What the vdev holds, verified: the block cache (filled from the buffers at commit) is
// emptied first.
std::vector<uint8_t> ReadFromDisk(Fixture& f, uint64_t offset, size_t n) {
  f.impl().FinishCacheFills();
  if (f.impl().block_cache) f.impl().block_cache->Clear();
  return ReadBack(f, offset, n);
}

// Writes `data` at 0, then starts an early write of it on a thread and returns once that
// write is held inside the vdev (GateDevice::Hold), its buffers in flight.
std::thread StartHeldEarlyWrite(Fixture& f, const std::vector<uint8_t>& data) {
  EXPECT_TRUE(f.vol->Write(0, data).ok());
  f.gate->Hold(true);
  std::thread early([&f] { f.impl().WriteEarlyNow(); });
  while (!f.gate->waiting) std::this_thread::yield();
  return early;
}

TEST(EarlyWriteTest, AStreamGoesOutEarlyAndItsCommitAdoptsIt) {
  auto f = MakeFixture();
  const auto data = Pattern(kMiB, 1);
  ASSERT_TRUE(f.vol->Write(0, data).ok());
  const uint64_t before = f.gate->written.load();
  f.impl().WriteEarlyNow();
  EXPECT_EQ(f.gate->written.load() - before, kMiB);
  EXPECT_EQ(f.EarlyBytes(), kMiB);
  const uint64_t early_done = f.gate->written.load();
  ASSERT_TRUE(f.vol->Flush().ok());
  EXPECT_EQ(f.EarlyBytes(), 0u);
  // The commit wrote indirect blocks, the space map, the MOS and uberblocks, not the data.
  EXPECT_LT(f.gate->written.load() - early_done, kMiB / 4);
  EXPECT_EQ(ReadFromDisk(f, 0, kMiB), data);
  ExpectConsistent(*f.pool);
}

TEST(EarlyWriteTest, ChangedAndDroppedBlocksCommitTheirLatestBytes) {
  auto f = MakeFixture();
  auto want = Pattern(2 * kMiB, 2);
  ASSERT_TRUE(f.vol->Write(0, want).ok());
  f.impl().WriteEarlyNow();
  ASSERT_EQ(f.EarlyBytes(), 2 * kMiB);
  // A whole block rewritten, a partial write, a block discarded, a partial zero.
  const auto whole = Pattern(16384, 3), part = Pattern(1000, 4);
  ASSERT_TRUE(f.vol->Write(16384, whole).ok());
  ASSERT_TRUE(f.vol->Write(5 * 16384 + 512, std::span(part.data(), 512)).ok());
  ASSERT_TRUE(f.vol->Discard(9 * 16384, 16384).ok());
  ASSERT_TRUE(f.vol->WriteZeroes(20 * 16384 + 4096, 4096).ok());
  std::memcpy(&want[16384], whole.data(), 16384);
  std::memcpy(&want[5 * 16384 + 512], part.data(), 512);
  std::memset(&want[9 * 16384], 0, 16384);
  std::memset(&want[20 * 16384 + 4096], 0, 4096);
  EXPECT_EQ(ReadBack(f, 0, 2 * kMiB), want);
  // The commit writes the three changed blocks (the discarded one is a hole) and adopts
  // the rest; the four void copies' space is free again (the checker finds no leak).
  const uint64_t before = f.gate->written.load();
  ASSERT_TRUE(f.vol->Flush().ok());
  EXPECT_GE(f.gate->written.load() - before, 3 * 16384u);
  EXPECT_LT(f.gate->written.load() - before, kMiB / 4);
  EXPECT_EQ(f.EarlyBytes(), 0u);
  EXPECT_EQ(ReadFromDisk(f, 0, 2 * kMiB), want);
  ExpectConsistent(*f.pool);
  // And after an import, from the disk.
  f.vol.reset();
  ASSERT_TRUE(f.pool->Export().ok());
  f.pool.reset();
  PoolImportOptions io;
  io.tuning = TestTuning();
  auto p = Pool::Import({f.gate}, io);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  f.pool = *p;
  f.vol = *f.pool->OpenVolume("trunk/v");
  EXPECT_EQ(ReadBack(f, 0, 2 * kMiB), want);
  ExpectConsistent(*f.pool);
}

TEST(EarlyWriteTest, ShortRunsWaitForTheCommit) {
  auto f = MakeFixture();
  const auto block = Pattern(16384, 5);
  // Every other block: runs of one. Then 240 KiB of adjacent blocks: one block short.
  for (uint64_t b = 0; b < 64; b += 2) ASSERT_TRUE(f.vol->Write(b * 16384, block).ok());
  ASSERT_TRUE(f.vol->Write(4 * kMiB, Pattern(15 * 16384, 6)).ok());
  const uint64_t before = f.gate->written.load();
  f.impl().WriteEarlyNow();
  EXPECT_EQ(f.gate->written.load(), before);
  EXPECT_EQ(f.EarlyBytes(), 0u);
  ASSERT_TRUE(f.vol->Flush().ok());
  ExpectConsistent(*f.pool);
}

TEST(EarlyWriteTest, ABufferInFlightIsNeverChangedUnderItsWrite) {
  auto f = MakeFixture();
  const auto first = Pattern(kMiB, 7);
  std::thread early = StartHeldEarlyWrite(f, first);
  // The early write now holds the buffers of blocks 0-63 (mid-write): these writes must
  // go to copies, neither waiting for it nor changing what it writes.
  auto want = first;
  const auto whole = Pattern(16384, 8), part = Pattern(700, 9);
  ASSERT_TRUE(f.vol->Write(0, whole).ok());
  ASSERT_TRUE(f.vol->Write(3 * 16384 + 100 * 512, std::span(part.data(), 512)).ok());
  ASSERT_TRUE(f.vol->Discard(7 * 16384, 16384).ok());
  std::memcpy(&want[0], whole.data(), 16384);
  std::memcpy(&want[3 * 16384 + 100 * 512], part.data(), 512);
  std::memset(&want[7 * 16384], 0, 16384);
  EXPECT_EQ(ReadBack(f, 0, kMiB), want);
  f.gate->Hold(false);
  early.join();
  // Its copies of the three changed blocks are void: the commit writes two (the third is
  // a hole now) and adopts the rest.
  const uint64_t before = f.gate->written.load();
  ASSERT_TRUE(f.vol->Flush().ok());
  EXPECT_GE(f.gate->written.load() - before, 2 * 16384u);
  EXPECT_LT(f.gate->written.load() - before, kMiB / 4);
  EXPECT_EQ(f.EarlyBytes(), 0u);
  EXPECT_EQ(ReadFromDisk(f, 0, kMiB), want);
  ExpectConsistent(*f.pool);
}

TEST(EarlyWriteTest, AWriteInFlightAcrossTheQuiesceIsAdopted) {
  auto f = MakeFixture();
  const auto data = Pattern(kMiB, 10);
  std::thread early = StartHeldEarlyWrite(f, data);
  // The commit quiesces (the open txg moves on), then waits for the write in flight
  // before it adopts it.
  auto open_txg = [&] {
    std::lock_guard l(f.impl().mu);
    return f.impl().open_txg;
  };
  const uint64_t txg = open_txg();
  std::thread commit([&] { EXPECT_TRUE(f.pool->Sync().ok()); });
  while (open_txg() == txg) std::this_thread::yield();
  const uint64_t before = f.gate->written.load();
  f.gate->Hold(false);
  early.join();
  commit.join();
  EXPECT_EQ(f.EarlyBytes(), 0u);
  EXPECT_LT(f.gate->written.load() - before, kMiB / 4);  // adopted, not written again
  EXPECT_EQ(ReadFromDisk(f, 0, kMiB), data);
  ExpectConsistent(*f.pool);
}

TEST(EarlyWriteTest, ADestroyedVolumeGivesItsEarlySpaceBack) {
  auto f = MakeFixture();
  ASSERT_TRUE(f.vol->Write(0, Pattern(kMiB, 11)).ok());
  f.impl().WriteEarlyNow();
  ASSERT_EQ(f.EarlyBytes(), kMiB);
  f.vol.reset();
  ASSERT_TRUE(f.pool->DestroyVolume("trunk/v").ok());
  ASSERT_TRUE(f.pool->Sync().ok());
  EXPECT_EQ(f.EarlyBytes(), 0u);
  ExpectConsistent(*f.pool);
}

// With the sync thread and its early writer running: writers streaming into one volume,
// rewriting what the early writer may be reading, reading back and flushing, end with
// exactly their bytes on disk.
TEST(EarlyWriteTest, StreamingWritersBesideTheEarlyWriterKeepEveryByte) {
  auto gate = std::make_shared<GateDevice>(bdev::MemoryDevice::Create(256 * kMiB));
  PoolCreateOptions o;
  o.tuning.dirty_max_bytes = 8 * kMiB;
  o.tuning.early_write_run_bytes = 128 * 1024;
  auto p = Pool::Create("trunk", {gate}, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  VolumeOptions vo;
  vo.volsize = 32 * kMiB;
  vo.sparse = true;
  ASSERT_TRUE((*p)->CreateVolume("trunk/v", vo).ok());
  auto vol = *(*p)->OpenVolume("trunk/v");
  // Two writers, each on its half, each pass writing its half in 64 KiB pieces with a
  // pattern of the pass, some pieces rewritten at once in part (a buffer in flight).
  std::vector<uint8_t> want(32 * kMiB);
  auto writer = [&](int id) {
    const uint64_t base = id * 16 * kMiB;
    for (int pass = 0; pass < 3; pass++) {
      for (uint64_t off = 0; off < 16 * kMiB; off += 65536) {
        auto d = Pattern(65536, 1000 * id + 10 * pass + off / 65536);
        ASSERT_TRUE(vol->Write(base + off, d).ok());
        if ((off / 65536) % 7 == 3) {
          auto part = Pattern(4096, 7 + off);
          ASSERT_TRUE(vol->Write(base + off + 8192, part).ok());
          std::memcpy(d.data() + 8192, part.data(), 4096);
        }
        std::vector<uint8_t> back(65536);
        ASSERT_TRUE(vol->Read(base + off, back).ok());
        ASSERT_EQ(back, d);
        if (pass == 2) std::memcpy(&want[base + off], d.data(), 65536);
        if ((off / 65536) % 64 == 63) {
          ASSERT_TRUE(vol->Flush().ok());
        }
      }
    }
  };
  std::thread a(writer, 0), b(writer, 1);
  a.join();
  b.join();
  ASSERT_TRUE(vol->Flush().ok());
  EXPECT_GT((*p)->impl()->TxgStatsSnapshot().early_bytes, 0u);
  vol.reset();
  ASSERT_TRUE((*p)->Export().ok());
  PoolImportOptions io;
  io.tuning = TestTuning();
  auto q = Pool::Import({gate}, io);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto back_vol = *(*q)->OpenVolume("trunk/v");
  std::vector<uint8_t> got(32 * kMiB);
  ASSERT_TRUE(back_vol->Read(0, got).ok());
  EXPECT_TRUE(got == want);
  ExpectConsistent(**q);
}

}  // namespace
}  // namespace volstack::pool

// The intent log: block format, that flushes go to the log and not to a txg, replay at
// import (also across several txgs, large commits split over blocks, and a replay that
// commits in steps), that Close leaves no log behind, logbias=throughput, and the old
// format's error.
#include "pool/zil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "bdev/fault_device.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"
#include "pool/test_util.h"
#include "pool/zil_format.h"
#include "util/coding.h"

namespace volstack::pool {
namespace {

using testing::ExpectConsistent;
using testing::kMiB;
using testing::Pattern;

// The plain format (1); the stamped one is zil_stamp_test.cc's.
TEST(ZilFormatTest, BlockRoundTripAndRejects) {
  auto data = Pattern(3000, 1);
  ZilRecordRef recs[2];
  recs[0] = {ZilRecordType::kWrite, kZilRecordContinued, 7, 4096, data.size(), data.data()};
  recs[1] = {ZilRecordType::kZero, 0, 8, 1 << 20, 65536, nullptr};
  ZilBlockInfo info{0x1234, 5, 99, Dva{0, 256, 2 << 20}};
  std::vector<uint8_t> buf(8192);
  const uint32_t used = EncodeZilBlock(info, recs, buf, kZilFormatPlain);
  EXPECT_EQ(used, kZilBlockHeaderSize + ZilRecordSize(ZilRecordType::kWrite, 3000) + 32);
  auto b = DecodeZilBlock(buf, 0x1234, 5, kZilFormatPlain);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->used, used);
  EXPECT_EQ(b->info.next, info.next);
  EXPECT_EQ(b->info.dataset_guid, 99u);
  ASSERT_EQ(b->records.size(), 2u);
  EXPECT_EQ(b->records[0].data, data);
  EXPECT_EQ(b->records[0].txg, 7u);
  EXPECT_EQ(b->records[0].flags, kZilRecordContinued);
  EXPECT_EQ(b->records[1].type, ZilRecordType::kZero);
  EXPECT_EQ(b->records[1].length, 65536u);
  // Another chain, the wrong sequence number, truncation, any flipped byte: rejected.
  EXPECT_TRUE(DecodeZilBlock(buf, 0x1235, 5, kZilFormatPlain).status().IsCorruption());
  EXPECT_TRUE(DecodeZilBlock(buf, 0x1234, 6, kZilFormatPlain).status().IsCorruption());
  EXPECT_FALSE(
      DecodeZilBlock(std::span<const uint8_t>(buf.data(), used - 1), 0x1234, 5, kZilFormatPlain)
          .ok());
  for (uint32_t i = 0; i < used; i += 7) {
    auto bad = buf;
    bad[i] ^= 0x10;
    EXPECT_FALSE(DecodeZilBlock(bad, 0x1234, 5, kZilFormatPlain).ok()) << i;
  }
  // Bytes after `used` are not covered: a block may be read with any tail.
  buf[used + 5] ^= 1;
  EXPECT_TRUE(DecodeZilBlock(buf, 0x1234, 5, kZilFormatPlain).ok());
}

TEST(ZilFormatTest, OldMosVersionIsAClearError) {
  auto buf = EncodeMos(MosPhys{});
  EncodeLE64(buf.data(), kMosMagicV1);
  auto m = DecodeMos(buf);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("version 1"), std::string::npos) << m.status().ToString();
}

struct Rig {
  explicit Rig(uint64_t seed = 1, uint32_t vbs = 4096, std::string logbias = "latency") {
    fault = bdev::FaultDevice::CreateInMemory(128 * kMiB, 512, seed);
    PoolCreateOptions co;
    co.tuning.sync_thread = false;
    pool = *Pool::Create("tank", {fault}, co);
    VolumeOptions vo;
    vo.volsize = 8 * kMiB;
    vo.volblocksize = vbs;
    vo.props["logbias"] = logbias;
    auto created = pool->CreateVolume("tank/v", vo);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    vol = *pool->OpenVolume("tank/v");
  }
  // Starts the volume's log: the first flush of a change commits a txg that creates it.
  void StartLog() {
    ASSERT_TRUE(vol->Write(vol->size() - 4096, std::vector<uint8_t>(4096, 1)).ok());
    ASSERT_TRUE(vol->Flush().ok());
  }
  // Cuts power (dropping everything unflushed), reopens and imports.
  std::shared_ptr<Pool> CrashAndImport(bdev::CrashMode mode = bdev::CrashMode::kDropAll) {
    EXPECT_TRUE(fault->CutPower(mode).ok());
    vol.reset();
    pool.reset();
    fault = *fault->Reopen();
    PoolImportOptions io;
    io.tuning.sync_thread = false;
    auto p = Pool::Import({fault}, io);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? *p : nullptr;
  }
  std::shared_ptr<bdev::FaultDevice> fault;
  std::shared_ptr<Pool> pool;
  bdev::BlockDevicePtr vol;
};

std::shared_ptr<Zil> ZilOf(Pool& pool) {
  PoolImpl& p = *pool.impl();
  std::lock_guard l(p.mu);
  return p.zil->Get(p.volumes.at("tank/v"));
}

TEST(ZilTest, FlushWritesTheLogNotATxg) {
  Rig rig;
  auto zil = ZilOf(*rig.pool);
  auto d = Pattern(4096, 2);
  ASSERT_TRUE(rig.vol->Write(0, d).ok());
  ASSERT_TRUE(rig.vol->Flush().ok());  // no chain yet: this one commits a txg
  const uint64_t txg = rig.pool->Info().txg;
  const auto before = rig.fault->counters();
  for (int i = 1; i <= 20; i++) {
    ASSERT_TRUE(rig.vol->Write(i * 8192, Pattern(4096, 2 + i)).ok());
    ASSERT_TRUE(rig.vol->Flush().ok());
  }
  EXPECT_EQ(rig.pool->Info().txg, txg) << "a flush committed a txg";
  EXPECT_EQ(zil->log_commits(), 20u);
  const auto after = rig.fault->counters();
  // One log write and one vdev flush per volume flush.
  EXPECT_EQ(after[bdev::OpType::kWrite] - before[bdev::OpType::kWrite], 20u);
  EXPECT_EQ(after[bdev::OpType::kFlush] - before[bdev::OpType::kFlush], 20u);
  ExpectConsistent(*rig.pool);
}

TEST(ZilTest, AFlushCoveredByARunningCommitCommitsNoTxgOfItsOwn) {
  // A streaming writer: more than the log takes (4 MiB pending), so the flush must see a
  // txg hold the data. When a commit is already running (the sync thread's, kicked by the
  // same writes), the flush waits for it and finds nothing left to do: no second txg.
  Rig rig;
  rig.StartLog();
  auto zil = ZilOf(*rig.pool);
  PoolImpl& impl = *rig.pool->impl();
  ASSERT_TRUE(rig.vol->Write(0, Pattern(5 * kMiB, 3)).ok());
  const uint64_t txg = rig.pool->Info().txg;
  const uint64_t fallbacks = zil->txg_fallbacks();
  Status flushed;
  {
    std::unique_lock running(impl.sync_mu);  // a commit in flight
    std::thread flusher([&] { flushed = rig.vol->Flush(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // let it wait for us
    ASSERT_TRUE(impl.SyncLocked().ok());
    running.unlock();
    flusher.join();
  }
  ASSERT_TRUE(flushed.ok()) << flushed.ToString();
  EXPECT_EQ(rig.pool->Info().txg, txg + 1) << "the flush committed a txg of its own";
  EXPECT_EQ(zil->txg_fallbacks(), fallbacks);
  // And the data is durable: a power cut now keeps it.
  auto pool = rig.CrashAndImport();
  ASSERT_NE(pool, nullptr);
  auto vol = *pool->OpenVolume("tank/v");
  std::vector<uint8_t> back(5 * kMiB);
  ASSERT_TRUE(vol->Read(0, back).ok());
  EXPECT_EQ(back, Pattern(5 * kMiB, 3));
  ExpectConsistent(*pool);
}

TEST(ZilTest, ReplayRestoresFlushedWritesAfterPowerCut) {
  Rig rig;
  std::vector<uint8_t> model(8 * kMiB, 0);
  std::mt19937_64 rng(3);
  ASSERT_TRUE(rig.vol->Flush().ok());
  for (int i = 0; i < 200; i++) {
    const uint64_t off = (rng() % (8 * kMiB / 512 - 64)) * 512;
    const uint64_t len = 512 * (1 + rng() % 64);
    if (rng() % 5 == 0) {
      ASSERT_TRUE(rig.vol->Discard(off, len).ok());
      std::fill(model.begin() + off, model.begin() + off + len, 0);
    } else {
      auto d = Pattern(len, i);
      ASSERT_TRUE(rig.vol->Write(off, d).ok());
      std::copy(d.begin(), d.end(), model.begin() + off);
    }
    if (i % 10 == 9) {
      ASSERT_TRUE(rig.vol->Flush().ok());
    }
    if (i % 70 == 69) {
      ASSERT_TRUE(rig.pool->Sync().ok());  // txgs between log commits
    }
  }
  ASSERT_TRUE(rig.vol->Flush().ok());
  auto zil = ZilOf(*rig.pool);
  EXPECT_GT(zil->log_commits(), 10u);
  // Unflushed writes after the last flush may be lost; the cut drops them.
  ASSERT_TRUE(rig.vol->Write(0, Pattern(4096, 999)).ok());
  auto pool = rig.CrashAndImport();
  ASSERT_TRUE(pool);
  EXPECT_GT(pool->impl()->zil->replayed_records(), 0u);
  auto vol = *pool->OpenVolume("tank/v");
  std::vector<uint8_t> got(model.size());
  ASSERT_TRUE(vol->Read(0, got).ok());
  EXPECT_TRUE(got == model);
  ExpectConsistent(*pool);
  // The replay committed: a second crash right away loses nothing and replays nothing.
  rig.pool = pool;
  rig.vol = vol;
  auto again = rig.CrashAndImport();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->impl()->zil->replayed_records(), 0u);
  std::vector<uint8_t> got2(model.size());
  ASSERT_TRUE((*again->OpenVolume("tank/v"))->Read(0, got2).ok());
  EXPECT_TRUE(got2 == model);
}

TEST(ZilTest, LargeCommitsSplitOverBlocksAndReplayInSteps) {
  Rig rig(4, 16384);
  rig.StartLog();
  std::vector<uint8_t> model(8 * kMiB, 0);
  std::fill(model.end() - 4096, model.end(), 1);
  // 3 MiB in one commit: records split over ~25 blocks of 128 KiB, one big replay.
  for (uint64_t off = 0; off < 3 * kMiB; off += 300 * 1024) {
    auto d = Pattern(300 * 1024, off);
    const uint64_t len = std::min<uint64_t>(d.size(), 3 * kMiB - off);
    ASSERT_TRUE(rig.vol->Write(off, std::span<const uint8_t>(d.data(), len)).ok());
    std::copy(d.begin(), d.begin() + len, model.begin() + off);
  }
  ASSERT_TRUE(rig.vol->Flush().ok());
  EXPECT_EQ(ZilOf(*rig.pool)->log_commits(), 1u);
  EXPECT_GT(rig.pool->impl()->zil->Account().log_blocks, 20u);
  ASSERT_TRUE(rig.fault->CutPower(bdev::CrashMode::kDropAll).ok());
  rig.vol.reset();
  rig.pool.reset();
  auto dev = *rig.fault->Reopen();
  PoolImportOptions io;
  io.tuning.sync_thread = false;
  io.tuning.dirty_max_bytes = 4 * kMiB;  // replay commits in steps of dirty_max / 8
  auto pool = Pool::Import({dev}, io);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_GT((*pool)->Info().txg, 3u);
  std::vector<uint8_t> got(model.size());
  ASSERT_TRUE((*(*pool)->OpenVolume("tank/v"))->Read(0, got).ok());
  EXPECT_TRUE(got == model);
  ExpectConsistent(**pool);
}

TEST(ZilTest, CloseLeavesNoLogAndTheReserveReturns) {
  Rig rig;
  const uint64_t free0 = rig.pool->Info().free;
  ASSERT_TRUE(rig.vol->Write(0, Pattern(4096, 1)).ok());
  ASSERT_TRUE(rig.vol->Flush().ok());
  ASSERT_TRUE(rig.vol->Write(4096, Pattern(4096, 2)).ok());
  ASSERT_TRUE(rig.vol->Flush().ok());
  EXPECT_LT(rig.pool->Info().free, free0 - (1 << 20)) << "no log reserve was carved";
  rig.vol.reset();
  ASSERT_TRUE(rig.pool->Export().ok());
  rig.pool.reset();
  auto pool = Pool::Import({rig.fault});
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_EQ((*pool)->impl()->zil->replayed_records(), 0u);
  for (const auto& d : (*pool)->impl()->volumes) EXPECT_TRUE(d.second->phys().zil.empty());
  std::vector<uint8_t> got(8192);
  ASSERT_TRUE((*(*pool)->OpenVolume("tank/v"))->Read(0, got).ok());
  auto a = Pattern(4096, 1), b = Pattern(4096, 2);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), got.begin()));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), got.begin() + 4096));
  ExpectConsistent(**pool);
}

TEST(ZilTest, LogbiasThroughputCommitsATxgPerFlush) {
  Rig rig(5, 4096, "throughput");
  const uint64_t txg = rig.pool->Info().txg;
  for (int i = 0; i < 5; i++) {
    ASSERT_TRUE(rig.vol->Write(i * 4096, Pattern(4096, i)).ok());
    ASSERT_TRUE(rig.vol->Flush().ok());
  }
  EXPECT_EQ(rig.pool->Info().txg, txg + 5);
  EXPECT_EQ(ZilOf(*rig.pool)->log_commits(), 0u);
  // Switching to the log later: the unlogged writes are covered by a txg first.
  ASSERT_TRUE(rig.pool->SetProperty("tank/v", "logbias", "latency").ok());
  EXPECT_FALSE(rig.pool->SetProperty("tank/v", "logbias", "fast").ok());
  ASSERT_TRUE(rig.vol->Write(0, Pattern(4096, 77)).ok());
  ASSERT_TRUE(rig.vol->Flush().ok());
  ASSERT_TRUE(rig.vol->Write(4096, Pattern(4096, 78)).ok());
  ASSERT_TRUE(rig.vol->Flush().ok());
  EXPECT_EQ(ZilOf(*rig.pool)->log_commits(), 1u);
  auto pool = rig.CrashAndImport();
  ASSERT_TRUE(pool);
  std::vector<uint8_t> got(5 * 4096);
  ASSERT_TRUE((*pool->OpenVolume("tank/v"))->Read(0, got).ok());
  auto want = Pattern(4096, 77);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin()));
  want = Pattern(4096, 78);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + 4096));
  want = Pattern(4096, 4);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + 4 * 4096));
}

TEST(ZilTest, FuaAndSyncAlwaysAreDurableThroughTheLog) {
  Rig rig(6);
  rig.StartLog();
  const uint64_t txg = rig.pool->Info().txg;
  ASSERT_TRUE(rig.vol->Write(0, Pattern(4096, 1), bdev::WriteOptions{true}).ok());
  ASSERT_TRUE(rig.pool->SetProperty("tank/v", "sync", "always").ok());
  const uint64_t txg2 = rig.pool->Info().txg;
  ASSERT_TRUE(rig.vol->Write(8192, Pattern(4096, 2)).ok());
  ASSERT_TRUE(rig.vol->WriteZeroes(0, 512).ok());
  EXPECT_EQ(txg2, txg + 1);  // the property change itself
  EXPECT_EQ(rig.pool->Info().txg, txg2);
  auto pool = rig.CrashAndImport(bdev::CrashMode::kTear);
  ASSERT_TRUE(pool);
  std::vector<uint8_t> got(3 * 4096);
  ASSERT_TRUE((*pool->OpenVolume("tank/v"))->Read(0, got).ok());
  auto a = Pattern(4096, 1), b = Pattern(4096, 2);
  EXPECT_TRUE(std::all_of(got.begin(), got.begin() + 512, [](uint8_t x) { return x == 0; }));
  EXPECT_TRUE(std::equal(a.begin() + 512, a.end(), got.begin() + 512));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), got.begin() + 8192));
  ExpectConsistent(*pool);
}

TEST(ZilTest, ConcurrentOverlappingWritersReplayInVolumeOrder) {
  Rig rig(7);
  rig.StartLog();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; i++) {
        auto d = Pattern(8192, t * 1000 + i);
        EXPECT_TRUE(rig.vol->Write((i % 16) * 4096, d).ok());
        if (i % 8 == t) {
          EXPECT_TRUE(rig.vol->Flush().ok());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(rig.vol->Flush().ok());
  std::vector<uint8_t> before(17 * 4096);
  ASSERT_TRUE(rig.vol->Read(0, before).ok());
  auto pool = rig.CrashAndImport();
  ASSERT_TRUE(pool);
  std::vector<uint8_t> after(before.size());
  ASSERT_TRUE((*pool->OpenVolume("tank/v"))->Read(0, after).ok());
  EXPECT_TRUE(before == after);
  ExpectConsistent(*pool);
}

}  // namespace
}  // namespace volstack::pool

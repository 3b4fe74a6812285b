// Early writes of a compressing volume (early_write.cc, Volume::WriteEarlyCompressed): a run
// of whole blocks goes out compressed before its commit, each block at its compressed
// size (a block that does not compress whole), the commit adopts them, and every byte reads
// back from disk and after import; with writers streaming beside the early writer and the
// commits, a compressing volume ends with exactly its writers' bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

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
using testing::Random;
using testing::TestTuning;
using testing::Text;

constexpr uint32_t kVbs = 16384;

uint64_t EarlyBytes(GatedPool& f) {
  std::lock_guard l(f.impl().sync_mu);
  uint64_t n = 0;
  for (const auto& e : f.impl().early) n += e.total();
  return n;
}

std::vector<BlockPtr> DataBps(Pool& pool) {
  std::vector<BlockPtr> out;
  EXPECT_TRUE(pool.impl()
                  ->volumes["trunk/v"]
                  ->Walk([&](const BlockPtr& bp) {
                    if (bp.level == 0) out.push_back(bp);
                    return Status::Ok();
                  })
                  .ok());
  return out;
}

// Blocks of text (lz4 stores them in about half) and of random bytes (stored whole),
// alternating in runs of four.
std::vector<uint8_t> HalfText(size_t n, uint64_t seed) {
  std::vector<uint8_t> v;
  for (uint64_t b = 0; v.size() < n; b++) {
    auto piece = (b / 4) % 2 == 0 ? Text(kVbs, seed + b) : Random(kVbs, seed + b);
    v.insert(v.end(), piece.begin(), piece.end());
  }
  v.resize(n);
  return v;
}

class EarlyCompressTest : public ::testing::TestWithParam<const char*> {};

TEST_P(EarlyCompressTest, AStreamGoesOutEarlyCompressedAndItsCommitAdoptsIt) {
  PoolTuning t = TestTuning();
  t.early_write_run_bytes = 256 * 1024;
  GatedPool f = MakeGatedPool(t);
  ASSERT_TRUE(f.pool->SetProperty("trunk/v", "compression", GetParam()).ok());
  ASSERT_TRUE(f.pool->Sync().ok());
  const auto data = HalfText(kMiB, 1);
  ASSERT_TRUE(f.vol->Write(0, data).ok());
  const uint64_t before = f.gate->written.load();
  f.impl().WriteEarlyNow();
  // Half the blocks are text: the early writes store them in at most 7/8, the rest whole.
  const uint64_t early = f.gate->written.load() - before;
  EXPECT_EQ(EarlyBytes(f), early);
  EXPECT_GE(early, kMiB / 2);
  EXPECT_LE(early, kMiB / 2 + kMiB / 2 * 7 / 8);
  ASSERT_TRUE(f.vol->Flush().ok());
  EXPECT_EQ(EarlyBytes(f), 0u);
  // The commit wrote indirect blocks, the space map, the MOS and uberblocks, not the data.
  EXPECT_LT(f.gate->written.load() - before - early, kMiB / 4);
  EXPECT_EQ(f.impl().TxgStatsSnapshot().early_bytes, early);
  const auto bps = DataBps(*f.pool);
  ASSERT_EQ(bps.size(), kMiB / kVbs);
  for (size_t i = 0; i < bps.size(); i++) {
    SCOPED_TRACE(i);
    const bool text = (i / 4) % 2 == 0;
    EXPECT_EQ(bps[i].comp != Compression::kNone, text);
    EXPECT_EQ(bps[i].psize < kVbs, text);
  }
  EXPECT_TRUE(f.impl().compressed_blocks.load());  // the MOS says so from this txg on
  f.impl().FinishCacheFills();
  f.impl().block_cache->Clear();
  std::vector<uint8_t> got(kMiB);
  ASSERT_TRUE(f.vol->Read(0, got).ok());
  EXPECT_TRUE(got == data);
  ExpectConsistent(*f.pool);
}

// Compressed early with the setting of the time: a later `zfs set` does not change blocks
// already on their way out (zfs: the property applies to blocks written afterwards).
TEST_P(EarlyCompressTest, ABlockRewrittenAfterItsEarlyWriteCommitsItsLatestBytes) {
  PoolTuning t = TestTuning();
  t.early_write_run_bytes = 256 * 1024;
  GatedPool f = MakeGatedPool(t);
  ASSERT_TRUE(f.pool->SetProperty("trunk/v", "compression", GetParam()).ok());
  auto data = Text(kMiB, 3);
  ASSERT_TRUE(f.vol->Write(0, data).ok());
  f.impl().WriteEarlyNow();
  ASSERT_GT(EarlyBytes(f), 0u);
  // Block 5 changes after its early copy: the commit stores its new bytes, compressed.
  const auto part = Text(4096, 4);
  ASSERT_TRUE(f.vol->Write(5 * kVbs + 4096, part).ok());
  std::memcpy(&data[5 * kVbs + 4096], part.data(), part.size());
  ASSERT_TRUE(f.vol->Flush().ok());
  EXPECT_EQ(EarlyBytes(f), 0u);
  for (const BlockPtr& bp : DataBps(*f.pool)) EXPECT_NE(bp.comp, Compression::kNone);
  f.impl().FinishCacheFills();
  f.impl().block_cache->Clear();
  std::vector<uint8_t> got(kMiB);
  ASSERT_TRUE(f.vol->Read(0, got).ok());
  EXPECT_TRUE(got == data);
  ExpectConsistent(*f.pool);
}

// With the sync thread and its early writer running: two writers streaming compressible
// and incompressible blocks into a compressing volume, rewriting in part what the early
// writer may be compressing, reading back and flushing, end with exactly their bytes on
// disk, and most blocks stored compressed.
TEST_P(EarlyCompressTest, StreamingWritersBesideTheEarlyWriterKeepEveryByte) {
  auto gate = std::make_shared<GateDevice>(bdev::MemoryDevice::Create(256 * kMiB));
  PoolCreateOptions o;
  o.tuning.dirty_max_bytes = 8 * kMiB;
  o.tuning.early_write_run_bytes = 128 * 1024;
  auto p = Pool::Create("trunk", {gate}, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  VolumeOptions vo;
  vo.volsize = 32 * kMiB;
  vo.sparse = true;
  vo.props["compression"] = GetParam();
  ASSERT_TRUE((*p)->CreateVolume("trunk/v", vo).ok());
  auto vol = *(*p)->OpenVolume("trunk/v");
  std::vector<uint8_t> want(32 * kMiB);
  const auto text = HalfText(16 * kMiB, 50);
  auto writer = [&](int id) {
    const uint64_t base = id * 16 * kMiB;
    for (int pass = 0; pass < 2; pass++) {
      for (uint64_t off = 0; off < 16 * kMiB; off += 65536) {
        std::vector<uint8_t> d(text.begin() + off, text.begin() + off + 65536);
        d[pass * 100 + id] ^= 0x5a;  // each pass's bytes differ
        ASSERT_TRUE(vol->Write(base + off, d).ok());
        if ((off / 65536) % 7 == 3) {
          auto part = Text(4096, 7 + off + pass);
          ASSERT_TRUE(vol->Write(base + off + 8192, part).ok());
          std::memcpy(d.data() + 8192, part.data(), 4096);
        }
        std::vector<uint8_t> back(65536);
        ASSERT_TRUE(vol->Read(base + off, back).ok());
        ASSERT_EQ(back, d);
        if (pass == 1) std::memcpy(&want[base + off], d.data(), 65536);
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
  size_t compressed = 0;
  const auto bps = DataBps(**q);
  for (const BlockPtr& bp : bps) compressed += bp.comp != Compression::kNone;
  EXPECT_GE(compressed, bps.size() * 2 / 5);  // the text half, but for rewritten blocks
  auto back_vol = *(*q)->OpenVolume("trunk/v");
  std::vector<uint8_t> got(32 * kMiB);
  ASSERT_TRUE(back_vol->Read(0, got).ok());
  EXPECT_TRUE(got == want);
  ExpectConsistent(**q);
}

INSTANTIATE_TEST_SUITE_P(Codecs, EarlyCompressTest, ::testing::Values("lz4", "zstd"));

}  // namespace
}  // namespace volstack::pool

// The volume read path (volume_read.cc): requests mixing dirty, syncing, committed and hole
// blocks at unaligned offsets read back the model; adjacent committed blocks are read with
// one vdev read per 128 KiB; a bad block inside a merged run is still EIO; reads keep the indirect
// cache within its bound.
#include <gtest/gtest.h>

#include <random>

#include "bdev/fault_device.h"
#include "bdev/memory_device.h"
#include "bdev/trace_device.h"
#include "pool/checker.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"

namespace volstack::pool {
namespace {

constexpr uint64_t kMiB = 1 << 20;

PoolTuning TestTuning() {
  PoolTuning t;
  t.sync_thread = false;
  t.dirty_max_bytes = 16 * kMiB;
  return t;
}

std::vector<uint8_t> Pattern(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng() | 1);
  return v;
}

struct Setup {
  std::shared_ptr<bdev::TraceDevice> trace;
  std::shared_ptr<Pool> pool;
  bdev::BlockDevicePtr dev;
};

Setup Make(bdev::BlockDevicePtr below, uint32_t vbs, uint64_t volsize, PoolTuning t) {
  Setup s;
  s.trace = bdev::TraceDevice::Create(std::move(below));
  PoolCreateOptions o;
  o.tuning = t;
  auto p = Pool::Create("trunk", {s.trace}, o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  s.pool = *p;
  VolumeOptions vo;
  vo.volsize = volsize;
  vo.volblocksize = vbs;
  vo.sparse = true;
  EXPECT_TRUE(s.pool->CreateVolume("trunk/v", vo).ok());
  s.dev = *s.pool->OpenVolume("trunk/v");
  return s;
}

TEST(VolumeReadTest, MixedDirtyCommittedAndHolesMatchTheModel) {
  constexpr uint32_t kVbs = 4096;
  auto s = Make(bdev::MemoryDevice::Create(64 * kMiB), kVbs, 4 * kMiB, TestTuning());
  std::vector<uint8_t> model(4 * kMiB, 0);
  auto put = [&](uint64_t off, const std::vector<uint8_t>& d) {
    ASSERT_TRUE(s.dev->Write(off, d).ok());
    std::copy(d.begin(), d.end(), model.begin() + static_cast<ptrdiff_t>(off));
  };
  put(0, Pattern(256 * kVbs, 1));  // blocks 0..255 committed below
  ASSERT_TRUE(s.dev->Flush().ok());
  put(5 * kVbs, Pattern(kVbs, 2));                        // dirty whole block
  put(6 * kVbs + 512, Pattern(1024, 3));                  // dirty partial block (read-modify-write)
  ASSERT_TRUE(s.dev->Discard(10 * kVbs, 2 * kVbs).ok());  // dirty holes
  std::fill(model.begin() + 10 * kVbs, model.begin() + 12 * kVbs, 0);
  put(300 * kVbs, Pattern(3 * kVbs, 4));  // dirty blocks after a never-written gap
  std::mt19937_64 rng(7);
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < 200; i++) {
      const uint64_t off = (rng() % (model.size() / 512)) * 512;
      const uint64_t len =
          std::min<uint64_t>(((rng() % (96 * kVbs / 512)) + 1) * 512, model.size() - off);
      std::vector<uint8_t> back(len);
      ASSERT_TRUE(s.dev->Read(off, back).ok()) << off << "+" << len;
      ASSERT_TRUE(std::equal(back.begin(), back.end(), model.begin() + off)) << off << "+" << len;
    }
    ASSERT_TRUE(s.dev->Flush().ok());  // second round: everything committed
  }
  auto r = CheckPool(*s.pool, true);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ok()) << r->Summary();
}

TEST(VolumeReadTest, AdjacentBlocksAreReadWithOneVdevRead) {
  auto s = Make(bdev::MemoryDevice::Create(64 * kMiB), 4096, 4 * kMiB, TestTuning());
  auto d = Pattern(kMiB, 5);
  ASSERT_TRUE(s.dev->Write(0, d).ok());  // one txg: allocated back to back
  ASSERT_TRUE(s.dev->Flush().ok());
  std::vector<uint8_t> back(256 * 1024);
  ASSERT_TRUE(s.dev->Read(0, back).ok());  // warms the indirect cache
  s.trace->StartRecording();
  ASSERT_TRUE(s.dev->Read(64 * 1024, back).ok());
  auto events = s.trace->StopRecording();
  EXPECT_TRUE(std::equal(back.begin(), back.end(), d.begin() + 64 * 1024));
  // 64 adjacent blocks: runs of at most 128 KiB (kMaxRunBytes), so two vdev reads, not 64.
  ASSERT_EQ(events.size(), 2u);
  for (const auto& e : events) {
    EXPECT_EQ(e.op, bdev::OpType::kRead);
    EXPECT_EQ(e.length, back.size() / 2);
  }
}

TEST(VolumeReadTest, BadBlockInsideAMergedRunIsEio) {
  auto fault = bdev::FaultDevice::CreateInMemory(64 * kMiB, 512, 3);
  auto s = Make(fault, 4096, 4 * kMiB, TestTuning());
  auto d = Pattern(64 * 4096, 6);
  ASSERT_TRUE(s.dev->Write(0, d).ok());
  ASSERT_TRUE(s.dev->Flush().ok());
  BlockPtr victim;
  for (auto& [name, v] : s.pool->impl()->volumes) {
    uint64_t n = 0;
    ASSERT_TRUE(v->Walk([&](const BlockPtr& bp) {
                   if (bp.level == 0 && n++ == 20) victim = bp;
                   return Status::Ok();
                 }).ok());
  }
  ASSERT_FALSE(victim.IsHole());
  ASSERT_TRUE(fault->FlipBits(victim.dva[0].offset + 100, 8, 1).ok());
  std::vector<uint8_t> back(d.size());
  EXPECT_EQ(s.dev->Read(0, back).code(), EIO);
  // The blocks around it still read.
  std::vector<uint8_t> head(20 * 4096);
  ASSERT_TRUE(s.dev->Read(0, head).ok());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), d.begin()));
}

TEST(VolumeReadTest, ReadsKeepTheIndirectCacheBounded) {
  PoolTuning t = TestTuning();
  t.cache_max_bytes = 8 * kIndirectBlockSize;
  constexpr uint32_t kVbs = 4096;
  auto s = Make(bdev::MemoryDevice::Create(128 * kMiB), kVbs, 32 * kMiB, t);
  // 32 MiB / 4 KiB = 8192 blocks = 64 L1 indirect blocks.
  auto d = Pattern(kMiB, 8);
  for (uint64_t off = 0; off < 32 * kMiB; off += kMiB) ASSERT_TRUE(s.dev->Write(off, d).ok());
  ASSERT_TRUE(s.dev->Flush().ok());
  std::vector<uint8_t> back(kVbs);
  for (uint64_t off = 0; off < 32 * kMiB; off += 128 * kVbs) {
    ASSERT_TRUE(s.dev->Read(off + kVbs, back).ok());
    EXPECT_TRUE(std::equal(back.begin(), back.end(), d.begin() + off % kMiB + kVbs));
    EXPECT_LE(s.pool->impl()->cache_bytes.load(), t.cache_max_bytes + kIndirectBlockSize);
  }
}

}  // namespace
}  // namespace volstack::pool

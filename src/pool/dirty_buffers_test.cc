// DirtyBuffers (dirty_buffers.h): blocks from many threads never overlap and keep their
// bytes; they live in the arena's chunks, which go back once emptied (all but one spare);
// and a pool's volumes dirty their blocks there, whose memory falls back after a commit
// to the spares the volume keeps.
#include "pool/dirty_buffers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "bdev/memory_device.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"
#include "pool/test_util.h"

namespace volstack::pool {
namespace {

using testing::kMiB;
using testing::Pattern;
using testing::TestTuning;

TEST(DirtyBuffersTest, ThreadsGetDisjointBlocksInChunksThatGoBackWhenEmptied) {
  DirtyBuffers buffers;
  constexpr uint32_t kSize = 16384;
  constexpr int kThreads = 4, kRounds = 200, kHeld = 64;
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<std::pair<DirtyBuffers::Buf, uint8_t>> held;
      for (int r = 0; r < kRounds; r++) {
        while (held.size() < kHeld) {
          const auto fill = static_cast<uint8_t>(rng() | 1);
          DirtyBuffers::Buf b = buffers.Allocate(kSize);
          if (reinterpret_cast<uintptr_t>(b.get()) % kSize != 0) bad++;
          std::memset(b.get(), fill, kSize);
          held.emplace_back(std::move(b), fill);
        }
        std::shuffle(held.begin(), held.end(), rng);
        // Another thread's block laid over one of these would have changed its bytes.
        for (size_t i = 0; i < held.size() / 2; i++) {
          const auto& [b, fill] = held.back();
          if (std::count(b.get(), b.get() + kSize, fill) != kSize) bad++;
          held.pop_back();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  // Every block is back: only the one spare chunk stays mapped.
  EXPECT_EQ(buffers.mapped_bytes(), BlockArena::kHugePage);

  std::vector<DirtyBuffers::Buf> held;
  for (int i = 0; i < 3 * 128; i++) held.push_back(buffers.Allocate(kSize));
  EXPECT_EQ(buffers.mapped_bytes(), 3 * BlockArena::kHugePage);  // 128 blocks a chunk
  held.clear();
  EXPECT_EQ(buffers.mapped_bytes(), BlockArena::kHugePage);
}

TEST(DirtyBuffersTest, AVolumesDirtyBlocksLiveThereAndShrinkToItsSparesAfterACommit) {
  auto dev = bdev::MemoryDevice::Create(256 * kMiB);
  PoolTuning tuning = TestTuning();
  tuning.dirty_max_bytes = 128 * kMiB;  // the whole write stays dirty until the Sync
  PoolCreateOptions o;
  o.tuning = tuning;
  auto pool = Pool::Create("trunk", {dev}, o);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  VolumeOptions vo;
  vo.volsize = 64 * kMiB;
  vo.volblocksize = 16384;
  ASSERT_TRUE((*pool)->CreateVolume("trunk/v", vo).ok());
  auto vol = (*pool)->OpenVolume("trunk/v");
  ASSERT_TRUE(vol.ok());
  const DirtyBuffers& buffers = (*pool)->impl()->dirty_buffers;
  const auto data = Pattern(kMiB, 1);
  for (uint64_t off = 0; off < 48 * kMiB; off += kMiB) ASSERT_TRUE((*vol)->Write(off, data).ok());
  EXPECT_GE(buffers.mapped_bytes(), 48 * kMiB);
  ASSERT_TRUE((*pool)->Sync().ok());
  // The volume keeps kMaxSpareBytes of the txg's buffers for the next one; the rest went
  // back, and only the arena's one spare chunk stays besides.
  EXPECT_LE(buffers.mapped_bytes(), 16 * kMiB + BlockArena::kHugePage);
  // The next txg dirties its first blocks in those spares: nothing new is mapped.
  const uint64_t before = buffers.mapped_bytes();
  for (uint64_t off = 0; off < 8 * kMiB; off += kMiB) ASSERT_TRUE((*vol)->Write(off, data).ok());
  EXPECT_EQ(buffers.mapped_bytes(), before);
  std::vector<uint8_t> back(kMiB);
  ASSERT_TRUE((*vol)->Read(0, back).ok());
  EXPECT_EQ(back, data);
}

}  // namespace
}  // namespace volstack::pool

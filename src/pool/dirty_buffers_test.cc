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

// A pool on memory with one 64 MiB volume, where 128 MiB may stay dirty until a Sync, and
// no block cache: a commit's fill may still hold a buffer (CacheFill::Keep), pinning one
// chunk more until the next commit.
void MakePool(uint32_t volblocksize, std::shared_ptr<Pool>* pool, bdev::BlockDevicePtr* vol) {
  PoolCreateOptions o;
  o.tuning = TestTuning();
  o.tuning.dirty_max_bytes = 128 * kMiB;
  o.tuning.cache_data = false;
  auto p = Pool::Create("trunk", {bdev::MemoryDevice::Create(256 * kMiB)}, o);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  *pool = *p;
  VolumeOptions vo;
  vo.volsize = 64 * kMiB;
  vo.volblocksize = volblocksize;
  ASSERT_TRUE((*pool)->CreateVolume("trunk/v", vo).ok());
  auto v = (*pool)->OpenVolume("trunk/v");
  ASSERT_TRUE(v.ok());
  *vol = *v;
}

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

// Blocks of one size left thinly spread over many chunks: Trim gives the free slots back,
// so another size's chunks come on top of the live blocks only, not of the old peak. A
// trim with little idle memory (a stream, whose chunks empty whole) does nothing.
TEST(DirtyBuffersTest, TrimGivesBackWhatThinlySpreadBlocksLeaveIdle) {
  DirtyBuffers buffers;
  std::vector<DirtyBuffers::Buf> small;
  for (int i = 0; i < 16 * 512; i++) small.push_back(buffers.Allocate(4096));  // 32 MiB
  for (auto& b : small) std::memset(b.get(), 1, 4096);
  std::vector<DirtyBuffers::Buf> kept;
  for (size_t i = 0; i < small.size(); i += 64) kept.push_back(std::move(small[i]));
  small.clear();  // 128 blocks left, 8 in each of the 16 chunks
  EXPECT_EQ(buffers.resident_bytes(), 32 * kMiB);
  EXPECT_EQ(buffers.Trim(), 32 * kMiB - 128 * 4096);
  EXPECT_EQ(buffers.resident_bytes(), 128 * 4096);
  std::vector<DirtyBuffers::Buf> big;
  for (int i = 0; i < 8 * 128; i++) big.push_back(buffers.Allocate(16384));  // 16 MiB
  EXPECT_EQ(buffers.resident_bytes(), 16 * kMiB + 128 * 4096);
  EXPECT_EQ(buffers.mapped_bytes(), 48 * kMiB);
  // Freed whole chunks go (one stays as the spare): nothing left to trim.
  big.clear();
  EXPECT_EQ(buffers.Trim(), 0u);
  EXPECT_EQ(buffers.resident_bytes(), 2 * kMiB + 128 * 4096);
}

// A pool whose 4 KiB volume wrote at random: after the commit its spares are spread over
// every chunk the txg used, and the pool's trim leaves only them (and the slack) resident.
TEST(DirtyBuffersTest, APoolTrimsTheChunksRandomWritesLeaveThinlyUsed) {
  std::shared_ptr<Pool> pool;
  bdev::BlockDevicePtr vol;
  ASSERT_NO_FATAL_FAILURE(MakePool(4096, &pool, &vol));
  std::vector<uint64_t> blocks(16384);
  for (size_t i = 0; i < blocks.size(); i++) blocks[i] = i;
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937_64(7));
  blocks.resize(14336);  // 56 MiB
  const auto data = Pattern(4096, 2);
  for (uint64_t b : blocks) ASSERT_TRUE(vol->Write(b * 4096, data).ok());
  const DirtyBuffers& buffers = pool->impl()->dirty_buffers;
  EXPECT_GE(buffers.resident_bytes(), 56 * kMiB);
  ASSERT_TRUE(pool->Sync().ok());
  // Kept: the volume's 16 MiB of spares, in every one of the 28 chunks.
  EXPECT_EQ(buffers.mapped_bytes(), 56 * kMiB);
  EXPECT_LE(buffers.resident_bytes(), 16 * kMiB + DirtyBuffers::kPurgeSlack);
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE(vol->Read(blocks[0] * 4096, back).ok());
  EXPECT_EQ(back, data);
}

TEST(DirtyBuffersTest, AVolumesDirtyBlocksLiveThereAndShrinkToItsSparesAfterACommit) {
  std::shared_ptr<Pool> pool;
  bdev::BlockDevicePtr vol;
  ASSERT_NO_FATAL_FAILURE(MakePool(16384, &pool, &vol));
  const DirtyBuffers& buffers = pool->impl()->dirty_buffers;
  const auto data = Pattern(kMiB, 1);
  for (uint64_t off = 0; off < 48 * kMiB; off += kMiB) ASSERT_TRUE(vol->Write(off, data).ok());
  EXPECT_GE(buffers.mapped_bytes(), 48 * kMiB);
  ASSERT_TRUE(pool->Sync().ok());
  // The volume keeps kMaxSpareBytes of the txg's buffers for the next one; the rest went
  // back, and only the arena's one spare chunk stays besides.
  EXPECT_LE(buffers.mapped_bytes(), 16 * kMiB + BlockArena::kHugePage);
  // The next txg dirties its first blocks in those spares: nothing new is mapped.
  const uint64_t before = buffers.mapped_bytes();
  for (uint64_t off = 0; off < 8 * kMiB; off += kMiB) ASSERT_TRUE(vol->Write(off, data).ok());
  EXPECT_EQ(buffers.mapped_bytes(), before);
  std::vector<uint8_t> back(kMiB);
  ASSERT_TRUE(vol->Read(0, back).ok());
  EXPECT_EQ(back, data);
}

}  // namespace
}  // namespace volstack::pool

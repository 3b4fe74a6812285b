// CacheRefill (cache_refill.h): only bytes that match their checksum go into the cache; a
// failed read is skipped; forgotten blocks, the freeing commit's fill's included, are not
// read; nothing is read while the pool is busy; the queue is bounded; Clear drops it and
// the read in flight without waiting.
#include "pool/cache_refill.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "pool/cache_fill.h"

namespace volstack::pool {
namespace {

constexpr uint32_t kBlock = 4096;
constexpr ChecksumType kCksum = ChecksumType::kXxh3_128;

BlockKey KeyOf(uint64_t i) { return BlockKey{0, kBlock, (uint64_t{1} << 22) + i * kBlock, 7}; }

std::vector<uint8_t> Bytes(uint64_t i) { return std::vector<uint8_t>(kBlock, uint8_t(i + 1)); }

WrittenBlock Written(uint64_t i) { return {KeyOf(i), kCksum, ComputeChecksum(kCksum, Bytes(i))}; }

// A vdev held in memory. A read at offset `hold` (if any) waits until `released` is set;
// every read is logged.
struct MemoryVdev {
  std::map<uint64_t, std::vector<uint8_t>> blocks;  // by offset
  std::mutex mu;
  std::vector<uint64_t> reads;
  const uint64_t hold;
  std::promise<void> held, released;

  explicit MemoryVdev(size_t n, uint64_t hold_offset = ~uint64_t{0}) : hold(hold_offset) {
    for (uint64_t i = 0; i < n; i++) blocks[KeyOf(i).offset] = Bytes(i);
  }
  CacheRefill::VdevRead Reader() {
    return [this](uint32_t, uint64_t offset, std::span<uint8_t> dst) {
      {
        std::lock_guard l(mu);
        reads.push_back(offset);
      }
      if (offset == hold) {
        held.set_value();
        released.get_future().wait();
      }
      auto it = blocks.find(offset);
      if (it == blocks.end()) return Status::IoError("no such block");
      std::copy_n(it->second.begin(), dst.size(), dst.begin());
      return Status::Ok();
    };
  }
  bool WasRead(uint64_t i) {
    std::lock_guard l(mu);
    return std::count(reads.begin(), reads.end(), KeyOf(i).offset) > 0;
  }
};

bool Cached(BlockCache& cache, uint64_t i) {
  std::vector<uint8_t> got(kBlock);
  return cache.Lookup(KeyOf(i), got.data(), 0, kBlock, false) && got == Bytes(i);
}

TEST(CacheRefillTest, OnlyBytesThatMatchTheirChecksumAreCached) {
  BlockCache cache(64 << 20, nullptr);
  MemoryVdev vdev(3);
  vdev.blocks[KeyOf(1).offset][100] ^= 1;  // its space was written again since
  vdev.blocks.erase(KeyOf(2).offset);      // a read that fails
  CacheRefill refill(&cache, vdev.Reader(), 64 << 20);
  const std::vector<WrittenBlock> blocks = {Written(0), Written(1), Written(2)};
  refill.Add(blocks);
  refill.WaitIdle();
  EXPECT_TRUE(Cached(cache, 0));
  std::vector<uint8_t> got(kBlock);
  EXPECT_FALSE(cache.Lookup(KeyOf(1), got.data(), 0, kBlock, false));
  EXPECT_FALSE(cache.Lookup(KeyOf(2), got.data(), 0, kBlock, false));
  const CacheRefillStats st = refill.Stats();
  EXPECT_EQ(st.refilled, 1u);
  EXPECT_EQ(st.mismatched, 1u);
  EXPECT_EQ(st.failed, 1u);
}

// Nothing is read back while the pool holds data not yet committed.
TEST(CacheRefillTest, NothingIsReadWhileThePoolIsBusy) {
  BlockCache cache(64 << 20, nullptr);
  MemoryVdev vdev(1);
  std::atomic<bool> busy{true};
  std::atomic<int> asked{0};
  CacheRefill refill(&cache, vdev.Reader(), 64 << 20, [&] {
    asked++;
    return busy.load();
  });
  const std::vector<WrittenBlock> blocks = {Written(0)};
  refill.Add(blocks);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (asked < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(CacheRefill::kBusyPoll);  // until it looked twice more
  }
  EXPECT_FALSE(vdev.WasRead(0));
  busy = false;
  refill.WaitIdle();
  EXPECT_TRUE(Cached(cache, 0));
}

// A block the cache left out while its reserve faulted memory in is offered again.
TEST(CacheRefillTest, ABlockLeftOutForWantOfMemoryIsOfferedAgain) {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  BlockCache cache(32 << 20, nullptr, /*reserve=*/true, [&](uint64_t bytes) {
    std::unique_lock l(mu);
    cv.wait(l, [&] { return released; });
    return BlockCache::MapFaultedChunk(bytes);
  });
  MemoryVdev vdev(1);
  CacheRefill refill(&cache, vdev.Reader(), 64 << 20);
  const std::vector<WrittenBlock> blocks = {Written(0)};
  refill.Add(blocks);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (cache.Stats().unready == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GT(cache.Stats().unready, 0u);
  {
    std::lock_guard l(mu);
    released = true;
  }
  cv.notify_all();
  refill.WaitIdle();
  EXPECT_TRUE(Cached(cache, 0));
  EXPECT_EQ(vdev.reads.size(), 1u);  // offered again from the bytes it read and verified
  EXPECT_EQ(refill.Stats().refilled, 1u);
}

// A refill whose worker is reading block 0, held there until Release(), with blocks 1 to
// `queued` added behind it.
struct HeldRefill {
  BlockCache cache{64 << 20, nullptr};
  MemoryVdev vdev;
  CacheRefill refill;

  HeldRefill(size_t queued, uint64_t bound)
      : vdev(queued + 1, KeyOf(0).offset), refill(&cache, vdev.Reader(), bound) {
    const std::vector<WrittenBlock> first = {Written(0)};
    refill.Add(first);
    vdev.held.get_future().wait();
    std::vector<WrittenBlock> rest;
    for (uint64_t i = 1; i <= queued; i++) rest.push_back(Written(i));
    refill.Add(rest);
  }
  // A test that fails before it releases the read must still end: the refill's destructor
  // joins its worker.
  ~HeldRefill() {
    if (!released) Release();
  }
  void Release() {
    released = true;
    vdev.released.set_value();
  }
  bool released = false;
};

// Freed blocks are dropped: a queued one is not read, the one being read is not offered.
TEST(CacheRefillTest, ForgottenBlocksAreNotOffered) {
  HeldRefill h(2, 64 << 20);
  const std::vector<BlockKey> freed = {KeyOf(0), KeyOf(1)};
  h.refill.Forget(freed);
  h.Release();
  h.refill.WaitIdle();
  EXPECT_FALSE(Cached(h.cache, 0));
  EXPECT_FALSE(h.vdev.WasRead(1));
  EXPECT_TRUE(Cached(h.cache, 2));
  EXPECT_EQ(h.refill.Stats().dropped, 1u);
}

TEST(CacheRefillTest, TheQueueHoldsAtMostItsBound) {
  HeldRefill h(4, 2 * kBlock);  // block 0 has left the queue: 1 and 2 fit, 3 and 4 do not
  h.Release();
  h.refill.WaitIdle();
  const CacheRefillStats st = h.refill.Stats();
  EXPECT_EQ(st.dropped, 2u);
  EXPECT_EQ(st.refilled, 3u);
  EXPECT_FALSE(h.vdev.WasRead(3));
  EXPECT_FALSE(h.vdev.WasRead(4));
}

TEST(CacheRefillTest, TheQueueHoldsAtMostKMaxQueuedBlocks) {
  HeldRefill h(0, uint64_t{1} << 40);
  std::vector<WrittenBlock> many;
  for (uint64_t i = 1; i <= CacheRefill::kMaxQueued + 5; i++) many.push_back(Written(i));
  h.refill.Add(many);
  const CacheRefillStats st = h.refill.Stats();
  EXPECT_EQ(st.queued, CacheRefill::kMaxQueued);
  EXPECT_EQ(st.dropped, 5u);
  h.refill.Clear();
  h.Release();
}

// Clear does not wait for a vdev read (a close would hang on a stuck device), and the
// block being read is not offered afterwards.
TEST(CacheRefillTest, ClearDropsTheQueueAndTheReadInFlightWithoutWaitingForIt) {
  HeldRefill h(2, 64 << 20);
  auto cleared = std::async(std::launch::async, [&] { h.refill.Clear(); });
  EXPECT_EQ(cleared.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  h.Release();
  cleared.wait();
  h.refill.WaitIdle();
  EXPECT_FALSE(Cached(h.cache, 0));
  EXPECT_FALSE(h.vdev.WasRead(1));
  EXPECT_FALSE(h.vdev.WasRead(2));
  EXPECT_EQ(h.refill.Stats().dropped, 1u);
}

// A commit's fill hands the blocks its txg freed to the refill too, so they are not read.
TEST(CacheRefillTest, TheBlocksACommitFreedAreNotRead) {
  HeldRefill h(2, 64 << 20);
  EXPECT_EQ(CacheFill::Start(&h.cache, &h.refill, {KeyOf(1)}, {}), nullptr);  // done at once
  h.Release();
  h.refill.WaitIdle();
  EXPECT_FALSE(h.vdev.WasRead(1));
  EXPECT_TRUE(Cached(h.cache, 2));
}

}  // namespace
}  // namespace volstack::pool

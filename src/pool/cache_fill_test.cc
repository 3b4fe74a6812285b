// CacheFill (cache_fill.h): after Stop() no block is read again but the one it names, so a
// commit may reuse every other buffer at once; what the copies cached is exact; the forgets
// all run even when stopped; a small txg is done before Start returns.
#include "pool/cache_fill.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

namespace volstack::pool {
namespace {

constexpr uint32_t kBlock = 4096;
constexpr uint64_t kTxg = 9;

BlockKey KeyOf(uint64_t i) { return BlockKey{0, kBlock, (uint64_t{1} << 22) + i * kBlock, kTxg}; }
constexpr ChecksumType kCksum = ChecksumType::kXxh3_128;

uint8_t Byte(uint64_t block, uint64_t k) { return static_cast<uint8_t>(block * 131 + k * 7 + 1); }

struct Buffers {
  explicit Buffers(size_t n) {
    for (size_t i = 0; i < n; i++) {
      bufs.emplace_back(new uint8_t[kBlock]);
      for (uint64_t k = 0; k < kBlock; k++) bufs[i][k] = Byte(i, k);
      const std::span<const uint8_t> bytes(bufs[i].get(), kBlock);
      blocks.push_back({WrittenBlock{KeyOf(i), kCksum, ComputeChecksum(kCksum, bytes)}, bytes});
    }
  }
  std::vector<Volume::Buf> bufs;
  std::vector<CacheFill::Block> blocks;
};

// Stopped at random points, the fill's caller overwrites every buffer but the one Stop()
// named (as the next writes reuse them) while that copy may still run: every block the
// cache then holds must still be the original bytes.
TEST(CacheFillTest, AfterStopOnlyTheNamedBlockIsRead) {
  std::mt19937_64 rng(5);
  uint64_t hits = 0, kept = 0;
  for (int round = 0; round < 40; round++) {
    BlockCache cache(64 << 20, nullptr);
    const size_t n = 2048;  // 8 MiB: copied on a thread
    Buffers b(n);
    auto fill = CacheFill::Start(&cache, nullptr, {}, b.blocks);
    ASSERT_NE(fill, nullptr);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 1000));
    const uint8_t* in_flight = fill->Stop();
    for (auto& buf : b.bufs) {
      if (buf.get() != in_flight) std::fill_n(buf.get(), kBlock, uint8_t{0xEE});
    }
    kept += in_flight != nullptr;
    fill.reset();  // joins
    std::vector<uint8_t> got(kBlock);
    for (size_t i = 0; i < n; i++) {
      if (!cache.Lookup(KeyOf(i), got.data(), 0, kBlock, /*count_access=*/false)) continue;
      hits++;
      for (uint64_t k = 0; k < kBlock; k += 97) {
        ASSERT_EQ(got[k], Byte(i, k)) << "round " << round << ", block " << i << ", byte " << k;
      }
    }
  }
  EXPECT_GT(hits, 0u);  // the copies did run
  EXPECT_GT(kept, 0u);  // and were stopped in flight
}

// What a stop leaves out is read back by the refill, so every block ends up cached, with
// the bytes that were written, although the buffers were overwritten at the stop.
TEST(CacheFillTest, WhatAStopLeavesOutIsReadBackByTheRefill) {
  BlockCache cache(256 << 20, nullptr);
  const size_t n = 16384;  // 64 MiB: a stop at once leaves most of it out
  Buffers b(n);
  std::vector<std::vector<uint8_t>> disk;
  for (auto& buf : b.bufs) disk.emplace_back(buf.get(), buf.get() + kBlock);
  CacheRefill refill(
      &cache,
      [&](uint32_t, uint64_t offset, std::span<uint8_t> dst) {
        std::copy_n(disk[(offset - KeyOf(0).offset) / kBlock].begin(), dst.size(), dst.begin());
        return Status::Ok();
      },
      uint64_t{1} << 30);
  auto fill = CacheFill::Start(&cache, &refill, {}, b.blocks);
  ASSERT_NE(fill, nullptr);
  const uint8_t* in_flight = fill->Stop();
  for (auto& buf : b.bufs) {
    if (buf.get() != in_flight) std::fill_n(buf.get(), kBlock, uint8_t{0xEE});
  }
  fill.reset();
  refill.WaitIdle();
  EXPECT_GT(refill.Stats().refilled, 0u);
  std::vector<uint8_t> got(kBlock);
  for (size_t i = 0; i < n; i++) {
    ASSERT_TRUE(cache.Lookup(KeyOf(i), got.data(), 0, kBlock, false)) << i;
    ASSERT_TRUE(std::equal(got.begin(), got.end(), disk[i].begin())) << i;
  }
}

TEST(CacheFillTest, ForgetsAllRunEvenWhenStopped) {
  BlockCache cache(64 << 20, nullptr);
  Buffers old(512);
  for (size_t i = 0; i < old.blocks.size(); i++) cache.Insert(KeyOf(i), old.bufs[i].get(), true);
  std::vector<BlockKey> forget;
  std::vector<uint8_t> got(kBlock);
  for (size_t i = 0; i < old.blocks.size(); i++) {
    forget.push_back(KeyOf(i));
    ASSERT_TRUE(cache.Lookup(KeyOf(i), got.data(), 0, kBlock)) << i;
  }
  Buffers fresh(1024);
  for (auto& b : fresh.blocks) b.block.key.offset += uint64_t{1} << 30;  // elsewhere
  auto fill = CacheFill::Start(&cache, nullptr, forget, fresh.blocks);
  ASSERT_NE(fill, nullptr);
  fill->Stop();
  fill.reset();
  for (const BlockKey& key : forget) EXPECT_FALSE(cache.Lookup(key, got.data(), 0, kBlock));
}

TEST(CacheFillTest, ASmallTxgIsCopiedBeforeStartReturns) {
  BlockCache cache(64 << 20, nullptr);
  Buffers b(16);  // 64 KiB
  EXPECT_EQ(CacheFill::Start(&cache, nullptr, {}, b.blocks), nullptr);
  std::vector<uint8_t> got(kBlock);
  for (size_t i = 0; i < b.blocks.size(); i++) {
    ASSERT_TRUE(cache.Lookup(KeyOf(i), got.data(), 0, kBlock)) << i;
    EXPECT_EQ(got[100], Byte(i, 100));
  }
}

}  // namespace
}  // namespace volstack::pool

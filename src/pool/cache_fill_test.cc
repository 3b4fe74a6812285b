// CacheFill (cache_fill.h): after Stop() no block is read again but the one it names, so a
// commit may reuse every other buffer at once; what the copies cached is exact; the forgets
// all run even when stopped; a small txg is done before Start returns.
#include "pool/cache_fill.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>
#include <vector>

namespace volstack::pool {
namespace {

constexpr uint32_t kBlock = 4096;
constexpr uint64_t kTxg = 9;

Dva At(uint64_t i) {
  Dva d;
  d.asize_sectors = kBlock >> 9;
  d.offset = (uint64_t{1} << 22) + i * kBlock;
  return d;
}

BlockKey KeyOf(uint64_t i) { return BlockKey{0, kBlock, At(i).offset, kTxg}; }

uint8_t Byte(uint64_t block, uint64_t k) { return static_cast<uint8_t>(block * 131 + k * 7 + 1); }

struct Buffers {
  explicit Buffers(size_t n) {
    for (size_t i = 0; i < n; i++) {
      bufs.emplace_back(new uint8_t[kBlock]);
      for (uint64_t k = 0; k < kBlock; k++) bufs[i][k] = Byte(i, k);
      blocks.emplace_back(At(i), std::span<const uint8_t>(bufs[i].get(), kBlock));
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
    auto fill = CacheFill::Start(&cache, kTxg, {}, b.blocks);
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
  for (auto& [dva, data] : fresh.blocks) dva.offset += uint64_t{1} << 30;  // elsewhere
  auto fill = CacheFill::Start(&cache, kTxg, forget, fresh.blocks);
  ASSERT_NE(fill, nullptr);
  fill->Stop();
  fill.reset();
  for (const BlockKey& key : forget) EXPECT_FALSE(cache.Lookup(key, got.data(), 0, kBlock));
}

TEST(CacheFillTest, ASmallTxgIsCopiedBeforeStartReturns) {
  BlockCache cache(64 << 20, nullptr);
  Buffers b(16);  // 64 KiB
  EXPECT_EQ(CacheFill::Start(&cache, kTxg, {}, b.blocks), nullptr);
  std::vector<uint8_t> got(kBlock);
  for (size_t i = 0; i < b.blocks.size(); i++) {
    ASSERT_TRUE(cache.Lookup(KeyOf(i), got.data(), 0, kBlock)) << i;
    EXPECT_EQ(got[100], Byte(i, 100));
  }
}

}  // namespace
}  // namespace volstack::pool

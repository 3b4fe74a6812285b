// Raidz geometry and parity (raidz.h): split/gather round trips for every width, parity
// that rebuilds every single lost column (raidz1) and every pair (raidz2), data and parity
// alike, and the GF(2^8) arithmetic it rests on.
#include "pool/raidz.h"

#include <gtest/gtest.h>

#include <random>

namespace volstack::pool {
namespace {

std::vector<uint8_t> Random(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

RaidzGeometry Geo(uint32_t n, uint32_t p, uint32_t sector = 512, uint32_t unit = 4096) {
  RaidzGeometry g;
  g.children = n;
  g.parity = p;
  g.sector = sector;
  g.unit = unit;
  return g;
}

TEST(RaidzMathTest, GaloisField) {
  EXPECT_EQ(GfMul(2, 0x80), 0x1d);  // x^8 = x^4 + x^3 + x^2 + 1
  EXPECT_EQ(GfPow2(0), 1);
  EXPECT_EQ(GfPow2(255), 1);
  for (int a = 1; a < 256; a++) {
    int inverses = 0;
    for (int b = 1; b < 256; b++) {
      inverses += GfMul(static_cast<uint8_t>(a), static_cast<uint8_t>(b)) == 1;
    }
    EXPECT_EQ(inverses, 1) << a;
  }
}

TEST(RaidzMathTest, GeometryAndSplitRoundTrip) {
  // 4K units over 3 data columns: 3 sectors each, the last one padding.
  EXPECT_EQ(Geo(4, 1).col_bytes(), 1536u);
  EXPECT_EQ(Geo(3, 1).col_bytes(), 2048u);
  EXPECT_EQ(Geo(10, 2).col_bytes(), 512u);
  EXPECT_EQ(Geo(3, 1).ChildOffset((1 << 20) + 3 * 4096), (1u << 20) + 3 * 2048u);
  for (uint32_t p = 1; p <= 2; p++) {
    for (uint32_t n = p + 1; n <= 16; n++) {
      const auto g = Geo(n, p);
      const auto data = Random(5 * 4096, n * 10 + p);
      std::vector<std::vector<uint8_t>> cols;
      RaidzSplit(g, data, cols);
      ASSERT_EQ(cols.size(), n);
      EXPECT_EQ(cols[p].size(), g.ChildLength(data.size()));
      std::vector<uint8_t> back(data.size());
      RaidzGather(g, cols, back);
      EXPECT_EQ(back, data) << n << " children, parity " << p;
    }
  }
}

// Every set of up to p lost columns is rebuilt exactly, for many widths.
TEST(RaidzMathTest, EveryLostColumnSetIsRebuilt) {
  for (uint32_t p = 1; p <= 2; p++) {
    for (uint32_t n = p + 1; n <= 12; n++) {
      const auto g = Geo(n, p);
      const auto data = Random(3 * 4096, n * 100 + p);
      std::vector<std::vector<uint8_t>> cols;
      RaidzSplit(g, data, cols);
      cols[0].resize(cols[p].size());
      if (p > 1) cols[1].resize(cols[p].size());
      RaidzParity(g, cols);
      const auto good = cols;
      std::vector<std::vector<uint32_t>> sets;
      for (uint32_t i = 0; i < n; i++) sets.push_back({i});
      if (p == 2) {
        for (uint32_t i = 0; i < n; i++) {
          for (uint32_t j = i + 1; j < n; j++) sets.push_back({i, j});
        }
      }
      for (const auto& set : sets) {
        auto work = good;
        for (uint32_t c : set) {
          for (auto& b : work[c]) b ^= 0x5a;
        }
        ASSERT_TRUE(RaidzReconstruct(g, work, set));
        for (uint32_t c = 0; c < n; c++) {
          ASSERT_EQ(work[c], good[c])
              << "n=" << n << " p=" << p << " col " << c << " set size " << set.size();
        }
      }
      // More than p columns cannot be solved.
      std::vector<uint32_t> too_many;
      for (uint32_t i = 0; i <= p && i < n; i++) too_many.push_back(i);
      if (too_many.size() > p) {
        auto work = good;
        EXPECT_FALSE(RaidzReconstruct(g, work, too_many));
      }
    }
  }
}

TEST(RaidzMathTest, LargeSectorsAndWideUnits) {
  const auto g = Geo(5, 2, 4096, 16384);  // 3 data columns of 2 sectors (1 padding)
  EXPECT_EQ(g.col_bytes(), 8192u);
  const auto data = Random(2 * 16384, 7);
  std::vector<std::vector<uint8_t>> cols;
  RaidzSplit(g, data, cols);
  for (uint32_t i = 0; i < 2; i++) cols[i].resize(cols[2].size());
  RaidzParity(g, cols);
  auto work = cols;
  work[2].assign(work[2].size(), 0);
  work[4].assign(work[4].size(), 0);
  ASSERT_TRUE(RaidzReconstruct(g, work, {2, 4}));
  std::vector<uint8_t> back(data.size());
  RaidzGather(g, work, back);
  EXPECT_EQ(back, data);
}

}  // namespace
}  // namespace volstack::pool

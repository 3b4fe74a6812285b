#include "bench/stats.h"

#include <gtest/gtest.h>

namespace volstack::bench {
namespace {

TEST(StatsTest, MedianOfOddAndEvenCounts) {
  auto odd = Summarize({5, 1, 3});
  ASSERT_TRUE(odd.has_value());
  EXPECT_DOUBLE_EQ(odd->median, 3);
  EXPECT_DOUBLE_EQ(odd->min, 1);
  EXPECT_DOUBLE_EQ(odd->max, 5);
  EXPECT_EQ(odd->n, 3);
  auto even = Summarize({4, 1, 3, 10});
  EXPECT_DOUBLE_EQ(even->median, 3.5);
  auto one = Summarize({7});
  EXPECT_DOUBLE_EQ(one->median, 7);
  EXPECT_FALSE(Summarize({}).has_value());
}

TEST(StatsTest, Ratio) {
  EXPECT_DOUBLE_EQ(*Ratio(524.834, 931.291), 524.834 / 931.291);
  EXPECT_FALSE(Ratio(1.0, 0.0).has_value());
  EXPECT_FALSE(Ratio(std::nullopt, 2.0).has_value());
  EXPECT_FALSE(Ratio(2.0, std::nullopt).has_value());
}

TEST(StatsTest, PercentileByNearestRank) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_DOUBLE_EQ(*Percentile(v, 50), 50);
  EXPECT_DOUBLE_EQ(*Percentile(v, 99), 99);
  EXPECT_DOUBLE_EQ(*Percentile(v, 100), 100);
  EXPECT_DOUBLE_EQ(*Percentile(v, 0), 1);
  EXPECT_FALSE(Percentile({}, 50).has_value());
}

}  // namespace
}  // namespace volstack::bench

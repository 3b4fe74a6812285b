// LegFanout: every index runs exactly once, the first on the caller, the others on helpers
// at the same time; concurrent callers that find every helper busy run their legs
// themselves.
#include "lvm/leg_fanout.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace volstack::lvm {
namespace {

TEST(LegFanoutTest, RunsEveryIndexOnceWithTheFirstOnTheCaller) {
  LegFanout f(3);
  for (size_t n : {1, 2, 4, 9}) {
    std::vector<std::atomic<int>> runs(n);
    std::thread::id first;
    f.Run(n, [&](size_t i) {
      runs[i]++;
      if (i == 0) first = std::this_thread::get_id();
    });
    for (size_t i = 0; i < n; i++) EXPECT_EQ(runs[i].load(), 1) << i << " of " << n;
    EXPECT_EQ(first, std::this_thread::get_id());
  }
}

// Each call waits until all three have started: only calls running at once get there.
TEST(LegFanoutTest, LegsRunAtTheSameTime) {
  LegFanout f(2);
  for (int round = 0; round < 50; round++) {
    std::atomic<int> started{0};
    std::atomic<int> met{0};
    f.Run(3, [&](size_t) {
      started++;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (started.load() < 3 && std::chrono::steady_clock::now() < until) {
        std::this_thread::yield();
      }
      if (started.load() == 3) met++;
    });
    ASSERT_EQ(met.load(), 3) << "round " << round;
  }
}

TEST(LegFanoutTest, ConcurrentCallersAllComplete) {
  LegFanout f(1);
  std::atomic<uint64_t> sum{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; t++) {
    callers.emplace_back([&] {
      for (int k = 0; k < 2000; k++) f.Run(3, [&](size_t i) { sum += i + 1; });
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(sum.load(), 4u * 2000u * 6u);
}

}  // namespace
}  // namespace volstack::lvm

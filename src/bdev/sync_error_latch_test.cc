// SyncErrorLatch: a failed flush fails every later one without running it, and a flush
// that succeeds while an earlier-started one is still running waits for it and reports
// its failure.
#include "bdev/sync_error_latch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

namespace volstack::bdev {
namespace {

// A call that blocks until opened, then returns `result`.
class GatedCall {
 public:
  explicit GatedCall(Status result) : result_(std::move(result)) {}
  Status operator()() {
    std::unique_lock l(mu_);
    started_ = true;
    cv_.notify_all();
    cv_.wait(l, [&] { return open_; });
    return result_;
  }
  void WaitStarted() {
    std::unique_lock l(mu_);
    cv_.wait(l, [&] { return started_; });
  }
  void Open() {
    std::lock_guard l(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  bool open_ = false;
  Status result_;
};

TEST(SyncErrorLatchTest, AFailureFailsEveryLaterCallWithoutRunningIt) {
  SyncErrorLatch latch;
  EXPECT_TRUE(latch.Run([] { return Status::Ok(); }, "dev").ok());
  EXPECT_EQ(latch.Run([] { return Status::IoError("write-back lost"); }, "dev").code(), EIO);
  int runs = 0;
  Status later = latch.Run(
      [&] {
        runs++;
        return Status::Ok();
      },
      "dev");
  EXPECT_EQ(later.code(), EIO);
  EXPECT_NE(later.message().find("earlier flush failed"), std::string::npos) << later.ToString();
  EXPECT_NE(later.message().find("write-back lost"), std::string::npos) << later.ToString();
  EXPECT_EQ(runs, 0);
}

// Runs a call that ends with `first_result` and, while it is in flight, a second call
// that succeeds; returns what Run said to each.
std::pair<Status, Status> RunOverlapping(SyncErrorLatch& latch, Status first_result) {
  GatedCall slow(std::move(first_result));
  Status first, second;
  std::thread a([&] { first = latch.Run([&] { return slow(); }, "dev"); });
  slow.WaitStarted();
  std::atomic<bool> second_ran{false};
  std::thread b([&] {
    second = latch.Run(
        [&] {
          second_ran = true;
          return Status::Ok();
        },
        "dev");
  });
  while (!second_ran) std::this_thread::yield();
  slow.Open();  // only now does the first call end
  a.join();
  b.join();
  return {first, second};
}

TEST(SyncErrorLatchTest, ASuccessOverlappingAFailureThatStartedFirstReportsIt) {
  SyncErrorLatch latch;
  auto [first, second] = RunOverlapping(latch, Status::IoError("write-back lost"));
  EXPECT_EQ(first.code(), EIO);
  EXPECT_EQ(second.code(), EIO) << second.ToString();
}

TEST(SyncErrorLatchTest, OverlappingSuccessesAllSucceed) {
  SyncErrorLatch latch;
  auto [first, second] = RunOverlapping(latch, Status::Ok());
  EXPECT_TRUE(first.ok());
  EXPECT_TRUE(second.ok());
}

}  // namespace
}  // namespace volstack::bdev

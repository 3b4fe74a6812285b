#include "export/devfs_flush.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace volstack::exportfs {
namespace {

using How = DevfsFlusher::How;

TEST(DevfsFlusher, SyncWithNothingWrittenSinceACoveringFlushSkipsTheDevice) {
  int flushes = 0;
  DevfsFlusher flusher([&] {
    flushes++;
    return Status::Ok();
  });
  How how = How::kFlushed;
  ASSERT_TRUE(flusher.Sync(&how).ok());  // nothing was ever written
  EXPECT_EQ(how, How::kClean);
  EXPECT_EQ(flushes, 0);

  flusher.NoteWrite();
  ASSERT_TRUE(flusher.Sync(&how).ok());
  EXPECT_EQ(how, How::kFlushed);
  EXPECT_EQ(flushes, 1);
  ASSERT_TRUE(flusher.Sync(&how).ok());  // e.g. a loop's post-flush, then the next pre-flush
  EXPECT_EQ(how, How::kClean);
  EXPECT_EQ(flushes, 1);

  flusher.NoteWrite();
  ASSERT_TRUE(flusher.Sync().ok());
  EXPECT_EQ(flushes, 2);
  const auto c = flusher.counters();
  EXPECT_EQ(c.syncs, 4u);
  EXPECT_EQ(c.clean, 2u);
  EXPECT_EQ(c.device_flushes, 2u);
}

// A device flush that blocks until released, to hold Syncs in flight.
class GatedFlush {
 public:
  Status operator()() {
    std::unique_lock lock(mu_);
    started_++;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    return result_;
  }
  void WaitStarted(int n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return started_ >= n; });
  }
  void Open(Status result = Status::Ok()) {
    std::lock_guard lock(mu_);
    open_ = true;
    result_ = std::move(result);
    cv_.notify_all();
  }
  int started() {
    std::lock_guard lock(mu_);
    return started_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int started_ = 0;
  bool open_ = false;
  Status result_;
};

void WaitForSyncs(const DevfsFlusher& flusher, uint64_t n) {
  for (int i = 0; i < 5000 && flusher.counters().syncs < n; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GE(flusher.counters().syncs, n);
}

TEST(DevfsFlusher, ConcurrentSyncsShareOneFlushAfterTheRunningOne) {
  GatedFlush gate;
  DevfsFlusher flusher([&] { return gate(); });
  flusher.NoteWrite();
  std::thread first([&] { EXPECT_TRUE(flusher.Sync().ok()); });
  gate.WaitStarted(1);
  // Written after the running flush began: it does not cover these Syncs.
  flusher.NoteWrite();
  std::vector<std::thread> later;
  for (int i = 0; i < 6; i++) later.emplace_back([&] { EXPECT_TRUE(flusher.Sync().ok()); });
  WaitForSyncs(flusher, 7);
  EXPECT_EQ(gate.started(), 1);  // they wait instead of flushing alongside
  gate.Open();
  first.join();
  for (auto& t : later) t.join();
  const auto c = flusher.counters();
  EXPECT_EQ(c.device_flushes, 2u);  // seven Syncs, two flushes
  EXPECT_EQ(c.joined, 5u);
  EXPECT_EQ(c.most_waiting, 7u);
}

TEST(DevfsFlusher, SyncsCoveredByARunningFlushReturnWithIt) {
  GatedFlush gate;
  DevfsFlusher flusher([&] { return gate(); });
  flusher.NoteWrite();
  std::thread first([&] { EXPECT_TRUE(flusher.Sync().ok()); });
  gate.WaitStarted(1);
  // No write since the running flush began: it covers this Sync too.
  std::thread second([&] {
    How how = How::kFlushed;
    EXPECT_TRUE(flusher.Sync(&how).ok());
    EXPECT_EQ(how, How::kJoined);
  });
  WaitForSyncs(flusher, 2);
  gate.Open();
  first.join();
  second.join();
  EXPECT_EQ(flusher.counters().device_flushes, 1u);
}

TEST(DevfsFlusher, AFailedFlushFailsItsWaitersAndIsRetried) {
  GatedFlush gate;
  int calls = 0;
  DevfsFlusher flusher([&] {
    calls++;
    return calls == 1 ? gate() : Status::Ok();
  });
  flusher.NoteWrite();
  std::thread first([&] { EXPECT_EQ(flusher.Sync().code(), EIO); });
  gate.WaitStarted(1);
  std::thread second([&] { EXPECT_EQ(flusher.Sync().code(), EIO); });  // covered, so it fails
  WaitForSyncs(flusher, 2);
  gate.Open(Status::IoError("disk gone"));
  first.join();
  second.join();
  // Nothing became durable: the next Sync flushes again, not "clean".
  How how = How::kClean;
  EXPECT_TRUE(flusher.Sync(&how).ok());
  EXPECT_EQ(how, How::kFlushed);
  EXPECT_EQ(calls, 2);
}

// The rule itself, under contention: every write completed before a Sync() began is inside
// what some device flush made durable before that Sync() returned.
TEST(DevfsFlusher, AWriteCompletedBeforeASyncIsAlwaysCovered) {
  std::mutex mu;
  uint64_t completed = 0;  // writes 1..completed have completed (and were noted)
  uint64_t durable = 0;    // writes 1..durable were covered by a finished flush
  DevfsFlusher* flusher_ptr = nullptr;
  DevfsFlusher flusher([&] {
    uint64_t covers;
    {
      std::lock_guard lock(mu);
      covers = completed;  // what a real device flush starting now makes durable
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::lock_guard lock(mu);
    durable = std::max(durable, covers);
    return Status::Ok();
  });
  flusher_ptr = &flusher;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; w++) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        {
          std::lock_guard lock(mu);
          completed++;
          flusher_ptr->NoteWrite();  // noted as it completes, before anyone is told
        }
        std::this_thread::yield();
      }
    });
  }
  std::atomic<int> violations{0};
  for (int s = 0; s < 4; s++) {
    threads.emplace_back([&] {
      for (int i = 0; i < 300; i++) {
        uint64_t must;
        {
          std::lock_guard lock(mu);
          must = completed;
        }
        ASSERT_TRUE(flusher.Sync().ok());
        std::lock_guard lock(mu);
        if (durable < must) violations++;
      }
    });
  }
  for (size_t i = 2; i < threads.size(); i++) threads[i].join();
  stop = true;
  threads[0].join();
  threads[1].join();
  EXPECT_EQ(violations.load(), 0);
  const auto c = flusher.counters();
  EXPECT_EQ(c.syncs, 1200u);
  EXPECT_LT(c.device_flushes, c.syncs);  // concurrent Syncs shared flushes
}

}  // namespace
}  // namespace volstack::exportfs

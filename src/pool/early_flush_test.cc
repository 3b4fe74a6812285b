// Early flushes (early_flush.h): a vdev is flushed in the background once enough has been
// written to it since its last flush, one flush at a time; the pool's stream gets flushed
// before its commit; and a failed early flush fails the commit under way, whatever the
// device reports for the commit's own flush.
#include "pool/early_flush.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "pool/gated_pool.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"
#include "pool/test_util.h"

namespace volstack::pool {
namespace {

using testing::ExpectConsistent;
using testing::GatedPool;
using testing::kMiB;
using testing::MakeGatedPool;
using testing::Pattern;
using testing::TestTuning;

// A flush function that records which vdev it flushed and, while closed, blocks.
class FlushLog {
 public:
  void operator()(uint32_t vdev) {
    std::unique_lock l(mu_);
    flushed_.push_back(vdev);
    cv_.notify_all();
    cv_.wait(l, [&] { return open_; });
  }
  void SetOpen(bool open) {
    std::lock_guard l(mu_);
    open_ = open;
    cv_.notify_all();
  }
  // Waits (up to 10 s) for `n` flushes to have started; returns what was flushed.
  std::vector<uint32_t> WaitFor(size_t n) {
    std::unique_lock l(mu_);
    cv_.wait_for(l, std::chrono::seconds(10), [&] { return flushed_.size() >= n; });
    return flushed_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint32_t> flushed_;
  bool open_ = true;
};

TEST(EarlyFlusherTest, AVdevIsFlushedOnceItsWritesReachTheThreshold) {
  FlushLog log;
  EarlyFlusher flusher(2, 100, [&](uint32_t v) { log(v); });
  flusher.NoteWritten(0, 60);
  flusher.NoteWritten(1, 60);
  EXPECT_EQ(flusher.unflushed(0), 60u);  // neither is due
  EXPECT_EQ(flusher.unflushed(1), 60u);
  flusher.NoteWritten(0, 40);
  EXPECT_EQ(flusher.unflushed(0), 0u);  // counted from here: the flush covers the 100
  EXPECT_EQ(log.WaitFor(1), std::vector<uint32_t>{0});
  flusher.NoteWritten(1, 40);
  EXPECT_EQ(log.WaitFor(2), (std::vector<uint32_t>{0, 1}));
}

TEST(EarlyFlusherTest, AFlushElsewhereStartsTheCountAgain) {
  FlushLog log;
  EarlyFlusher flusher(1, 100, [&](uint32_t v) { log(v); });
  flusher.NoteWritten(0, 60);
  flusher.NoteFlushed(0);
  flusher.NoteWritten(0, 60);
  EXPECT_EQ(flusher.unflushed(0), 60u);
  flusher.NoteWritten(0, 40);
  EXPECT_EQ(log.WaitFor(1).size(), 1u);
}

TEST(EarlyFlusherTest, WritesDuringAFlushGetOneFlushAfterIt) {
  FlushLog log;
  log.SetOpen(false);
  EarlyFlusher flusher(1, 100, [&](uint32_t v) { log(v); });
  flusher.NoteWritten(0, 100);
  ASSERT_EQ(log.WaitFor(1).size(), 1u);
  flusher.NoteFlushed(0);  // a commit's flush starts meanwhile: this one is in flight still
  for (int i = 0; i < 5; i++) flusher.NoteWritten(0, 100);
  EXPECT_EQ(flusher.unflushed(0), 500u);  // none of them queued a flush behind this one
  log.SetOpen(true);
  EXPECT_EQ(log.WaitFor(2).size(), 2u);  // but they are due one once it ends
}

TEST(EarlyFlusherTest, AFlushElsewhereDropsAnEarlyFlushNotYetStarted) {
  FlushLog log;
  log.SetOpen(false);
  EarlyFlusher flusher(2, 100, [&](uint32_t v) { log(v); });
  flusher.NoteWritten(0, 100);
  ASSERT_EQ(log.WaitFor(1).size(), 1u);  // vdev 0's flush is in flight
  flusher.NoteWritten(1, 100);           // vdev 1's waits behind it
  flusher.NoteFlushed(1);                // and a commit's flush covers it
  flusher.NoteFlushed(0);                // which cannot drop one in flight
  log.SetOpen(true);
  flusher.WaitIdle();
  EXPECT_EQ(log.WaitFor(1), std::vector<uint32_t>{0});
  EXPECT_EQ(flusher.flushes(), 1u);
}

TEST(EarlyFlushTest, AStreamIsFlushedWhileItsTxgIsOpen) {
  PoolTuning t;
  t.txg_timeout = std::chrono::hours(1);
  t.dirty_max_bytes = 32 * kMiB;  // no commit kicked by 6 MiB (and room to write early)
  t.early_write_run_bytes = kMiB;
  t.early_flush_bytes = kMiB;
  auto f = MakeGatedPool(t);
  ASSERT_TRUE(f.pool->Sync().ok());
  const uint64_t synced = f.impl().synced_txg.load();
  const int flushes = f.gate->flushes.load();
  const auto data = Pattern(6 * kMiB, 1);
  for (uint64_t off = 0; off < data.size(); off += 64 * 1024) {
    ASSERT_TRUE(f.vol->Write(off, std::span(data).subspan(off, 64 * 1024)).ok());
  }
  // The early writer's runs reach the vdev, and the early flusher flushes them.
  for (int i = 0; i < 10000 && f.gate->flushes.load() == flushes; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GT(f.gate->flushes.load(), flushes);
  EXPECT_EQ(f.impl().synced_txg.load(), synced);  // before any commit
  ASSERT_TRUE(f.vol->Flush().ok());
  std::vector<uint8_t> got(data.size());
  ASSERT_TRUE(f.vol->Read(0, got).ok());
  EXPECT_EQ(got, data);
  ExpectConsistent(*f.pool);
}

// A pool whose txgs commit when asked, with an early flusher (1 MiB) fed only by what a
// test notes, and 256 KiB of the volume dirty after a first commit; `synced` is that txg.
struct DirtyPool : GatedPool {
  uint64_t synced = 0;
};
DirtyPool MakeDirtyPoolWithEarlyFlusher() {
  PoolTuning t = TestTuning();
  t.early_write_run_bytes = 0;
  t.early_flush_bytes = kMiB;
  DirtyPool f{MakeGatedPool(t)};
  f.impl().StartEarlyFlusher();
  EXPECT_TRUE(f.pool->Sync().ok());
  f.synced = f.impl().synced_txg.load();
  EXPECT_TRUE(f.vol->Write(0, Pattern(256 * 1024, 2)).ok());
  return f;
}

TEST(EarlyFlushTest, AFailedEarlyFlushFailsTheCommitUnderWay) {
  auto f = MakeDirtyPoolWithEarlyFlusher();
  // The commit passes its check of the pool's state and stops in its data writes.
  f.gate->Hold(true);
  Status commit;
  std::thread sync([&] { commit = f.pool->Sync(); });
  while (!f.gate->waiting) std::this_thread::yield();
  // Meanwhile an early flush fails, and the device recovers at once.
  f.gate->fail_next_flush = true;
  const uint64_t early = f.impl().early_flusher->flushes();
  f.impl().NoteDataWritten(0, kMiB);
  while (f.impl().early_flusher->flushes() == early) std::this_thread::yield();
  EXPECT_FALSE(f.gate->fail_next_flush.load());
  f.gate->Hold(false);
  sync.join();
  // The commit's own flushes succeed, but what the failed one covered may be lost.
  EXPECT_EQ(commit.code(), EIO) << commit.ToString();
  EXPECT_EQ(f.impl().synced_txg.load(), f.synced);
  EXPECT_EQ(f.pool->Sync().code(), EIO);
}

// The commit's flush succeeds while an early flush that started before it is still in
// flight; that one then fails. The commit must not take its own flush as proof.
TEST(EarlyFlushTest, AnEarlyFlushFailingAfterTheCommitsFlushFailsTheCommit) {
  auto f = MakeDirtyPoolWithEarlyFlusher();
  f.gate->fail_next_flush = true;
  f.gate->hold_next_flush = true;
  f.impl().NoteDataWritten(0, kMiB);
  while (!f.gate->flush_held) std::this_thread::yield();
  const int flushes = f.gate->flushes.load();
  Status commit;
  std::atomic<bool> done{false};
  std::thread sync([&] {
    commit = f.pool->Sync();
    done = true;
  });
  while (f.gate->flushes.load() == flushes) std::this_thread::yield();  // its first flush
  // A commit that does not wait for the early flush finishes now, before it fails.
  for (int i = 0; i < 300 && !done; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  f.gate->ReleaseFlush();
  sync.join();
  EXPECT_EQ(commit.code(), EIO) << commit.ToString();
  EXPECT_EQ(f.impl().synced_txg.load(), f.synced);
}

}  // namespace
}  // namespace volstack::pool

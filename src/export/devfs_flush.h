// DevfsFlusher: how devfs answers FSYNC for one device (group commit and clean skips).
//
// The rule FSYNC keeps: when Sync() returns OK, every write noted (NoteWrite) before Sync()
// was called is durable. Two cheap ways to keep it with fewer device flushes:
//
//  - Clean skip. Writes are numbered as they complete. A device flush that *starts* after
//    write n completed makes writes 1..n durable, so the flusher remembers the highest such n
//    (`durable_`). A Sync() that finds no write completed beyond it returns at once, without
//    touching the device. A loop device sends one of these for every write it was asked to
//    make durable with FUA (the block layer emulates FUA as write + post-flush, and XFS's next
//    log write starts with a pre-flush): when no data write came in between, that pre-flush
//    costs nothing.
//  - Group commit. While a device flush is running, a Sync() whose writes it does not cover
//    (they completed after it started) waits for it, and then all such waiters share one new
//    flush, started by the first of them, which covers all of them. So N concurrent Syncs cost
//    at most two device flushes, however large N is.
//
// Scope: only writes noted here are tracked, i.e. writes made through devfs. A device also
// written through another path (an NBD export of the same device) is made durable there by
// that path's own flushes.
//
// Errors: a failed device flush fails every Sync() that waited for it, and advances nothing,
// so the next Sync() flushes again.
//
// Threads: all methods from any thread. NoteWrite is one atomic increment; Sync takes a mutex.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

#include "util/status.h"

namespace volstack::exportfs {

class DevfsFlusher {
 public:
  struct Counters {
    uint64_t syncs = 0;           // Sync() calls
    uint64_t clean = 0;           // answered at once: nothing written since a covering flush
    uint64_t joined = 0;          // answered by a flush another Sync() ran
    uint64_t device_flushes = 0;  // flushes of the device
    uint64_t most_waiting = 0;    // most Sync() calls in progress at once
  };

  // `flush` makes every write completed before it was called durable (BlockDevice::Flush).
  explicit DevfsFlusher(std::function<Status()> flush);

  // A write (or zeroing) completed. Call after it succeeded and before it is answered.
  void NoteWrite() { written_.fetch_add(1, std::memory_order_release); }
  // How a Sync() was answered.
  enum class How { kClean, kJoined, kFlushed };
  // Returns once every write noted before the call is durable.
  Status Sync(How* how = nullptr);

  Counters counters() const;

 private:
  const std::function<Status()> flush_;
  std::atomic<uint64_t> written_{0};  // writes noted so far

  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  uint64_t durable_ = 0;        // GUARDED_BY(mu_): writes 1..durable_ are durable
  bool flushing_ = false;       // GUARDED_BY(mu_): a device flush runs
  uint64_t flushing_upto_ = 0;  // GUARDED_BY(mu_): what the running flush covers
  uint64_t flush_seq_ = 0;      // GUARDED_BY(mu_): device flushes finished
  Status last_error_;           // GUARDED_BY(mu_): the last failed flush's status
  uint64_t waiting_ = 0;        // GUARDED_BY(mu_)
  Counters counters_;           // GUARDED_BY(mu_)
};

}  // namespace volstack::exportfs

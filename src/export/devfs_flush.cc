// DevfsFlusher: see devfs_flush.h for the rule and the two shortcuts.
//
// Invariant (under mu_): durable_ <= every `upto` of a flush that succeeded, and every write
// numbered <= durable_ completed before a successful device flush began. A flush's `upto` is
// read after it is marked running and before the device is called, so every write it counts
// completed before the device flush started.
#include "export/devfs_flush.h"

#include <algorithm>
#include <utility>

namespace volstack::exportfs {

DevfsFlusher::DevfsFlusher(std::function<Status()> flush) : flush_(std::move(flush)) {}

Status DevfsFlusher::Sync(How* how) {
  // Every write this Sync must cover was noted before this load.
  const uint64_t target = written_.load(std::memory_order_acquire);
  std::unique_lock lock(mu_);
  counters_.syncs++;
  waiting_++;
  counters_.most_waiting = std::max(counters_.most_waiting, waiting_);
  bool waited = false;
  Status result;
  while (true) {
    if (durable_ >= target) {
      (waited ? counters_.joined : counters_.clean)++;
      if (how != nullptr) *how = waited ? How::kJoined : How::kClean;
      break;
    }
    if (flushing_) {
      // The running flush may have started before our writes completed: wait for it, then
      // look again (it covered us, or we lead or join the next one).
      const uint64_t seq = flush_seq_;
      const uint64_t covers = flushing_upto_;
      done_cv_.wait(lock, [&] { return flush_seq_ != seq; });
      waited = true;
      if (covers >= target && durable_ < target) {  // it covered us and failed
        counters_.joined++;
        if (how != nullptr) *how = How::kJoined;
        result = last_error_;
        break;
      }
      continue;
    }
    flushing_ = true;
    const uint64_t upto = written_.load(std::memory_order_acquire);
    flushing_upto_ = upto;
    lock.unlock();
    Status s = flush_();
    lock.lock();
    flushing_ = false;
    flush_seq_++;
    counters_.device_flushes++;
    if (s.ok()) {
      durable_ = std::max(durable_, upto);
    } else {
      last_error_ = s;
    }
    done_cv_.notify_all();
    if (how != nullptr) *how = How::kFlushed;
    result = std::move(s);
    break;
  }
  waiting_--;
  return result;
}

DevfsFlusher::Counters DevfsFlusher::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

}  // namespace volstack::exportfs

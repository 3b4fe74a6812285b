#include "pool/early_flush.h"

#include <algorithm>
#include <system_error>

namespace volstack::pool {

EarlyFlusher::EarlyFlusher(size_t vdevs, uint64_t threshold, FlushFn flush)
    : threshold_(threshold), flush_(std::move(flush)), unflushed_(vdevs, 0), wanted_(vdevs) {
  try {
    thread_ = std::thread([this] { Run(); });
  } catch (const std::system_error&) {
    // No thread to be had: the commits' own flushes drain everything, as without one.
  }
}

EarlyFlusher::~EarlyFlusher() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EarlyFlusher::NoteWritten(uint32_t vdev, uint64_t bytes) {
  bool wake = false;
  {
    std::lock_guard l(mu_);
    if (vdev >= unflushed_.size()) return;
    unflushed_[vdev] += bytes;
    if (unflushed_[vdev] >= threshold_ && !wanted_[vdev]) {
      wanted_[vdev] = wake = true;
      unflushed_[vdev] = 0;
    }
  }
  if (wake) cv_.notify_one();
}

void EarlyFlusher::NoteFlushed(uint32_t vdev) {
  std::lock_guard l(mu_);
  if (vdev >= unflushed_.size()) return;
  unflushed_[vdev] = 0;
  if (in_flight_ != vdev) wanted_[vdev] = false;
}

void EarlyFlusher::WaitIdle() {
  std::unique_lock l(mu_);
  idle_.wait(l, [&] { return in_flight_ < 0; });
}

uint64_t EarlyFlusher::flushes() const {
  std::lock_guard l(mu_);
  return flushes_;
}

uint64_t EarlyFlusher::unflushed(uint32_t vdev) const {
  std::lock_guard l(mu_);
  return vdev < unflushed_.size() ? unflushed_[vdev] : 0;
}

void EarlyFlusher::Run() {
  std::unique_lock l(mu_);
  for (;;) {
    cv_.wait(l, [&] {
      return stop_ || std::find(wanted_.begin(), wanted_.end(), true) != wanted_.end();
    });
    if (stop_) return;
    const auto vdev =
        static_cast<uint32_t>(std::find(wanted_.begin(), wanted_.end(), true) - wanted_.begin());
    in_flight_ = vdev;
    l.unlock();
    flush_(vdev);
    l.lock();
    in_flight_ = -1;
    idle_.notify_all();
    flushes_++;
    // Writes noted during the flush counted up without making a second flush due behind
    // it (it may cover them); if they reached the threshold, they are due one now.
    wanted_[vdev] = unflushed_[vdev] >= threshold_;
    if (wanted_[vdev]) unflushed_[vdev] = 0;
  }
}

}  // namespace volstack::pool

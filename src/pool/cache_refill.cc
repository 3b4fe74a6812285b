#include "pool/cache_refill.h"

#include <cstdlib>
#include <memory>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "util/check.h"

namespace volstack::pool {

bool CacheRefill::DiskOrder::Less(const BlockKey& a, const BlockKey& b) {
  return std::tie(a.vdev, a.offset, a.size, a.birth) < std::tie(b.vdev, b.offset, b.size, b.birth);
}

CacheRefill::CacheRefill(BlockCache* cache, VdevRead read, uint64_t max_bytes, Busy busy)
    : cache_(cache), read_(std::move(read)), max_bytes_(max_bytes), busy_(std::move(busy)) {}

CacheRefill::~CacheRefill() {
  {
    std::lock_guard l(mu_);
    queue_.clear();
  }
  if (worker_.joinable()) {
    worker_.request_stop();
    worker_.join();
  }
}

void CacheRefill::Add(std::span<const WrittenBlock> blocks) {
  if (blocks.empty()) return;
  std::lock_guard l(mu_);
  for (const WrittenBlock& b : blocks) {
    if (queued_bytes_ + b.key.size > max_bytes_ || queue_.size() >= kMaxQueued) {
      stats_.dropped++;
      continue;
    }
    if (queue_.insert(b).second) queued_bytes_ += b.key.size;
  }
  if (!worker_.joinable()) {
    try {
      worker_ = std::jthread([this](std::stop_token stop) { Run(stop); });
    } catch (const std::system_error&) {
      // No thread to be had: the blocks are read from their vdevs when asked for.
      stats_.dropped += queue_.size();
      queue_.clear();
      queued_bytes_ = 0;
      idle_.notify_all();
      return;
    }
  }
  wake_.notify_one();
}

void CacheRefill::Forget(std::span<const BlockKey> keys) {
  std::lock_guard l(mu_);
  if (queue_.empty()) return;
  for (const BlockKey& k : keys) {
    auto it = queue_.find(k);
    if (it == queue_.end()) continue;
    queued_bytes_ -= it->key.size;
    queue_.erase(it);
  }
  if (queue_.empty()) idle_.notify_all();
}

void CacheRefill::Clear() {
  std::unique_lock l(mu_);
  queue_.clear();
  queued_bytes_ = 0;
  clears_++;
  idle_.notify_all();
  idle_.wait(l, [this] { return !inserting_; });
}

void CacheRefill::WaitIdle() {
  std::unique_lock l(mu_);
  idle_.wait(l, [this] { return queue_.empty() && !in_flight_; });
}

CacheRefillStats CacheRefill::Stats() const {
  std::lock_guard l(mu_);
  CacheRefillStats st = stats_;
  st.queued = queue_.size();
  return st;
}

void CacheRefill::Run(std::stop_token stop) {
  // Aligned, so that a vdev opened with O_DIRECT reads into it without a bounce buffer.
  constexpr size_t kAlign = 4096;
  std::unique_ptr<uint8_t, decltype(&std::free)> buf(nullptr, &std::free);
  size_t buf_size = 0;
  std::unique_lock l(mu_);
  for (;;) {
    if (!wake_.wait(l, stop, [this] { return !queue_.empty(); })) return;
    if (busy_ && busy_()) {
      wake_.wait_for(l, stop, kBusyPoll, [] { return false; });
      continue;
    }
    const WrittenBlock b = *queue_.begin();
    queued_bytes_ -= b.key.size;
    queue_.erase(queue_.begin());
    const uint64_t clears = clears_;
    in_flight_ = true;
    l.unlock();
    if (buf_size < b.key.size) {
      buf_size = (b.key.size + kAlign - 1) / kAlign * kAlign;
      buf.reset(static_cast<uint8_t*>(std::aligned_alloc(kAlign, buf_size)));
      VS_CHECK(buf != nullptr);
    }
    const std::span<uint8_t> bytes(buf.get(), b.key.size);
    const Status read = read_(b.key.vdev, b.key.offset, bytes);
    const bool intact = read.ok() && ComputeChecksum(b.cksum, bytes) == b.checksum;
    l.lock();
    const bool offered = intact && clears == clears_;
    bool unready = false;
    if (offered) {
      inserting_ = true;
      l.unlock();
      unready = !cache_->Insert(b.key, bytes.data(), /*count_access=*/true, Offer::kRead);
      l.lock();
      inserting_ = false;
    }
    in_flight_ = false;
    if (unready && clears == clears_) {
      // The cache's reserve is faulting memory in: offer the block again once it has.
      if (queue_.insert(b).second) queued_bytes_ += b.key.size;
      idle_.notify_all();
      wake_.wait_for(l, stop, kBusyPoll, [] { return false; });
      continue;
    }
    if (!read.ok()) {
      stats_.failed++;
    } else if (!intact) {
      stats_.mismatched++;
    } else if (!offered) {
      stats_.dropped++;
    } else {
      stats_.refilled++;
    }
    idle_.notify_all();
  }
}

}  // namespace volstack::pool

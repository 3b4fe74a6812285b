#include "pool/cache_refill.h"

#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

namespace volstack::pool {

bool CacheRefill::DiskOrder::Less(const BlockKey& a, const BlockKey& b) {
  return std::tie(a.vdev, a.offset, a.size, a.birth) < std::tie(b.vdev, b.offset, b.size, b.birth);
}

CacheRefill::CacheRefill(BlockCache* cache, VdevRead read, uint64_t max_bytes)
    : cache_(cache), read_(std::move(read)), max_bytes_(max_bytes) {}

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
    if (queued_bytes_ + b.key.size > max_bytes_) {
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
}

void CacheRefill::Clear() {
  std::unique_lock l(mu_);
  queue_.clear();
  queued_bytes_ = 0;
  idle_.wait(l, [this] { return !in_flight_; });
}

void CacheRefill::WaitIdle() {
  std::unique_lock l(mu_);
  idle_.wait(l, [this] { return queue_.empty() && !in_flight_; });
}

CacheRefillStats CacheRefill::Stats() const {
  std::lock_guard l(mu_);
  return stats_;
}

void CacheRefill::Run(std::stop_token stop) {
  std::vector<uint8_t> buf;
  std::unique_lock l(mu_);
  for (;;) {
    if (!wake_.wait(l, stop, [this] { return !queue_.empty(); })) return;
    const WrittenBlock b = *queue_.begin();
    queued_bytes_ -= b.key.size;
    queue_.erase(queue_.begin());
    in_flight_ = true;
    l.unlock();
    buf.resize(b.key.size);
    const Status read = read_(b.key.vdev, b.key.offset, buf);
    const bool intact = read.ok() && ComputeChecksum(b.cksum, buf) == b.checksum;
    if (intact) cache_->Insert(b.key, buf.data(), /*count_access=*/true);
    l.lock();
    in_flight_ = false;
    if (!read.ok()) {
      stats_.failed++;
    } else if (!intact) {
      stats_.mismatched++;
    } else {
      stats_.refilled++;
    }
    idle_.notify_all();
  }
}

}  // namespace volstack::pool

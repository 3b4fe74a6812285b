#include "pool/cache_refill.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "pool/compress.h"
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
    clears_++;  // the block in flight is not offered either
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
  for (const BlockKey& k : keys) {
    if (in_flight_ && k == in_flight_key_) in_flight_forgotten_ = true;
    if (queue_.empty()) continue;
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
  std::unique_ptr<uint8_t, decltype(&std::free)> raw(nullptr, &std::free);  // compressed
  size_t buf_size = 0, raw_size = 0;
  auto pause = [&](std::unique_lock<std::mutex>& l, std::chrono::milliseconds d) {
    wake_.wait_for(l, stop, d, [] { return false; });
  };
  std::unique_lock l(mu_);
  for (;;) {
    if (!wake_.wait(l, stop, [this] { return !queue_.empty(); })) return;
    if (busy_ && busy_()) {
      pause(l, kBusyPoll);
      continue;
    }
    const WrittenBlock b = *queue_.begin();
    queued_bytes_ -= b.key.size;
    queue_.erase(queue_.begin());
    const uint64_t clears = clears_;
    in_flight_ = true;
    in_flight_key_ = b.key;
    in_flight_forgotten_ = false;
    l.unlock();
    if (buf_size < b.key.size) {
      buf_size = (b.key.size + kAlign - 1) / kAlign * kAlign;
      buf.reset(static_cast<uint8_t*>(std::aligned_alloc(kAlign, buf_size)));
      VS_CHECK(buf != nullptr);
    }
    const std::span<uint8_t> bytes(buf.get(), b.key.size);
    Status read;
    bool intact;
    if (b.comp == Compression::kNone) {
      read = read_(b.key.vdev, b.key.offset, bytes);
      intact = read.ok() && ComputeChecksum(b.cksum, bytes) == b.checksum;
    } else {
      if (raw_size < b.stored) {
        raw_size = (b.stored + kAlign - 1) / kAlign * kAlign;
        raw.reset(static_cast<uint8_t*>(std::aligned_alloc(kAlign, raw_size)));
        VS_CHECK(raw != nullptr);
      }
      read = read_(b.key.vdev, b.key.offset, std::span(raw.get(), b.stored));
      const std::span<const uint8_t> stream(raw.get(), std::min(b.psize, b.stored));
      intact = read.ok() && ComputeChecksum(b.cksum, stream) == b.checksum &&
               DecompressBlock(b.comp, stream, bytes).ok();
    }
    l.lock();
    // Offered until it goes in, unless dropped (Clear, stop) or freed (Forget) meanwhile: a
    // block left out while the cache's reserve faults memory in is offered again, from these
    // verified bytes, and counted as an access once.
    auto wanted = [&] {
      return clears == clears_ && !in_flight_forgotten_ && !stop.stop_requested();
    };
    bool inserted = false;
    for (int offers = 0; intact && wanted(); offers++) {
      if (offers > 0) {
        pause(l, kRetryDelay);
        if (!wanted()) break;
      }
      inserting_ = true;
      l.unlock();
      inserted = cache_->Insert(b.key, bytes.data(), /*count_access=*/offers == 0, Offer::kRead);
      l.lock();
      inserting_ = false;
      idle_.notify_all();
      if (inserted) break;
    }
    in_flight_ = false;
    if (!read.ok()) {
      stats_.failed++;
    } else if (!intact) {
      stats_.mismatched++;
    } else if (inserted) {
      stats_.refilled++;
    } else {
      stats_.dropped++;
    }
    idle_.notify_all();
  }
}

}  // namespace volstack::pool

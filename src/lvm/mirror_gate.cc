#include "lvm/mirror_gate.h"

#include <algorithm>

namespace volstack::lvm {

MirrorGate& MirrorGate::Global() {
  static MirrorGate* gate = new MirrorGate;  // never destroyed: devices may outlive main()
  return *gate;
}

void MirrorGate::BeginWrite(const std::string& pv, uint64_t offset, uint64_t length) {
  std::unique_lock lock(mu_);
  auto free = [&] {
    return std::none_of(ranges_.begin(), ranges_.end(),
                        [&](const Range& r) { return r.copy && r.Overlaps(pv, offset, length); });
  };
  if (!free()) {
    const auto t0 = std::chrono::steady_clock::now();
    cv_.wait(lock, free);
    stats_.waited_writes++;
    stats_.wait_ns += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count());
  }
  ranges_.push_back({pv, offset, length, false});
}

void MirrorGate::EndWrite(const std::string& pv, uint64_t offset, uint64_t length) {
  std::lock_guard lock(mu_);
  RemoveLocked(pv, offset, length, false);
  cv_.notify_all();
}

void MirrorGate::BeginCopy(const std::string& pv, uint64_t offset, uint64_t length) {
  std::unique_lock lock(mu_);
  // Another copy of an overlapping range (two movers on one PV) waits its turn.
  cv_.wait(lock, [&] {
    return std::none_of(ranges_.begin(), ranges_.end(),
                        [&](const Range& r) { return r.copy && r.Overlaps(pv, offset, length); });
  });
  ranges_.push_back({pv, offset, length, true});
  cv_.wait(lock, [&] {
    return std::none_of(ranges_.begin(), ranges_.end(),
                        [&](const Range& r) { return !r.copy && r.Overlaps(pv, offset, length); });
  });
}

void MirrorGate::EndCopy(const std::string& pv, uint64_t offset, uint64_t length) {
  std::lock_guard lock(mu_);
  RemoveLocked(pv, offset, length, true);
  cv_.notify_all();
}

MirrorGate::Stats MirrorGate::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

size_t MirrorGate::held() const {
  std::lock_guard lock(mu_);
  return ranges_.size();
}

void MirrorGate::RemoveLocked(const std::string& pv, uint64_t offset, uint64_t length, bool copy) {
  for (auto it = ranges_.begin(); it != ranges_.end(); ++it) {
    if (it->copy == copy && it->pv == pv && it->offset == offset && it->length == length) {
      ranges_.erase(it);
      return;
    }
  }
}

}  // namespace volstack::lvm

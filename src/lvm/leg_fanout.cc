#include "lvm/leg_fanout.h"

#include <chrono>

namespace volstack::lvm {

namespace {

// How long a thread polls before it sleeps: a few request times, so a stream of requests
// keeps the helpers awake and an idle device lets them sleep.
constexpr auto kSpin = std::chrono::microseconds(50);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

LegFanout::LegFanout(size_t helpers) {
  for (size_t i = 0; i < helpers; i++) {
    helpers_.push_back(std::make_unique<Helper>());
    Helper& h = *helpers_.back();
    h.thread = std::thread([&h] { Loop(h); });
  }
}

LegFanout::~LegFanout() {
  for (auto& h : helpers_) {
    h->state.store(kStop, std::memory_order_release);
    h->state.notify_one();
  }
  for (auto& h : helpers_) h->thread.join();
}

uint32_t LegFanout::AwaitChange(const std::atomic<uint32_t>& state, uint32_t from) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; i++) {
    const uint32_t s = state.load(std::memory_order_acquire);
    if (s != from) return s;
    CpuRelax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) break;
  }
  for (;;) {
    state.wait(from, std::memory_order_acquire);
    const uint32_t s = state.load(std::memory_order_acquire);
    if (s != from) return s;
  }
}

void LegFanout::Loop(Helper& h) {
  uint32_t s = h.state.load(std::memory_order_acquire);
  for (;;) {
    // kIdle: wait for a job; kDone: the caller has not collected the last one yet.
    while (s == kIdle || s == kDone) s = AwaitChange(h.state, s);
    if (s == kStop) return;
    // The caller may have taken the job back (kPosted -> kIdle) meanwhile.
    if (!h.state.compare_exchange_strong(s, kRunning, std::memory_order_acquire)) continue;
    (*h.fn)(h.index);
    h.state.store(kDone, std::memory_order_release);
    h.state.notify_one();
    s = kDone;
  }
}

void LegFanout::Run(size_t n, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  // Which helper took leg i (nullptr: this thread runs it). Few legs: a small fixed array.
  constexpr size_t kMaxInline = 8;
  Helper* taken_small[kMaxInline] = {};
  std::vector<Helper*> taken_big;
  Helper** taken = taken_small;
  if (n > kMaxInline) {
    taken_big.assign(n, nullptr);
    taken = taken_big.data();
  }
  size_t next = 0;
  for (size_t i = 1; i < n; i++) {
    while (next < helpers_.size()) {
      Helper& h = *helpers_[next++];
      if (h.claimed.exchange(true, std::memory_order_acquire)) continue;
      h.fn = &fn;
      h.index = i;
      h.state.store(kPosted, std::memory_order_release);
      h.state.notify_one();
      taken[i] = &h;
      break;
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (!taken[i]) fn(i);
  }
  for (size_t i = 1; i < n; i++) {
    Helper* h = taken[i];
    if (!h) continue;
    // A helper that has not started yet (no core free for it) is not waited for: its leg is
    // taken back and run here, so a busy machine costs no more than one leg after the other.
    uint32_t expected = kPosted;
    if (h->state.compare_exchange_strong(expected, kIdle, std::memory_order_acq_rel)) {
      fn(i);
    } else {
      uint32_t s = expected;
      while (s == kRunning) s = AwaitChange(h->state, kRunning);
      h->state.store(kIdle, std::memory_order_release);
    }
    h->claimed.store(false, std::memory_order_release);
  }
}

}  // namespace volstack::lvm

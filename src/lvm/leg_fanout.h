// LegFanout: runs one operation on several legs at the same time and waits for all of them.
//
// A raid1 write must reach every leg before it completes; issued one after the other, each
// write costs the sum of the legs' latencies. LegFanout keeps helper threads that take the
// legs after the first while the calling thread does the first itself, so a write costs
// about the slowest leg's latency instead.
//
// Hand-off: a request is a few microseconds of work (a page-cache write), about what a
// sleeping thread takes to wake up. So helpers poll for work for a short while
// (kSpin) after each job before they sleep on a futex (std::atomic::wait), and the caller
// polls for their completion the same way: back-to-back requests never sleep, an idle
// device costs nothing after kSpin. A helper that has not picked its job up by the time the
// caller has finished its own leg (no free core: the machine is busy) loses it: the caller
// runs it itself, so a loaded machine pays one leg after the other, never a wake-up on top.
//
// Threads: Run may be called from any number of threads at once. A caller claims idle
// helpers without waiting; the legs it cannot hand off (every helper busy with another
// caller's request) it runs itself, one after the other. So concurrent callers never wait
// for each other, and Run never deadlocks.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace volstack::lvm {

class LegFanout {
 public:
  // `helpers` threads (0: Run does everything on the calling thread).
  explicit LegFanout(size_t helpers);
  ~LegFanout();
  LegFanout(const LegFanout&) = delete;
  LegFanout& operator=(const LegFanout&) = delete;

  // Calls fn(i) once for every i in [0, n) and returns when every call has returned. fn(0)
  // runs on the calling thread; the others on helpers when one is idle. fn must not throw.
  void Run(size_t n, const std::function<void(size_t)>& fn);

  size_t helpers() const { return helpers_.size(); }

 private:
  enum : uint32_t { kIdle, kPosted, kRunning, kDone, kStop };
  struct Helper {
    std::atomic<bool> claimed{false};
    std::atomic<uint32_t> state{kIdle};
    const std::function<void(size_t)>* fn = nullptr;  // written before state = kPosted
    size_t index = 0;
    std::thread thread;
  };
  static void Loop(Helper& h);
  // Waits until h.state leaves `from`, polling briefly before sleeping. Returns the new state.
  static uint32_t AwaitChange(const std::atomic<uint32_t>& state, uint32_t from);

  std::vector<std::unique_ptr<Helper>> helpers_;
};

}  // namespace volstack::lvm

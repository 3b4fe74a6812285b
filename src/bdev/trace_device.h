// TraceDevice: an observing layer that counts operations and bytes per operation type, and
// can record each request, for per-layer counters in benchmarks and for tests that check
// what a layer sent below (e.g. "the uberblock write came after a flush").
//
// Counters are relaxed atomics, so counting costs a few uncontended increments per request
// and nothing else; Counters() is a snapshot that may be torn across types under load.
// Recording (StartRecording) takes a mutex per request and is meant for tests.
//
// Threads: safe from any number of threads.
#pragma once

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "bdev/forwarding_device.h"
#include "bdev/op_type.h"

namespace volstack::bdev {

struct OpCounters {
  uint64_t ops = 0;     // requests that reached this layer (zero-length ones are not counted)
  uint64_t bytes = 0;   // bytes covered by those requests (0 for flush)
  uint64_t errors = 0;  // requests the device below failed
  uint64_t fua = 0;     // writes / write-zeroes with FUA
  uint64_t nanos = 0;   // time spent below, summed over requests
};

struct TraceCounters {
  std::array<OpCounters, kNumOpTypes> op{};

  const OpCounters& operator[](OpType t) const { return op[static_cast<size_t>(t)]; }
  uint64_t total_ops() const;
};

// One recorded request.
struct TraceEvent {
  OpType op = OpType::kRead;
  uint64_t offset = 0;
  uint64_t length = 0;
  bool fua = false;
  int error = 0;  // 0 on success, else the errno-style code

  bool operator==(const TraceEvent&) const = default;
};

class TraceDevice final : public ForwardingDevice {
 public:
  static std::shared_ptr<TraceDevice> Create(BlockDevicePtr target, std::string name = {});

  TraceCounters Counters() const;
  void ResetCounters();

  // Starts keeping every request (up to `max_events`; later ones are counted, not kept).
  void StartRecording(size_t max_events = 1 << 20);
  // Stops recording and returns what was recorded, in completion order.
  std::vector<TraceEvent> StopRecording();

  TraceDevice(BlockDevicePtr target, std::string name);

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override;
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, WriteOptions opts) override;
  // Counted as one write of the total length.
  Status DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                  WriteOptions opts) override;
  Status DoFlush() override;
  Status DoDiscard(uint64_t offset, uint64_t length) override;
  Status DoWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts) override;
  Result<std::vector<AllocationExtent>> DoQueryAllocation(uint64_t offset,
                                                          uint64_t length) override;

 private:
  struct AtomicCounters {
    std::atomic<uint64_t> ops{0}, bytes{0}, errors{0}, fua{0}, nanos{0};
  };
  // Times `fn` and accounts it under `op`.
  template <typename Fn>
  auto Account(OpType op, uint64_t offset, uint64_t length, bool fua, Fn&& fn);
  void Record(const TraceEvent& event);

  std::array<AtomicCounters, kNumOpTypes> counters_;
  std::atomic<bool> recording_{false};
  std::mutex mu_;
  std::vector<TraceEvent> events_;  // GUARDED_BY(mu_)
  size_t max_events_ = 0;           // GUARDED_BY(mu_)
};

}  // namespace volstack::bdev

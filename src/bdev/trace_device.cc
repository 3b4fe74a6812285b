#include "bdev/trace_device.h"

#include <chrono>
#include <type_traits>

namespace volstack::bdev {

uint64_t TraceCounters::total_ops() const {
  uint64_t n = 0;
  for (const auto& c : op) n += c.ops;
  return n;
}

std::shared_ptr<TraceDevice> TraceDevice::Create(BlockDevicePtr target, std::string name) {
  return std::make_shared<TraceDevice>(std::move(target), std::move(name));
}

TraceDevice::TraceDevice(BlockDevicePtr target, std::string name)
    : ForwardingDevice(std::move(target), std::move(name)) {}

TraceCounters TraceDevice::Counters() const {
  TraceCounters out;
  for (int i = 0; i < kNumOpTypes; i++) {
    const auto& c = counters_[i];
    out.op[i] =
        OpCounters{c.ops.load(std::memory_order_relaxed), c.bytes.load(std::memory_order_relaxed),
                   c.errors.load(std::memory_order_relaxed), c.fua.load(std::memory_order_relaxed),
                   c.nanos.load(std::memory_order_relaxed)};
  }
  return out;
}

void TraceDevice::ResetCounters() {
  for (auto& c : counters_) {
    c.ops.store(0, std::memory_order_relaxed);
    c.bytes.store(0, std::memory_order_relaxed);
    c.errors.store(0, std::memory_order_relaxed);
    c.fua.store(0, std::memory_order_relaxed);
    c.nanos.store(0, std::memory_order_relaxed);
  }
}

void TraceDevice::StartRecording(size_t max_events) {
  std::lock_guard lock(mu_);
  events_.clear();
  max_events_ = max_events;
  recording_.store(true, std::memory_order_release);
}

std::vector<TraceEvent> TraceDevice::StopRecording() {
  std::lock_guard lock(mu_);
  recording_.store(false, std::memory_order_release);
  return std::move(events_);
}

void TraceDevice::Record(const TraceEvent& event) {
  std::lock_guard lock(mu_);
  if (recording_.load(std::memory_order_relaxed) && events_.size() < max_events_) {
    events_.push_back(event);
  }
}

template <typename Fn>
auto TraceDevice::Account(OpType op, uint64_t offset, uint64_t length, bool fua, Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  auto result = fn();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  auto& c = counters_[static_cast<size_t>(op)];
  c.ops.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(length, std::memory_order_relaxed);
  if (fua) c.fua.fetch_add(1, std::memory_order_relaxed);
  c.nanos.fetch_add(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()),
      std::memory_order_relaxed);
  int error = 0;
  if constexpr (std::is_same_v<decltype(result), Status>) {
    error = result.code();
  } else {
    error = result.ok() ? 0 : result.status().code();
  }
  if (error != 0) c.errors.fetch_add(1, std::memory_order_relaxed);
  if (recording_.load(std::memory_order_acquire)) {
    Record(TraceEvent{op, offset, length, fua, error});
  }
  return result;
}

Status TraceDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  return Account(OpType::kRead, offset, buf.size(), false,
                 [&] { return ForwardingDevice::DoRead(offset, buf); });
}

Status TraceDevice::DoWrite(uint64_t offset, std::span<const uint8_t> buf, WriteOptions opts) {
  return Account(OpType::kWrite, offset, buf.size(), opts.fua,
                 [&] { return ForwardingDevice::DoWrite(offset, buf, opts); });
}

Status TraceDevice::DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                             WriteOptions opts) {
  return Account(OpType::kWrite, offset, TotalLength(pieces), opts.fua,
                 [&] { return ForwardingDevice::DoWriteV(offset, pieces, opts); });
}

Status TraceDevice::DoFlush() {
  return Account(OpType::kFlush, 0, 0, false, [&] { return ForwardingDevice::DoFlush(); });
}

Status TraceDevice::DoDiscard(uint64_t offset, uint64_t length) {
  return Account(OpType::kDiscard, offset, length, false,
                 [&] { return ForwardingDevice::DoDiscard(offset, length); });
}

Status TraceDevice::DoWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts) {
  return Account(OpType::kWriteZeroes, offset, length, opts.fua,
                 [&] { return ForwardingDevice::DoWriteZeroes(offset, length, opts); });
}

Result<std::vector<AllocationExtent>> TraceDevice::DoQueryAllocation(uint64_t offset,
                                                                     uint64_t length) {
  return Account(OpType::kQueryAllocation, offset, length, false,
                 [&] { return ForwardingDevice::DoQueryAllocation(offset, length); });
}

}  // namespace volstack::bdev

#include "bench/block_workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <mutex>
#include <random>
#include <thread>

#include "bench/cancel.h"

namespace volstack::bench {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kMiB = 1 << 20;

struct Phase {
  const char* name;
  bool write;
  uint32_t block;
  bool random;
};

constexpr Phase kPhases[] = {
    {"seqwrite-1m", true, 1 << 20, false},
    {"randwrite-4k", true, 4096, true},
    {"seqread-1m", false, 1 << 20, false},
    {"randread-4k", false, 4096, true},
};

// An aligned buffer of random bytes: incompressible, so a compressing layer does real work.
struct Buffer {
  explicit Buffer(size_t size, uint64_t seed) : size(size) {
    data = static_cast<uint8_t*>(std::aligned_alloc(4096, size));
    std::mt19937_64 rng(seed);
    for (size_t i = 0; i + 8 <= size; i += 8) {
      uint64_t v = rng();
      std::memcpy(data + i, &v, 8);
    }
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint8_t* data;
  size_t size;
};

struct PhaseState {
  std::atomic<bool> stop{false};
  std::mutex mu;
  Status error;  // GUARDED_BY(mu): the first failure
  void Fail(Status s) {
    std::lock_guard<std::mutex> lock(mu);
    if (error.ok()) error = std::move(s);
    stop.store(true);
  }
};

struct ThreadResult {
  LatencyHistogram latency;
  uint64_t ops = 0;
  uint64_t bytes = 0;
};

// Runs one phase on `threads` threads until `seconds` pass (or, for prefill with
// seconds <= 0, until each thread's slice is written once).
Result<BlockWorkloadResult> RunPhase(bdev::BlockDevice& device, const Phase& phase,
                                     const BlockWorkloadOptions& options, uint64_t region,
                                     double seconds, const std::string& label) {
  const int threads = std::max(1, options.threads);
  const uint64_t slice = std::max<uint64_t>(kMiB, (region / threads) / kMiB * kMiB);
  const bool once = seconds <= 0;
  PhaseState state;
  std::vector<ThreadResult> results(threads);
  std::latch ready(threads + 1);
  Clock::time_point start;
  std::atomic<int64_t> start_ns{0};

  auto worker = [&](int t) {
    Buffer buf(phase.block, options.seed * 1000 + t);
    std::mt19937_64 rng(options.seed + 7919 * t);
    const uint64_t blocks = region / phase.block;
    const uint64_t slice_start = (static_cast<uint64_t>(t) * slice) % region;
    const uint64_t slice_len = std::min(slice, region - slice_start);
    uint64_t pos = 0;
    ThreadResult& r = results[t];
    ready.arrive_and_wait();
    const auto deadline = Clock::time_point(std::chrono::nanoseconds(start_ns.load())) +
                          std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(std::max(0.0, seconds)));
    while (!state.stop.load(std::memory_order_relaxed)) {
      uint64_t offset;
      if (phase.random) {
        offset = (rng() % blocks) * phase.block;
      } else {
        if (once && pos >= slice_len) break;
        offset = slice_start + pos % slice_len;
        pos += phase.block;
      }
      auto t0 = Clock::now();
      if (!once && t0 >= deadline) break;
      Status s = phase.write ? device.Write(offset, std::span<const uint8_t>(buf.data, buf.size))
                             : device.Read(offset, std::span<uint8_t>(buf.data, buf.size));
      auto t1 = Clock::now();
      if (!s.ok()) {
        state.Fail(s.WithContext(fmt::format("{} at offset {}", label, offset)));
        break;
      }
      r.latency.Record(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
      ++r.ops;
      r.bytes += phase.block;
      if ((r.ops & 63) == 0 && CancelRequested()) state.stop.store(true);
    }
  };

  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t);
  start = Clock::now();
  start_ns.store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count());
  ready.arrive_and_wait();
  // Progress from this thread while the workers run.
  std::atomic<int> done{0};
  std::thread joiner([&] {
    for (auto& th : pool) th.join();
    done.store(1);
  });
  while (done.load() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (options.on_progress) {
      double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      options.on_progress(label, once ? 0 : seconds - elapsed);
    }
    if (CancelRequested()) state.stop.store(true);
  }
  joiner.join();
  if (!state.error.ok()) return state.error;
  VS_RETURN_IF_ERROR(CheckCancelled());
  if (phase.write) {
    Status s = device.Flush();
    if (!s.ok()) return s.WithContext(label + ": flush");
  }
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  BlockWorkloadResult out;
  out.name = phase.name;
  LatencyHistogram all;
  for (const auto& r : results) {
    all.Merge(r.latency);
    out.ops += r.ops;
    out.bytes += r.bytes;
  }
  out.seconds = elapsed;
  out.iops = elapsed > 0 ? static_cast<double>(out.ops) / elapsed : 0;
  out.mb_s = elapsed > 0 ? static_cast<double>(out.bytes) / elapsed / 1e6 : 0;
  out.p50_us = static_cast<double>(all.Percentile(50)) / 1e3;
  out.p99_us = static_cast<double>(all.Percentile(99)) / 1e3;
  out.p999_us = static_cast<double>(all.Percentile(99.9)) / 1e3;
  out.max_us = static_cast<double>(all.max()) / 1e3;
  return out;
}

}  // namespace

int LatencyHistogram::BucketOf(uint64_t v) {
  if (v < (1u << kSubBits)) return static_cast<int>(v);
  int msb = 63 - __builtin_clzll(v);
  int shift = msb - kSubBits;
  int sub = static_cast<int>((v >> shift) & ((1u << kSubBits) - 1));
  return (shift + 1) * (1 << kSubBits) + sub;
}

uint64_t LatencyHistogram::UpperBound(int bucket) {
  if (bucket < (1 << kSubBits)) return static_cast<uint64_t>(bucket);
  int group = bucket >> kSubBits;
  int sub = bucket & ((1 << kSubBits) - 1);
  int shift = group - 1;
  uint64_t lower = static_cast<uint64_t>((1 << kSubBits) + sub) << shift;
  return lower + ((uint64_t{1} << shift) - 1);
}

void LatencyHistogram::Record(uint64_t nanos) {
  ++buckets_[BucketOf(nanos)];
  ++count_;
  max_ = std::max(max_, nanos);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (int i = 0; i < kBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  max_ = std::max(max_, other.max_);
}

uint64_t LatencyHistogram::Percentile(double p) const {
  if (count_ == 0) return 0;
  uint64_t target = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= target) return std::min(UpperBound(i), max_);
  }
  return max_;
}

Result<std::vector<BlockWorkloadResult>> RunBlockWorkload(bdev::BlockDevice& device,
                                                          const BlockWorkloadOptions& options) {
  uint64_t region = options.region_bytes == 0 ? device.size() : options.region_bytes;
  region = std::min(region, device.size()) / kMiB * kMiB;
  if (region < kMiB) {
    return Status::InvalidArgument(device.name() + ": too small for the block workload (< 1 MiB)");
  }
  if (device.logical_block_size() > 4096) {
    return Status::InvalidArgument(device.name() + ": logical block size above 4096");
  }
  if (options.prefill) {
    VS_ASSIGN_OR_RETURN(BlockWorkloadResult ignored,
                        RunPhase(device, kPhases[0], options, region, 0, "prefill"));
    (void)ignored;
  }
  std::vector<BlockWorkloadResult> results;
  for (const Phase& phase : kPhases) {
    VS_ASSIGN_OR_RETURN(BlockWorkloadResult r,
                        RunPhase(device, phase, options, region, options.seconds, phase.name));
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace volstack::bench

// An in-process block workload, the bench's fallback when dbench cannot run (no root, no
// loop devices, no dbench) and a view of the stacks without the kernel in the way.
//
// Phases, each for a fixed time with N threads, in this order so that reads find data:
//   prefill       (untimed) one sequential 1 MiB pass over the region, then a flush
//   seqwrite-1m   each thread streams 1 MiB writes through its own slice of the region
//   randwrite-4k  4 KiB writes at uniformly random aligned offsets
//   seqread-1m    as seqwrite, reading
//   randread-4k   as randwrite, reading
// A write phase ends with a Flush that is counted in its time, so buffered layers pay for
// what they buffered. Each operation's latency goes into a log-bucketed histogram (at most
// 1/16 relative error), from which the percentiles come.
//
// Threads: RunBlockWorkload starts `threads` threads and joins them before returning; the
// device must be thread-safe (every BlockDevice is).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "bench/report.h"

namespace volstack::bench {

// Latencies in nanoseconds, bucketed by the top 5 significant bits. Not thread-safe: one per
// thread, merged at the end.
class LatencyHistogram {
 public:
  void Record(uint64_t nanos);
  void Merge(const LatencyHistogram& other);
  uint64_t count() const { return count_; }
  uint64_t max() const { return max_; }
  // The value below which `p` percent of recorded latencies fall (the bucket's upper bound,
  // clamped to the max seen); 0 when empty.
  uint64_t Percentile(double p) const;

 private:
  static constexpr int kSubBits = 4;  // 16 sub-buckets per power of two
  static constexpr int kBuckets = 64 << kSubBits;
  static int BucketOf(uint64_t v);
  static uint64_t UpperBound(int bucket);

  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
  uint64_t max_ = 0;
};

struct BlockWorkloadOptions {
  int threads = 4;
  double seconds = 5;         // per timed phase
  uint64_t region_bytes = 0;  // 0: the whole device
  bool prefill = true;
  uint64_t seed = 42;
  // Called about ten times a second from the calling thread: the phase and its seconds left.
  std::function<void(const std::string& phase, double seconds_left)> on_progress;
};

// Runs the phases on `device`. Fails on the first I/O error (naming the phase and offset), or
// with ECANCELED on Ctrl-C (see cancel.h).
Result<std::vector<BlockWorkloadResult>> RunBlockWorkload(bdev::BlockDevice& device,
                                                          const BlockWorkloadOptions& options);

}  // namespace volstack::bench

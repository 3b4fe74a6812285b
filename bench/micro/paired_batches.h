// Paired batches: how the micro-benchmarks compare a device with its reference on a shared
// machine. Each iteration runs one batch of random block requests on the reference (path 0)
// and one on the subject (path 1), alternating which goes first, each batch over fresh
// random offsets (replaying the other path's offsets would hand the second batch pages the
// first one just dirtied). Per pair, ratio = time(reference) / time(subject): the subject's
// throughput relative to the reference's. The medians over all pairs are reported as the
// counters ratio_wall (wall clock) and ratio_cpu (the thread's CPU time: the layer's own
// cost), so a burst of load from elsewhere moves one pair, not the result.
#pragma once

#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "util/status.h"

namespace volstack::bench {

inline uint64_t NowNs(clockid_t clock) {
  struct timespec ts;
  ::clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

inline double Median(std::vector<double>& v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// `io(path, write, offset, buf)` does one request of buf.size() bytes at `offset` (a multiple
// of buf.size() below blocks * buf.size()) on path 0 (reference) or 1 (subject). Writes when
// state.range(0) != 0.
template <typename IoFn>
void RunPairedBatches(benchmark::State& state, uint64_t blocks, size_t block_bytes, uint64_t seed,
                      IoFn io) {
  constexpr int kBatch = 16;
  const bool write = state.range(0) != 0;
  std::vector<uint8_t> buf(block_bytes, 0xa5);
  std::mt19937_64 rng(seed);
  uint64_t wall[2] = {0, 0}, cpu[2] = {0, 0};
  std::vector<double> wall_ratios, cpu_ratios;
  bool subject_first = false;
  auto batch = [&](int path) {
    uint64_t offsets[kBatch];
    for (auto& o : offsets) o = (rng() % blocks) * block_bytes;
    const uint64_t w0 = NowNs(CLOCK_MONOTONIC), c0 = NowNs(CLOCK_THREAD_CPUTIME_ID);
    for (uint64_t off : offsets) {
      if (!io(path, write, off, std::span<uint8_t>(buf)).ok()) return false;
    }
    wall[path] = NowNs(CLOCK_MONOTONIC) - w0;
    cpu[path] = NowNs(CLOCK_THREAD_CPUTIME_ID) - c0;
    return true;
  };
  for (auto _ : state) {
    const bool ok = subject_first ? (batch(1) && batch(0)) : (batch(0) && batch(1));
    if (!ok) {
      state.SkipWithError("I/O failed");
      break;
    }
    subject_first = !subject_first;
    if (wall[1] > 0) wall_ratios.push_back(static_cast<double>(wall[0]) / wall[1]);
    if (cpu[1] > 0) cpu_ratios.push_back(static_cast<double>(cpu[0]) / cpu[1]);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * 2 * kBatch);
  state.counters["ratio_wall"] = Median(wall_ratios);
  state.counters["ratio_cpu"] = Median(cpu_ratios);
}

}  // namespace volstack::bench

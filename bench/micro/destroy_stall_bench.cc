// Destroying a big snapshot must not stall writers (src/pool/snapshot.cc: a destroy's frees
// run inside one txg commit). One run measures, side by side:
//
//   DestroyStall   a writer doing 4 KiB random writes (a flush every 64) to its own volume
//                  while nothing else happens (the reference), then while a snapshot
//                  holding VOLSTACK_BENCH_DESTROY_MB of unique data (default 1024; the
//                  issue's figure is 10240) of another volume is destroyed. Counters:
//                  destroy_ms (the destroy call), ref_p99_us / destroy_p99_us (per-write
//                  latency, each write or flush), ratio (destroy_p99 / ref_p99: 1 is no
//                  stall), destroy_max_us (the slowest write or flush overlapping the
//                  destroy) and max_at_ms (when it started, after the destroy began),
//                  ops_during (writes timed during the destroy).
//
//   destroy_stall_bench
//
// Files live in VOLSTACK_BENCH_DIR (default /var/tmp) and are removed at exit.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bdev/file_device.h"
#include "pool/spa.h"

namespace {

using namespace volstack;
using Clock = std::chrono::steady_clock;
constexpr uint64_t kMiB = 1 << 20;

std::string Path() {
  const char* d = std::getenv("VOLSTACK_BENCH_DIR");
  return std::string(d ? d : "/var/tmp") + "/volstack-destroy-bench-" + std::to_string(getpid());
}

void Die(const std::string& what) {
  std::fprintf(stderr, "destroy_stall_bench: %s\n", what.c_str());
  ::unlink(Path().c_str());
  std::exit(1);
}

std::vector<uint8_t> Data(size_t n, uint64_t seed) {
  std::vector<uint8_t> d(n);
  std::mt19937_64 rng(seed);
  for (auto& b : d) b = static_cast<uint8_t>(rng() | 1);
  return d;
}

// Writes until told to stop, timing each write (and flush): (start, microseconds).
class Writer {
 public:
  explicit Writer(bdev::BlockDevicePtr dev) : dev_(std::move(dev)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Writer() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // Latencies of the operations that overlap [from, to]; *slowest_at (if given): when the
  // slowest of them started, in ms after `from` (negative: before).
  std::vector<double> Between(Clock::time_point from, Clock::time_point to,
                              double* slowest_at = nullptr) {
    std::lock_guard l(mu_);
    std::vector<double> out;
    double slowest = -1;
    for (const auto& [start, us] : ops_) {
      const auto end = start + std::chrono::microseconds(static_cast<int64_t>(us));
      if (end < from || start > to) continue;
      out.push_back(us);
      if (us > slowest && slowest_at != nullptr) {
        slowest = us;
        *slowest_at = std::chrono::duration<double, std::milli>(start - from).count();
      }
    }
    return out;
  }

 private:
  void Run() {
    const auto d = Data(4096, 2);
    std::mt19937_64 rng(9);
    const uint64_t blocks = dev_->size() / 4096;
    for (int i = 0; !stop_; i++) {
      const auto t0 = Clock::now();
      if (!dev_->Write((rng() % blocks) * 4096, d).ok()) Die("write");
      if (i % 64 == 63 && !dev_->Flush().ok()) Die("flush");
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      std::lock_guard l(mu_);
      ops_.emplace_back(t0, us);
    }
  }
  bdev::BlockDevicePtr dev_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::pair<Clock::time_point, double>> ops_;  // GUARDED_BY(mu_)
  std::thread thread_;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * double(v.size())))];
}

void DestroyStall(benchmark::State& state) {
  const char* env = std::getenv("VOLSTACK_BENCH_DESTROY_MB");
  const uint64_t unique = (env != nullptr && *env ? std::strtoull(env, nullptr, 10) : 1024) * kMiB;
  const uint64_t wsize = 256 * kMiB;
  auto f = bdev::FileDevice::Create(Path(), 2 * unique + wsize + 1024 * kMiB);
  if (!f.ok()) Die(f.status().ToString());
  auto created = pool::Pool::Create("bench", {*f});
  if (!created.ok()) Die(created.status().ToString());
  auto pool = *created;
  pool::VolumeOptions vo;
  vo.volsize = unique;
  vo.sparse = true;  // 16 KiB blocks, the default
  if (!pool->CreateVolume("bench/big", vo).ok()) Die("create big");
  vo.volsize = wsize;
  vo.volblocksize = 4096;
  if (!pool->CreateVolume("bench/w", vo).ok()) Die("create w");
  {
    // The snapshot holds `unique` bytes no other tree names: written, snapshotted, rewritten.
    auto big = *pool->OpenVolume("bench/big");
    for (uint64_t seed : {1, 2}) {
      const auto d = Data(kMiB, seed);
      for (uint64_t o = 0; o < unique; o += kMiB) {
        if (!big->Write(o, d).ok()) Die("fill");
      }
      if (!pool->Sync().ok()) Die("sync");
      if (seed == 1 && !pool->Snapshot({"bench/big@s"}).ok()) Die("snapshot");
    }
    auto w = *pool->OpenVolume("bench/w");
    const auto d = Data(kMiB, 3);
    for (uint64_t o = 0; o < wsize; o += kMiB) {
      if (!w->Write(o, d).ok()) Die("fill w");
    }
    if (!pool->Sync().ok()) Die("sync");
  }
  double ref_p99 = 0, des_p99 = 0, des_max = 0, destroy_ms = 0, ops_during = 0, max_at = 0;
  for (auto _ : state) {
    Writer writer(*pool->OpenVolume("bench/w"));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // past its start
    const auto r0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const auto r1 = Clock::now();
    const auto t0 = Clock::now();
    if (Status st = pool->DestroySnapshot("bench/big@s"); !st.ok()) Die(st.ToString());
    const auto t1 = Clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    writer.Stop();
    const auto ref = writer.Between(r0, r1), during = writer.Between(t0, t1, &max_at);
    ref_p99 = Percentile(ref, 0.99);
    des_p99 = Percentile(during, 0.99);
    des_max = Percentile(during, 1.0);
    ops_during = double(during.size());
    destroy_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  }
  state.counters["destroyed_MiB"] = double(unique / kMiB);
  state.counters["destroy_ms"] = destroy_ms;
  state.counters["ref_p99_us"] = ref_p99;
  state.counters["destroy_p99_us"] = des_p99;
  state.counters["destroy_max_us"] = des_max;
  state.counters["ops_during"] = ops_during;
  state.counters["max_at_ms"] = max_at;
  state.counters["ratio"] = ref_p99 > 0 ? des_p99 / ref_p99 : 0;
  pool.reset();
  ::unlink(Path().c_str());
}
BENCHMARK(DestroyStall)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

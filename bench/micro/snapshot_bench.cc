// Volume snapshots (src/pool/snapshot.cc), each measured against its reference in one run:
//
//   SnapshotTime   zfs snapshot of a large thin volume (VOLSTACK_BENCH_SNAP_GB, default 100
//                  GiB, with VOLSTACK_BENCH_SNAP_WRITTEN_MB written in 1 MiB runs spread over
//                  it, default 1024; the figure is 10240) against a 1 GiB volume with
//                  64 MiB written. A snapshot is a directory entry in one commit: the two
//                  should be the same within noise. Counters: big_ms, small_ms (median per
//                  snapshot, each in its own pool; the snapshot is destroyed between
//                  passes), ratio (small / big).
//   RandWrite4K/0, /1, /10   4 KiB random writes, flush every 64, on a 256 MiB volume
//                  (volblocksize 4K) holding 0, 1 or 10 snapshots, each taken after another
//                  round of random overwrites, so every snapshot holds blocks of its own and
//                  the writes keep hitting blocks a snapshot holds; the reference is the
//                  same volume with none, in its own pool, the passes alternating.
//                  Counters: ref_MBps, snap_MBps, ratio (snap / ref: target >= 0.9).
//
//   snapshot_bench [--benchmark_filter=SnapshotTime]
//
// Files live in VOLSTACK_BENCH_DIR (default /var/tmp) and are removed at exit.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bdev/file_device.h"
#include "pool/spa.h"

namespace {

using namespace volstack;
using Clock = std::chrono::steady_clock;
constexpr uint64_t kMiB = 1 << 20;

uint64_t EnvOr(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  return v != nullptr && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

std::string Path(const std::string& n) {
  const char* d = std::getenv("VOLSTACK_BENCH_DIR");
  return std::string(d ? d : "/var/tmp") + "/volstack-snap-bench-" + std::to_string(getpid()) +
         "-" + n;
}

void Die(const std::string& what) {
  std::fprintf(stderr, "snapshot_bench: %s\n", what.c_str());
  for (const char* n : {"a", "b"}) ::unlink(Path(n).c_str());
  std::exit(1);
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A pool on a sparse file holding one thin volume bench/v.
struct PoolVol {
  PoolVol(const std::string& tag, uint64_t volsize, uint32_t vbs, uint64_t vdev_size)
      : path(Path(tag)) {
    auto f = bdev::FileDevice::Create(path, vdev_size);
    if (!f.ok()) Die(f.status().ToString());
    pool::PoolCreateOptions co;
    co.tuning.txg_timeout = std::chrono::milliseconds(5000);
    auto p = pool::Pool::Create("bench", {*f}, co);
    if (!p.ok()) Die(p.status().ToString());
    pool = *p;
    pool::VolumeOptions vo;
    vo.volsize = volsize;
    vo.volblocksize = vbs;
    vo.sparse = true;
    if (!pool->CreateVolume("bench/v", vo).ok()) Die("create volume");
    dev = *pool->OpenVolume("bench/v");
  }
  ~PoolVol() {
    dev.reset();
    pool.reset();
    ::unlink(path.c_str());
  }
  std::string path;
  std::shared_ptr<pool::Pool> pool;
  bdev::BlockDevicePtr dev;
};

std::vector<uint8_t> Data(size_t n, uint64_t seed) {
  std::vector<uint8_t> d(n);
  std::mt19937_64 rng(seed);
  for (auto& b : d) b = static_cast<uint8_t>(rng() | 1);
  return d;
}

// `written` bytes in 1 MiB runs at distinct random 1 MiB-aligned places of the volume.
void Spread(PoolVol& pv, uint64_t volsize, uint64_t written) {
  const auto d = Data(kMiB, 7);
  std::mt19937_64 rng(3);
  std::vector<uint64_t> slots(volsize / kMiB);
  for (uint64_t i = 0; i < slots.size(); i++) slots[i] = i;
  std::shuffle(slots.begin(), slots.end(), rng);
  for (uint64_t i = 0; i < written / kMiB && i < slots.size(); i++) {
    if (!pv.dev->Write(slots[i] * kMiB, d).ok()) Die("write");
  }
  if (!pv.pool->Sync().ok()) Die("sync");
}

double MedianSnapshotMs(PoolVol& pv, int passes) {
  std::vector<double> ms;
  for (int i = 0; i < passes; i++) {
    const auto t0 = Clock::now();
    if (Status st = pv.pool->Snapshot({"bench/v@s"}); !st.ok()) Die(st.ToString());
    ms.push_back(Seconds(t0, Clock::now()) * 1e3);
    if (!pv.pool->DestroySnapshot("bench/v@s").ok()) Die("destroy");
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void SnapshotTime(benchmark::State& state) {
  const uint64_t big = EnvOr("VOLSTACK_BENCH_SNAP_GB", 100) << 30;
  const uint64_t big_written = EnvOr("VOLSTACK_BENCH_SNAP_WRITTEN_MB", 1024) * kMiB;
  const uint64_t small = 1ull << 30, small_written = 64 * kMiB;
  PoolVol b("a", big, 16384, big_written * 2 + 512 * kMiB);
  PoolVol s("b", small, 16384, small + 256 * kMiB);
  Spread(b, big, big_written);
  Spread(s, small, small_written);
  double big_ms = 0, small_ms = 0;
  for (auto _ : state) {
    // Alternating, so load on the machine falls on both alike.
    big_ms += MedianSnapshotMs(b, 5);
    small_ms += MedianSnapshotMs(s, 5);
  }
  state.counters["big_ms"] = big_ms / double(state.iterations());
  state.counters["small_ms"] = small_ms / double(state.iterations());
  state.counters["ratio"] = small_ms / big_ms;
  state.counters["big_GiB"] = double(big >> 30);
  state.counters["big_written_MiB"] = double(big_written / kMiB);
}
BENCHMARK(SnapshotTime)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void RandomWrites(PoolVol& pv, uint64_t size, int n, std::mt19937_64& rng,
                  const std::vector<uint8_t>& d) {
  for (int i = 0; i < n; i++) {
    if (!pv.dev->Write((rng() % (size / 4096)) * 4096, d).ok()) Die("write");
    if (i % 64 == 63 && !pv.dev->Flush().ok()) Die("flush");
  }
}

void RandWrite4K(benchmark::State& state) {
  const int nsnaps = static_cast<int>(state.range(0));
  const uint64_t size = 256 * kMiB;
  const uint64_t vdev = size * (nsnaps + 3) / 2 + 512 * kMiB;
  PoolVol ref("a", size, 4096, vdev), snap("b", size, 4096, vdev);
  const auto fill = Data(kMiB, 1);
  for (PoolVol* pv : {&ref, &snap}) {
    for (uint64_t o = 0; o < size; o += kMiB) {
      if (!pv->dev->Write(o, fill).ok()) Die("fill");
    }
    if (!pv->pool->Sync().ok()) Die("sync");
  }
  // Each snapshot after a round of overwrites (an eighth of the volume), on both sides.
  const auto d = Data(4096, 2);
  std::mt19937_64 rng_setup(5);
  for (int k = 0; k < nsnaps; k++) {
    std::mt19937_64 r1 = rng_setup, r2 = rng_setup;
    RandomWrites(ref, size, int(size / 8 / 4096), r1, d);
    RandomWrites(snap, size, int(size / 8 / 4096), r2, d);
    rng_setup = r1;
    if (!ref.pool->Sync().ok()) Die("sync");
    if (!snap.pool->Snapshot({"bench/v@s" + std::to_string(k)}).ok()) Die("snapshot");
  }
  const int n = 4096;
  double ref_s = 0, snap_s = 0;
  std::mt19937_64 rng(9);
  for (auto _ : state) {
    std::mt19937_64 r1 = rng, r2 = rng;
    auto t0 = Clock::now();
    RandomWrites(ref, size, n, r1, d);
    auto t1 = Clock::now();
    RandomWrites(snap, size, n, r2, d);
    auto t2 = Clock::now();
    rng = r1;
    ref_s += Seconds(t0, t1);
    snap_s += Seconds(t1, t2);
  }
  const double bytes = 4096.0 * n * double(state.iterations());
  state.counters["ref_MBps"] = bytes / ref_s / 1e6;
  state.counters["snap_MBps"] = bytes / snap_s / 1e6;
  state.counters["ratio"] = ref_s / snap_s;
}
BENCHMARK(RandWrite4K)
    ->Arg(0)
    ->Arg(1)
    ->Arg(10)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(6)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

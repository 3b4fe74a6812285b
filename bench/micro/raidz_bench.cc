// Raidz against a single vdev and against a stripe of the same files, side by side in one
// run (files in VOLSTACK_BENCH_DIR, default /var/tmp, removed at exit; issue 36, "Speed"):
//
//   Raidz/<layout>   layouts: raidz1 of 3 files, raidz2 of 6. Each pass, on a pool with one
//                    file, on a stripe of the layout's count of files and on the raidz
//                    (sides alternating within the pass, the first one changing from pass
//                    to pass, so load drifts and writeback hit all three):
//                      seq_write  the volume written whole in 1 MiB writes, committed;
//                      seq_read   read back whole in 1 MiB reads (no data cache);
//                      rand_write 4 KiB writes at random 4 KiB offsets (a quarter of the
//                                 volume's blocks), committed;
//                      rand_read  4 KiB reads at random offsets (as many).
//                    Counters per workload: MBps of the raidz, and its ratio to the single
//                    vdev (`<w>_vs_single`) and to the stripe (`<w>_vs_stripe`).
//
//   raidz_bench [--benchmark_filter=Raidz/raidz1]
#include <benchmark/benchmark.h>
#include <unistd.h>

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
constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kVolSize = 192 * kMiB;
constexpr uint64_t kRandOps = kVolSize / 4096 / 4;

std::string Path(const std::string& n) {
  const char* d = std::getenv("VOLSTACK_BENCH_DIR");
  return std::string(d ? d : "/var/tmp") + "/volstack-raidz-bench-" + std::to_string(getpid()) +
         "-" + n;
}

std::vector<std::string> all_files;

void Die(const std::string& what) {
  std::fprintf(stderr, "raidz_bench: %s\n", what.c_str());
  for (const auto& f : all_files) ::unlink(Path(f).c_str());
  std::exit(1);
}

struct Side {
  std::shared_ptr<pool::Pool> pool;
  bdev::BlockDevicePtr vol;
  std::vector<std::string> files;
  ~Side() {
    vol.reset();
    if (pool) pool->Close().IgnoreError();
    for (auto& f : files) ::unlink(Path(f).c_str());
  }
};

// `kind`: "single" (one file), "stripe" (n files, one vdev each) or "raidz" (one raidz of
// n files with `parity`). Every file is sized so that the volume fits the smallest pool.
void Open(Side& s, const std::string& kind, int n, uint32_t parity) {
  const int files = kind == "single" ? 1 : n;
  const uint64_t per_file = kVolSize / (kind == "raidz" ? n - parity : files) + 96 * kMiB;
  std::vector<pool::VdevSpec> specs;
  pool::VdevSpec rz;
  rz.raidz = parity;
  for (int i = 0; i < files; i++) {
    const std::string name = kind + std::to_string(n) + "-" + std::to_string(i);
    s.files.push_back(name);
    all_files.push_back(name);
    ::unlink(Path(name).c_str());
    auto f = bdev::FileDevice::Create(Path(name), per_file);
    if (!f.ok()) Die(f.status().ToString());
    if (kind == "raidz") {
      rz.devices.push_back(*f);
    } else {
      pool::VdevSpec one;
      one.devices.push_back(*f);
      specs.push_back(one);
    }
  }
  if (kind == "raidz") specs.push_back(rz);
  pool::PoolCreateOptions o;
  o.tuning.cache_data = false;  // reads reach the vdevs
  auto p = pool::Pool::Create("b" + kind + std::to_string(n), specs, o);
  if (!p.ok()) Die(p.status().ToString());
  s.pool = *p;
  pool::VolumeOptions vo;
  vo.volsize = kVolSize;
  vo.volblocksize = 4096;
  vo.sparse = true;
  vo.props["logbias"] = "throughput";
  const std::string name = s.pool->name() + "/v";
  if (!s.pool->CreateVolume(name, vo).ok()) Die("create volume");
  s.vol = *s.pool->OpenVolume(name);
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

enum Workload { kSeqWrite, kSeqRead, kRandWrite, kRandRead, kWorkloads };
const char* kNames[] = {"seq_write", "seq_read", "rand_write", "rand_read"};

// Runs workload `w` on `s`; returns its seconds. Offsets come from `seed`, the same for every side.
double Run(Side& s, Workload w, std::vector<uint8_t>& buf, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto t0 = std::chrono::steady_clock::now();
  switch (w) {
    case kSeqWrite:
      for (uint64_t off = 0; off < kVolSize; off += kMiB) {
        if (!s.vol->Write(off, std::span<const uint8_t>(buf.data(), kMiB)).ok()) Die("write");
      }
      if (!s.pool->Sync().ok()) Die("sync");
      break;
    case kSeqRead:
      for (uint64_t off = 0; off < kVolSize; off += kMiB) {
        if (!s.vol->Read(off, std::span<uint8_t>(buf.data(), kMiB)).ok()) Die("read");
      }
      break;
    case kRandWrite:
      for (uint64_t i = 0; i < kRandOps; i++) {
        const uint64_t off = rng() % (kVolSize / 4096) * 4096;
        if (!s.vol->Write(off, std::span<const uint8_t>(buf.data(), 4096)).ok()) Die("write");
      }
      if (!s.pool->Sync().ok()) Die("sync");
      break;
    default:
      for (uint64_t i = 0; i < kRandOps; i++) {
        const uint64_t off = rng() % (kVolSize / 4096) * 4096;
        if (!s.vol->Read(off, std::span<uint8_t>(buf.data(), 4096)).ok()) Die("read");
      }
      break;
  }
  return Seconds(t0);
}

void Raidz(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const auto parity = static_cast<uint32_t>(state.range(1));
  Side single, stripe, raidz;
  Open(single, "single", n, parity);
  Open(stripe, "stripe", n, parity);
  Open(raidz, "raidz", n, parity);
  Side* sides[] = {&single, &stripe, &raidz};
  std::vector<uint8_t> buf(kMiB);
  std::mt19937_64 rng(7);
  for (auto& b : buf) b = static_cast<uint8_t>(rng() | 1);
  double t[3][kWorkloads] = {};
  uint64_t pass = 0;
  for (auto _ : state) {
    for (int w = 0; w < kWorkloads; w++) {
      buf[pass % 4096] ^= 0x5a;  // new data each pass
      // The side that goes first changes with the pass: it pays for the others' writeback.
      for (int j = 0; j < 3; j++) {
        const auto k = (j + pass) % 3;
        t[k][w] += Run(*sides[k], Workload(w), buf, 100 + pass);
      }
    }
    pass++;
  }
  const double iters = static_cast<double>(state.iterations());
  for (int w = 0; w < kWorkloads; w++) {
    const double bytes = (w == kSeqWrite || w == kSeqRead) ? kVolSize : kRandOps * 4096.0;
    const std::string name = kNames[w];
    state.counters[name + "_MBps"] = bytes * iters / t[2][w] / 1e6;
    state.counters[name + "_vs_single"] = t[0][w] / t[2][w];
    state.counters[name + "_vs_stripe"] = t[1][w] / t[2][w];
  }
}
BENCHMARK(Raidz)
    ->Name("Raidz/raidz1")
    ->Args({3, 1})
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(Raidz)
    ->Name("Raidz/raidz2")
    ->Args({6, 2})
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

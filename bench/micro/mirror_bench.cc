// Mirrors against a single vdev, side by side in one run (files in VOLSTACK_BENCH_DIR,
// default /var/tmp, removed at exit):
//
//   MirrorWrite   1 MiB sequential writes over a 256 MiB volume and a commit (Sync), on a
//                 pool with one file vdev and on one with a 2-way mirror of two files,
//                 passes alternating. Counters: single_MBps, mirror_MBps and their ratio
//                 (mirror / single; the children are written in parallel, so the target is
//                 >= 0.9 on children with disks of their own), and each side's time in its
//                 commits' trees (data writes) and flushes (<side>_trees_s, <side>_flush_s)
//   ScrubRate     a scrub of the mirror (after MirrorWrite's data, committed) against a
//                 sequential 1 MiB read of the same bytes from both files (pread of each
//                 child's allocated range). Counters: scrub_MBps, read_MBps (bytes read
//                 from the children per second, both sides) and their ratio (target >= 0.7)
//
//   mirror_bench [--benchmark_filter=MirrorWrite]
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bdev/file_device.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"

namespace {

using namespace volstack;
constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kVolSize = 256 * kMiB;
constexpr uint64_t kVdevSize = kVolSize + 128 * kMiB;

std::string Path(const std::string& n) {
  const char* d = std::getenv("VOLSTACK_BENCH_DIR");
  return std::string(d ? d : "/var/tmp") + "/volstack-mirror-bench-" + std::to_string(getpid()) +
         "-" + n;
}

void Die(const std::string& what) {
  std::fprintf(stderr, "mirror_bench: %s\n", what.c_str());
  for (const char* n : {"s", "m0", "m1"}) ::unlink(Path(n).c_str());
  std::exit(1);
}

bdev::BlockDevicePtr File(const std::string& n) {
  ::unlink(Path(n).c_str());
  auto f = bdev::FileDevice::Create(Path(n), kVdevSize);
  if (!f.ok()) Die(f.status().ToString());
  return *f;
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

void Open(Side& s, bool mirror) {
  pool::VdevSpec spec;
  spec.mirror = mirror;
  s.files = mirror ? std::vector<std::string>{"m0", "m1"} : std::vector<std::string>{"s"};
  for (auto& f : s.files) spec.devices.push_back(File(f));
  auto p = pool::Pool::Create(mirror ? "mir" : "one", std::vector<pool::VdevSpec>{spec});
  if (!p.ok()) Die(p.status().ToString());
  s.pool = *p;
  pool::VolumeOptions vo;
  vo.volsize = kVolSize;
  vo.sparse = true;
  vo.props["logbias"] = "throughput";
  const std::string name = s.pool->name() + "/v";
  if (!s.pool->CreateVolume(name, vo).ok()) Die("create volume");
  s.vol = *s.pool->OpenVolume(name);
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One pass: the volume written whole in 1 MiB writes, committed.
double WritePass(Side& s, const std::vector<uint8_t>& buf) {
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t off = 0; off < kVolSize; off += buf.size()) {
    if (!s.vol->Write(off, buf).ok()) Die("write");
  }
  if (!s.pool->Sync().ok()) Die("sync");
  return Seconds(t0);
}

void MirrorWrite(benchmark::State& state) {
  Side single, mirror;
  Open(single, false);
  Open(mirror, true);
  std::vector<uint8_t> buf(kMiB);
  std::mt19937_64 rng(1);
  for (auto& b : buf) b = static_cast<uint8_t>(rng() | 1);
  double ts = 0, tm = 0;
  for (auto _ : state) {
    for (int pass = 0; pass < 3; pass++) {
      buf[pass] ^= 0x5a;  // new data each pass
      ts += WritePass(single, buf);
      tm += WritePass(mirror, buf);
    }
  }
  const double bytes = 3.0 * static_cast<double>(state.iterations()) * kVolSize;
  state.counters["single_MBps"] = bytes / ts / 1e6;
  state.counters["mirror_MBps"] = bytes / tm / 1e6;
  state.counters["ratio"] = ts / tm;
  // Where each side's commits spent their time (txg_stats.h), in seconds: the trees (the
  // data writes) and the flushes. Both files of the mirror share one disk in this bench,
  // so once the flushes drain to it the mirror writes twice the bytes of the single vdev.
  for (auto [side, name] : {std::pair{&single, "single"}, std::pair{&mirror, "mirror"}}) {
    const auto st = side->pool->impl()->TxgStatsSnapshot();
    state.counters[std::string(name) + "_trees_s"] =
        std::chrono::duration<double>(st.trees).count();
    state.counters[std::string(name) + "_flush_s"] =
        std::chrono::duration<double>(st.flush + st.uberblocks).count();
  }
}
BENCHMARK(MirrorWrite)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

void ScrubRate(benchmark::State& state) {
  Side mirror;
  Open(mirror, true);
  std::vector<uint8_t> buf(kMiB);
  std::mt19937_64 rng(2);
  for (auto& b : buf) b = static_cast<uint8_t>(rng() | 1);
  WritePass(mirror, buf);
  pool::PoolImpl& p = *mirror.pool->impl();
  const uint64_t allocated = p.total_size() - p.free_bytes.load();
  double tscrub = 0, tread = 0;
  uint64_t scrub_bytes = 0, read_bytes = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    if (!mirror.pool->Scrub().ok() || !mirror.pool->WaitScan().ok()) Die("scrub");
    tscrub += Seconds(t0);
    scrub_bytes += 2 * mirror.pool->Info().scan.issued;
    t0 = std::chrono::steady_clock::now();
    for (auto& f : mirror.files) {
      const int fd = ::open(Path(f).c_str(), O_RDONLY);
      if (fd < 0) Die("open");
      for (uint64_t off = pool::kAllocStart; off < pool::kAllocStart + allocated; off += kMiB) {
        if (::pread(fd, buf.data(), kMiB, static_cast<off_t>(off)) < 0) Die("pread");
        read_bytes += kMiB;
      }
      ::close(fd);
    }
    tread += Seconds(t0);
  }
  state.counters["scrub_MBps"] = static_cast<double>(scrub_bytes) / tscrub / 1e6;
  state.counters["read_MBps"] = static_cast<double>(read_bytes) / tread / 1e6;
  state.counters["ratio"] =
      (static_cast<double>(scrub_bytes) / tscrub) / (static_cast<double>(read_bytes) / tread);
}
BENCHMARK(ScrubRate)->Iterations(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

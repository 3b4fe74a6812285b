// pvmove's speed, against references measured in the same run (issue 6):
//
//   BM_PvmoveVsCopy   each iteration moves a 128 MiB LV (filled with data) from one file PV
//                     to another with the pvmove engine (plan, commit, copy, checkpoints,
//                     final commit), and, alternating which goes first, copies the same bytes
//                     between the same two files with plain pread/pwrite in 4 MiB requests
//                     and an fsync. Counters: move_MBps, copy_MBps, ratio = move / copy
//                     (target >= 0.8).
//   BM_WorkloadDuringMove
//                     4 KiB random writes (one thread) through the live LV for the length
//                     of a move, against the same writes for the same time with no move
//                     running (alternating). Counters: iops_idle, iops_moving,
//                     ratio = moving / idle; move_MBps while the workload runs.
//
// Run: pvmove_bench [--benchmark_repetitions=3]. Files go to $TMPDIR or /tmp, unlinked after.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <thread>

#include "bdev/file_device.h"
#include "lvm/activations.h"
#include "lvm/lv_device.h"
#include "lvm/lvm.h"
#include "lvm/mirror_gate.h"
#include "lvm/pvmove.h"
#include "lvm/vg_ops.h"

namespace {

using namespace volstack;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kFileSize = 300ull << 20;
constexpr uint32_t kLvExtents = 32;  // 4 MiB extents: 128 MiB
constexpr uint64_t kCopyBuf = 4 << 20;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Fixture {
  std::string dir;
  std::vector<std::string> paths;
  std::map<std::string, bdev::BlockDevicePtr> devs;
  std::unique_ptr<lvm::Lvm> lvm;
  bdev::BlockDevicePtr lv;
  int from = 0;  // the PV index the LV is on

  Fixture() {
    const char* tmp = std::getenv("TMPDIR");
    dir = tmp ? tmp : "/tmp";
    for (int i = 0; i < 2; i++) {
      paths.push_back(dir + "/volstack_pvmove_bench_" + std::to_string(::getpid()) + "_" +
                      std::to_string(i));
      auto f = bdev::FileDevice::Create(paths.back(), kFileSize);
      if (!f.ok()) std::abort();
      devs[paths.back()] = *f;
    }
    lvm = std::make_unique<lvm::Lvm>(
        [this](const std::string& n, bool) -> Result<bdev::BlockDevicePtr> {
          auto it = devs.find(n);
          if (it == devs.end()) return Status::NotFound(n);
          return it->second;
        },
        false, std::make_shared<lvm::Activations>());
    std::vector<const lvm::Pv*> pvs;
    for (const auto& p : paths) pvs.push_back(*lvm->CreatePv(p, {}));
    auto vg = lvm::NewVg("bench", 8192, pvs);
    if (!vg.ok() || !lvm->Commit(*vg, "bench").ok()) std::abort();
    lvm::VolumeGroup v = lvm->FindVg("bench")->vg;
    lvm::NewLvOptions o;
    o.name = "lv";
    o.alloc.extents = kLvExtents;
    o.alloc.pvs = {0};
    if (!lvm::CreateLv(v, o).ok() || !lvm->Commit(v, "lv").ok()) std::abort();
    lv = *lvm->Activate(*lvm->FindVg("bench"), "lv");
    std::vector<uint8_t> buf(1 << 20);
    std::mt19937_64 rng(1);
    for (uint64_t off = 0; off < lv->size(); off += buf.size()) {
      for (auto& b : buf) b = static_cast<uint8_t>(rng());
      if (!lv->Write(off, buf).ok()) std::abort();
    }
    if (!lv->Flush().ok()) std::abort();
  }
  ~Fixture() {
    lv.reset();
    lvm.reset();
    devs.clear();
    for (const auto& p : paths) ::unlink(p.c_str());
  }

  // Moves the LV to the other PV; returns the seconds it took.
  double Move(const lvm::MoveOptions& options) {
    lvm::MovePlan plan;
    plan.source.pv = from;
    plan.dests = {{1 - from, {}}};
    plan.max_segment_extents = 16;
    const auto t0 = Clock::now();
    lvm::VolumeGroup v = lvm->FindVg("bench")->vg;
    if (!lvm::PlanMove(v, plan).ok() || !lvm->Commit(v, "pvmove").ok()) std::abort();
    if (!lvm::RunMove(*lvm, "bench", options).ok()) std::abort();
    const auto t1 = Clock::now();
    from = 1 - from;
    return Seconds(t0, t1);
  }

  // Copies the LV's bytes from the PV it is on to the other PV's free space past it, with
  // plain pread/pwrite and an fsync: what a copy tool would do.
  double PlainCopy() {
    const int in = ::open(paths[from].c_str(), O_RDONLY | O_CLOEXEC);
    const int out = ::open(paths[1 - from].c_str(), O_WRONLY | O_CLOEXEC);
    std::vector<uint8_t> buf(kCopyBuf);
    const uint64_t len = lv->size();
    const uint64_t src = 1 << 20, dst = (1 << 20) + len;  // where a move would not write
    const auto t0 = Clock::now();
    for (uint64_t o = 0; o < len; o += kCopyBuf) {
      if (::pread(in, buf.data(), kCopyBuf, static_cast<off_t>(src + o)) != (ssize_t)kCopyBuf ||
          ::pwrite(out, buf.data(), kCopyBuf, static_cast<off_t>(dst + o)) != (ssize_t)kCopyBuf) {
        std::abort();
      }
    }
    ::fsync(out);
    const auto t1 = Clock::now();
    ::close(in);
    ::close(out);
    return Seconds(t0, t1);
  }
};

// The copy's settings from the benchmark's arguments: region KiB, regions in flight,
// write-behind MiB (0: off).
lvm::MoveOptions Options(const benchmark::State& state) {
  lvm::MoveOptions o;
  o.region_bytes = static_cast<uint64_t>(state.range(0)) << 10;
  o.depth = static_cast<int>(state.range(1));
  o.flush_behind_bytes = static_cast<uint64_t>(state.range(2)) << 20;
  return o;
}

void BM_PvmoveVsCopy(benchmark::State& state) {
  Fixture f;
  const lvm::MoveOptions o = Options(state);
  double move_s = 0, copy_s = 0;
  int i = 0;
  for (auto _ : state) {
    if (i++ % 2 == 0) {
      copy_s += f.PlainCopy();
      move_s += f.Move(o);
    } else {
      move_s += f.Move(o);
      copy_s += f.PlainCopy();
    }
  }
  const double mb = static_cast<double>(f.lv->size()) / (1 << 20) * i;
  state.counters["move_MBps"] = mb / move_s;
  state.counters["copy_MBps"] = mb / copy_s;
  state.counters["ratio"] = copy_s / move_s;
  state.SetBytesProcessed(static_cast<int64_t>(f.lv->size()) * i);
}
// {region KiB, depth, write-behind MiB}: the default first; then the old serial copy of
// 4 MiB regions and neighbours of the default, which is how the default was picked.
void CopyArgs(benchmark::internal::Benchmark* b) {
  b->Args({1024, 2, 16})
      ->Args({4096, 1, 0})
      ->Args({1024, 2, 0})
      ->Args({1024, 2, 8})
      ->Args({1024, 2, 32})
      ->Args({4096, 2, 16})
      ->Args({256, 2, 16});
}
BENCHMARK(BM_PvmoveVsCopy)
    ->Apply(CopyArgs)
    ->Iterations(4)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// 4 KiB random writes through the LV until `stop`; returns how many.
uint64_t Writes(bdev::BlockDevice& lv, const std::atomic<bool>& stop, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> b(4096, 0x33);
  uint64_t n = 0;
  const uint64_t blocks = lv.size() / 4096;
  while (!stop) {
    if (!lv.Write((rng() % blocks) * 4096, b).ok()) std::abort();
    n++;
  }
  return n;
}

void BM_WorkloadDuringMove(benchmark::State& state) {
  Fixture f;
  const lvm::MoveOptions o = Options(state);
  double idle_s = 0, moving_s = 0, move_mb = 0, flushing_s = 0;
  uint64_t idle_n = 0, moving_n = 0, flushing_n = 0;
  const auto gate0 = lvm::MirrorGate::Global().stats();
  for (auto _ : state) {
    std::atomic<bool> stop{false};
    uint64_t n = 0;
    auto t0 = Clock::now();
    std::thread w([&] { n = Writes(*f.lv, stop, 7); });
    const double secs = f.Move(o);
    stop = true;
    w.join();
    moving_s += Seconds(t0, Clock::now());
    moving_n += n;
    move_mb += static_cast<double>(f.lv->size()) / (1 << 20);
    (void)secs;
    // The same writes for as long, with no move.
    stop = false;
    t0 = Clock::now();
    std::thread w2([&] { n = Writes(*f.lv, stop, 8); });
    std::this_thread::sleep_for(std::chrono::duration<double>(secs));
    stop = true;
    w2.join();
    idle_s += Seconds(t0, Clock::now());
    idle_n += n;
    // Diagnosis: the same writes with the LV flushed every 250 ms, as the move's checkpoint
    // and write-behind flushes make the device write back the workload's dirty pages too.
    stop = false;
    t0 = Clock::now();
    std::thread w3([&] { n = Writes(*f.lv, stop, 9); });
    while (Seconds(t0, Clock::now()) < secs) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      if (!f.lv->Flush().ok()) std::abort();
    }
    stop = true;
    w3.join();
    flushing_s += Seconds(t0, Clock::now());
    flushing_n += n;
  }
  state.counters["iops_idle_flushing"] = static_cast<double>(flushing_n) / flushing_s;
  state.counters["iops_idle"] = static_cast<double>(idle_n) / idle_s;
  state.counters["iops_moving"] = static_cast<double>(moving_n) / moving_s;
  state.counters["ratio"] =
      (static_cast<double>(moving_n) / moving_s) / (static_cast<double>(idle_n) / idle_s);
  state.counters["move_MBps"] = move_mb / moving_s;
  // How much of the slowdown is writes waiting for a region being copied.
  const auto gate1 = lvm::MirrorGate::Global().stats();
  state.counters["gate_waits"] = static_cast<double>(gate1.waited_writes - gate0.waited_writes);
  state.counters["gate_wait_pct"] =
      100.0 * static_cast<double>(gate1.wait_ns - gate0.wait_ns) / 1e9 / moving_s;
}
BENCHMARK(BM_WorkloadDuringMove)
    ->Args({1024, 2, 16})
    ->Args({4096, 1, 0})
    ->Args({256, 2, 16})
    ->Iterations(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

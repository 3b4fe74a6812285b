// FileDevice against plain pread/pwrite on the same file, in the same run: 4 KiB random
// reads and writes, buffered (page cache) and O_DIRECT, at 1 and 4 threads (queue depth by
// threads). Each FileDevice benchmark runs right after its reference, and the end of the run
// prints the ratio FileDevice / reference of items per second for every pair (the target is
// >= 0.97: the device layer must cost close to nothing). The paired_* benchmarks interleave
// the two paths in small batches inside one run and report the ratio directly; on a shared,
// loaded machine those are the numbers to trust.
//
//   file_device_bench [--benchmark_repetitions=3 --benchmark_report_aggregates_only=true]
//   file_device_bench --benchmark_filter=paired    # only the interleaved comparison
//
// The file is VOLSTACK_BENCH_FILE (default /var/tmp/volstack-file-device-bench.img), 1 GiB
// (VOLSTACK_BENCH_SIZE_MB to change), created and filled with non-zero data on first use and
// kept for the next run. Buffered runs read the whole file once first so reads hit the cache.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "bdev/file_device.h"

namespace {

using volstack::bdev::FileDevice;

constexpr size_t kIo = 4096;

std::string BenchPath() {
  const char* p = std::getenv("VOLSTACK_BENCH_FILE");
  return p != nullptr ? p : "/var/tmp/volstack-file-device-bench.img";
}

uint64_t BenchSize() {
  const char* p = std::getenv("VOLSTACK_BENCH_SIZE_MB");
  return (p != nullptr ? std::strtoull(p, nullptr, 10) : 1024) << 20;
}

struct AlignedBuf {
  explicit AlignedBuf(size_t n) : p(static_cast<uint8_t*>(std::aligned_alloc(4096, n))) {
    std::memset(p, 0x5a, n);
  }
  ~AlignedBuf() { std::free(p); }
  uint8_t* p;
};

void Die(const std::string& what) {
  std::perror(what.c_str());
  std::exit(1);
}

// Creates and fills the file unless it already has the right size.
void PrepareFile(const std::string& path, uint64_t size) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == size) return;
  std::fprintf(stderr, "file_device_bench: filling %s (%llu MiB)\n", path.c_str(),
               static_cast<unsigned long long>(size >> 20));
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) Die("open " + path);
  std::vector<uint8_t> chunk(1 << 20);
  std::mt19937_64 rng(1);
  for (uint64_t off = 0; off < size; off += chunk.size()) {
    for (size_t i = 0; i < chunk.size(); i += 8) {
      const uint64_t v = rng();
      std::memcpy(&chunk[i], &v, 8);
    }
    if (::pwrite(fd, chunk.data(), chunk.size(), static_cast<off_t>(off)) !=
        static_cast<ssize_t>(chunk.size())) {
      Die("fill " + path);
    }
  }
  if (::fsync(fd) != 0) Die("fsync " + path);
  ::close(fd);
}

void WarmCache(int fd, uint64_t size) {
  std::vector<uint8_t> chunk(1 << 20);
  for (uint64_t off = 0; off < size; off += chunk.size()) {
    if (::pread(fd, chunk.data(), chunk.size(), static_cast<off_t>(off)) < 0) Die("warm");
  }
}

// One pair of handles per I/O mode, opened once and shared by all threads.
struct Target {
  int fd = -1;
  std::shared_ptr<FileDevice> dev;
  uint64_t blocks = 0;
};

Target& GetTarget(bool direct) {
  static std::mutex mu;
  static std::map<bool, Target> targets;
  std::lock_guard lock(mu);
  auto it = targets.find(direct);
  if (it != targets.end()) return it->second;
  const std::string path = BenchPath();
  const uint64_t size = BenchSize();
  PrepareFile(path, size);
  Target t;
  t.fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (t.fd < 0) Die("open " + path);
  volstack::bdev::FileDeviceOptions options;
  options.direct_io = direct;
  options.logical_block_size = 4096;
  auto dev = FileDevice::Open(path, options);
  if (!dev.ok()) {
    std::fprintf(stderr, "%s\n", dev.status().ToString().c_str());
    std::exit(1);
  }
  t.dev = *dev;
  t.blocks = size / kIo;
  if (!direct) WarmCache(t.fd, size);
  return targets.emplace(direct, t).first->second;
}

enum class Impl { kSyscall, kFileDevice };

void RandomIo(benchmark::State& state, bool direct, bool write, Impl impl) {
  Target& t = GetTarget(direct);
  AlignedBuf buf(kIo);
  std::mt19937_64 rng(12345 + static_cast<uint64_t>(state.thread_index()));
  std::uniform_int_distribution<uint64_t> pick(0, t.blocks - 1);
  const std::span<uint8_t> span(buf.p, kIo);
  for (auto _ : state) {
    const uint64_t off = pick(rng) * kIo;
    if (impl == Impl::kSyscall) {
      const ssize_t n = write ? ::pwrite(t.fd, buf.p, kIo, static_cast<off_t>(off))
                              : ::pread(t.fd, buf.p, kIo, static_cast<off_t>(off));
      if (n != static_cast<ssize_t>(kIo)) {
        state.SkipWithError("short or failed I/O");
        break;
      }
    } else {
      const volstack::Status s = write ? t.dev->Write(off, span) : t.dev->Read(off, span);
      if (!s.ok()) {
        state.SkipWithError(s.ToString().c_str());
        break;
      }
    }
    benchmark::DoNotOptimize(buf.p[0]);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kIo));
}

uint64_t NowNs(clockid_t clock) {
  struct timespec ts;
  ::clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// The same comparison, interleaved: each iteration does a batch of requests through one
// path then a batch through the other (alternating which goes first), timing each batch in
// wall-clock and thread CPU time. Drifts in machine load (other processes, writeback) hit
// both paths alike, so the ratio is far steadier than the ratio of two separate runs. The
// CPU-time ratio is the cost of the layer itself; the wall ratio includes the device.
void PairedIo(benchmark::State& state, bool direct, bool write) {
  constexpr int kBatch = 16;
  Target& t = GetTarget(direct);
  AlignedBuf buf(kIo);
  std::mt19937_64 rng(777 + static_cast<uint64_t>(state.thread_index()));
  std::uniform_int_distribution<uint64_t> pick(0, t.blocks - 1);
  const std::span<uint8_t> span(buf.p, kIo);
  uint64_t wall[2] = {0, 0}, cpu[2] = {0, 0};
  std::vector<double> wall_ratios, cpu_ratios;  // per iteration: syscall time / device time
  bool dev_first = false;
  auto batch = [&](int impl) {
    const uint64_t w0 = NowNs(CLOCK_MONOTONIC), c0 = NowNs(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < kBatch; i++) {
      const uint64_t off = pick(rng) * kIo;
      bool ok;
      if (impl == 0) {
        ok = (write ? ::pwrite(t.fd, buf.p, kIo, static_cast<off_t>(off))
                    : ::pread(t.fd, buf.p, kIo, static_cast<off_t>(off))) ==
             static_cast<ssize_t>(kIo);
      } else {
        ok = (write ? t.dev->Write(off, span) : t.dev->Read(off, span)).ok();
      }
      if (!ok) return false;
    }
    wall[impl] = NowNs(CLOCK_MONOTONIC) - w0;
    cpu[impl] = NowNs(CLOCK_THREAD_CPUTIME_ID) - c0;
    return true;
  };
  for (auto _ : state) {
    const bool ok = dev_first ? (batch(1) && batch(0)) : (batch(0) && batch(1));
    if (!ok) {
      state.SkipWithError("I/O failed");
      break;
    }
    dev_first = !dev_first;
    if (wall[1] > 0) wall_ratios.push_back(static_cast<double>(wall[0]) / wall[1]);
    if (cpu[1] > 0) cpu_ratios.push_back(static_cast<double>(cpu[0]) / cpu[1]);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * 2 * kBatch);
  // Throughput ratio FileDevice / syscall = time(syscall) / time(FileDevice), as the median
  // over batch pairs: a batch that lost the CPU to another process skews one pair, not all.
  auto median = [](std::vector<double>& v) {
    if (v.empty()) return 0.0;
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  state.counters["ratio_wall"] =
      benchmark::Counter(median(wall_ratios), benchmark::Counter::kAvgThreads);
  state.counters["ratio_cpu"] =
      benchmark::Counter(median(cpu_ratios), benchmark::Counter::kAvgThreads);
}

// Collects items/s per benchmark (the median when repeated) and prints the ratios at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      if (r.error_occurred) continue;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type == Run::RT_Aggregate && !median) continue;
      auto wall = r.counters.find("ratio_wall");
      auto cpu = r.counters.find("ratio_cpu");
      if (wall != r.counters.end() && cpu != r.counters.end()) {
        auto& slot = paired_[r.run_name.str()];
        if (median || !slot.median) slot = Paired{wall->second.value, cpu->second.value, median};
        continue;
      }
      auto it = r.counters.find("items_per_second");
      if (it == r.counters.end()) continue;
      auto& slot = rates_[r.run_name.str()];
      if (median || !slot.median) slot = Rate{it->second.value, median};
    }
  }

  void PrintRatios() const {
    std::printf("\nFileDevice / pread-pwrite (items per second%s):\n",
                any_median() ? ", medians" : "");
    double worst = 1e9;
    for (const auto& [name, rate] : rates_) {
      const auto pos = name.find("/FileDevice");
      if (pos == std::string::npos) continue;
      std::string ref = name;
      ref.replace(pos, std::strlen("/FileDevice"), "/syscall");
      auto it = rates_.find(ref);
      if (it == rates_.end() || it->second.value <= 0) continue;
      const double ratio = rate.value / it->second.value;
      worst = std::min(worst, ratio);
      std::printf("  %-44s %10.0f vs %10.0f IOPS  ratio %.3f\n", name.c_str(), rate.value,
                  it->second.value, ratio);
    }
    if (worst < 1e9) std::printf("minimum ratio of separate runs %.3f\n", worst);
    if (paired_.empty()) return;
    std::printf("\nInterleaved (paired) FileDevice / pread-pwrite throughput ratios:\n");
    double worst_wall = 1e9, worst_cpu = 1e9;
    for (const auto& [name, p] : paired_) {
      std::printf("  %-44s wall %.3f  cpu %.3f\n", name.c_str(), p.wall, p.cpu);
      worst_wall = std::min(worst_wall, p.wall);
      worst_cpu = std::min(worst_cpu, p.cpu);
    }
    std::printf("minimum paired ratio: wall %.3f, cpu %.3f (target >= 0.97)\n", worst_wall,
                worst_cpu);
  }

 private:
  struct Rate {
    double value = 0;
    bool median = false;
  };
  bool any_median() const {
    for (const auto& [n, r] : rates_) {
      if (r.median) return true;
    }
    return false;
  }
  struct Paired {
    double wall = 0, cpu = 0;
    bool median = false;
  };
  std::map<std::string, Rate> rates_;
  std::map<std::string, Paired> paired_;
};

void RegisterAll() {
  for (bool direct : {false, true}) {
    for (bool write : {false, true}) {
      const std::string name = std::string("paired_rand4k_") + (write ? "write" : "read") + "/" +
                               (direct ? "direct" : "buffered");
      benchmark::RegisterBenchmark(name.c_str(), PairedIo, direct, write)
          ->Threads(1)
          ->Threads(4)
          ->UseRealTime()
          ->MinTime(direct ? 2.0 : 1.0);
    }
  }
  for (bool direct : {false, true}) {
    for (bool write : {false, true}) {
      for (int threads : {1, 4}) {
        for (Impl impl : {Impl::kSyscall, Impl::kFileDevice}) {
          const std::string name = std::string("rand4k_") + (write ? "write" : "read") + "/" +
                                   (direct ? "direct" : "buffered") + "/" +
                                   (impl == Impl::kSyscall ? "syscall" : "FileDevice");
          benchmark::RegisterBenchmark(name.c_str(), RandomIo, direct, write, impl)
              ->Threads(threads)
              ->UseRealTime()
              ->MinTime(direct ? 1.0 : 0.5);
        }
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RegisterAll();
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  benchmark::Shutdown();
  return 0;
}

// The pool against plain files, side by side in one run. Each benchmark runs the reference
// (pwrite/pread/fdatasync on a plain file) and the pool path (a volume on a pool whose vdev
// is a FileDevice on a file of the same kind) for the same work, timing each, and reports
// both throughputs and their ratio (pool / reference) as counters:
//
//   RandWrite4K   4 KiB random writes, flush (fdatasync / Flush) every 64 writes,
//                 volblocksize 4K                                       target ratio >= 0.5
//   SeqWrite64K   64 KiB sequential writes, flush every 16 MiB          target ratio >= 0.8
//   RandRead4K    4 KiB random reads of written data (page cache warm)  target ratio >= 0.8
//   SeqRead1M     1 MiB sequential reads of written data, volblocksize 16K (page cache
//                 warm)                                                 target ratio >= 0.8
//   WriteAmp/4096, /16384   bytes the vdev receives per byte written, 4 KiB random writes,
//                 flush every 64: the volblocksize choice (docs/format/pool.md)
//   SyncWrite4K/1, /8   4 KiB random writes, fdatasync / Flush after every write (/1) or
//                 every 8 (/8), volblocksize 4K; three paths interleaved: the file, a
//                 volume with the intent log (logbias=latency) and one without
//                 (logbias=throughput: each flush commits a txg). Reports the ratios
//                 log_ratio and txg_ratio (file time / volume time) and the mean latency
//                 of one write+flush cycle (/1) or one write (/8) on each path, in us
//   Import1G      import + close of a pool holding a fully written 1 GiB volume (metadata
//                 only is read: reported as meta_MiB read)
//   ThinFill      writes a sparse volume end to end (VOLSTACK_BENCH_THIN_GB, default 2;
//                 the figure is 100) and reports the process's peak RSS growth
//                 against cache + dirty limits. Every block holds one 16 KiB pattern and
//                 the vdev below drops writes of that pattern (nothing reads data back), so
//                 100 GiB costs the pool's full CPU path but only its metadata on disk.
//
//   pool_bench [--benchmark_filter=RandWrite4K]
//
// Files live in VOLSTACK_BENCH_DIR (default /var/tmp) and are removed at exit.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bdev/file_device.h"
#include "bdev/forwarding_device.h"
#include "pool/spa.h"

namespace {

using namespace volstack;
using Clock = std::chrono::steady_clock;
constexpr uint64_t kMiB = 1 << 20;

std::string Dir() {
  const char* d = std::getenv("VOLSTACK_BENCH_DIR");
  return d ? d : "/var/tmp";
}

std::string Path(const std::string& n) {
  return Dir() + "/volstack-pool-bench-" + std::to_string(getpid()) + "-" + n;
}

void Die(const std::string& what) {
  std::fprintf(stderr, "pool_bench: %s\n", what.c_str());
  std::exit(1);
}

// Counts what reaches the device below.
class CountingDevice final : public bdev::ForwardingDevice {
 public:
  explicit CountingDevice(bdev::BlockDevicePtr t) : ForwardingDevice(std::move(t)) {}
  std::atomic<uint64_t> written{0}, read{0}, dropped{0};
  // ThinFill: block-sized chunks equal to this pattern are counted but not written.
  std::vector<uint8_t> drop;

 protected:
  Status DoWrite(uint64_t o, std::span<const uint8_t> b, bdev::WriteOptions opts) override {
    written += b.size();
    if (drop.empty() || b.size() % drop.size() != 0) return ForwardingDevice::DoWrite(o, b, opts);
    for (size_t i = 0; i < b.size(); i += drop.size()) {
      auto chunk = b.subspan(i, drop.size());
      if (std::memcmp(chunk.data(), drop.data(), drop.size()) == 0) {
        dropped += drop.size();
        continue;
      }
      VS_RETURN_IF_ERROR(ForwardingDevice::DoWrite(o + i, chunk, opts));
    }
    return Status::Ok();
  }
  Status DoRead(uint64_t o, std::span<uint8_t> b) override {
    read += b.size();
    return ForwardingDevice::DoRead(o, b);
  }
};

struct RawFile {
  explicit RawFile(uint64_t size) : path(Path("raw")) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(size)) != 0) Die("raw file");
  }
  ~RawFile() {
    ::close(fd);
    ::unlink(path.c_str());
  }
  std::string path;
  int fd;
};

struct PoolVol {
  PoolVol(uint64_t volsize, uint32_t vbs, bool sparse = true) : path(Path("vdev")) {
    auto f = bdev::FileDevice::Create(path, volsize + volsize / 4 + 128 * kMiB);
    if (!f.ok()) Die(f.status().ToString());
    counter = std::make_shared<CountingDevice>(*f);
    auto p = pool::Pool::Create("bench", {counter});
    if (!p.ok()) Die(p.status().ToString());
    pool = *p;
    pool::VolumeOptions vo;
    vo.volsize = volsize;
    vo.volblocksize = vbs;
    vo.sparse = sparse;
    if (!pool->CreateVolume("bench/v", vo).ok()) Die("create volume");
    dev = *pool->OpenVolume("bench/v");
  }
  ~PoolVol() {
    dev.reset();
    pool.reset();
    counter.reset();
    ::unlink(path.c_str());
  }
  std::string path;
  std::shared_ptr<CountingDevice> counter;
  std::shared_ptr<pool::Pool> pool;
  bdev::BlockDevicePtr dev;
};

std::vector<uint8_t> Data(size_t n) {
  std::vector<uint8_t> d(n);
  std::mt19937_64 rng(1);
  for (auto& b : d) b = static_cast<uint8_t>(rng() | 1);
  return d;
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void Report(benchmark::State& state, double ref_s, double pool_s, double bytes) {
  state.counters["ref_MBps"] = bytes / ref_s / 1e6;
  state.counters["pool_MBps"] = bytes / pool_s / 1e6;
  state.counters["ratio"] = ref_s / pool_s;
}

void RandWrite4K(benchmark::State& state) {
  const uint64_t size = 256 * kMiB;
  RawFile raw(size);
  PoolVol pv(size, 4096);
  auto d = Data(4096);
  const int n = 4096;
  double ref_s = 0, pool_s = 0;
  std::mt19937_64 rng(2);
  for (auto _ : state) {
    std::vector<uint64_t> offs(n);
    for (auto& o : offs) o = (rng() % (size / 4096)) * 4096;
    auto t0 = Clock::now();
    for (int i = 0; i < n; i++) {
      if (::pwrite(raw.fd, d.data(), 4096, static_cast<off_t>(offs[i])) != 4096) Die("pwrite");
      if (i % 64 == 63 && ::fdatasync(raw.fd) != 0) Die("fdatasync");
    }
    auto t1 = Clock::now();
    for (int i = 0; i < n; i++) {
      if (!pv.dev->Write(offs[i], d).ok()) Die("write");
      if (i % 64 == 63 && !pv.dev->Flush().ok()) Die("flush");
    }
    auto t2 = Clock::now();
    ref_s += Seconds(t0, t1);
    pool_s += Seconds(t1, t2);
  }
  Report(state, ref_s, pool_s, 4096.0 * n * state.iterations());
}
BENCHMARK(RandWrite4K)->Unit(benchmark::kMillisecond)->Iterations(5)->UseRealTime();

void SeqWrite64K(benchmark::State& state) {
  const uint64_t size = 256 * kMiB;
  RawFile raw(size);
  PoolVol pv(size, 16384);
  auto d = Data(65536);
  double ref_s = 0, pool_s = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    for (uint64_t off = 0; off < size; off += 65536) {
      if (::pwrite(raw.fd, d.data(), 65536, static_cast<off_t>(off)) != 65536) Die("pwrite");
      if ((off + 65536) % (16 * kMiB) == 0 && ::fdatasync(raw.fd) != 0) Die("fdatasync");
    }
    auto t1 = Clock::now();
    for (uint64_t off = 0; off < size; off += 65536) {
      if (!pv.dev->Write(off, d).ok()) Die("write");
      if ((off + 65536) % (16 * kMiB) == 0 && !pv.dev->Flush().ok()) Die("flush");
    }
    auto t2 = Clock::now();
    ref_s += Seconds(t0, t1);
    pool_s += Seconds(t1, t2);
  }
  Report(state, ref_s, pool_s, double(size) * state.iterations());
}
BENCHMARK(SeqWrite64K)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void RandRead4K(benchmark::State& state) {
  const uint64_t size = 256 * kMiB;
  RawFile raw(size);
  PoolVol pv(size, 4096);
  auto d = Data(kMiB);
  for (uint64_t off = 0; off < size; off += kMiB) {
    if (::pwrite(raw.fd, d.data(), kMiB, static_cast<off_t>(off)) != kMiB) Die("pwrite");
    if (!pv.dev->Write(off, d).ok()) Die("write");
  }
  if (!pv.dev->Flush().ok()) Die("flush");
  std::vector<uint8_t> buf(4096);
  const int n = 65536;
  double ref_s = 0, pool_s = 0;
  std::mt19937_64 rng(3);
  for (auto _ : state) {
    std::vector<uint64_t> offs(n);
    for (auto& o : offs) o = (rng() % (size / 4096)) * 4096;
    auto t0 = Clock::now();
    for (int i = 0; i < n; i++) {
      if (::pread(raw.fd, buf.data(), 4096, static_cast<off_t>(offs[i])) != 4096) Die("pread");
    }
    auto t1 = Clock::now();
    for (int i = 0; i < n; i++) {
      if (!pv.dev->Read(offs[i], buf).ok()) Die("read");
    }
    auto t2 = Clock::now();
    ref_s += Seconds(t0, t1);
    pool_s += Seconds(t1, t2);
  }
  Report(state, ref_s, pool_s, 4096.0 * n * state.iterations());
}
BENCHMARK(RandRead4K)->Unit(benchmark::kMillisecond)->Iterations(5)->UseRealTime();

void SeqRead1M(benchmark::State& state) {
  const uint64_t size = 256 * kMiB;
  RawFile raw(size);
  PoolVol pv(size, 16384);
  auto d = Data(kMiB);
  for (uint64_t off = 0; off < size; off += kMiB) {
    if (::pwrite(raw.fd, d.data(), kMiB, static_cast<off_t>(off)) != kMiB) Die("pwrite");
    if (!pv.dev->Write(off, d).ok()) Die("write");
  }
  if (!pv.dev->Flush().ok()) Die("flush");
  std::vector<uint8_t> buf(kMiB);
  double ref_s = 0, pool_s = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    for (uint64_t off = 0; off < size; off += kMiB) {
      if (::pread(raw.fd, buf.data(), kMiB, static_cast<off_t>(off)) != kMiB) Die("pread");
    }
    auto t1 = Clock::now();
    for (uint64_t off = 0; off < size; off += kMiB) {
      if (!pv.dev->Read(off, buf).ok()) Die("read");
    }
    auto t2 = Clock::now();
    ref_s += Seconds(t0, t1);
    pool_s += Seconds(t1, t2);
  }
  Report(state, ref_s, pool_s, double(size) * state.iterations());
}
BENCHMARK(SeqRead1M)->Unit(benchmark::kMillisecond)->Iterations(5)->UseRealTime();

void WriteAmp(benchmark::State& state) {
  const uint32_t vbs = static_cast<uint32_t>(state.range(0));
  const uint64_t size = 256 * kMiB;
  PoolVol pv(size, vbs);
  auto d = Data(4096);
  // Fill first so every 4K write is a read-modify-write of a written block.
  auto big = Data(kMiB);
  for (uint64_t off = 0; off < size; off += kMiB) {
    if (!pv.dev->Write(off, big).ok()) Die("fill");
  }
  if (!pv.dev->Flush().ok()) Die("flush");
  std::mt19937_64 rng(4);
  const int n = 8192;
  uint64_t user = 0;
  const uint64_t before = pv.counter->written;
  for (auto _ : state) {
    for (int i = 0; i < n; i++) {
      if (!pv.dev->Write((rng() % (size / 4096)) * 4096, d).ok()) Die("write");
      if (i % 64 == 63 && !pv.dev->Flush().ok()) Die("flush");
    }
    user += 4096ull * n;
  }
  state.counters["write_amp"] = double(pv.counter->written - before) / double(user);
  state.counters["IOPS"] =
      benchmark::Counter(double(n) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(WriteAmp)
    ->Arg(4096)
    ->Arg(16384)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2)
    ->UseRealTime();

void SyncWrite4K(benchmark::State& state) {
  const int every = static_cast<int>(state.range(0));
  const uint64_t size = 256 * kMiB;
  RawFile raw(size);
  PoolVol pv(size, 4096);  // bench/v: logbias=latency (the default)
  pool::VolumeOptions vo;
  vo.volsize = size;
  vo.volblocksize = 4096;
  vo.sparse = true;
  vo.props["logbias"] = "throughput";
  vo.props["sync"] = "standard";
  if (!pv.pool->CreateVolume("bench/t", vo).ok()) Die("create volume");
  if (!pv.pool->SetProperty("bench/v", "logbias", "latency").ok()) Die("set logbias");
  auto txg_dev = *pv.pool->OpenVolume("bench/t");
  auto d = Data(4096);
  const int n = every == 1 ? 1024 : 4096;
  double ref_s = 0, log_s = 0, txg_s = 0;
  std::mt19937_64 rng(5);
  for (auto _ : state) {
    std::vector<uint64_t> offs(n);
    for (auto& o : offs) o = (rng() % (size / 4096)) * 4096;
    auto t0 = Clock::now();
    for (int i = 0; i < n; i++) {
      if (::pwrite(raw.fd, d.data(), 4096, static_cast<off_t>(offs[i])) != 4096) Die("pwrite");
      if (i % every == every - 1 && ::fdatasync(raw.fd) != 0) Die("fdatasync");
    }
    auto t1 = Clock::now();
    for (int i = 0; i < n; i++) {
      if (!pv.dev->Write(offs[i], d).ok()) Die("write");
      if (i % every == every - 1 && !pv.dev->Flush().ok()) Die("flush");
    }
    auto t2 = Clock::now();
    for (int i = 0; i < n; i++) {
      if (!txg_dev->Write(offs[i], d).ok()) Die("write");
      if (i % every == every - 1 && !txg_dev->Flush().ok()) Die("flush");
    }
    auto t3 = Clock::now();
    ref_s += Seconds(t0, t1);
    log_s += Seconds(t1, t2);
    txg_s += Seconds(t2, t3);
  }
  const double ops = double(n) * state.iterations();
  state.counters["log_ratio"] = ref_s / log_s;
  state.counters["txg_ratio"] = ref_s / txg_s;
  state.counters["ref_us"] = ref_s / ops * 1e6;
  state.counters["log_us"] = log_s / ops * 1e6;
  state.counters["txg_us"] = txg_s / ops * 1e6;
}
BENCHMARK(SyncWrite4K)->Arg(1)->Arg(8)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

void Import1G(benchmark::State& state) {
  const uint64_t size = 1024 * kMiB;
  std::string path;
  {
    PoolVol pv(size, 16384, /*sparse=*/false);
    path = pv.path;
    auto d = Data(kMiB);
    for (uint64_t off = 0; off < size; off += kMiB) {
      if (!pv.dev->Write(off, d).ok()) Die("fill");
    }
    pv.dev.reset();
    if (!pv.pool->Export().ok()) Die("export");
    pv.pool.reset();
    // Keep the file for the import below: pv's destructor unlinks pv.path, gone by then.
    path = Path("keep");
    if (::rename(pv.path.c_str(), path.c_str()) != 0) Die("rename");
  }
  double meta = 0;
  for (auto _ : state) {
    auto f = bdev::FileDevice::Open(path);
    if (!f.ok()) Die(f.status().ToString());
    auto counter = std::make_shared<CountingDevice>(*f);
    auto p = pool::Pool::Import({counter});
    if (!p.ok()) Die(p.status().ToString());
    if (!(*p)->Export().ok()) Die("export");
    meta = double(counter->read) / kMiB;
  }
  state.counters["meta_MiB_read"] = meta;
  ::unlink(path.c_str());
}
BENCHMARK(Import1G)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

long MaxRssKiB() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

void ThinFill(benchmark::State& state) {
  const char* gb = std::getenv("VOLSTACK_BENCH_THIN_GB");
  const uint64_t size = (gb ? std::strtoull(gb, nullptr, 10) : 2) << 30;
  const long rss0 = MaxRssKiB();
  PoolVol pv(size, 16384);
  pv.counter->drop = Data(16384);
  std::vector<uint8_t> d;
  for (int i = 0; i < 64; i++) d.insert(d.end(), pv.counter->drop.begin(), pv.counter->drop.end());
  for (auto _ : state) {
    for (uint64_t off = 0; off < size; off += kMiB) {
      if (!pv.dev->Write(off, d).ok()) Die("write");
    }
    if (!pv.dev->Flush().ok()) Die("flush");
  }
  state.counters["GiB"] = double(size) / (1 << 30);
  state.counters["meta_MiB_written"] = double(pv.counter->written - pv.counter->dropped) / kMiB;
  state.counters["peak_rss_growth_MiB"] = double(MaxRssKiB() - rss0) / 1024;
  state.counters["bound_MiB"] = (256 + 64 + 64);  // cache + dirty limit + 64 MiB
}
BENCHMARK(ThinFill)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

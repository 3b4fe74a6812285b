// The pool against plain files, side by side in one run. Each benchmark runs the reference
// (pwrite/pread/fdatasync on a plain file) and the pool path (a volume on a pool whose vdev
// is a FileDevice on a file of the same kind) for the same work, timing each, and reports
// both throughputs and their ratio (pool / reference) as counters:
//
//   RandWrite4K   4 KiB random writes, flush (fdatasync / Flush) every 64 writes,
//                 volblocksize 4K                                       target ratio >= 0.5
//   RandWrite4KNoFlush/vbs/backing/direct   4 KiB random writes over a written volume with
//                 no flush but one at the end of each pass (fdatasync / Flush), so the pool's
//                 write path and its commits are timed, not a flush per 64 writes; vbs 4K or
//                 16K (the default), backing 0 sparse, 1 written (Backing below); direct 1:
//                 the vdev file opened O_DIRECT (the raw file stays buffered).
//                 Counters: ratio (writes + final flush), write_ratio (the writes alone:
//                 the pool's include its throttle's waits for commits), write_amp (bytes
//                 the vdev received / bytes written), rmw_pct (the share of writes that
//                 read the old block: PoolImpl::rmw_reads), ref_us and pool_us per write,
//                 ref_cpu_us and pool_cpu_us (the process's CPU per write, every thread,
//                 the kernel's share included) and their ratio cpu_ratio (steadier than
//                 the clock on a loaded machine, but blind to the host disk's writeback)
//                                                                       target ratio >= 0.6
//   SeqWrite64K   64 KiB sequential writes, flush every 16 MiB          target ratio >= 0.8
//                 /0 on sparse files, /1 on files written through first (block-device-like:
//                 see Backing below). The sides alternate per flush interval. Counters:
//                 last_ratio (the last of 3 passes: the first also fills the pool's cache
//                 from fresh memory), per interval ref_ms, pool_write_ms, pool_flush_ms;
//                 cached_pct: the share of the written blocks the commits cached; per
//                 commit (txg_stats.h) txg_trees_ms, txg_flush1_ms, txg_ub_ms,
//                 txg_other_ms; early_pct: the share of the data written early
//   RandRead4K/0  4 KiB random reads of written data (page cache warm)  target ratio >= 0.8
//   HitRead4K     4 KiB random reads over 192 MiB the pool's cache holds whole: the cost of
//                 a hit (pool_ns, ref_ns: per read)
//   SeqRead1M/0   1 MiB sequential reads of written data, volblocksize 16K (page cache
//                 warm)                                                 target ratio >= 0.8
//                 Both write the data, commit it (Sync), then time 5 passes; /1../7 are
//                 variants (no data cache, small cache, cold, O_DIRECT, warm, rewritten:
//                 see ReadMode below). Counters: ratio (all passes), last_ratio (the last
//                 pass), cpu_ratio (the same from the thread's CPU time, user + system:
//                 steadier on a loaded machine), cache_hit_pct (the pool's block
//                 cache), cache_MiB
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
//                 (VmHWM after, less VmRSS before; the peak is reset first, so benchmarks
//                 run before it in the process do not hide its own) against cache + dirty
//                 limits; run it alone, as those benchmarks leave heap pages resident that
//                 it then reuses. Every block holds one 16 KiB pattern and the vdev below
//                 drops writes of that pattern (nothing reads data back), so 100 GiB costs
//                 the pool's full CPU path but only its metadata on disk.
//
//   CompressWrite64K/codec   64 KiB sequential writes of compressible data (text: lz4 stores
//                 it in about half, zstd in a third), flush every 16 MiB, on two volumes in
//                 one process, compression=off and codec 1 lz4 / 2 zstd (level 3), taking
//                 turns per interval. ratio = off time / codec time (the target:
//                 lz4 >= 0.9), stored_pct = the codec volume's used / off's, early_pct:
//                 the share of each volume's data written early (early_write.cc). Each
//                 turn ends once its pool's cache refill is idle, so neither pays for the
//                 other's. cpu_ratio: the same from the process's CPU time (every
//                 thread: the early writer's and the commits' compression count), steadier
//                 on a loaded machine
//   CompressRead4K/codec/cache   4 KiB random reads of that data, volblocksize 16K, after
//                 a commit; cache 1: the pool's defaults (blocks cached at commit, logical
//                 bytes), 0: no data cache, every read verifies and decodes a block.
//                 ratio = off time / codec time; cpu_ratio: the same from the reading
//                 thread's CPU time; hit_pct: each pool's block cache hits
//
//   pool_bench [--benchmark_filter=RandWrite4K]
//
// Files live in VOLSTACK_BENCH_DIR (default /var/tmp) and are removed at exit.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "bdev/file_device.h"
#include "bdev/forwarding_device.h"
#include "pool/pool_impl.h"
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

// Die() exits without running the destructors that remove the files: it removes them.
void RemoveFiles() {
  for (const char* n : {"raw", "vdev", "keep", "comp-off", "comp-on"}) ::unlink(Path(n).c_str());
}

void Die(const std::string& what) {
  std::fprintf(stderr, "pool_bench: %s\n", what.c_str());
  RemoveFiles();
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
  Status DoWriteV(uint64_t o, std::span<const std::span<const uint8_t>> pieces,
                  bdev::WriteOptions opts) override {
    // ThinFill's filter works on plain writes: the base splits the pieces into DoWrites.
    if (!drop.empty()) return BlockDevice::DoWriteV(o, pieces, opts);
    written += bdev::TotalLength(pieces);
    return ForwardingDevice::DoWriteV(o, pieces, opts);
  }
  Status DoRead(uint64_t o, std::span<uint8_t> b) override {
    read += b.size();
    return ForwardingDevice::DoRead(o, b);
  }
};

// Defined with the read benchmarks: writes `size` bytes to both sides and commits.
struct RawFile;
struct PoolVol;
void FillBoth(RawFile& raw, PoolVol& pv, uint64_t size);

double ProcessCpu() {
  timespec ts;
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double ThreadCpu() {
  timespec ts;
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// How the files under both sides start. kSparse: holes, so the first write to each file
// block also allocates it in the host file system; the pool, copy-on-write, keeps writing
// to never-written parts of its vdev file until it has used all of it once, while the raw
// file pays only on its first pass. kWritten: every byte written (zeros) and flushed
// before the pool is created, as a block device is: the steady state of both.
enum class Backing { kSparse, kWritten };

void WriteZeros(int fd, uint64_t size) {
  std::vector<uint8_t> zeros(4 * kMiB, 0);
  for (uint64_t off = 0; off < size; off += zeros.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(zeros.size(), size - off));
    if (::pwrite(fd, zeros.data(), n, static_cast<off_t>(off)) != static_cast<ssize_t>(n)) {
      Die("writing zeros");
    }
  }
  if (::fdatasync(fd) != 0) Die("fdatasync");
}

struct RawFile {
  explicit RawFile(uint64_t size, Backing backing = Backing::kSparse) : path(Path("raw")) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(size)) != 0) Die("raw file");
    if (backing == Backing::kWritten) WriteZeros(fd, size);
  }
  ~RawFile() {
    ::close(fd);
    ::unlink(path.c_str());
  }
  std::string path;
  int fd;
};

struct PoolVol {
  PoolVol(uint64_t volsize, uint32_t vbs, bool sparse = true, pool::PoolTuning tuning = {},
          bdev::FileDeviceOptions fo = {}, Backing backing = Backing::kSparse)
      : path(Path("vdev")) {
    const uint64_t vdev_size = volsize + volsize / 4 + 128 * kMiB;
    if (backing == Backing::kWritten) {
      const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
      if (fd < 0) Die("vdev file");
      WriteZeros(fd, vdev_size);
      ::close(fd);
    }
    auto f = backing == Backing::kWritten ? bdev::FileDevice::Open(path, fo)
                                          : bdev::FileDevice::Create(path, vdev_size, fo);
    if (!f.ok()) Die(f.status().ToString());
    counter = std::make_shared<CountingDevice>(*f);
    pool::PoolCreateOptions co;
    co.tuning = tuning;
    auto p = pool::Pool::Create("bench", {counter}, co);
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

// 4 KiB random writes, no flush between them (RandWrite4KNoFlush above). Both sides are
// written in full and committed first, so a write into a volume block is a
// read-modify-write when the rest of the block is not dirty already.
void RandWrite4KNoFlush(benchmark::State& state) {
  const uint32_t vbs = static_cast<uint32_t>(state.range(0));
  const Backing backing = state.range(1) == 0 ? Backing::kSparse : Backing::kWritten;
  const uint64_t size = 256 * kMiB;
  RawFile raw(size, backing);
  bdev::FileDeviceOptions fo;
  fo.direct_io = state.range(2) != 0;
  PoolVol pv(size, vbs, true, {}, fo, backing);
  FillBoth(raw, pv, size);
  auto d = Data(4096);
  const int n = 16384;  // 64 MiB a pass: the pool commits several txgs on its own
  double ref_s = 0, pool_s = 0, ref_write_s = 0, pool_write_s = 0, ref_cpu = 0, pool_cpu = 0;
  std::mt19937_64 rng(6);
  const uint64_t written_before = pv.counter->written;
  const uint64_t rmw_before = pv.pool->impl()->rmw_reads.load();
  for (auto _ : state) {
    std::vector<uint64_t> offs(n);
    for (auto& o : offs) o = (rng() % (size / 4096)) * 4096;
    const double r0 = ProcessCpu();
    const auto t0 = Clock::now();
    for (const uint64_t off : offs) {
      if (::pwrite(raw.fd, d.data(), 4096, static_cast<off_t>(off)) != 4096) Die("pwrite");
    }
    const auto t1 = Clock::now();
    if (::fdatasync(raw.fd) != 0) Die("fdatasync");
    const auto t2 = Clock::now();
    const double c0 = ProcessCpu();
    ref_cpu += c0 - r0;
    for (const uint64_t off : offs) {
      if (auto st = pv.dev->Write(off, d); !st.ok()) Die("write: " + st.ToString());
    }
    const auto t3 = Clock::now();
    if (auto st = pv.dev->Flush(); !st.ok()) Die("flush: " + st.ToString());
    const auto t4 = Clock::now();
    pool_cpu += ProcessCpu() - c0;
    ref_write_s += Seconds(t0, t1);
    ref_s += Seconds(t0, t2);
    pool_write_s += Seconds(t2, t3);
    pool_s += Seconds(t2, t4);
  }
  const double writes = double(n) * state.iterations();
  Report(state, ref_s, pool_s, 4096.0 * writes);
  state.counters["write_ratio"] = ref_write_s / pool_write_s;
  state.counters["write_amp"] = double(pv.counter->written - written_before) / (4096.0 * writes);
  state.counters["rmw_pct"] =
      100.0 * double(pv.pool->impl()->rmw_reads.load() - rmw_before) / writes;
  state.counters["ref_us"] = ref_s / writes * 1e6;
  state.counters["pool_us"] = pool_s / writes * 1e6;
  state.counters["ref_cpu_us"] = ref_cpu / writes * 1e6;
  state.counters["pool_cpu_us"] = pool_cpu / writes * 1e6;
  state.counters["cpu_ratio"] = ref_cpu / pool_cpu;
}
BENCHMARK(RandWrite4KNoFlush)
    ->Args({16384, 0, 0})
    ->Args({16384, 1, 0})
    ->Args({16384, 1, 1})
    ->Args({4096, 0, 0})
    ->Args({4096, 1, 0})
    ->Args({4096, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

// The commits' steps between two snapshots (txg_stats.h), in ms per commit: trees (the
// data and indirect blocks: checksums, the kernel's copies, write-back started), flush1
// (the first flush), ub (uberblocks and the second flush), other (space map, MOS, finish);
// and early_pct, the share of the data blocks written early (early_write.cc).
void ReportTxgSteps(benchmark::State& state, const pool::TxgStats& a, const pool::TxgStats& b) {
  const double commits = double(b.commits - a.commits);
  if (commits == 0) return;
  auto per_commit = [&](std::chrono::nanoseconds d) { return double(d.count()) / commits / 1e6; };
  state.counters["commits"] = commits;
  const uint64_t data = b.data_bytes - a.data_bytes;
  state.counters["early_pct"] =
      data > 0 ? 100.0 * double(b.early_bytes - a.early_bytes) / double(data) : 0;
  state.counters["txg_trees_ms"] = per_commit(b.trees - a.trees);
  state.counters["txg_flush1_ms"] = per_commit(b.flush - a.flush);
  state.counters["txg_ub_ms"] = per_commit(b.uberblocks - a.uberblocks);
  state.counters["txg_other_ms"] = per_commit(b.space_maps - a.space_maps + b.finish - a.finish);
}

// /0: sparse files; /1: written files (Backing above).
void SeqWrite64K(benchmark::State& state) {
  const uint64_t size = 256 * kMiB;
  const Backing backing = state.range(0) == 0 ? Backing::kSparse : Backing::kWritten;
  RawFile raw(size, backing);
  const uint32_t vbs = 16384;
  PoolVol pv(size, vbs, true, {}, {}, backing);
  auto d = Data(65536);
  const uint64_t between_flushes = 16 * kMiB;
  double ref_s = 0, pool_s = 0, pool_write_s = 0, last_ref_s = 0, last_pool_s = 0;
  const pool::TxgStats txgs_before = pv.pool->impl()->TxgStatsSnapshot();
  for (auto _ : state) {
    last_ref_s = last_pool_s = 0;
    // The two sides take turns per flush interval, so a drift in the host disk's speed
    // (large on a VM) hits both alike.
    for (uint64_t start = 0; start < size; start += between_flushes) {
      auto t0 = Clock::now();
      for (uint64_t off = start; off < start + between_flushes; off += 65536) {
        if (::pwrite(raw.fd, d.data(), 65536, static_cast<off_t>(off)) != 65536) Die("pwrite");
      }
      if (::fdatasync(raw.fd) != 0) Die("fdatasync");
      auto t1 = Clock::now();
      for (uint64_t off = start; off < start + between_flushes; off += 65536) {
        if (!pv.dev->Write(off, d).ok()) Die("write");
      }
      auto t2 = Clock::now();
      if (!pv.dev->Flush().ok()) Die("flush");
      auto t3 = Clock::now();
      last_ref_s += Seconds(t0, t1);
      last_pool_s += Seconds(t1, t3);
      pool_write_s += Seconds(t1, t2);
    }
    ref_s += last_ref_s;
    pool_s += last_pool_s;
  }
  Report(state, ref_s, pool_s, double(size) * state.iterations());
  // The first pass also fills the pool's block cache from nothing (fresh pages); the last
  // is the steady state. Per flush interval: the reference's time, and the pool's split
  // into its writes (copies into dirty buffers) and its Flush (the txg commit).
  const double intervals = double(size / between_flushes) * state.iterations();
  state.counters["last_ratio"] = last_ref_s / last_pool_s;
  state.counters["ref_ms"] = ref_s / intervals * 1e3;
  state.counters["pool_write_ms"] = pool_write_s / intervals * 1e3;
  state.counters["pool_flush_ms"] = (pool_s - pool_write_s) / intervals * 1e3;
  ReportTxgSteps(state, txgs_before, pv.pool->impl()->TxgStatsSnapshot());
  // How much of what was written the commits copied into the block cache before they
  // stopped the copies (they never wait for them).
  const auto cache = pv.pool->impl()->block_cache->Stats();
  state.counters["cached_pct"] =
      100.0 * double(cache.inserted) * vbs / (double(size) * double(state.iterations()));
}
BENCHMARK(SeqWrite64K)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

// Read benchmarks. Variants (state.range(0)):
//   0  the target: the pool with its defaults (256 MiB cache: indirect blocks + verified
//      data; the 256 MiB of data do not quite fit)
//   1  no data cache (PoolTuning::cache_data = false): every read goes to the vdev and is
//      verified; what the pool did before the block cache
//   2  cache 32 MiB, 1/8 of the data: mostly misses (a working set bigger than the cache)
//   3  cold: before each iteration the host page cache of both files is dropped
//      (posix_fadvise DONTNEED) and the pool's cache emptied; both sides read from disk
//      (RandRead4K does 1/16 of the reads in this mode and in mode 4)
//   4  O_DIRECT vdev (FileDeviceOptions::direct_io): no double caching; the pool's misses
//      go to disk while the reference reads the page cache
//   5  warm: one untimed read pass over the volume first (the reference's page cache is
//      warm from its writes; this is what caching blocks at commit would give the pool)
//   6  rewritten: the data is written and committed twice before the reads, so the first
//      copy of every block is freed: what the cache keeps of an overwrite
//   7  (RandRead4K only) volblocksize 16K, the default: every 4 KiB read is part of a block
enum ReadMode {
  kDefault = 0,
  kNoDataCache = 1,
  kSmallCache = 2,
  kCold = 3,
  kDirect = 4,
  kWarm = 5,
  kRewritten = 6,
  kPartBlock = 7
};

void WarmPass(PoolVol& pv, uint64_t size) {
  std::vector<uint8_t> b(128 * 1024);  // longer requests bypass the pool's cache
  for (uint64_t off = 0; off < size; off += b.size()) {
    if (!pv.dev->Read(off, b).ok()) Die("read");
  }
}

pool::PoolTuning ReadTuning(int mode) {
  pool::PoolTuning t;
  if (mode == kNoDataCache) t.cache_data = false;
  if (mode == kSmallCache) t.cache_max_bytes = 32 * kMiB;
  return t;
}

bdev::FileDeviceOptions ReadFileOptions(int mode) {
  bdev::FileDeviceOptions o;
  o.direct_io = mode == kDirect;
  return o;
}

void DropCaches(int raw_fd, PoolVol& pv) {
  pv.pool->impl()->FinishCacheFills();  // and the refill, which would warm the cache again
  if (auto* c = pv.pool->impl()->block_cache.get()) c->Clear();
  auto* f = dynamic_cast<bdev::FileDevice*>(pv.counter->target().get());
  if (f == nullptr) Die("not a file device");
  ::fdatasync(raw_fd);
  ::fdatasync(f->fd());
  ::posix_fadvise(raw_fd, 0, 0, POSIX_FADV_DONTNEED);
  ::posix_fadvise(f->fd(), 0, 0, POSIX_FADV_DONTNEED);
}

void ReportCache(benchmark::State& state, PoolVol& pv, const pool::BlockCacheStats& before) {
  auto* c = pv.pool->impl()->block_cache.get();
  if (c == nullptr) return;
  const auto st = c->Stats();
  const double lookups = double(st.hits - before.hits + st.misses - before.misses);
  state.counters["cache_hit_pct"] =
      lookups > 0 ? 100.0 * double(st.hits - before.hits) / lookups : 0;
  state.counters["cache_MiB"] = double(st.bytes) / kMiB;
}

// CPU time of this thread (user + system: pread's copy counts), for ratios that hold up
// on a loaded machine, where wall-clock time includes waiting for a core.

// Writes `size` bytes of the same data to the raw file and the volume, then commits.
void FillBoth(RawFile& raw, PoolVol& pv, uint64_t size) {
  auto d = Data(kMiB);
  for (uint64_t off = 0; off < size; off += kMiB) {
    if (::pwrite(raw.fd, d.data(), kMiB, static_cast<off_t>(off)) != kMiB) Die("pwrite");
    if (!pv.dev->Write(off, d).ok()) Die("write");
  }
  if (!pv.dev->Flush().ok()) Die("flush");
  if (!pv.pool->Sync().ok()) Die("sync");
}

// The read benchmarks' variants: /0 is the comparison the target is stated for.
void ReadVariants(benchmark::internal::Benchmark* b) {
  for (int mode : {kDefault, kNoDataCache, kSmallCache, kCold, kDirect, kWarm, kRewritten}) {
    b->Arg(mode);
  }
  b->Unit(benchmark::kMillisecond)->Iterations(5)->UseRealTime();
}

struct ReadTimes {
  double ref_s = 0, pool_s = 0, ref_cpu = 0, pool_cpu = 0;
};

// 4 KiB reads at `offs`: pread of the raw file, then the volume into `aligned` (4 KiB,
// aligned for O_DIRECT), each timed by the clock and by the thread's CPU.
ReadTimes TimeRandomReads(RawFile& raw, PoolVol& pv, const std::vector<uint64_t>& offs,
                          uint8_t* aligned) {
  std::vector<uint8_t> buf(4096);
  ReadTimes t;
  const double c0 = ThreadCpu();
  const auto t0 = Clock::now();
  for (const uint64_t off : offs) {
    if (::pread(raw.fd, buf.data(), 4096, static_cast<off_t>(off)) != 4096) Die("pread");
  }
  const auto t1 = Clock::now();
  const double c1 = ThreadCpu();
  for (const uint64_t off : offs) {
    if (!pv.dev->Read(off, std::span<uint8_t>(aligned, 4096)).ok()) Die("read");
  }
  t.pool_s = Seconds(t1, Clock::now());
  t.pool_cpu = ThreadCpu() - c1;
  t.ref_s = Seconds(t0, t1);
  t.ref_cpu = c1 - c0;
  return t;
}

void RandRead4K(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const uint64_t size = 256 * kMiB;
  RawFile raw(size);
  PoolVol pv(size, mode == kPartBlock ? 16384 : 4096, true, ReadTuning(mode),
             ReadFileOptions(mode));
  FillBoth(raw, pv, size);
  if (mode == kRewritten) FillBoth(raw, pv, size);
  if (mode == kWarm) WarmPass(pv, size);
  auto* aligned = static_cast<uint8_t*>(std::aligned_alloc(4096, 4096));  // O_DIRECT
  // From disk (cold, O_DIRECT): fewer reads.
  const int n = mode == kCold || mode == kDirect ? 4096 : 65536;
  double ref_s = 0, pool_s = 0, ref_cpu = 0, pool_cpu = 0;
  std::mt19937_64 rng(3);
  pool::BlockCacheStats before;
  if (auto* c = pv.pool->impl()->block_cache.get()) before = c->Stats();
  for (auto _ : state) {
    std::vector<uint64_t> offs(n);
    for (auto& o : offs) o = (rng() % (size / 4096)) * 4096;
    if (mode == kCold) DropCaches(raw.fd, pv);
    const ReadTimes t = TimeRandomReads(raw, pv, offs, aligned);
    ref_cpu += t.ref_cpu;
    pool_cpu += t.pool_cpu;
    ref_s += t.ref_s;
    pool_s += t.pool_s;
    state.counters["last_ratio"] = t.ref_s / t.pool_s;
  }
  std::free(aligned);
  Report(state, ref_s, pool_s, 4096.0 * n * state.iterations());
  ReportCache(state, pv, before);
  state.counters["cpu_ratio"] = ref_cpu / pool_cpu;
}
BENCHMARK(RandRead4K)->Apply(ReadVariants)->Arg(kPartBlock);

// What a hit costs: 4 KiB random reads over 192 MiB that the pool's cache holds whole (each
// block read twice first, so admitted), against pread of the same, page-cached, data.
void HitRead4K(benchmark::State& state) {
  const uint64_t size = 192 * kMiB;
  RawFile raw(size);
  PoolVol pv(size, 4096, true, ReadTuning(kDefault), ReadFileOptions(kDefault));
  FillBoth(raw, pv, size);
  auto* aligned = static_cast<uint8_t*>(std::aligned_alloc(4096, 4096));
  for (int pass = 0; pass < 2; pass++) {
    for (uint64_t off = 0; off < size; off += 4096) {
      if (!pv.dev->Read(off, std::span<uint8_t>(aligned, 4096)).ok()) Die("read");
    }
  }
  const int n = 1 << 18;
  std::mt19937_64 rng(3);
  std::vector<uint64_t> offs(n);
  const auto before = pv.pool->impl()->block_cache->Stats();
  double ref_s = 0, pool_s = 0;
  for (auto _ : state) {
    for (auto& o : offs) o = (rng() % (size / 4096)) * 4096;
    const ReadTimes t = TimeRandomReads(raw, pv, offs, aligned);
    ref_s += t.ref_s;
    pool_s += t.pool_s;
  }
  std::free(aligned);
  const double reads = double(n) * state.iterations();
  Report(state, ref_s, pool_s, 4096.0 * reads);
  state.counters["ref_ns"] = ref_s / reads * 1e9;
  state.counters["pool_ns"] = pool_s / reads * 1e9;
  ReportCache(state, pv, before);
}
BENCHMARK(HitRead4K)->Unit(benchmark::kMillisecond)->Iterations(5)->UseRealTime();

void SeqRead1M(benchmark::State& state) {
  const int mode = static_cast<int>(state.range(0));
  const uint64_t size = 256 * kMiB;
  RawFile raw(size);
  PoolVol pv(size, 16384, true, ReadTuning(mode), ReadFileOptions(mode));
  FillBoth(raw, pv, size);
  if (mode == kRewritten) FillBoth(raw, pv, size);
  if (mode == kWarm) WarmPass(pv, size);
  auto* buf = static_cast<uint8_t*>(std::aligned_alloc(4096, kMiB));
  double ref_s = 0, pool_s = 0, ref_cpu = 0, pool_cpu = 0;
  pool::BlockCacheStats before;
  if (auto* c = pv.pool->impl()->block_cache.get()) before = c->Stats();
  for (auto _ : state) {
    if (mode == kCold) DropCaches(raw.fd, pv);
    const double c0 = ThreadCpu();
    auto t0 = Clock::now();
    for (uint64_t off = 0; off < size; off += kMiB) {
      if (::pread(raw.fd, buf, kMiB, static_cast<off_t>(off)) != kMiB) Die("pread");
    }
    auto t1 = Clock::now();
    const double c1 = ThreadCpu();
    for (uint64_t off = 0; off < size; off += kMiB) {
      if (!pv.dev->Read(off, std::span<uint8_t>(buf, kMiB)).ok()) Die("read");
    }
    auto t2 = Clock::now();
    ref_cpu += c1 - c0;
    pool_cpu += ThreadCpu() - c1;
    ref_s += Seconds(t0, t1);
    pool_s += Seconds(t1, t2);
    state.counters["last_ratio"] = Seconds(t0, t1) / Seconds(t1, t2);
  }
  std::free(buf);
  Report(state, ref_s, pool_s, double(size) * state.iterations());
  ReportCache(state, pv, before);
  state.counters["cpu_ratio"] = ref_cpu / pool_cpu;
}
BENCHMARK(SeqRead1M)->Apply(ReadVariants);

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

// The process's resident set (VmRSS) or its peak since the last ResetPeakRss (VmHWM), in
// KiB, from /proc/self/status.
long RssKiB(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) Die("/proc/self/status");
  char line[256];
  long kib = -1;
  const size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') kib = std::atol(line + n + 1);
  }
  std::fclose(f);
  if (kib < 0) Die(std::string("no ") + field + " in /proc/self/status");
  return kib;
}

// Sets the peak to the current resident set, so the next VmHWM is this benchmark's own
// peak whatever ran before it in the process (getrusage's ru_maxrss cannot be reset).
void ResetPeakRss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr || std::fputs("5", f) < 0 || std::fclose(f) != 0) Die("/proc/self/clear_refs");
}

void ThinFill(benchmark::State& state) {
  const char* gb = std::getenv("VOLSTACK_BENCH_THIN_GB");
  const uint64_t size = (gb ? std::strtoull(gb, nullptr, 10) : 2) << 30;
  ResetPeakRss();
  const long rss0 = RssKiB("VmRSS");
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
  state.counters["peak_rss_growth_MiB"] = double(RssKiB("VmHWM") - rss0) / 1024;
  state.counters["bound_MiB"] = (256 + 64 + 64);  // cache + dirty limit + 64 MiB
}
BENCHMARK(ThinFill)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

// --- compression: off against lz4 / zstd, side by side ---

// Words in random order: about 2x for lz4, 3x for zstd, as text and logs are.
std::vector<uint8_t> TextData(size_t n, uint64_t seed) {
  static const char* kWords[] = {"the ",   "volume ", "pool ", "block ",  "of ",    "data ",
                                 "write ", "read ",   "txg ",  "commit ", "error ", "\n"};
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out;
  out.reserve(n + 16);
  while (out.size() < n) {
    const char* w = kWords[rng() % 12];
    out.insert(out.end(), w, w + std::strlen(w));
  }
  out.resize(n);
  return out;
}

struct CompVol {
  CompVol(const std::string& name, uint64_t volsize, const std::string& comp, bool cache_data)
      : path(Path(name)) {
    auto f = bdev::FileDevice::Create(path, volsize + volsize / 4 + 128 * kMiB, {});
    if (!f.ok()) Die(f.status().ToString());
    pool::PoolCreateOptions co;
    co.tuning.cache_data = cache_data;
    auto p = pool::Pool::Create("bench" + name.substr(5), {*f}, co);
    if (!p.ok()) Die(p.status().ToString());
    pool = *p;
    pool::VolumeOptions vo;
    vo.volsize = volsize;
    vo.sparse = true;
    vo.props["compression"] = comp;
    if (!pool->CreateVolume(pool->name() + "/v", vo).ok()) Die("create volume");
    dev = *pool->OpenVolume(pool->name() + "/v");
  }
  ~CompVol() {
    dev.reset();
    pool.reset();
    ::unlink(path.c_str());
  }
  uint64_t used() { return std::stoull((*pool->GetDataset(pool->name() + "/v")).props.at("used")); }
  // Waits until the block cache's refill (cache_refill.h) has read back what the commits'
  // copies left out: it runs once the writes are committed, so it would otherwise run in
  // the other volume's turn (the two pools share the cores).
  void Settle() {
    if (auto* r = pool->impl()->cache_refill.get()) r->WaitIdle();
  }
  std::string path;
  std::shared_ptr<pool::Pool> pool;
  bdev::BlockDevicePtr dev;
};

const char* CodecName(int64_t arg) { return arg == 1 ? "lz4" : "zstd"; }

void CompressWrite64K(benchmark::State& state) {
  const uint64_t size = 128 * kMiB, interval = 16 * kMiB;
  CompVol off("comp-off", size, "off", true), on("comp-on", size, CodecName(state.range(0)), true);
  const auto data = TextData(size, 9);
  double off_s = 0, on_s = 0, off_cpu = 0, on_cpu = 0;
  for (auto _ : state) {
    for (uint64_t start = 0; start < size; start += interval) {
      for (CompVol* v : {&off, &on}) {
        const auto t0 = Clock::now();
        const double c0 = ProcessCpu();
        for (uint64_t o = start; o < start + interval; o += 65536) {
          if (!v->dev->Write(o, std::span(data.data() + o, 65536)).ok()) Die("write");
        }
        if (!v->dev->Flush().ok()) Die("flush");
        v->Settle();  // each side pays for the refill its own writes cause
        (v == &off ? off_s : on_s) += Seconds(t0, Clock::now());
        (v == &off ? off_cpu : on_cpu) += ProcessCpu() - c0;
      }
    }
  }
  state.counters["off_MBps"] = double(size) * state.iterations() / off_s / 1e6;
  state.counters["codec_MBps"] = double(size) * state.iterations() / on_s / 1e6;
  state.counters["ratio"] = off_s / on_s;
  state.counters["cpu_ratio"] = off_cpu / on_cpu;
  state.counters["stored_pct"] = 100.0 * double(on.used()) / double(off.used());
  for (CompVol* v : {&off, &on}) {
    const pool::TxgStats t = v->pool->impl()->TxgStatsSnapshot();
    state.counters[v == &off ? "off_early_pct" : "codec_early_pct"] =
        100.0 * double(t.early_bytes) / double(std::max<uint64_t>(t.data_bytes, 1));
  }
}
BENCHMARK(CompressWrite64K)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2)
    ->UseRealTime();

void CompressRead4K(benchmark::State& state) {
  const uint64_t size = 128 * kMiB;
  const bool cache = state.range(1) != 0;
  CompVol off("comp-off", size, "off", cache),
      on("comp-on", size, CodecName(state.range(0)), cache);
  const auto data = TextData(size, 9);
  for (CompVol* v : {&off, &on}) {
    if (!v->dev->Write(0, data).ok() || !v->dev->Flush().ok() || !v->pool->Sync().ok()) {
      Die("fill");
    }
  }
  for (CompVol* v : {&off, &on}) v->Settle();
  std::vector<uint8_t> buf(4096);
  std::mt19937_64 rng(4);
  double off_s = 0, on_s = 0, off_cpu = 0, on_cpu = 0;
  const int n = cache ? 65536 : 16384;
  for (auto _ : state) {
    std::vector<uint64_t> offs(n);
    for (auto& o : offs) o = (rng() % (size / 4096)) * 4096;
    for (CompVol* v : {&off, &on}) {
      const auto t0 = Clock::now();
      const double c0 = ThreadCpu();
      for (const uint64_t o : offs) {
        if (!v->dev->Read(o, buf).ok()) Die("read");
      }
      (v == &off ? off_s : on_s) += Seconds(t0, Clock::now());
      (v == &off ? off_cpu : on_cpu) += ThreadCpu() - c0;
    }
  }
  state.counters["off_kIOPS"] = double(n) * state.iterations() / off_s / 1e3;
  state.counters["codec_kIOPS"] = double(n) * state.iterations() / on_s / 1e3;
  state.counters["ratio"] = off_s / on_s;
  state.counters["cpu_ratio"] = off_cpu / on_cpu;
  for (CompVol* v : {&off, &on}) {
    auto* c = v->pool->impl()->block_cache.get();
    if (c == nullptr) continue;
    const auto st = c->Stats();
    state.counters[v == &off ? "off_hit_pct" : "codec_hit_pct"] =
        100.0 * double(st.hits) / double(std::max<uint64_t>(st.hits + st.misses, 1));
  }
}
BENCHMARK(CompressRead4K)
    ->Args({1, 1})
    ->Args({1, 0})
    ->Args({2, 1})
    ->Args({2, 0})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

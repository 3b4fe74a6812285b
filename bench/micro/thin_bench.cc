// 4 KiB random I/O on a thin LV in a pool holding 100 thin volumes, against a linear mapping
// (a slice) of the same data blocks, in one run (issue 40's target: >= 0.8).
//
//   BM_PairedThin/write:0|1   batches of 16 requests alternate between the thin LV and the
//       slice, over fresh random offsets each batch; ratio_wall = time(slice) / time(thin),
//       the median over batch pairs, ratio_cpu likewise in thread CPU time. The thin LV is
//       fully provisioned first, so writes are in place (first-write allocation and commits
//       are not measured here).
//
// Run: thin_bench [--benchmark_min_time=2]
// The files (metadata 4 MiB, data 256 MiB) go to $TMPDIR or /tmp and are unlinked at once.
#include <benchmark/benchmark.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "bdev/file_device.h"
#include "bdev/slice_device.h"
#include "lvm/thin_commit.h"
#include "lvm/thin_device.h"

namespace {

using namespace volstack;

constexpr uint64_t kMetaBytes = 4ull << 20;
constexpr uint64_t kDataBytes = 256ull << 20;
constexpr uint64_t kChunk = 64 << 10;
constexpr uint64_t kLvBytes = 128ull << 20;
constexpr uint64_t kBlock = 4096;
constexpr uint64_t kVolumes = 100;

bdev::BlockDevicePtr TempFile(const std::string& tag, uint64_t size) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/volstack_thin_bench_" +
                           std::to_string(::getpid()) + "_" + tag;
  auto f = bdev::FileDevice::Create(path, size);
  if (!f.ok()) std::abort();
  ::unlink(path.c_str());
  return *f;
}

struct Fixture {
  bdev::BlockDevicePtr thin, linear;

  Fixture() {
    auto meta = TempFile("meta", kMetaBytes);
    auto data = TempFile("data", kDataBytes);
    lvm::ThinPoolState st;
    st.sb.trans_id = 1;
    st.sb.data_block_size = kChunk / 512;
    st.sb.metadata_nr_blocks = kMetaBytes / lvm::kThinBlockBytes;
    st.sb.metadata_sm.nr_blocks = st.sb.metadata_nr_blocks;
    st.data_refs.assign(kDataBytes / kChunk, 0);
    for (uint64_t id = 1; id <= kVolumes; id++) st.devices[id];
    std::vector<bool> used(st.sb.metadata_nr_blocks, false);
    used[0] = true;
    if (!lvm::CommitThinMetadata(meta, st, used).ok()) std::abort();
    lvm::ThinDevice::Config c;
    c.name = "bench/thin1";
    c.size = kLvBytes;
    c.meta = meta;
    c.data = data;
    c.device_id = 1;
    c.chunk_sectors = kChunk / 512;
    c.transaction_id = 1;
    auto t = lvm::ThinDevice::Open(c);
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", t.status().ToString().c_str());
      std::abort();
    }
    std::vector<uint8_t> buf(1 << 20, 0x5a);
    for (uint64_t o = 0; o < kLvBytes; o += buf.size()) {
      if (!(*t)->Write(o, buf).ok()) std::abort();
    }
    if (!(*t)->Flush().ok()) std::abort();
    thin = *t;
    bdev::SliceOptions so;
    // The same data blocks the thin LV maps (allocated in order from 0 as it was filled): both
    // sides read and write the same page-cache pages.
    so.offset = 0;
    so.size = kLvBytes;
    auto s = bdev::SliceDevice::Create(data, so);
    if (!s.ok()) std::abort();
    linear = *s;
    if (thin->QueryAllocation(0, kLvBytes)->size() != 1) std::abort();  // all mapped
    if (!data->Flush().ok()) std::abort();
  }
};

Fixture& F() {
  static Fixture* f = new Fixture;
  return *f;
}

uint64_t NowNs(clockid_t clock) {
  struct timespec ts;
  ::clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

double Median(std::vector<double>& v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

void BM_PairedThin(benchmark::State& state) {
  constexpr int kBatch = 16;
  const bool write = state.range(0) != 0;
  bdev::BlockDevice* devs[2] = {F().linear.get(), F().thin.get()};
  std::vector<uint8_t> buf(kBlock, 0xa5);
  const uint64_t blocks = kLvBytes / kBlock;
  std::mt19937_64 rng(4242);
  uint64_t wall[2] = {0, 0}, cpu[2] = {0, 0};
  std::vector<double> wall_ratios, cpu_ratios;
  bool thin_first = false;
  auto batch = [&](int path) {
    uint64_t offsets[kBatch];
    for (auto& o : offsets) o = (rng() % blocks) * kBlock;
    const uint64_t w0 = NowNs(CLOCK_MONOTONIC), c0 = NowNs(CLOCK_THREAD_CPUTIME_ID);
    for (uint64_t off : offsets) {
      Status s = write ? devs[path]->Write(off, buf) : devs[path]->Read(off, buf);
      if (!s.ok()) return false;
    }
    wall[path] = NowNs(CLOCK_MONOTONIC) - w0;
    cpu[path] = NowNs(CLOCK_THREAD_CPUTIME_ID) - c0;
    return true;
  };
  for (auto _ : state) {
    const bool ok = thin_first ? (batch(1) && batch(0)) : (batch(0) && batch(1));
    if (!ok) {
      state.SkipWithError("I/O failed");
      break;
    }
    thin_first = !thin_first;
    if (wall[1] > 0) wall_ratios.push_back(static_cast<double>(wall[0]) / wall[1]);
    if (cpu[1] > 0) cpu_ratios.push_back(static_cast<double>(cpu[0]) / cpu[1]);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * 2 * kBatch);
  state.counters["ratio_wall"] = Median(wall_ratios);
  state.counters["ratio_cpu"] = Median(cpu_ratios);
}
BENCHMARK(BM_PairedThin)->Arg(0)->Arg(1)->ArgName("write");

}  // namespace

BENCHMARK_MAIN();

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
#include "paired_batches.h"

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

void BM_PairedThin(benchmark::State& state) {
  bdev::BlockDevice* devs[2] = {F().linear.get(), F().thin.get()};
  bench::RunPairedBatches(state, kLvBytes / kBlock, kBlock, 4242,
                          [&](int path, bool write, uint64_t off, std::span<uint8_t> buf) {
                            return write ? devs[path]->Write(off, buf) : devs[path]->Read(off, buf);
                          });
}
BENCHMARK(BM_PairedThin)->Arg(0)->Arg(1)->ArgName("write");

}  // namespace

BENCHMARK_MAIN();

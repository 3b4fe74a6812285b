// 4 KiB random I/O through an active LV against the same I/O on its file PVs directly, in
// one run (issue 4's target: ratio >= 0.97 for a linear LV on a file PV, and for a striped
// LV over two file PVs).
//
//   BM_FileDirect/write:0|1         reference: the first PV file, through FileDevice
//   BM_LinearLv/write:0|1           a linear LV over all of that file
//   BM_StripedLv/write:0|1          a 2-stripe LV (64 KiB chunks) over two files
//   BM_Paired{Linear,Striped}/...   the numbers to trust on a shared machine: batches of 16
//       requests alternate between the LV and the direct path (alternating which goes
//       first); the direct path does the I/O the LV would map its own random LV offsets to
//       (same distribution over the same files). ratio_wall = time(direct) / time(LV) as the median
//       over batch pairs, i.e. the LV's throughput relative to the file's; ratio_cpu likewise in
//       thread CPU time, the cost of the layer itself.
//
// Run: lvm_bench [--benchmark_filter=Paired] [--benchmark_min_time=2]
// The files (256 MiB each, filled) go to $TMPDIR or /tmp and are unlinked at once.
#include <benchmark/benchmark.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "bdev/file_device.h"
#include "lvm/lv_device.h"
#include "lvm/metadata.h"
#include "lvm/uuid.h"
#include "paired_batches.h"

namespace {

using namespace volstack;

constexpr uint64_t kFileSize = 256ull << 20;
constexpr uint64_t kBlock = 4096;
constexpr uint64_t kPeStart = 1 << 20;  // bytes: lvm2's default
constexpr uint32_t kExtentSectors = 8192;
constexpr uint64_t kChunk = 64 << 10;  // stripe size

struct Fixture {
  std::vector<bdev::BlockDevicePtr> files;
  bdev::BlockDevicePtr linear;
  bdev::BlockDevicePtr striped;

  Fixture() {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = tmp ? tmp : "/tmp";
    lvm::VolumeGroup vg;
    vg.name = "bench";
    vg.id = lvm::GenerateId();
    vg.extent_size = kExtentSectors;
    for (int i = 0; i < 2; i++) {
      std::string path =
          dir + "/volstack_lvm_bench_" + std::to_string(::getpid()) + "_" + std::to_string(i);
      auto f = bdev::FileDevice::Create(path, kFileSize);
      if (!f.ok()) std::abort();
      ::unlink(path.c_str());
      // Fill so reads hit data, not holes.
      std::vector<uint8_t> buf(1 << 20, 0x5a);
      for (uint64_t o = 0; o < kFileSize; o += buf.size()) (void)(*f)->Write(o, buf).ok();
      files.push_back(*f);
      lvm::PhysicalVolume pv;
      pv.id = lvm::GenerateId();
      pv.pe_start = kPeStart / 512;
      pv.pe_count = static_cast<uint32_t>((kFileSize - kPeStart) / (kExtentSectors * 512ull));
      vg.pvs.push_back(pv);
    }
    const uint32_t n = vg.pvs[0].pe_count;
    lvm::LogicalVolume lin;
    lin.name = "lin";
    lin.id = lvm::GenerateId();
    lvm::Segment s;
    s.extent_count = n;
    s.areas = {{0, "", 0}};
    lin.segments = {s};
    vg.lvs.push_back(lin);
    auto l = lvm::LvDevice::Create(vg, "lin", files);
    if (!l.ok()) std::abort();
    linear = *l;
    vg.lvs.clear();
    lvm::LogicalVolume str = lin;
    str.name = "str";
    s.extent_count = 2 * n;
    s.stripe_size = kChunk / 512;
    s.areas = {{0, "", 0}, {1, "", 0}};
    str.segments = {s};
    vg.lvs.push_back(str);
    auto st = lvm::LvDevice::Create(vg, "str", files);
    if (!st.ok()) std::abort();
    striped = *st;
  }

  // Where the LV puts LV offset `off` (a 4 KiB request never crosses a 64 KiB chunk).
  std::pair<bdev::BlockDevice*, uint64_t> MapLinear(uint64_t off) const {
    return {files[0].get(), kPeStart + off};
  }
  std::pair<bdev::BlockDevice*, uint64_t> MapStriped(uint64_t off) const {
    const uint64_t chunk = off / kChunk;
    return {files[chunk % 2].get(), kPeStart + (chunk / 2) * kChunk + off % kChunk};
  }
};

Fixture& F() {
  static Fixture* f = new Fixture;
  return *f;
}

void RandomIo(benchmark::State& state, bdev::BlockDevice& dev, uint64_t span, bool write) {
  std::mt19937_64 rng(42);
  std::vector<uint8_t> buf(kBlock, 0xa5);
  const uint64_t blocks = span / kBlock;
  for (auto _ : state) {
    const uint64_t off = (rng() % blocks) * kBlock;
    Status s = write ? dev.Write(off, buf) : dev.Read(off, buf);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBlock));
}

// The same span of the device for every variant: the linear LV's size (the file minus
// pe_start).
void BM_FileDirect(benchmark::State& state) {
  RandomIo(state, *F().files[0], F().linear->size(), state.range(0));
}
void BM_LinearLv(benchmark::State& state) {
  RandomIo(state, *F().linear, F().linear->size(), state.range(0));
}
void BM_StripedLv(benchmark::State& state) {
  RandomIo(state, *F().striped, F().striped->size(), state.range(0));
}
BENCHMARK(BM_FileDirect)->Arg(0)->Arg(1)->ArgName("write");
BENCHMARK(BM_LinearLv)->Arg(0)->Arg(1)->ArgName("write");
BENCHMARK(BM_StripedLv)->Arg(0)->Arg(1)->ArgName("write");

// Interleaved direct / LV batches over the same random LV offsets (see the file comment): the
// direct path does the I/O the LV maps each offset to.
template <typename MapFn>
void PairedIo(benchmark::State& state, bdev::BlockDevice& lv, MapFn map) {
  bench::RunPairedBatches(state, lv.size() / kBlock, kBlock, 777,
                          [&](int path, bool write, uint64_t off, std::span<uint8_t> buf) {
                            if (path == 1) return write ? lv.Write(off, buf) : lv.Read(off, buf);
                            auto [dev, at] = map(off);
                            return write ? dev->Write(at, buf) : dev->Read(at, buf);
                          });
}

void BM_PairedLinear(benchmark::State& state) {
  PairedIo(state, *F().linear, [](uint64_t off) { return F().MapLinear(off); });
}
void BM_PairedStriped(benchmark::State& state) {
  PairedIo(state, *F().striped, [](uint64_t off) { return F().MapStriped(off); });
}
BENCHMARK(BM_PairedLinear)->Arg(0)->Arg(1)->ArgName("write");
BENCHMARK(BM_PairedStriped)->Arg(0)->Arg(1)->ArgName("write");

// The mapping the paired benchmarks replay must be the LV's: a block written through the LV
// reads back at the mapped file offset. Checked once before any benchmark runs.
void CheckMapping() {
  std::vector<uint8_t> mark(kBlock), got(kBlock);
  std::mt19937_64 rng(5);
  for (auto [lv, striped] : {std::pair{F().linear.get(), false}, {F().striped.get(), true}}) {
    for (int i = 0; i < 64; i++) {
      const uint64_t off = (rng() % (lv->size() / kBlock)) * kBlock;
      for (auto& b : mark) b = static_cast<uint8_t>(rng());
      auto [dev, at] = striped ? F().MapStriped(off) : F().MapLinear(off);
      if (!lv->Write(off, mark).ok() || !dev->Read(at, got).ok() || got != mark) {
        std::fprintf(stderr, "lvm_bench: LV offset %llu is not where the bench maps it\n",
                     static_cast<unsigned long long>(off));
        std::exit(1);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  CheckMapping();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

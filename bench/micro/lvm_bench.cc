// 4 KiB random I/O through an active LV against the same I/O on the file PV directly, in one
// run. The LV adds only a map lookup and a call (no copy), so the ratio should be ~1.
//   BM_FileDirect/read|write        the PV file itself
//   BM_LinearLv/read|write          a linear LV on that file
//   BM_StripedLv/read|write         a 2-stripe LV over two files (64 KiB chunks)
// Run: bench/micro/lvm_bench  (files go to $TMPDIR or /tmp; 256 MiB each, sparse)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <random>

#include "bdev/file_device.h"
#include "lvm/lv_device.h"
#include "lvm/metadata.h"
#include "lvm/uuid.h"

namespace {

using namespace volstack;

constexpr uint64_t kFileSize = 256ull << 20;
constexpr uint64_t kBlock = 4096;

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
    vg.extent_size = 8192;
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
      pv.pe_start = 2048;
      pv.pe_count = static_cast<uint32_t>((kFileSize - (1 << 20)) / (4 << 20));
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
    s.stripe_size = 128;
    s.areas = {{0, "", 0}, {1, "", 0}};
    str.segments = {s};
    vg.lvs.push_back(str);
    auto st = lvm::LvDevice::Create(vg, "str", files);
    if (!st.ok()) std::abort();
    striped = *st;
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
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBlock));
}

// The same span of the device for every variant: the LV's size (the file minus pe_start).
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

}  // namespace

BENCHMARK_MAIN();

// 4 KiB random I/O on a raid1 LV (two legs, one file PV each) against a linear LV on one of
// its legs (the r1_rimage_0 sub-LV, activated alone), in one run (issue 40's targets: read
// >= 0.97, write >= 0.9).
//
//   BM_PairedRaid1/write:0|1   batches of 16 requests alternate between the raid1 LV and the
//       linear LV, over fresh random offsets each batch; ratio_wall = time(linear) /
//       time(raid1), the median over batch pairs (the raid1 LV's throughput relative to the
//       linear one's), ratio_cpu likewise in thread CPU time.
//
// Run: raid1_bench [--benchmark_min_time=2]
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
#include "lvm/mirrored_lv.h"
#include "paired_batches.h"

namespace {

using namespace volstack;

constexpr uint64_t kFileSize = 256ull << 20;
constexpr uint64_t kBlock = 4096;
constexpr uint32_t kExtents = 60;  // 4 MiB extents: 240 MiB per leg, 1 for each rmeta

std::string Text() {
  int k = 0;
  auto sub = [&k](const std::string& name, int pv, int pe, uint32_t n) {
    return name + " {\nid = \"" + std::string(31, 'd') + std::to_string(k++) +
           "\"\nstatus = [\"READ\", \"WRITE\"]\nsegment_count = 1\nsegment1 {\nstart_extent = "
           "0\nextent_count = " +
           std::to_string(n) + "\ntype = \"striped\"\nstripe_count = 1\nstripes = [\"pv" +
           std::to_string(pv) + "\", " + std::to_string(pe) + "]\n}\n}\n";
  };
  std::string t =
      "bench {\nid = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"\nseqno = 1\nstatus = "
      "[\"RESIZEABLE\", \"READ\", \"WRITE\"]\nextent_size = 8192\nmax_lv = 0\nmax_pv "
      "= 0\nphysical_volumes {\n";
  for (int i = 0; i < 2; i++) {
    t += "pv" + std::to_string(i) + " {\nid = \"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" +
         std::to_string(i) + "\"\nstatus = [\"ALLOCATABLE\"]\npe_start = 2048\npe_count = 63\n}\n";
  }
  t += "}\nlogical_volumes {\nr1 {\nid = \"cccccccccccccccccccccccccccccccc\"\nstatus = "
       "[\"READ\", \"WRITE\", \"VISIBLE\", \"NOTSYNCED\"]\nsegment_count = 1\nsegment1 "
       "{\nstart_extent = 0\nextent_count = " +
       std::to_string(kExtents) +
       "\ntype = \"raid1\"\ndevice_count = 2\nregion_size = 4096\nraids = [\"r1_rmeta_0\", "
       "\"r1_rimage_0\", \"r1_rmeta_1\", \"r1_rimage_1\"]\n}\n}\n";
  t += sub("r1_rmeta_0", 0, 0, 1) + sub("r1_rmeta_1", 1, 0, 1) +
       sub("r1_rimage_0", 0, 1, kExtents) + sub("r1_rimage_1", 1, 1, kExtents);
  return t + "}\n}\n";
}

struct Fixture {
  std::vector<bdev::BlockDevicePtr> files;
  bdev::BlockDevicePtr raid1, linear;

  Fixture() {
    const char* tmp = std::getenv("TMPDIR");
    const std::string dir = tmp ? tmp : "/tmp";
    for (int i = 0; i < 2; i++) {
      std::string path =
          dir + "/volstack_raid1_bench_" + std::to_string(::getpid()) + "_" + std::to_string(i);
      auto f = bdev::FileDevice::Create(path, kFileSize);
      if (!f.ok()) std::abort();
      ::unlink(path.c_str());
      std::vector<uint8_t> buf(1 << 20, 0x5a);
      for (uint64_t o = 0; o < kFileSize; o += buf.size()) (void)(*f)->Write(o, buf).ok();
      // The rmeta extent (PE 0) as lvm2 leaves it: wiped.
      (void)(*f)->WriteZeroes(1 << 20, 4 << 20).ok();
      files.push_back(*f);
    }
    auto vg = lvm::ImportVg(Text());
    if (!vg.ok()) {
      std::fprintf(stderr, "%s\n", vg.status().ToString().c_str());
      std::abort();
    }
    auto r = lvm::ActivateMirroredLv(*vg, *vg->FindLv("r1"), files, {});
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      std::abort();
    }
    raid1 = *r;
    auto l = lvm::LvDevice::Create(*vg, "r1_rimage_0", files);
    if (!l.ok()) std::abort();
    linear = *l;
  }
};

Fixture& F() {
  static Fixture* f = new Fixture;
  return *f;
}

void BM_PairedRaid1(benchmark::State& state) {
  bdev::BlockDevice* devs[2] = {F().linear.get(), F().raid1.get()};
  bench::RunPairedBatches(state, F().raid1->size() / kBlock, kBlock, 777,
                          [&](int path, bool write, uint64_t off, std::span<uint8_t> buf) {
                            return write ? devs[path]->Write(off, buf) : devs[path]->Read(off, buf);
                          });
}
BENCHMARK(BM_PairedRaid1)->Arg(0)->Arg(1)->ArgName("write");

}  // namespace

BENCHMARK_MAIN();

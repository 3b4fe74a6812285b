// Tests of pvmove on memory and fault devices: the metadata transforms (bad input changes
// nothing; lvm2's text round-trips), moves of linear, striped and several LVs with the data
// checked byte for byte, a writer racing the copy, stop + abort, hole skipping, and a
// crash at many points of a move (power cut on every PV) followed by resume or abort.
#include "lvm/pvmove.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <thread>

#include "bdev/fault_device.h"
#include "bdev/memory_device.h"
#include "lvm/allocator.h"
#include "lvm/lv_device.h"
#include "lvm/mirror_gate.h"
#include "lvm/test_devices.h"
#include "lvm/vg_ops.h"

namespace volstack::lvm {
namespace {

using bdev::BlockDevicePtr;

constexpr uint32_t kExtentSectors = 128;  // 64 KiB extents
constexpr uint64_t kExt = kExtentSectors * kSector;

using testing::Devices;

NewLvOptions Lv(const std::string& name, uint32_t extents, std::vector<int> pvs = {},
                uint32_t stripes = 1) {
  NewLvOptions o;
  o.name = name;
  o.alloc.extents = extents;
  o.alloc.pvs = std::move(pvs);
  o.alloc.stripes = stripes;
  o.alloc.stripe_size = stripes > 1 ? 16 : 0;  // 8 KiB chunks
  return o;
}

// A VG "vg" over the devices in `d` (in name order).
void MakeVg(Lvm& lvm, const std::vector<std::string>& names) {
  std::vector<const Pv*> pvs;
  for (const auto& n : names) pvs.push_back(*lvm.CreatePv(n, {}));
  auto vg = NewVg("vg", kExtentSectors, pvs);
  ASSERT_TRUE(vg.ok());
  ASSERT_TRUE(lvm.Commit(*vg, "create").ok());
}

std::vector<uint8_t> Random(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Fills an LV with random data through its device; returns the data.
std::vector<uint8_t> Fill(BlockDevicePtr lv, uint64_t seed) {
  auto data = Random(lv->size(), seed);
  EXPECT_TRUE(lv->Write(0, data).ok());
  EXPECT_TRUE(lv->Flush().ok());
  return data;
}

std::vector<uint8_t> ReadAll(BlockDevicePtr dev) {
  std::vector<uint8_t> b(dev->size());
  EXPECT_TRUE(dev->Read(0, b).ok());
  return b;
}

bool UsesPv(const VolumeGroup& vg, const std::string& lv, int pv) {
  for (const auto& s : vg.FindLv(lv)->segments) {
    for (const auto& a : s.areas) {
      if (a.pv == pv) return true;
    }
  }
  return false;
}

MovePlan Plan(int src, std::vector<int> dests = {}) {
  MovePlan p;
  p.source.pv = src;
  for (int d : dests) p.dests.push_back({d, {}});
  return p;
}

Status StartMove(Lvm& lvm, const MovePlan& plan) {
  VolumeGroup vg = lvm.FindVg("vg")->vg;
  VS_ASSIGN_OR_RETURN(auto name, PlanMove(vg, plan));
  (void)name;
  return lvm.Commit(vg, "pvmove");
}

TEST(PvmoveTest, ParsesPeRanges) {
  auto r = ParsePeRanges("0-9:20+5:30");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<PeRange>{{0, 10}, {20, 5}, {30, 1}}));
  EXPECT_FALSE(ParsePeRanges("0-9:5-12").ok());  // overlap
  EXPECT_FALSE(ParsePeRanges("9-3").ok());
  EXPECT_FALSE(ParsePeRanges("x").ok());
  EXPECT_FALSE(ParsePeRanges("").ok());
  EXPECT_FALSE(ParsePeRanges("1+0").ok());
}

TEST(PvmoveTest, BadInputChangesNothing) {
  Devices d;
  for (auto n : {"a", "b", "c"}) d.map[n] = bdev::MemoryDevice::Create(4 << 20);
  Lvm lvm(d.opener(), false);
  MakeVg(lvm, {"a", "b", "c"});
  VolumeGroup vg = lvm.FindVg("vg")->vg;
  ASSERT_TRUE(CreateLv(vg, Lv("big", 40, {0})).ok());
  ASSERT_TRUE(CreateLv(vg, Lv("fill", 40, {1})).ok());
  const VolumeGroup before = vg;
  auto same = [&] { return ExportVg(vg, {}) == ExportVg(before, {}); };
  // Unknown PV.
  EXPECT_EQ(PlanMove(vg, Plan(7)).status().code(), EINVAL);
  EXPECT_TRUE(same());
  // Not enough free extents on b alone (8 free).
  EXPECT_EQ(PlanMove(vg, Plan(0, {1})).status().code(), ENOSPC);
  EXPECT_TRUE(same());
  // Onto itself; overlapping source/destination ranges; a range past the end.
  EXPECT_EQ(PlanMove(vg, Plan(0, {0})).status().code(), EINVAL);
  MovePlan overlap = Plan(0);
  overlap.source.ranges = {{0, 10}};
  overlap.dests = {{0, {{5, 10}}}};
  EXPECT_EQ(PlanMove(vg, overlap).status().code(), EINVAL);
  MovePlan past = Plan(0);
  past.source.ranges = {{40, 100}};
  EXPECT_EQ(PlanMove(vg, past).status().code(), EINVAL);
  // An unknown LV; nothing allocated in the range.
  MovePlan named = Plan(0);
  named.lv_name = "nope";
  EXPECT_EQ(PlanMove(vg, named).status().code(), ENOENT);
  MovePlan empty = Plan(2);
  EXPECT_EQ(PlanMove(vg, empty).status().code(), ENOENT);
  EXPECT_TRUE(same());
  // A second move while one is in progress.
  MovePlan part = Plan(0);
  part.source.ranges = {{0, 4}};
  ASSERT_TRUE(PlanMove(vg, part).ok());
  EXPECT_EQ(PlanMove(vg, Plan(1)).status().code(), EBUSY);
}

TEST(PvmoveTest, MetadataLooksLikeLvm2sAndRoundTrips) {
  Devices d;
  for (auto n : {"a", "b"}) d.map[n] = bdev::MemoryDevice::Create(4 << 20);
  Lvm lvm(d.opener(), false);
  MakeVg(lvm, {"a", "b"});
  VolumeGroup vg = lvm.FindVg("vg")->vg;
  ASSERT_TRUE(CreateLv(vg, Lv("lvl", 6, {0})).ok());
  const VolumeGroup orig = vg;
  MovePlan p = Plan(0, {1});
  p.source.ranges = {{2, 3}};  // splits the LV into 3 segments
  auto name = PlanMove(vg, p);
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  EXPECT_EQ(*name, "pvmove0");
  const LogicalVolume* lv = vg.FindLv("lvl");
  ASSERT_EQ(lv->segments.size(), 3u);
  EXPECT_TRUE(lv->HasStatus("LOCKED"));
  EXPECT_EQ(lv->segments[1].areas[0].lv, "pvmove0");
  const LogicalVolume* pm = vg.FindLv("pvmove0");
  EXPECT_EQ(pm->status, (std::vector<std::string>{"READ", "WRITE", "PVMOVE", "LOCKED"}));
  EXPECT_EQ(pm->allocation_policy, "contiguous");
  ASSERT_EQ(pm->segments.size(), 1u);
  EXPECT_TRUE(pm->segments[0].is_mirror());
  EXPECT_EQ(pm->segments[0].areas[0], (SegmentArea{0, "", 2}));
  EXPECT_EQ(pm->segments[0].areas[1].pv, 1);
  const std::string text = ExportVg(vg, {});
  EXPECT_NE(text.find("type = \"mirror\""), std::string::npos);
  EXPECT_NE(text.find("\"pvmove0\", 0"), std::string::npos);
  auto back = ImportVg(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ExportVg(*back, {}), text);
  // Finish needs every segment copied; abort restores the original layout exactly.
  VolumeGroup fin = vg;
  EXPECT_EQ(FinishMove(fin, "pvmove0", false).code(), EAGAIN);
  ASSERT_TRUE(FinishMove(fin, "pvmove0", true).ok());
  EXPECT_EQ(fin.FindLv("lvl")->segments.size(), 1u);
  EXPECT_FALSE(fin.FindLv("lvl")->HasStatus("LOCKED"));
  EXPECT_EQ(ExportVg(fin, {}), ExportVg(orig, {}));
  ASSERT_TRUE(MarkSegmentMoved(vg, "pvmove0", 0).ok());
  ASSERT_TRUE(FinishMove(vg, "pvmove0", false).ok());
  EXPECT_TRUE(UsesPv(vg, "lvl", 1));
  EXPECT_EQ(vg.FindLv("pvmove0"), nullptr);
}

TEST(PvmoveTest, MovesLinearStripedAndSeveralLvs) {
  Devices d;
  for (auto n : {"a", "b", "c", "d"}) d.map[n] = bdev::MemoryDevice::Create(8 << 20);
  Lvm lvm(d.opener(), false);
  MakeVg(lvm, {"a", "b", "c", "d"});
  VolumeGroup vg = lvm.FindVg("vg")->vg;
  ASSERT_TRUE(CreateLv(vg, Lv("lin", 20, {0})).ok());
  ASSERT_TRUE(CreateLv(vg, Lv("str", 24, {0, 1}, 2)).ok());
  ASSERT_TRUE(CreateLv(vg, Lv("other", 10, {0})).ok());
  ASSERT_TRUE(lvm.Commit(vg, "lvs").ok());
  std::map<std::string, std::vector<uint8_t>> data;
  std::map<std::string, BlockDevicePtr> live;
  for (auto n : {"lin", "str", "other"}) {
    live[n] = *lvm.Activate(*lvm.FindVg("vg"), n);
    data[n] = Fill(live[n], data.size() + 1);
  }
  MovePlan p = Plan(0, {2, 3});
  p.max_segment_extents = 7;
  ASSERT_TRUE(StartMove(lvm, p).ok());
  int calls = 0;
  MoveOptions o;
  o.region_bytes = 32 << 10;
  o.progress = [&](const MoveProgress& pr) {
    calls++;
    EXPECT_LE(pr.done_bytes, pr.total_bytes);
  };
  ASSERT_TRUE(RunMove(lvm, "vg", o).ok());
  EXPECT_GT(calls, 10);
  const VolumeGroup& after = lvm.FindVg("vg")->vg;
  EXPECT_EQ(FindPvmoveLv(after), nullptr);
  EXPECT_EQ(after.pv_allocated_extents(0), 0u);
  for (auto n : {"lin", "str", "other"}) {
    EXPECT_FALSE(UsesPv(after, n, 0)) << n;
    EXPECT_FALSE(after.FindLv(n)->HasStatus("LOCKED"));
    // The live device followed, and a fresh activation reads the same.
    EXPECT_EQ(ReadAll(live[n]), data[n]) << n;
    EXPECT_EQ(ReadAll(*lvm.Activate(*lvm.FindVg("vg"), n)), data[n]) << n;
  }
  // The striped LV's moved stripe did not land on the PV its other stripe uses.
  for (const auto& s : after.FindLv("str")->segments) {
    EXPECT_NE(s.areas[0].pv, s.areas[1].pv);
  }
  // Wipe the source: nothing reads from it any more.
  ASSERT_TRUE(d.map["a"]->WriteZeroes(1 << 20, 7 << 20).ok());
  for (auto n : {"lin", "str", "other"}) EXPECT_EQ(ReadAll(live[n]), data[n]) << n;
}

TEST(PvmoveTest, WriterRacingTheCopyLosesNothing) {
  Devices d;
  for (auto n : {"a", "b"}) d.map[n] = bdev::MemoryDevice::Create(8 << 20);
  Lvm lvm(d.opener(), false);
  MakeVg(lvm, {"a", "b"});
  VolumeGroup vg = lvm.FindVg("vg")->vg;
  ASSERT_TRUE(CreateLv(vg, Lv("lv", 64, {0})).ok());
  ASSERT_TRUE(lvm.Commit(vg, "lv").ok());
  auto dev = *lvm.Activate(*lvm.FindVg("vg"), "lv");
  auto model = Fill(dev, 9);
  MovePlan p = Plan(0, {1});
  p.max_segment_extents = 16;
  ASSERT_TRUE(StartMove(lvm, p).ok());
  std::atomic<bool> done{false};
  std::atomic<int> writes{0};
  std::thread writer([&] {
    std::mt19937_64 rng(5);
    while (!done || writes < 200) {
      const uint64_t blocks = dev->size() / 4096;
      const uint64_t off = (rng() % blocks) * 4096;
      const uint64_t len = 4096 * (1 + rng() % 8);
      const uint64_t n = std::min(len, dev->size() - off);
      std::vector<uint8_t> buf(n, static_cast<uint8_t>(rng()));
      buf[0] = static_cast<uint8_t>(writes.load());
      ASSERT_TRUE(dev->Write(off, buf).ok());
      std::copy(buf.begin(), buf.end(), model.begin() + static_cast<std::ptrdiff_t>(off));
      writes++;
    }
  });
  MoveOptions o;
  o.region_bytes = 16 << 10;
  // Let the writer land a few writes between regions, so writes hit copied, copying and
  // not yet copied regions of every segment.
  o.between_regions = [&] {
    const int target = writes + 3;
    for (int i = 0; i < 2000 && writes < target; i++) std::this_thread::yield();
  };
  Status s = RunMove(lvm, "vg", o);
  done = true;
  writer.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(writes.load(), 200);
  EXPECT_EQ(MirrorGate::Global().held(), 0u);
  EXPECT_FALSE(UsesPv(lvm.FindVg("vg")->vg, "lv", 0));
  EXPECT_EQ(ReadAll(dev), model);
  // What the destination holds is the data, independently of the live map.
  EXPECT_EQ(ReadAll(*lvm.Activate(*lvm.FindVg("vg"), "lv")), model);
}

TEST(PvmoveTest, StopThenAbortKeepsCopiedSegmentsAndData) {
  for (bool atomic : {false, true}) {
    Devices d;
    for (auto n : {"a", "b"}) d.map[n] = bdev::MemoryDevice::Create(8 << 20);
    Lvm lvm(d.opener(), false);
    MakeVg(lvm, {"a", "b"});
    VolumeGroup vg = lvm.FindVg("vg")->vg;
    ASSERT_TRUE(CreateLv(vg, Lv("lv", 32, {0})).ok());
    ASSERT_TRUE(lvm.Commit(vg, "lv").ok());
    auto dev = *lvm.Activate(*lvm.FindVg("vg"), "lv");
    auto model = Fill(dev, 3);
    MovePlan p = Plan(0, {1});
    p.max_segment_extents = 8;
    p.atomic = atomic;
    ASSERT_TRUE(StartMove(lvm, p).ok());
    MoveOptions o;
    o.region_bytes = 64 << 10;
    o.progress = [&](const MoveProgress& pr) {
      auto live = LiveMoveProgress("vg");
      ASSERT_TRUE(live.has_value());
      if (pr.done_bytes >= pr.total_bytes / 2 + 4 * kExt) {
        EXPECT_TRUE(StopMove("vg"));
      }
    };
    EXPECT_EQ(RunMove(lvm, "vg", o).code(), ECANCELED);
    EXPECT_FALSE(LiveMoveProgress("vg").has_value());
    // Writes between the stop and the abort reach the source (mirror or pending map).
    std::vector<uint8_t> late(8192, 0x5a);
    ASSERT_TRUE(dev->Write(dev->size() - 8192, late).ok());
    std::copy(late.begin(), late.end(), model.end() - 8192);
    const LogicalVolume* pm = FindPvmoveLv(lvm.FindVg("vg")->vg);
    ASSERT_NE(pm, nullptr);
    uint32_t copied = 0;
    for (const auto& s : pm->segments) copied += s.extents_moved;
    EXPECT_EQ(copied, atomic ? 0u : 16u);
    ASSERT_TRUE(AbortMove(lvm, "vg").ok());
    const VolumeGroup& after = lvm.FindVg("vg")->vg;
    EXPECT_EQ(FindPvmoveLv(after), nullptr);
    EXPECT_EQ(after.pv_allocated_extents(1), atomic ? 0u : 16u);
    EXPECT_EQ(ReadAll(dev), model);
    EXPECT_EQ(ReadAll(*lvm.Activate(*lvm.FindVg("vg"), "lv")), model);
  }
}

TEST(PvmoveTest, SkipsHolesOfTheSource) {
  Devices d;
  auto a = bdev::MemoryDevice::Create(16 << 20);
  auto b = bdev::MemoryDevice::Create(16 << 20);
  d.map["a"] = a;
  d.map["b"] = b;
  Lvm lvm(d.opener(), false);
  MakeVg(lvm, {"a", "b"});
  VolumeGroup vg = lvm.FindVg("vg")->vg;
  ASSERT_TRUE(CreateLv(vg, Lv("thin", 200, {0})).ok());
  ASSERT_TRUE(lvm.Commit(vg, "lv").ok());
  auto dev = *lvm.Activate(*lvm.FindVg("vg"), "thin");
  std::vector<uint8_t> blob(64 << 10, 0x77);
  ASSERT_TRUE(dev->Write(5 << 20, blob).ok());
  const uint64_t b_before = b->allocated_bytes();
  ASSERT_TRUE(StartMove(lvm, Plan(0, {1})).ok());
  ASSERT_TRUE(RunMove(lvm, "vg").ok());
  // The 12.5 MiB LV cost the destination about one chunk of data plus metadata.
  EXPECT_LT(b->allocated_bytes() - b_before, 512u << 10);
  std::vector<uint8_t> back(blob.size());
  ASSERT_TRUE(dev->Read(5 << 20, back).ok());
  EXPECT_EQ(back, blob);
  std::vector<uint8_t> zero(4096), z(4096);
  ASSERT_TRUE(dev->Read(1 << 20, z).ok());
  EXPECT_EQ(z, zero);
}

TEST(PvmoveTest, LiveLvFollowsExtendAndReduce) {
  Devices d;
  for (auto n : {"a", "b"}) d.map[n] = bdev::MemoryDevice::Create(8 << 20);
  Lvm lvm(d.opener(), false);
  MakeVg(lvm, {"a", "b"});
  VolumeGroup vg = lvm.FindVg("vg")->vg;
  ASSERT_TRUE(CreateLv(vg, Lv("lv", 4, {0})).ok());
  ASSERT_TRUE(lvm.Commit(vg, "lv").ok());
  auto dev = *lvm.Activate(*lvm.FindVg("vg"), "lv");
  EXPECT_EQ(dev->size(), 4 * kExt);
  vg = lvm.FindVg("vg")->vg;
  AllocRequest more;
  more.extents = 6;
  more.pvs = {1};
  ASSERT_TRUE(AllocateExtents(vg, "lv", more).ok());
  ASSERT_TRUE(lvm.Commit(vg, "lvextend").ok());
  EXPECT_EQ(dev->size(), 10 * kExt);
  std::vector<uint8_t> tail(kExt, 0x42);
  ASSERT_TRUE(dev->Write(9 * kExt, tail).ok());
  vg = lvm.FindVg("vg")->vg;
  ASSERT_TRUE(ReduceExtents(vg, "lv", 3).ok());
  ASSERT_TRUE(lvm.Commit(vg, "lvreduce").ok());
  EXPECT_EQ(dev->size(), 3 * kExt);
  std::vector<uint8_t> b(4096);
  EXPECT_FALSE(dev->Read(5 * kExt, b).ok());
  EXPECT_TRUE(dev->Read(2 * kExt, b).ok());
}

TEST(LvDeviceRemapTest, RequestsNeverSeeATornMap) {
  // Two PVs hold the same bytes; readers read the LV while the map flips between them
  // thousands of times. Every read must return the data and no request may fail.
  Devices d;
  for (auto n : {"a", "b"}) d.map[n] = bdev::MemoryDevice::Create(4 << 20);
  Lvm lvm(d.opener(), false);
  MakeVg(lvm, {"a", "b"});
  VolumeGroup on_a = lvm.FindVg("vg")->vg;
  ASSERT_TRUE(CreateLv(on_a, Lv("lv", 8, {0})).ok());
  ASSERT_TRUE(lvm.Commit(on_a, "lv").ok());
  on_a = lvm.FindVg("vg")->vg;
  auto dev = *lvm.Activate(*lvm.FindVg("vg"), "lv");
  auto data = Fill(dev, 11);
  VolumeGroup on_b = on_a;
  on_b.lvs[0].segments[0].areas[0].pv = 1;
  std::vector<uint8_t> raw(8 * kExt);
  ASSERT_TRUE(d.map["a"]->Read(1 << 20, raw).ok());
  ASSERT_TRUE(d.map["b"]->Write(1 << 20, raw).ok());
  auto* lv = static_cast<LvDevice*>(dev.get());
  std::vector<BlockDevicePtr> devs{d.map["a"], d.map["b"]};
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; t++) {
    readers.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<uint8_t> b(3 * kExt);
      while (!stop) {
        const uint64_t off = (rng() % 5) * kExt + 512 * (rng() % 64);
        if (!dev->Read(off, b).ok() ||
            !std::equal(b.begin(), b.end(), data.begin() + static_cast<std::ptrdiff_t>(off))) {
          bad++;
        }
      }
    });
  }
  for (int i = 0; i < 2000; i++) ASSERT_TRUE(lv->Remap(i % 2 ? on_a : on_b, devs).ok());
  stop = true;
  for (auto& r : readers) r.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(lv->generation(), 2000u);
}

}  // namespace
}  // namespace volstack::lvm

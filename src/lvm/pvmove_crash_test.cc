// A pvmove survives a power cut at any point. The scenario: an LV on PV "a" full of known
// data; a move to PV "b" in 4-extent segments while a writer (called between copy regions)
// writes 4 KiB blocks through the live LV and flushes every other write. Both PVs are
// FaultDevices; a power cut is armed at the n-th mutating request of one of them (the other
// loses power at the same moment). After reopening, the move is resumed (even points) or
// aborted (odd points); then the VG must be plain (no pvmove LV, nothing LOCKED) and every
// 512-byte sector of the LV must hold its last flushed contents or a later write's.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "bdev/fault_device.h"
#include "lvm/lv_device.h"
#include "lvm/pvmove.h"
#include "lvm/vg_ops.h"

namespace volstack::lvm {
namespace {

using bdev::BlockDevicePtr;
using bdev::FaultDevice;

constexpr uint32_t kExtentSectors = 128;  // 64 KiB
constexpr uint32_t kLvExtents = 16;
constexpr uint64_t kBlock = 4096;

uint64_t Mutations(const FaultDevice& f) {
  auto c = f.counters();
  return c[bdev::OpType::kWrite] + c[bdev::OpType::kFlush] + c[bdev::OpType::kDiscard] +
         c[bdev::OpType::kWriteZeroes];
}

// What the LV may hold: per 4 KiB block, the flushed contents and unflushed candidates.
struct Model {
  std::vector<uint8_t> flushed;
  std::map<uint64_t, std::vector<std::vector<uint8_t>>> pending;  // block -> later writes

  void Flushed() {
    for (auto& [blk, writes] : pending) {
      std::copy(writes.back().begin(), writes.back().end(),
                flushed.begin() + static_cast<std::ptrdiff_t>(blk * kBlock));
    }
    pending.clear();
  }
  // Every sector matches the flushed contents or one of the pending writes of its block.
  ::testing::AssertionResult Check(const std::vector<uint8_t>& got) const {
    for (uint64_t s = 0; s < got.size(); s += 512) {
      auto eq = [&](const uint8_t* want) { return std::equal(want, want + 512, &got[s]); };
      if (eq(&flushed[s])) continue;
      bool ok = false;
      if (auto it = pending.find(s / kBlock); it != pending.end()) {
        for (const auto& w : it->second) ok |= eq(&w[s % kBlock]);
      }
      if (!ok) return ::testing::AssertionFailure() << "sector at LV byte " << s;
    }
    return ::testing::AssertionSuccess();
  }
};

struct Scenario {
  std::shared_ptr<FaultDevice> a, b;
  Model model;
  bool crashed = false;
  bdev::CrashMode mode = bdev::CrashMode::kKeepSubset;
};

DeviceOpener Opener(std::map<std::string, BlockDevicePtr>* devs) {
  return [devs](const std::string& name, bool) -> Result<BlockDevicePtr> {
    auto it = devs->find(name);
    if (it == devs->end()) return Status::NotFound(name);
    return it->second;
  };
}

// Builds the VG and LV and fills it; then `arm` is called and the move runs until it ends or
// the power goes.
void RunScenario(Scenario& sc, uint64_t seed, const std::function<void(Scenario&)>& arm) {
  sc.a = FaultDevice::CreateInMemory(4 << 20, 512, seed);
  sc.b = FaultDevice::CreateInMemory(4 << 20, 512, seed + 1);
  std::map<std::string, BlockDevicePtr> devs{{"a", sc.a}, {"b", sc.b}};
  Lvm lvm(Opener(&devs), false);
  Pv* pa = *lvm.CreatePv("a", {});
  Pv* pb = *lvm.CreatePv("b", {});
  auto vg = NewVg("vg", kExtentSectors, {pa, pb});
  ASSERT_TRUE(lvm.Commit(*vg, "create").ok());
  VolumeGroup v = lvm.FindVg("vg")->vg;
  NewLvOptions o;
  o.name = "lv";
  o.alloc.extents = kLvExtents;
  o.alloc.pvs = {0};
  ASSERT_TRUE(CreateLv(v, o).ok());
  ASSERT_TRUE(lvm.Commit(v, "lv").ok());
  auto lv = *lvm.Activate(*lvm.FindVg("vg"), "lv");
  sc.model.flushed.resize(lv->size());
  std::mt19937_64 rng(seed);
  for (auto& x : sc.model.flushed) x = static_cast<uint8_t>(rng());
  ASSERT_TRUE(lv->Write(0, sc.model.flushed).ok());
  ASSERT_TRUE(lv->Flush().ok());
  sc.a->ResetCounters();
  sc.b->ResetCounters();
  arm(sc);

  v = lvm.FindVg("vg")->vg;
  MovePlan plan;
  plan.source.pv = 0;
  plan.max_segment_extents = 4;
  ASSERT_TRUE(PlanMove(v, plan).ok());
  Status s = lvm.Commit(v, "pvmove");
  if (s.ok()) {
    MoveOptions mo;
    mo.region_bytes = 32 << 10;
    int step = 0;
    mo.between_regions = [&] {
      if (sc.crashed) return;
      std::vector<uint8_t> w(kBlock);
      for (auto& x : w) x = static_cast<uint8_t>(rng());
      const uint64_t blk = rng() % (lv->size() / kBlock);
      sc.model.pending[blk].push_back(w);
      if (!lv->Write(blk * kBlock, w).ok()) {
        sc.crashed = true;
        return;
      }
      if (++step % 2 == 0) {
        if (lv->Flush().ok()) {
          sc.model.Flushed();
        } else {
          sc.crashed = true;
        }
      }
    };
    s = RunMove(lvm, "vg", mo);
  }
  if (!s.ok()) sc.crashed = true;
  // The other PV loses power at the same moment.
  for (auto& f : {sc.a, sc.b}) {
    if (f->powered()) (void)f->CutPower(sc.mode);
  }
}

TEST(PvmoveCrashTest, ResumeOrAbortAfterPowerCutAtManyPoints) {
  // A dry run counts each PV's mutating requests during the move.
  uint64_t total_a = 0, total_b = 0;
  {
    Scenario sc;
    RunScenario(sc, 1, [](Scenario&) {});
    total_a = Mutations(*sc.a);
    total_b = Mutations(*sc.b);
  }
  ASSERT_GT(total_a, 40u);
  ASSERT_GT(total_b, 40u);
  const int points = std::getenv("VOLSTACK_LONG") ? 400 : 48;
  int resumed = 0, aborted = 0, mid_move = 0;
  for (int k = 0; k < points; k++) {
    const bool on_a = k % 3 != 0;
    const uint64_t total = on_a ? total_a : total_b;
    const uint64_t n = (static_cast<uint64_t>(k) * 7919) % total;
    const bdev::CrashMode mode = bdev::kAllCrashModes[k % 4];
    SCOPED_TRACE("crash point " + std::to_string(k) + " at request " + std::to_string(n) + " of " +
                 (on_a ? "a" : "b") + ", " + bdev::CrashModeName(mode));
    Scenario sc;
    sc.mode = mode;
    RunScenario(sc, 1, [&](Scenario& s) { (on_a ? s.a : s.b)->CutPowerAfter(n, mode); });
    ASSERT_TRUE(sc.crashed);
    std::map<std::string, BlockDevicePtr> devs{{"a", *sc.a->Reopen()}, {"b", *sc.b->Reopen()}};
    Lvm lvm(Opener(&devs), false);
    lvm.Scan({"a", "b"});
    VgHandle* h = lvm.FindVg("vg");
    ASSERT_NE(h, nullptr);
    if (FindPvmoveLv(h->vg)) {
      mid_move++;
      if (k % 2 == 0) {
        ASSERT_TRUE(RunMove(lvm, "vg").ok());
        resumed++;
      } else {
        ASSERT_TRUE(AbortMove(lvm, "vg").ok());
        aborted++;
      }
    }
    h = lvm.FindVg("vg");
    EXPECT_EQ(FindPvmoveLv(h->vg), nullptr);
    EXPECT_FALSE(h->vg.FindLv("lv")->HasStatus("LOCKED"));
    ASSERT_TRUE(ValidateVg(h->vg).ok());
    auto lv = lvm.Activate(*h, "lv");
    ASSERT_TRUE(lv.ok());
    std::vector<uint8_t> got((*lv)->size());
    ASSERT_TRUE((*lv)->Read(0, got).ok());
    EXPECT_TRUE(sc.model.Check(got));
  }
  // Most points fall inside the move, and both ways out were taken.
  EXPECT_GE(mid_move, 20);
  EXPECT_GE(resumed, 8);
  EXPECT_GE(aborted, 8);
}

}  // namespace
}  // namespace volstack::lvm

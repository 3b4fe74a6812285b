// LvDevice's fast path (linear and 2-striped segments, no mirror): random reads and writes
// crossing segment and chunk boundaries land where an independent model of lvm2's mapping
// says, the same as through the general path (a 4-striped LV, which does not qualify), and an
// area on a missing PV still fails with EIO.
#include "lvm/lv_device.h"

#include <gtest/gtest.h>

#include <random>

#include "bdev/memory_device.h"
#include "lvm/allocator.h"
#include "lvm/uuid.h"
#include "lvm/vg_ops.h"

namespace volstack::lvm {
namespace {

using bdev::BlockDevicePtr;

constexpr uint64_t kPeStartBytes = 4096;

struct Rig {
  VolumeGroup vg;
  std::vector<BlockDevicePtr> devs;

  explicit Rig(int pvs) {
    vg.name = "vg";
    vg.id = GenerateId();
    vg.extent_size = 16;  // 8 KiB extents
    for (int i = 0; i < pvs; i++) {
      PhysicalVolume pv;
      pv.id = GenerateId();
      pv.pe_start = kPeStartBytes / 512;
      pv.pe_count = 120;
      vg.pvs.push_back(pv);
      devs.push_back(bdev::MemoryDevice::Create(1 << 20, 512, 4096, "pv" + std::to_string(i)));
    }
  }
  void Add(const std::string& lv, uint32_t extents, uint32_t stripes, uint32_t stripe_sectors) {
    AllocRequest r;
    r.extents = extents;
    r.stripes = stripes;
    r.stripe_size = stripe_sectors;
    if (!vg.FindLv(lv)) {
      NewLvOptions o;
      o.name = lv;
      o.alloc = r;
      ASSERT_TRUE(CreateLv(vg, o).ok());
    } else {
      ASSERT_TRUE(AllocateExtents(vg, lv, r).ok());
    }
  }
  // lvm2's mapping of LV byte `o`: {pv index, byte offset on the PV}.
  std::pair<int, uint64_t> Where(const LogicalVolume& lv, uint64_t o) const {
    const uint64_t ext = vg.extent_bytes();
    for (const auto& s : lv.segments) {
      const uint64_t st = s.start_extent * ext, len = s.extent_count * ext;
      if (o < st || o >= st + len) continue;
      const uint64_t r = o - st;
      if (s.stripe_count() == 1) return {s.areas[0].pv, kPeStartBytes + s.areas[0].start * ext + r};
      const uint64_t c = s.stripe_size * 512, k = r / c;
      const auto& a = s.areas[k % s.stripe_count()];
      return {a.pv, kPeStartBytes + a.start * ext + (k / s.stripe_count()) * c + r % c};
    }
    return {-1, 0};
  }
};

// Writes random runs through the LV, checks each byte on the PVs against the model, and reads
// them back through the LV.
void CheckMapping(Rig& rig, const std::string& name, uint32_t seed) {
  auto lv = LvDevice::Create(rig.vg, name, rig.devs);
  ASSERT_TRUE(lv.ok()) << lv.status().ToString();
  const LogicalVolume& meta = *rig.vg.FindLv(name);
  const uint64_t size = (*lv)->size();
  ASSERT_EQ(size, meta.le_count() * rig.vg.extent_bytes());
  std::mt19937 rng(seed);
  for (int i = 0; i < 200; i++) {
    const uint64_t off = (rng() % (size / 512)) * 512;
    const uint64_t len = std::min<uint64_t>(size - off, 512 * (1 + rng() % 96));
    std::vector<uint8_t> data(len);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    ASSERT_TRUE((*lv)->Write(off, data).ok());
    for (uint64_t x = 0; x < len; x += 512) {
      auto [pv, at] = rig.Where(meta, off + x);
      ASSERT_GE(pv, 0);
      std::vector<uint8_t> sector(512);
      ASSERT_TRUE(rig.devs[pv]->Read(at, sector).ok());
      ASSERT_TRUE(std::equal(sector.begin(), sector.end(), data.begin() + x))
          << name << ": LV offset " << off + x << " is not at pv" << pv << ":" << at;
    }
    std::vector<uint8_t> back(len);
    ASSERT_TRUE((*lv)->Read(off, back).ok());
    ASSERT_TRUE(back == data) << name << ": read back at " << off;
  }
  // Past the end: ENOSPC from the boundary check, nothing reaches the PVs.
  std::vector<uint8_t> one(512);
  EXPECT_EQ((*lv)->Read(size, one).code(), ENOSPC);
}

TEST(LvDeviceFastPathTest, LinearAndTwoStripedSegmentsMapLikeLvm2) {
  Rig rig(3);
  rig.Add("mixed", 5, 1, 0);
  rig.Add("mixed", 8, 2, 8);   // 4 KiB chunks
  rig.Add("mixed", 3, 1, 0);   // on another PV or further along
  rig.Add("mixed", 6, 2, 16);  // 8 KiB chunks
  rig.Add("one", 7, 1, 0);
  rig.Add("str", 10, 2, 32);  // one 2-striped segment, 16 KiB chunks
  CheckMapping(rig, "mixed", 1);
  CheckMapping(rig, "one", 2);
  CheckMapping(rig, "str", 3);
}

TEST(LvDeviceFastPathTest, WideStripesTakeTheGeneralPathToTheSamePlaces) {
  Rig rig(4);
  rig.Add("wide", 8, 4, 8);
  rig.Add("wide", 4, 1, 0);
  rig.Add("wide", 6, 3, 16);
  CheckMapping(rig, "wide", 4);
}

TEST(LvDeviceFastPathTest, MissingPvAreasFailWithEio) {
  Rig rig(2);
  rig.Add("str", 8, 2, 8);
  std::vector<BlockDevicePtr> devs = {rig.devs[0], nullptr};
  LvActivation partial;
  partial.partial = true;
  auto lv = LvDevice::Create(rig.vg, "str", devs, partial);
  ASSERT_TRUE(lv.ok()) << lv.status().ToString();
  std::vector<uint8_t> buf(4096);
  EXPECT_TRUE((*lv)->Read(0, buf).ok());          // chunk 0: pv0
  EXPECT_EQ((*lv)->Read(4096, buf).code(), EIO);  // chunk 1: the missing pv1
  EXPECT_EQ((*lv)->Write(4096, buf).code(), EIO);
  EXPECT_EQ((*lv)->Read(2048, buf).code(), EIO);  // crosses into chunk 1
  // Without partial activation the LV does not activate at all.
  EXPECT_FALSE(LvDevice::Create(rig.vg, "str", devs).ok());
}

}  // namespace
}  // namespace volstack::lvm

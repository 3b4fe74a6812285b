// Tests of the LVM session on memory and fault devices: PV/VG/LV life cycle, reading lvm2's
// own PVs, the circular buffer, crash safety of commits, allocation invariants and the LV
// device mapping.
#include "lvm/lvm.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <random>

#include "bdev/fault_device.h"
#include "bdev/memory_device.h"
#include "lvm/allocator.h"
#include "lvm/lv_device.h"
#include "lvm/test_devices.h"
#include "lvm/uuid.h"
#include "lvm/vg_ops.h"

namespace volstack::lvm {
namespace {

using bdev::BlockDevicePtr;

AllocRequest Req(uint64_t n, uint32_t stripes = 1, uint32_t stripe_size = 0,
                 AllocPolicy policy = AllocPolicy::kNormal) {
  AllocRequest r;
  r.extents = static_cast<uint32_t>(n);
  r.stripes = stripes;
  r.stripe_size = stripe_size;
  r.policy = policy;
  return r;
}
NewLvOptions Lv(const std::string& name, const AllocRequest& r) {
  NewLvOptions o;
  o.name = name;
  o.alloc = r;
  return o;
}

using testing::Devices;

Result<VgHandle*> MakeVg(Lvm& lvm, const std::string& name, const std::vector<std::string>& pvs,
                         uint32_t extent_size = 8192) {
  std::vector<const Pv*> list;
  for (const auto& p : pvs) {
    VS_ASSIGN_OR_RETURN(Pv * pv, lvm.CreatePv(p, {}));
    list.push_back(pv);
  }
  VS_ASSIGN_OR_RETURN(auto vg, NewVg(name, extent_size, list));
  VS_RETURN_IF_ERROR(lvm.Commit(vg, "test"));
  return lvm.FindVg(name);
}

TEST(LvmTest, LifeCycleOnMemoryDevices) {
  Devices d;
  d.map["a"] = bdev::MemoryDevice::Create(64 << 20);
  d.map["b"] = bdev::MemoryDevice::Create(64 << 20);
  {
    Lvm lvm(d.opener(), false);
    auto h = MakeVg(lvm, "vg0", {"a", "b"});
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    VolumeGroup vg = (*h)->vg;
    EXPECT_EQ(vg.seqno, 1u);
    EXPECT_EQ(vg.pvs[0].pe_count, 15u);
    ASSERT_TRUE(CreateLv(vg, Lv("lin", Req(5))).ok());
    NewLvOptions s = Lv("str", Req(8, 2, 128));
    ASSERT_TRUE(CreateLv(vg, s).ok());
    ASSERT_TRUE(lvm.Commit(vg, "lvcreate").ok());
  }
  Lvm lvm(d.opener(), false);
  lvm.Scan(d.names());
  EXPECT_TRUE(lvm.scan_errors().empty());
  VgHandle* h = lvm.FindVg("vg0");
  ASSERT_TRUE(h);
  EXPECT_FALSE(h->partial());
  EXPECT_FALSE(h->inconsistent);
  EXPECT_EQ(h->vg.seqno, 2u);
  ASSERT_TRUE(h->vg.FindLv("str"));
  EXPECT_EQ(h->vg.FindLv("str")->segments[0].stripe_count(), 2u);
  // Rename, extend, reduce, remove: each a commit; seqno grows by one each time.
  VolumeGroup vg = h->vg;
  ASSERT_TRUE(RenameLv(vg, "lin", "lin2").ok());
  ASSERT_TRUE(AllocateExtents(vg, "lin2", Req(3)).ok());
  EXPECT_EQ(vg.FindLv("lin2")->le_count(), 8u);
  ASSERT_TRUE(ReduceExtents(vg, "lin2", 6).ok());
  ASSERT_TRUE(lvm.Commit(vg, "x").ok());
  h = lvm.FindVg("vg0");
  EXPECT_EQ(h->vg.seqno, 3u);
  EXPECT_EQ(h->vg.FindLv("lin2")->le_count(), 6u);
  // A PV in use cannot leave; an empty one can, and becomes an orphan.
  vg = h->vg;
  EXPECT_EQ(RemovePvFromVg(vg, vg.pvs[1].id).code(), EBUSY);
  ASSERT_TRUE(RemoveLv(vg, "str").ok());
  const std::string b_uuid = vg.pvs[1].id;
  ASSERT_TRUE(RemovePvFromVg(vg, b_uuid).ok());
  ASSERT_TRUE(lvm.Commit(vg, "vgreduce", {lvm.FindPv("b")}).ok());
  EXPECT_EQ(lvm.VgOfPv(lvm.FindPv("b")), nullptr);
  EXPECT_FALSE(lvm.FindPv("b")->label().in_use());
  EXPECT_EQ(lvm.FindVg("vg0")->vg.pvs.size(), 1u);
  ASSERT_TRUE(lvm.RemovePv(lvm.FindPv("b")).ok());
  EXPECT_EQ(lvm.RemovePv(lvm.FindPv("a")).code(), EBUSY);
}

std::vector<uint8_t> TestData(const std::string& name) {
  std::string dir = __FILE__;
  dir = dir.substr(0, dir.rfind("/src/lvm/")) + "/tests/data/lvm/";
  std::ifstream in(dir + name, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(LvmTest, ReadsPvsWrittenByLvm2AndMapsTheirExtents) {
  Devices d;
  for (const char* n : {"pv0", "pv1"}) {
    auto dev = bdev::MemoryDevice::Create(64 << 20);
    auto head = TestData(std::string("lvm2_testvg_") + n + "_head.bin");
    ASSERT_EQ(head.size(), 16384u);
    ASSERT_TRUE(dev->Write(0, head).ok());
    d.map[n] = dev;
  }
  Lvm lvm(d.opener(), false);
  lvm.Scan({"pv0", "pv1"});
  VgHandle* h = lvm.FindVg("testvg");
  ASSERT_TRUE(h);
  EXPECT_FALSE(h->partial());
  EXPECT_FALSE(h->inconsistent);
  // Data placed at the PV offsets lvm2 reports reads back through the LVs.
  const uint64_t ext = 4 << 20, pe_start = 1 << 20;
  auto put = [&](const std::string& pv, uint64_t pe, uint64_t within, char c) {
    std::vector<uint8_t> buf(4096, static_cast<uint8_t>(c));
    ASSERT_TRUE(d.map[pv]->Write(pe_start + pe * ext + within, buf).ok());
  };
  put("pv0", 4, 0, 'A');      // lv1 LE 2 (segment 2 starts at pv0 PE 4)
  put("pv0", 2, 0, 'B');      // lvs chunk 0
  put("pv1", 0, 0, 'C');      // lvs chunk 1
  put("pv0", 2, 65536, 'D');  // lvs chunk 2
  auto lv1 = lvm.Activate(*h, "lv1");
  ASSERT_TRUE(lv1.ok()) << lv1.status().ToString();
  EXPECT_EQ((*lv1)->size(), 5 * ext);
  std::vector<uint8_t> buf(4096);
  ASSERT_TRUE((*lv1)->Read(2 * ext, buf).ok());
  EXPECT_EQ(buf[0], 'A');
  auto lvs = lvm.Activate(*h, "lvs");
  ASSERT_TRUE(lvs.ok());
  EXPECT_EQ((*lvs)->geometry().optimal_io_size, 128u * 1024);
  for (auto [off, c] :
       std::vector<std::pair<uint64_t, char>>{{0, 'B'}, {65536, 'C'}, {131072, 'D'}}) {
    ASSERT_TRUE((*lvs)->Read(off, buf).ok());
    EXPECT_EQ(buf[0], c) << off;
  }
  // volstack commits on top of lvm2's copy: the new text lands after it in the buffer.
  VolumeGroup vg = h->vg;
  ASSERT_TRUE(CreateLv(vg, Lv("new", Req(2))).ok());
  ASSERT_TRUE(lvm.Commit(vg, "x").ok());
  Lvm again(d.opener(), true);
  again.Scan({"pv0", "pv1"});
  ASSERT_TRUE(again.FindVg("testvg"));
  EXPECT_EQ(again.FindVg("testvg")->vg.seqno, 5u);
  // lvm2's copy: 4608 + 1574 bytes; the next starts at the following 512 boundary.
  EXPECT_EQ(again.FindPv("pv0")->mdas()[0].header().committed.offset, 6656u);
}

TEST(LvmTest, CircularBufferWrapsLikeLvm2) {
  MdaHeader h;
  h.start = 4096;
  h.size = 8192;
  // Max text: (8192 - 512) / 2 - 512 = 3328.
  EXPECT_FALSE(MetadataArea::Place(h, 3329).ok());
  h.committed = {512, 3000, 0, 0};
  auto p = MetadataArea::Place(h, 3000);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->offset, 3584u);  // after 512+3000 rounded up to 512
  h.committed = *p;
  p = MetadataArea::Place(h, 3000);  // 3584+3000 = 6584 -> 6656; wraps: 6656..8192 then 512..
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->offset, 6656u);
  h.committed = *p;  // ends at 512 + (3000 - 1536) = 1976 -> next at 2048
  p = MetadataArea::Place(h, 1000);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->offset, 2048u);
  h.committed = {7000, 700, 0, 0};  // leaves 492 < 512 bytes before the end: restart at 512
  p = MetadataArea::Place(h, 100);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->offset, 512u);
  // And a real write/read of a wrapped copy with its chained CRC.
  auto dev = bdev::MemoryDevice::Create(1 << 20);
  MetadataArea mda(dev, 4096, 8192);
  ASSERT_TRUE(mda.Initialize().ok());
  std::string last;
  for (int i = 0; i < 20; i++) {
    std::string text(2000 + i * 37, static_cast<char>('a' + i));
    text += '\0';
    auto l = mda.WriteText(text);
    ASSERT_TRUE(l.ok()) << i << l.status().ToString();
    ASSERT_TRUE(mda.Precommit(*l).ok());
    ASSERT_TRUE(mda.Commit(*l).ok());
    MetadataArea reread(dev, 4096, 8192);
    ASSERT_TRUE(reread.Load().ok());
    auto t = reread.ReadCommitted();
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(*t, text.substr(0, text.size() - 1));
    EXPECT_GE(l->offset, 512u);
  }
}

TEST(LvmTest, CommitIsCrashSafe) {
  // Two PVs (one with two mdas); crash at every mutating request of a commit, with torn and
  // reordered writes; afterwards the VG reads as the old or the new seqno, never broken.
  for (uint64_t n = 0; n < 40; n++) {
    for (auto mode :
         {bdev::CrashMode::kDropAll, bdev::CrashMode::kTear, bdev::CrashMode::kKeepSubset}) {
      auto fa = bdev::FaultDevice::CreateInMemory(16 << 20, 512, n);
      auto fb = bdev::FaultDevice::CreateInMemory(16 << 20, 512, n + 100);
      Devices d;
      d.map["a"] = fa;
      d.map["b"] = fb;
      {
        Lvm lvm(d.opener(), false);
        Pv* a = *lvm.CreatePv("a", {});
        PvCreateOptions two;
        two.metadata_copies = 2;
        Pv* b = *lvm.CreatePv("b", two);
        auto vg = NewVg("vg", 2048, {a, b});
        ASSERT_TRUE(lvm.Commit(*vg, "create").ok());
        VolumeGroup next = lvm.FindVg("vg")->vg;
        ASSERT_TRUE(CreateLv(next, Lv("lv", Req(4))).ok());
        fa->CutPowerAfter(n, mode);
        fb->CutPowerAfter(n, mode);
        (void)lvm.Commit(next, "crash").ok();
        if (fa->powered()) (void)fa->CutPower(mode);
        if (fb->powered()) (void)fb->CutPower(mode);
      }
      d.map["a"] = *fa->Reopen();
      d.map["b"] = *fb->Reopen();
      Lvm lvm(d.opener(), true);
      lvm.Scan({"a", "b"});
      VgHandle* h = lvm.FindVg("vg");
      ASSERT_TRUE(h) << "crash point " << n;
      ASSERT_TRUE(h->vg.seqno == 1 || h->vg.seqno == 2) << n;
      EXPECT_EQ(h->vg.FindLv("lv") != nullptr, h->vg.seqno == 2) << n;
      EXPECT_FALSE(h->partial());
    }
  }
}

TEST(AllocatorTest, RandomOperationsKeepInvariants) {
  std::mt19937 rng(7);
  VolumeGroup vg;
  vg.name = "vg";
  vg.id = GenerateId();
  vg.extent_size = 8;
  for (int i = 0; i < 4; i++) {
    PhysicalVolume pv;
    pv.id = GenerateId();
    pv.pe_start = 2048;
    pv.pe_count = 50 + i * 13;
    vg.pvs.push_back(pv);
  }
  int made = 0;
  for (int step = 0; step < 400; step++) {
    VolumeGroup copy = vg;
    int op = rng() % 4;
    Status s;
    if (op == 0 || vg.lvs.empty()) {
      uint32_t stripes = 1 + rng() % 3;
      AllocRequest r = Req(stripes * (1 + rng() % 12), stripes, 16,
                           rng() % 4 == 0 ? AllocPolicy::kContiguous : AllocPolicy::kNormal);
      s = CreateLv(copy, Lv("lv" + std::to_string(made++), r));
    } else {
      const LogicalVolume& lv = vg.lvs[rng() % vg.lvs.size()];
      uint32_t stripes = lv.segments.back().stripe_count();
      if (op == 1) {
        s = AllocateExtents(
            copy, lv.name, Req(stripes * (1 + rng() % 6), stripes, lv.segments.back().stripe_size));
      } else if (op == 2 && lv.le_count() > stripes) {
        s = ReduceExtents(copy, lv.name, lv.le_count() - stripes);
      } else {
        s = RemoveLv(copy, lv.name);
      }
    }
    if (s.ok()) {
      ASSERT_TRUE(ValidateVg(copy).ok()) << ValidateVg(copy).ToString();
      vg = copy;
    } else {
      EXPECT_TRUE(s.code() == ENOSPC || s.code() == EINVAL) << s.ToString();
    }
    uint64_t free = 0;
    for (auto& runs : FreeExtents(vg)) {
      for (auto& r : runs) free += r.count;
    }
    ASSERT_EQ(free + vg.allocated_extents(), vg.total_extents());
  }
  EXPECT_GT(made, 20);
}

TEST(AllocatorTest, ExtendInPlaceMergesAndContiguousRefuses) {
  VolumeGroup vg;
  vg.name = "vg";
  vg.id = GenerateId();
  PhysicalVolume pv;
  pv.id = GenerateId();
  pv.pe_count = 10;
  vg.pvs = {pv};
  ASSERT_TRUE(CreateLv(vg, Lv("a", Req(3))).ok());
  ASSERT_TRUE(AllocateExtents(vg, "a", Req(2)).ok());
  EXPECT_EQ(vg.FindLv("a")->segments.size(), 1u);
  ASSERT_TRUE(CreateLv(vg, Lv("b", Req(2))).ok());
  ASSERT_TRUE(AllocateExtents(vg, "a", Req(1)).ok());  // not adjacent: a second segment
  EXPECT_EQ(vg.FindLv("a")->segments.size(), 2u);
  EXPECT_EQ(AllocateExtents(vg, "b", Req(1, 1, 0, AllocPolicy::kContiguous)).code(), ENOSPC);
  EXPECT_EQ(CreateLv(vg, Lv("c", Req(5))).code(), ENOSPC);
  EXPECT_EQ(CreateLv(vg, Lv("d", Req(2, 2, 128))).code(), ENOSPC);  // one PV cannot hold 2 stripes
}

TEST(LvDeviceTest, PatternShowsEveryPieceLandsRight) {
  // Random reads through a multi-segment striped+linear LV match an independent model.
  VolumeGroup vg;
  vg.name = "vg";
  vg.id = GenerateId();
  vg.extent_size = 16;  // 8 KiB extents
  std::vector<BlockDevicePtr> devs;
  for (int i = 0; i < 3; i++) {
    PhysicalVolume pv;
    pv.id = GenerateId();
    pv.pe_start = 8;
    pv.pe_count = 64;
    vg.pvs.push_back(pv);
    auto m = bdev::MemoryDevice::Create(1 << 20, 512, 4096, "pv" + std::to_string(i));
    std::vector<uint8_t> buf(1 << 20);
    for (size_t w = 0; w < buf.size(); w += 8) {
      uint64_t tag = (uint64_t{static_cast<uint64_t>(i)} << 56) | w;
      for (int b = 0; b < 8; b++) buf[w + b] = static_cast<uint8_t>(tag >> (8 * b));
    }
    ASSERT_TRUE(m->Write(0, buf).ok());
    devs.push_back(m);
  }
  ASSERT_TRUE(CreateLv(vg, Lv("x", Req(9))).ok());
  ASSERT_TRUE(AllocateExtents(vg, "x", Req(12, 3, 8)).ok());  // 4 KiB chunks
  ASSERT_TRUE(AllocateExtents(vg, "x", Req(4, 2, 16)).ok());
  auto lv = LvDevice::Create(vg, "x", devs);
  ASSERT_TRUE(lv.ok()) << lv.status().ToString();
  // Model: where is LV byte `o`?
  auto where = [&](uint64_t o) -> std::pair<int, uint64_t> {
    const uint64_t ext = vg.extent_bytes();
    for (const auto& s : vg.lvs[0].segments) {
      uint64_t st = s.start_extent * ext, len = s.extent_count * ext;
      if (o < st || o >= st + len) continue;
      uint64_t r = o - st;
      if (s.stripe_count() == 1) return {s.areas[0].pv, 4096 + s.areas[0].start * ext + r};
      uint64_t c = s.stripe_size * 512, k = r / c;
      const auto& a = s.areas[k % s.stripe_count()];
      return {a.pv, 4096 + a.start * ext + (k / s.stripe_count()) * c + r % c};
    }
    return {-1, 0};
  };
  std::mt19937 rng(1);
  const uint64_t size = (*lv)->size();
  EXPECT_EQ(size, 25u * 8192);
  for (int i = 0; i < 300; i++) {
    uint64_t off = (rng() % (size / 512)) * 512;
    uint64_t len = std::min<uint64_t>(size - off, 512 * (1 + rng() % 64));
    std::vector<uint8_t> buf(len);
    ASSERT_TRUE((*lv)->Read(off, buf).ok());
    for (uint64_t w = 0; w < len; w += 8) {
      auto [pv, pos] = where(off + w);
      uint64_t got = 0;
      for (int b = 0; b < 8; b++) got |= uint64_t{buf[w + b]} << (8 * b);
      ASSERT_EQ(got, (uint64_t{static_cast<uint64_t>(pv)} << 56) | pos) << "LV offset " << off + w;
    }
  }
  // Writes go to the same places.
  std::vector<uint8_t> data(64 * 1024, 0xee);
  ASSERT_TRUE((*lv)->Write(40960, data).ok());
  for (uint64_t o = 40960; o < 40960 + data.size(); o += 4096) {
    auto [pv, pos] = where(o);
    std::vector<uint8_t> b(512);
    ASSERT_TRUE(devs[pv]->Read(pos, b).ok());
    EXPECT_EQ(b[0], 0xee);
  }
  // Missing PV: refused unless partial; partial reads of its extents are EIO.
  auto missing = devs;
  missing[2] = nullptr;
  EXPECT_FALSE(LvDevice::Create(vg, "x", missing).ok());
  auto partial = LvDevice::Create(vg, "x", missing, {true, false, nullptr});
  ASSERT_TRUE(partial.ok());
  std::vector<uint8_t> b(512);
  uint64_t bad_off = 0;
  for (uint64_t o = 0; o < size; o += 512) {
    if (where(o).first == 2) {
      bad_off = o;
      break;
    }
  }
  EXPECT_EQ((*partial)->Read(bad_off, b).code(), EIO);
}

}  // namespace
}  // namespace volstack::lvm

// MirroredDevice: legs kept in sync through dm-raid superblocks and the md bitmap (raid1) or
// dm-log clean bits (mirror); failed legs recorded and skipped; out-of-sync legs resynced at
// open, or the LV refused when no leg can be trusted.
#include "lvm/mirrored_device.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "bdev/fault_device.h"
#include "bdev/forwarding_device.h"
#include "bdev/memory_device.h"
#include "bdev/slice_device.h"
#include "lvm/raid_format.h"

namespace volstack::lvm {
namespace {

constexpr uint64_t kSize = 4 << 20;
constexpr uint64_t kRegion = 512 << 10;  // 8 regions

std::vector<uint8_t> Fill(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<uint8_t>(seed + i * 7 + i / 4096);
  return v;
}

std::vector<uint8_t> ReadAll(bdev::BlockDevice& d, uint64_t off = 0, uint64_t len = kSize) {
  std::vector<uint8_t> v(len);
  EXPECT_TRUE(d.Read(off, v).ok());
  return v;
}

struct Legs {
  std::vector<std::shared_ptr<bdev::FaultDevice>> data, meta;
  std::shared_ptr<bdev::FaultDevice> log;
  explicit Legs(size_t n) {
    for (size_t i = 0; i < n; i++) {
      data.push_back(bdev::FaultDevice::CreateInMemory(kSize));
      meta.push_back(bdev::FaultDevice::CreateInMemory(1 << 20));
    }
    log = bdev::FaultDevice::CreateInMemory(1 << 20);
  }
  MirroredDevice::Config Config(MirroredDevice::Kind kind = MirroredDevice::Kind::kRaid1) const {
    MirroredDevice::Config c;
    c.kind = kind;
    c.name = "vg/r1";
    c.size = kSize;
    c.region_bytes = kRegion;
    for (size_t i = 0; i < data.size(); i++) {
      MirroredDevice::Leg l;
      l.name = "vg/r1_rimage_" + std::to_string(i);
      l.data = data[i];
      if (kind == MirroredDevice::Kind::kRaid1) l.meta = meta[i];
      c.legs.push_back(l);
    }
    if (kind == MirroredDevice::Kind::kMirror) c.log = log;
    return c;
  }
  DmRaidSuperblock Sb(size_t i) {
    std::vector<uint8_t> b(kDmRaidSuperblockBytes);
    EXPECT_TRUE(meta[i]->Read(0, b).ok());
    auto sb = DecodeDmRaidSuperblock(b);
    EXPECT_TRUE(sb.ok()) << sb.status().ToString();
    return sb.ok() ? *sb : DmRaidSuperblock{};
  }
  bool BitmapBit(size_t i, uint64_t region) {
    std::vector<uint8_t> b(4096);
    EXPECT_TRUE(meta[i]->Read(kMdBitmapOffset, b).ok());
    return (b[kMdBitmapSuperBytes + region / 8] >> (region % 8)) & 1;
  }
};

TEST(MirroredDeviceTest, NewRaid1IsSyncedFromLegZeroAndWritesReachEveryLeg) {
  Legs legs(2);
  ASSERT_TRUE(legs.data[0]->Write(0, Fill(kSize, 1)).ok());
  ASSERT_TRUE(legs.data[1]->Write(0, Fill(kSize, 99)).ok());
  MirroredDevice::OpenReport report;
  auto dev = MirroredDevice::Open(legs.Config(), &report);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(report.legs_rebuilt, std::vector<uint32_t>{1});
  EXPECT_EQ(ReadAll(**dev), Fill(kSize, 1));
  EXPECT_EQ(ReadAll(*legs.data[1]), Fill(kSize, 1));
  for (size_t i = 0; i < 2; i++) {
    const DmRaidSuperblock sb = legs.Sb(i);
    EXPECT_EQ(sb.array_position, i);
    EXPECT_EQ(sb.num_devices, 2u);
    EXPECT_EQ(sb.failed_devices, 0u);
    EXPECT_EQ(sb.disk_recovery_offset, kMaxSector);
  }
  const auto data = Fill(8192, 5);
  ASSERT_TRUE((*dev)->Write(kRegion * 3 + 4096, data).ok());
  // The region is dirty on disk while the device is open, clean after close.
  EXPECT_TRUE(legs.BitmapBit(0, 3));
  EXPECT_TRUE(legs.BitmapBit(1, 3));
  EXPECT_FALSE(legs.BitmapBit(0, 2));
  dev->reset();
  EXPECT_FALSE(legs.BitmapBit(0, 3));
  EXPECT_FALSE(legs.BitmapBit(1, 3));
  for (auto& d : legs.data) EXPECT_EQ(ReadAll(*d, kRegion * 3 + 4096, 8192), data);
}

TEST(MirroredDeviceTest, FailedLegWriteIsRecordedAndTheLegRebuiltNextTime) {
  Legs legs(2);
  { ASSERT_TRUE(MirroredDevice::Open(legs.Config()).ok()); }
  auto dev = MirroredDevice::Open(legs.Config());
  ASSERT_TRUE(dev.ok());
  const uint64_t events_before = legs.Sb(0).events;
  legs.data[1]->FailOps(bdev::OpBit(bdev::OpType::kWrite));
  const auto data = Fill(4096, 42);
  ASSERT_TRUE((*dev)->Write(0, data).ok());  // degraded, not failed
  EXPECT_FALSE((*dev)->leg_live(1));
  EXPECT_TRUE((*dev)->leg_live(0));
  const DmRaidSuperblock sb = legs.Sb(0);
  EXPECT_TRUE(sb.leg_failed(1));
  EXPECT_GT(sb.events, events_before);
  ASSERT_TRUE((*dev)->Write(8192, data).ok());
  EXPECT_EQ(ReadAll(**dev, 0, 4096), data);
  dev->reset();
  legs.data[1]->ClearFailRules();
  // Leg 1 missed writes: it is rebuilt from leg 0 at the next open, never read stale.
  MirroredDevice::OpenReport report;
  auto again = MirroredDevice::Open(legs.Config(), &report);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(report.legs_rebuilt, std::vector<uint32_t>{1});
  EXPECT_EQ(ReadAll(*legs.data[1]), ReadAll(*legs.data[0]));
  EXPECT_FALSE(legs.Sb(1).leg_failed(1));
}

// A leg whose writes wait until every leg has a write in progress (or a deadline passes), and
// that checks the region's bitmap bit is already on disk when its data arrives.
struct Rendezvous {
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  int legs = 0;
  int met = 0;       // writes that saw every leg arrive
  int unmarked = 0;  // data writes whose region was not yet dirty on disk
};

class RendezvousLeg final : public bdev::ForwardingDevice {
 public:
  RendezvousLeg(bdev::BlockDevicePtr target, Rendezvous& r, std::function<bool()> marked)
      : ForwardingDevice(std::move(target)), r_(r), marked_(std::move(marked)) {}

 protected:
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) override {
    std::unique_lock lock(r_.mu);
    if (!marked_()) r_.unmarked++;
    const int round = r_.arrived++ / r_.legs;
    r_.cv.notify_all();
    if (r_.cv.wait_for(lock, std::chrono::seconds(2),
                       [&] { return r_.arrived >= (round + 1) * r_.legs; })) {
      r_.met++;
    }
    lock.unlock();
    return ForwardingDevice::DoWrite(offset, buf, opts);
  }

 private:
  Rendezvous& r_;
  std::function<bool()> marked_;
};

// The legs of a write are written at the same time, and only after the region is dirty on
// disk in every live leg's bitmap.
TEST(MirroredDeviceTest, LegsAreWrittenAtOnceAfterTheRegionIsMarked) {
  for (size_t n : {2, 3}) {
    Legs legs(n);
    { ASSERT_TRUE(MirroredDevice::Open(legs.Config()).ok()); }
    Rendezvous r;
    r.legs = static_cast<int>(n);
    MirroredDevice::Config c = legs.Config();
    for (size_t i = 0; i < n; i++) {
      c.legs[i].data = std::make_shared<RendezvousLeg>(legs.data[i], r, [&legs, n] {
        for (size_t j = 0; j < n; j++) {
          if (!legs.BitmapBit(j, 5)) return false;
        }
        return true;
      });
    }
    auto dev = MirroredDevice::Open(c);
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    r.arrived = r.met = r.unmarked = 0;  // the open's own writes (none expected) do not count
    const auto data = Fill(4096, 17);
    ASSERT_TRUE((*dev)->Write(kRegion * 5, data).ok());
    EXPECT_EQ(r.met, static_cast<int>(n)) << n << " legs";
    EXPECT_EQ(r.unmarked, 0);
    for (size_t i = 0; i < n; i++) EXPECT_EQ(ReadAll(*legs.data[i], kRegion * 5, 4096), data);
  }
}

// A mirror LV's log has no per-leg record: after a leg fails, a write acknowledged from the
// other leg alone would be lost if the next activation synced from the failed one. So the
// failing write and every later one are refused; reads go on.
TEST(MirroredDeviceTest, MirrorLvWithAFailedLegTakesNoMoreWrites) {
  Legs legs(2);
  auto dev = MirroredDevice::Open(legs.Config(MirroredDevice::Kind::kMirror));
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  const auto data = Fill(4096, 7);
  ASSERT_TRUE((*dev)->Write(0, data).ok());
  legs.data[0]->FailOps(bdev::OpBit(bdev::OpType::kWrite));
  EXPECT_FALSE((*dev)->Write(4096, Fill(4096, 8)).ok());
  EXPECT_FALSE((*dev)->leg_live(0));
  legs.data[0]->ClearFailRules();
  Status later = (*dev)->Write(8192, Fill(4096, 9));
  EXPECT_FALSE(later.ok());
  EXPECT_NE(later.message().find("takes no more writes"), std::string::npos) << later.ToString();
  EXPECT_EQ(ReadAll(**dev, 0, 4096), data);
}

TEST(MirroredDeviceTest, MissingLegServesDegradedAndReadsFailOver) {
  Legs legs(2);
  ASSERT_TRUE(legs.data[0]->Write(0, Fill(kSize, 3)).ok());
  { ASSERT_TRUE(MirroredDevice::Open(legs.Config()).ok()); }
  auto cfg = legs.Config();
  cfg.legs[0].data = nullptr;
  cfg.legs[0].meta = nullptr;
  auto dev = MirroredDevice::Open(cfg);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(ReadAll(**dev), Fill(kSize, 3));
  EXPECT_TRUE(legs.Sb(1).leg_failed(0));
  dev->reset();
  // A read error on the primary fails over to the other leg.
  auto both = MirroredDevice::Open(legs.Config());
  ASSERT_TRUE(both.ok());
  legs.data[0]->FailOps(bdev::OpBit(bdev::OpType::kRead));
  EXPECT_EQ(ReadAll(**both), Fill(kSize, 3));
  EXPECT_FALSE((*both)->leg_live(0));
}

TEST(MirroredDeviceTest, DirtyRegionsAfterACrashAreCopiedFromThePrimary) {
  Legs legs(2);
  { ASSERT_TRUE(MirroredDevice::Open(legs.Config()).ok()); }
  auto dev = MirroredDevice::Open(legs.Config());
  ASSERT_TRUE(dev.ok());
  ASSERT_TRUE((*dev)->Write(kRegion * 5, Fill(4096, 8)).ok());
  // A crash: the write reached leg 0 only, the region stays dirty in the bitmap.
  ASSERT_TRUE(legs.data[1]->Write(kRegion * 5, Fill(4096, 9)).ok());
  ASSERT_TRUE(legs.data[1]->Write(kRegion * 6, Fill(4096, 9)).ok());  // not dirty: not copied
  auto crashed = std::move(*dev);
  for (auto& m : legs.meta) m->CutPower(bdev::CrashMode::kKeepAll).IgnoreError();
  crashed.reset();
  for (auto& m : legs.meta) m = *m->Reopen();
  MirroredDevice::OpenReport report;
  auto again = MirroredDevice::Open(legs.Config(), &report);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(report.regions_copied, 1u);
  EXPECT_EQ(ReadAll(*legs.data[1], kRegion * 5, 4096), Fill(4096, 8));
  EXPECT_EQ(ReadAll(*legs.data[1], kRegion * 6, 4096), Fill(4096, 9));
}

TEST(MirroredDeviceTest, RefusesWhenNoLegCanBeTrusted) {
  Legs legs(2);
  std::vector<uint8_t> block(kDmRaidSuperblockBytes);
  for (uint32_t i = 0; i < 2; i++) {
    DmRaidSuperblock sb;
    sb.num_devices = 2;
    sb.array_position = i;
    sb.events = 7;
    sb.failed_devices = 0x3;
    EncodeDmRaidSuperblock(sb, block);
    ASSERT_TRUE(legs.meta[i]->Write(0, block).ok());
  }
  auto dev = MirroredDevice::Open(legs.Config());
  ASSERT_FALSE(dev.ok());
  EXPECT_NE(dev.status().message().find("vg/r1: no leg is in sync"), std::string::npos)
      << dev.status().ToString();
  // Nothing was written: the superblocks are as they were.
  EXPECT_EQ(legs.Sb(0).events, 7u);
  // A superblock for another array shape is refused too.
  DmRaidSuperblock three;
  three.num_devices = 3;
  three.events = 9;
  EncodeDmRaidSuperblock(three, block);
  ASSERT_TRUE(legs.meta[0]->Write(0, block).ok());
  dev = MirroredDevice::Open(legs.Config());
  ASSERT_FALSE(dev.ok());
  EXPECT_NE(dev.status().message().find("names 3 legs"), std::string::npos);
  // Legs that disagree in size.
  auto cfg = legs.Config();
  cfg.legs[1].data = bdev::MemoryDevice::Create(kSize / 2);
  EXPECT_FALSE(MirroredDevice::Open(cfg).ok());
}

TEST(MirroredDeviceTest, ReadOnlyOpenWritesNothingAndReadsThePrimary) {
  Legs legs(2);
  ASSERT_TRUE(legs.data[0]->Write(0, Fill(kSize, 4)).ok());
  auto cfg = legs.Config();
  auto ro = [](bdev::BlockDevicePtr d) -> bdev::BlockDevicePtr {
    return *bdev::SliceDevice::Create(d, {.read_only = true});
  };
  for (auto& leg : cfg.legs) {
    leg.data = ro(leg.data);
    leg.meta = ro(leg.meta);
  }
  // A never-synced array opened read-only: read from leg 0 only, nothing written.
  legs.data[1]->FailOps(bdev::OpBit(bdev::OpType::kRead));
  auto dev = MirroredDevice::Open(cfg);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_TRUE((*dev)->read_only());
  EXPECT_EQ(ReadAll(**dev), Fill(kSize, 4));
  dev->reset();
  for (auto& m : legs.meta) EXPECT_EQ(m->counters()[bdev::OpType::kWrite], 0u);
}

TEST(MirroredDeviceTest, MirrorLogCleanBitsFollowWrites) {
  Legs legs(2);
  ASSERT_TRUE(legs.data[0]->Write(0, Fill(kSize, 6)).ok());
  auto dev = MirroredDevice::Open(legs.Config(MirroredDevice::Kind::kMirror));
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(ReadAll(*legs.data[1]), Fill(kSize, 6));  // a new log: everything copied
  std::vector<uint8_t> log(4096);
  ASSERT_TRUE(legs.log->Read(0, log).ok());
  auto h = DecodeMirrorLogHeader(log);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->nr_regions, kSize / kRegion);
  EXPECT_EQ(log[kMirrorLogBitsOffset], 0xff);  // all 8 regions clean
  ASSERT_TRUE((*dev)->Write(kRegion * 2, Fill(4096, 1)).ok());
  ASSERT_TRUE(legs.log->Read(0, log).ok());
  EXPECT_EQ(log[kMirrorLogBitsOffset], 0xfb);  // region 2 not clean while open
  dev->reset();
  ASSERT_TRUE(legs.log->Read(0, log).ok());
  EXPECT_EQ(log[kMirrorLogBitsOffset], 0xff);
  EXPECT_EQ(ReadAll(*legs.data[1], kRegion * 2, 4096), Fill(4096, 1));
}

}  // namespace
}  // namespace volstack::lvm

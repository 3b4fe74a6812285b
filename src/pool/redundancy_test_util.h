// What the redundancy tests (mirror_test.cc, raidz_pool_test.cc) share: children that
// inject faults, pools whose every read reaches them, a volume with a snapshot and a later
// overwrite, and every block the pool names, to damage on purpose.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bdev/fault_device.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"
#include "pool/test_util.h"

namespace volstack::pool::testing {

using FaultDevs = std::vector<std::shared_ptr<bdev::FaultDevice>>;

inline PoolTuning UncachedTuning() {
  PoolTuning t = TestTuning();
  t.cache_data = false;  // every read goes to the vdevs
  return t;
}

inline FaultDevs MakeFaultDevs(int n, uint64_t seed, uint64_t size) {
  FaultDevs d;
  for (int i = 0; i < n; i++) d.push_back(bdev::FaultDevice::CreateInMemory(size, 512, seed + i));
  return d;
}

inline std::vector<bdev::BlockDevicePtr> Ptrs(const FaultDevs& d) { return {d.begin(), d.end()}; }

inline Result<std::shared_ptr<Pool>> ImportUncached(const std::vector<bdev::BlockDevicePtr>& devs) {
  PoolImportOptions o;
  o.tuning = UncachedTuning();
  return Pool::Import(devs, o);
}

// Creates trunk/vol of `volsize` in 4K blocks, writes it whole, snapshots it (trunk/vol@s)
// and overwrites a quarter: data, indirect blocks, snapshot and space-map metadata.
// Returns the volume's and the snapshot's contents.
inline std::pair<std::vector<uint8_t>, std::vector<uint8_t>> FillWithSnapshot(Pool& pool,
                                                                              uint64_t seed,
                                                                              uint64_t volsize) {
  VolumeOptions vo;
  vo.volsize = volsize;
  vo.volblocksize = 4096;
  vo.props["logbias"] = "throughput";
  EXPECT_TRUE(pool.CreateVolume("trunk/vol", vo).ok());
  auto dev = *pool.OpenVolume("trunk/vol");
  auto data = Pattern(volsize, seed);
  EXPECT_TRUE(dev->Write(0, data).ok());
  EXPECT_TRUE(dev->Flush().ok());
  EXPECT_TRUE(pool.Snapshot({"trunk/vol@s"}).ok());
  auto snap = data;
  auto over = Pattern(volsize / 4, seed + 1);
  std::memcpy(data.data() + volsize / 2, over.data(), over.size());
  EXPECT_TRUE(dev->Write(volsize / 2, over).ok());
  EXPECT_TRUE(dev->Flush().ok());
  EXPECT_TRUE(pool.Sync().ok());
  return {data, snap};
}

// A block the pool names, where its first copy lies.
struct BlockRef {
  uint32_t vdev;
  uint64_t offset, psize, asize;
  BlockType type;
  bool operator<(const BlockRef& o) const {
    return std::tie(vdev, offset) < std::tie(o.vdev, o.offset);
  }
};

// Every block the pool names after a commit: the MOS, space maps, volume and snapshot trees.
inline std::set<BlockRef> AllBlocks(Pool& pool) {
  EXPECT_TRUE(pool.Sync().ok());
  PoolImpl& p = *pool.impl();
  std::set<BlockRef> out;
  auto add = [&](const BlockPtr& bp) {
    out.insert({bp.dva[0].vdev, bp.dva[0].offset, bp.psize, bp.dva[0].asize(), bp.type});
    return Status::Ok();
  };
  std::lock_guard s(p.sync_mu);
  add(p.mos_bp).IgnoreError();
  for (auto& bp : p.sm_bps) add(bp).IgnoreError();
  std::lock_guard l(p.mu);
  for (auto& [n, v] : p.volumes) EXPECT_TRUE(v->Walk(add).ok());
  for (auto& [n, v] : p.snapshots) EXPECT_TRUE(v->Walk(add).ok());
  return out;
}

inline void ExpectReads(Pool& pool, const std::string& name, const std::vector<uint8_t>& want) {
  auto dev = pool.OpenVolume(name);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  std::vector<uint8_t> got(want.size());
  Status st = (*dev)->Read(0, got);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(got == want) << name << " reads back wrong";
}

// Damages two of child 0's four label configs, one of child 1's, and child 1's first
// uberblock ring: what an import must read past. Returns the configs damaged.
inline uint64_t DamageLabels(const FaultDevs& devs, uint64_t dev_size) {
  uint64_t labels = 0;
  for (auto [child, l] : {std::pair{0, 0}, std::pair{0, 2}, std::pair{1, 1}}) {
    EXPECT_TRUE(devs[child]->FlipBits(LabelOffset(dev_size, l) + kLabelConfigOffset, 4096, 4).ok());
    labels++;
  }
  EXPECT_TRUE(
      devs[1]
          ->FlipBits(LabelOffset(dev_size, 0) + kUberRingOffset, kUberSlots * kUberSlotSize, 64)
          .ok());
  return labels;
}

inline ScanInfo ScrubAndWait(Pool& pool) {
  EXPECT_TRUE(pool.Scrub().ok());
  EXPECT_TRUE(pool.WaitScan().ok());
  return pool.Info().scan;
}

}  // namespace volstack::pool::testing

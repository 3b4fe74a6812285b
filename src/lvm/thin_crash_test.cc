// Thin pool crash safety: a workload of whole-block writes (new blocks, in-place rewrites,
// discards) with flushes in between, power cut at every mutating request in every crash
// mode (fault_device.h). After each cut the pool must open (the superblock names a whole
// transaction), every block must hold a version it was given no earlier than the last
// flush that returned (or zeroes where it was unmapped then), never anything else.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "bdev/fault_device.h"
#include "bdev/slice_device.h"
#include "lvm/thin_commit.h"
#include "lvm/thin_device.h"

namespace volstack::lvm {
namespace {

constexpr uint64_t kMetaBytes = 64 * kThinBlockBytes;
constexpr uint64_t kChunk = 64 << 10;
constexpr uint64_t kDataBlocks = 24;
constexpr uint64_t kLvBlocks = 8;

struct Devs {
  bdev::BlockDevicePtr meta, data;
};

Devs Slices(const bdev::BlockDevicePtr& f) {
  bdev::SliceOptions m, d;
  m.size = kMetaBytes;
  d.offset = kMetaBytes;
  d.size = kDataBlocks * kChunk;
  return {*bdev::SliceDevice::Create(f, m), *bdev::SliceDevice::Create(f, d)};
}

Result<std::shared_ptr<ThinDevice>> OpenThin(const bdev::BlockDevicePtr& f) {
  Devs d = Slices(f);
  ThinDevice::Config c;
  c.name = "vg/thin";
  c.size = kLvBlocks * kChunk;
  c.meta = d.meta;
  c.data = d.data;
  c.device_id = 1;
  c.chunk_sectors = kChunk / 512;
  c.transaction_id = 1;
  return ThinDevice::Open(c);
}

// One step of the workload: write block v with version `value` (0 = discard it).
struct Step {
  uint64_t vblock;
  uint8_t value;
  bool flush_after;
};

std::vector<Step> Workload() {
  std::vector<Step> w;
  uint8_t next = 1;
  const uint64_t order[] = {0, 3, 0, 5, 3, 7, 1, 5, 0, 2};
  for (size_t i = 0; i < std::size(order); i++) {
    w.push_back({order[i], next++, i % 3 == 2});
    if (i == 5) w.push_back({3, 0, false});  // a discard
  }
  w.back().flush_after = true;
  return w;
}

// An empty pool with thin device 1, committed as transaction 1.
std::shared_ptr<bdev::FaultDevice> FormattedPool() {
  auto base = bdev::FaultDevice::CreateInMemory(kMetaBytes + kDataBlocks * kChunk, 512, 7);
  {
    Devs d = Slices(base);
    ThinPoolState st;
    st.sb.trans_id = 1;
    st.sb.data_block_size = kChunk / 512;
    st.sb.metadata_nr_blocks = kMetaBytes / kThinBlockBytes;
    st.sb.metadata_sm.nr_blocks = st.sb.metadata_nr_blocks;
    st.data_refs.assign(kDataBlocks, 0);
    st.devices[1];
    std::vector<bool> used(st.sb.metadata_nr_blocks, false);
    used[0] = true;
    EXPECT_TRUE(CommitThinMetadata(d.meta, st, used).ok());
    EXPECT_TRUE(base->Flush().ok());
  }
  return base;
}

TEST(ThinCrashTest, EveryCrashPointLeavesAWholeTransaction) {
  auto base = FormattedPool();
  const std::vector<Step> work = Workload();
  int cuts = 0;
  for (bdev::CrashMode mode : bdev::kAllCrashModes) {
    for (uint64_t n = 0;; n++) {
      auto f = base->Fork(n + 1);
      ASSERT_TRUE(f.ok());
      (*f)->CutPowerAfter(n, mode);
      // allowed[v]: the versions block v may hold after the cut (0 = zeroes).
      std::map<uint64_t, std::set<uint8_t>> allowed;
      for (uint64_t v = 0; v < kLvBlocks; v++) allowed[v] = {0};
      bool crashed = false;
      {
        auto dev = OpenThin(*f);
        ASSERT_TRUE(dev.ok()) << dev.status().ToString();
        for (const Step& s : work) {
          allowed[s.vblock].insert(s.value);
          Status st = s.value
                          ? (*dev)->Write(s.vblock * kChunk, std::vector<uint8_t>(kChunk, s.value))
                          : (*dev)->Discard(s.vblock * kChunk, kChunk);
          if (st.ok() && s.flush_after) st = (*dev)->Flush();
          if (!st.ok()) {
            crashed = true;
            break;
          }
          if (s.flush_after) {
            // Every block's newest version is durable: drop the older ones.
            std::map<uint64_t, uint8_t> newest;
            for (const Step& t : work) {
              if (&t > &s) break;
              newest[t.vblock] = t.value;
            }
            for (auto& [v, vals] : allowed) {
              vals = {newest.count(v) ? newest[v] : uint8_t{0}};
            }
          }
        }
      }
      if (!crashed) break;  // n is past the last mutating request
      cuts++;
      ASSERT_FALSE((*f)->powered());
      auto back = (*f)->Reopen();
      ASSERT_TRUE(back.ok());
      auto dev = OpenThin(*back);
      ASSERT_TRUE(dev.ok()) << "crash point " << n << ": " << dev.status().ToString();
      std::vector<uint8_t> got(kChunk);
      for (uint64_t v = 0; v < kLvBlocks; v++) {
        ASSERT_TRUE((*dev)->Read(v * kChunk, got).ok());
        for (uint64_t s = 0; s < kChunk; s += 512) {
          ASSERT_TRUE(allowed[v].count(got[s]))
              << "crash point " << n << ": block " << v << " sector " << s / 512 << " holds "
              << int(got[s]);
          ASSERT_EQ(got[s + 511], got[s]) << "torn inside a sector";
        }
      }
    }
  }
  EXPECT_GT(cuts, 20);
}

// A superblock write that fails may still have reached the disk: the pool then cannot know
// which blocks are free, so it takes no more writes until it is activated again.
TEST(ThinCrashTest, AFailedCommitTakesNoMoreWrites) {
  auto base = FormattedPool();
  auto dev = OpenThin(base);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  ASSERT_TRUE((*dev)->Write(0, std::vector<uint8_t>(kChunk, 1)).ok());
  bdev::FaultRule superblock;
  superblock.ops = bdev::OpBit(bdev::OpType::kWrite);
  superblock.offset = 0;
  superblock.length = kThinBlockBytes;
  base->AddFailRule(superblock);
  EXPECT_FALSE((*dev)->Flush().ok());
  base->ClearFailRules();
  EXPECT_FALSE((*dev)->Write(kChunk, std::vector<uint8_t>(kChunk, 2)).ok());
  EXPECT_FALSE((*dev)->Discard(0, kChunk).ok());
  EXPECT_FALSE((*dev)->Flush().ok());
  dev->reset();
  auto again = OpenThin(base);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  std::vector<uint8_t> got(kChunk);
  ASSERT_TRUE((*again)->Read(0, got).ok());
  EXPECT_EQ(got[0], 0) << "the failed transaction's mapping was committed after all";
}

}  // namespace
}  // namespace volstack::lvm

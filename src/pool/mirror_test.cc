// Mirror vdevs on FaultDevices: create/import of striped n-way mirrors, self-heal of reads
// whose copy is bad, the fault campaign (random blocks of data and metadata corrupted on up
// to n-1 children each, labels too: every read is right, a scrub repairs the rest, a second
// scrub finds nothing), EIO and the error list when every copy is bad, degraded import and
// its refusal, replace/attach with a resilver, offline/online, and power cuts during scrub
// and resilver.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "bdev/fault_device.h"
#include "pool/pool_impl.h"
#include "pool/redundancy_test_util.h"
#include "pool/spa.h"
#include "pool/test_util.h"

namespace volstack::pool {
namespace {

using bdev::FaultDevice;
using testing::kMiB;
using testing::Pattern;

constexpr uint64_t kDevSize = 72 * kMiB;
constexpr uint64_t kVolSize = 12 * kMiB;

using testing::AllBlocks;
using testing::BlockRef;
using testing::ExpectReads;
using testing::Ptrs;
using testing::ScrubAndWait;

PoolTuning Tuning() { return testing::UncachedTuning(); }
testing::FaultDevs MakeDevs(int n, uint64_t seed) {
  return testing::MakeFaultDevs(n, seed, kDevSize);
}
auto Import(const std::vector<bdev::BlockDevicePtr>& devs) { return testing::ImportUncached(devs); }
auto Fill(Pool& pool, uint64_t seed) { return testing::FillWithSnapshot(pool, seed, kVolSize); }

// `mirrors` top-level mirrors of `width` children each, from `devs` in order.
std::shared_ptr<Pool> CreateMirrors(const std::vector<std::shared_ptr<FaultDevice>>& devs,
                                    int mirrors, int width) {
  std::vector<VdevSpec> specs;
  for (int m = 0; m < mirrors; m++) {
    VdevSpec s;
    s.mirror = true;
    for (int c = 0; c < width; c++) {
      s.devices.push_back(devs[m * width + c]);
      s.paths.push_back("dev" + std::to_string(m * width + c));
    }
    specs.push_back(s);
  }
  PoolCreateOptions o;
  o.tuning = Tuning();
  auto p = Pool::Create("trunk", specs, o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : nullptr;
}

uint64_t ChecksumErrors(Pool& pool) {
  uint64_t n = 0;
  for (const auto& v : pool.Info().vdevs) n += v.checksum_errors;
  return n;
}

TEST(MirrorTest, CreateImportAndStatus) {
  auto devs = MakeDevs(5, 1);
  std::vector<VdevSpec> specs(3);
  specs[0] = {true, {devs[0], devs[1]}, {"a", "b"}};
  specs[1] = {false, {devs[2]}, {"c"}};
  specs[2] = {true, {devs[3], devs[4]}, {"d", "e"}};
  PoolCreateOptions o;
  o.tuning = Tuning();
  auto p = *Pool::Create("trunk", specs, o);
  auto [data, snap] = Fill(*p, 7);
  auto info = p->Info();
  ASSERT_EQ(info.vdevs.size(), 3u);
  EXPECT_EQ(info.vdevs[0].type, "mirror");
  EXPECT_EQ(info.vdevs[0].children.size(), 2u);
  EXPECT_EQ(info.vdevs[0].children[1].name, "b");
  EXPECT_EQ(info.vdevs[1].type, "disk");
  EXPECT_EQ(info.health, "ONLINE");
  ASSERT_TRUE(p->Export().ok());
  p.reset();
  // Children carry label version 2 (an older volstack refuses them); the plain vdev 1.
  std::vector<uint8_t> label(kLabelConfigSize);
  ASSERT_TRUE(devs[0]->Read(kLabelConfigOffset, label).ok());
  EXPECT_EQ(label[8], kMirrorLabelVersion);
  ASSERT_TRUE(devs[2]->Read(kLabelConfigOffset, label).ok());
  EXPECT_EQ(label[8], kFormatVersion);
  // Any order.
  auto q = Import({devs[4], devs[2], devs[1], devs[3], devs[0]});
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ExpectReads(**q, "trunk/vol", data);
  ExpectReads(**q, "trunk/vol@s", snap);
  EXPECT_EQ((*q)->Info().vdevs[2].children[0].name, "d");
  testing::ExpectConsistent(**q);
}

TEST(MirrorTest, WritesReachEveryChild) {
  auto devs = MakeDevs(2, 3);
  auto p = CreateMirrors(devs, 1, 2);
  auto [data, snap] = Fill(*p, 3);
  ASSERT_TRUE(p->Close().ok());
  // Each child alone holds the whole pool.
  for (int c = 0; c < 2; c++) {
    auto q = Import({devs[c]});
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    EXPECT_EQ((*q)->Info().health, "DEGRADED");
    ExpectReads(**q, "trunk/vol", data);
    ExpectReads(**q, "trunk/vol@s", snap);
    ASSERT_TRUE((*q)->Close().ok());
  }
}

// The fault campaign: see the top of this file. Prints the counts.
void Campaign(int width, uint64_t seed) {
  auto devs = MakeDevs(2 * width, seed);
  auto p = CreateMirrors(devs, 2, width);
  auto [data, snap] = Fill(*p, seed);
  const auto blocks = AllBlocks(*p);
  ASSERT_TRUE(p->Close().ok());
  p.reset();
  std::mt19937_64 rng(seed);
  uint64_t injected = 0, blocks_hit = 0, meta_hit = 0;
  for (const auto& b : blocks) {
    if (rng() % 3 != 0) continue;
    blocks_hit++;
    meta_hit += b.psize != 4096;
    std::vector<int> kids(width);
    for (int i = 0; i < width; i++) kids[i] = i;
    std::shuffle(kids.begin(), kids.end(), rng);
    const int k = 1 + static_cast<int>(rng() % (width - 1));  // up to the redundancy
    for (int i = 0; i < k; i++) {
      auto& dev = devs[b.vdev * width + kids[i]];
      ASSERT_TRUE(dev->FlipBits(b.offset, b.psize, 1 + rng() % 8).ok());
      injected++;
    }
  }
  const uint64_t labels = testing::DamageLabels(devs, kDevSize);
  auto q = Import(Ptrs(devs));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ExpectReads(**q, "trunk/vol", data);
  ExpectReads(**q, "trunk/vol@s", snap);
  const uint64_t read_cksum = ChecksumErrors(**q);
  const uint64_t read_healed = (*q)->impl()->healed_bytes.load();
  EXPECT_GT(read_cksum, 0u);
  EXPECT_GT(read_healed, 0u);
  const ScanInfo first = ScrubAndWait(**q);
  EXPECT_EQ(first.state, "finished");
  EXPECT_EQ(first.errors, 0u);
  EXPECT_GT(first.repaired, 0u);
  const uint64_t total_cksum = ChecksumErrors(**q);
  // Every injected bad copy was found, by a read or the scrub (import's reads, which do
  // not repair, may count one twice).
  EXPECT_GE(total_cksum, injected);
  const ScanInfo second = ScrubAndWait(**q);
  EXPECT_EQ(second.repaired, 0u);
  EXPECT_EQ(second.errors, 0u);
  EXPECT_EQ(ChecksumErrors(**q), total_cksum) << "the second scrub found bad copies";
  EXPECT_TRUE((*q)->Info().data_errors.empty());
  ExpectReads(**q, "trunk/vol", data);
  testing::ExpectConsistent(**q);
  ASSERT_TRUE((*q)->Close().ok());
  std::printf(
      "[campaign] %d-way x2 seed %llu: %zu blocks, %llu hit (%llu metadata), %llu bad copies "
      "injected + %llu label configs + 1 uberblock ring; reads found %llu and healed %llu "
      "bytes; scrub repaired %llu bytes (labels included), total CKSUM %llu; second scrub: "
      "%llu repaired, %llu errors\n",
      width, static_cast<unsigned long long>(seed), blocks.size(),
      static_cast<unsigned long long>(blocks_hit), static_cast<unsigned long long>(meta_hit),
      static_cast<unsigned long long>(injected), static_cast<unsigned long long>(labels),
      static_cast<unsigned long long>(read_cksum), static_cast<unsigned long long>(read_healed),
      static_cast<unsigned long long>(first.repaired), static_cast<unsigned long long>(total_cksum),
      static_cast<unsigned long long>(second.repaired),
      static_cast<unsigned long long>(second.errors));
}

TEST(MirrorTest, FaultCampaignTwoWay) {
  for (uint64_t seed : {11, 12}) Campaign(2, seed);
}

TEST(MirrorTest, FaultCampaignThreeWay) { Campaign(3, 21); }

TEST(MirrorTest, EveryCopyBadIsEioAndListed) {
  auto devs = MakeDevs(2, 5);
  auto p = CreateMirrors(devs, 1, 2);
  auto [data, snap] = Fill(*p, 5);
  // A data block of the volume (not the snapshot's): the last one.
  BlockPtr victim;
  {
    auto& vol = *p->impl()->volumes.at("trunk/vol");
    ASSERT_TRUE(vol.Walk([&](const BlockPtr& bp) {
                     if (bp.type == BlockType::kVolData) victim = bp;
                     return Status::Ok();
                   })
                    .ok());
  }
  ASSERT_TRUE(p->Close().ok());
  p.reset();
  for (auto& d : devs) ASSERT_TRUE(d->FlipBits(victim.dva[0].offset, victim.psize, 3).ok());
  auto q = *Import(Ptrs(devs));
  auto dev = *q->OpenVolume("trunk/vol");
  std::vector<uint8_t> buf(kVolSize);
  Status st = dev->Read(0, buf);
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
  auto info = q->Info();
  ASSERT_EQ(info.data_errors.size(), 1u);
  EXPECT_NE(info.data_errors[0].find("trunk/vol: offset"), std::string::npos)
      << info.data_errors[0];
  EXPECT_GE(ChecksumErrors(*q), 2u);
  // The scrub cannot repair it either, and says so.
  const ScanInfo s = ScrubAndWait(*q);
  EXPECT_EQ(s.errors, 1u);
  dev.reset();
}

TEST(MirrorTest, DegradedImportAndRefusal) {
  auto devs = MakeDevs(4, 8);
  auto p = CreateMirrors(devs, 2, 2);
  auto [data, snap] = Fill(*p, 8);
  ASSERT_TRUE(p->Export().ok());
  p.reset();
  {
    auto q = Import({devs[0], devs[2], devs[3]});
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    auto info = (*q)->Info();
    EXPECT_EQ(info.health, "DEGRADED");
    EXPECT_EQ(info.vdevs[0].state, "DEGRADED");
    EXPECT_EQ(info.vdevs[0].children[1].state, "UNAVAIL");
    EXPECT_EQ(info.vdevs[0].children[1].name, "dev1");
    ExpectReads(**q, "trunk/vol", data);
    // Writes go on.
    auto dev = *(*q)->OpenVolume("trunk/vol");
    auto more = Pattern(kMiB, 99);
    ASSERT_TRUE(dev->Write(0, more).ok());
    ASSERT_TRUE(dev->Flush().ok());
    std::memcpy(data.data(), more.data(), more.size());
    dev.reset();
    ASSERT_TRUE((*q)->Export().ok());
  }
  // Both children of mirror-1 missing: refused, naming it, nothing written.
  auto q = Import({devs[0], devs[1]});
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("vdev 1 is missing"), std::string::npos)
      << q.status().ToString();
  // The child that missed the writes comes back: reads heal it, a scrub finishes it.
  auto r = Import(Ptrs(devs));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->Info().health, "ONLINE");
  ExpectReads(**r, "trunk/vol", data);
  const ScanInfo s = ScrubAndWait(**r);
  EXPECT_EQ(s.errors, 0u);
  ExpectReads(**r, "trunk/vol", data);
}

TEST(MirrorTest, ReplaceMissingChildResilvers) {
  auto devs = MakeDevs(3, 30);
  auto p = CreateMirrors(devs, 1, 2);
  auto [data, snap] = Fill(*p, 30);
  ASSERT_TRUE(p->Close().ok());
  p.reset();
  auto q = *Import({devs[0]});
  EXPECT_EQ(q->Info().health, "DEGRADED");
  Status st = q->Replace("dev1", devs[2], "dev2");
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto info = q->Info();
  EXPECT_EQ(info.health, "ONLINE");
  ASSERT_EQ(info.vdevs[0].children.size(), 2u);
  EXPECT_EQ(info.vdevs[0].children[1].name, "dev2");
  EXPECT_EQ(info.scan.func, "resilver");
  EXPECT_GT(info.scan.repaired, kVolSize);
  ASSERT_TRUE(q->Close().ok());
  q.reset();
  // The new child alone holds everything; the replaced one is no member any more.
  auto r = Import({devs[2]});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectReads(**r, "trunk/vol", data);
  ExpectReads(**r, "trunk/vol@s", snap);
  testing::ExpectConsistent(**r);
  ASSERT_TRUE((*r)->Close().ok());
  r = Import({devs[0], devs[1], devs[2]});  // the replaced device is left out
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  info = (*r)->Info();
  EXPECT_EQ(info.health, "ONLINE");
  ASSERT_EQ(info.vdevs[0].children.size(), 2u);
  EXPECT_EQ(info.vdevs[0].children[0].name, "dev0");
  EXPECT_EQ(info.vdevs[0].children[1].name, "dev2");
}

TEST(MirrorTest, AttachMakesAMirrorAndDetach) {
  auto devs = MakeDevs(2, 40);
  PoolCreateOptions o;
  o.tuning = Tuning();
  auto p = *Pool::Create("trunk", std::vector<bdev::BlockDevicePtr>{devs[0]}, o);
  auto [data, snap] = Fill(*p, 40);
  const std::string first = p->Info().vdevs[0].name;
  ASSERT_TRUE(p->Attach(first, devs[1], "second").ok());
  EXPECT_EQ(p->Info().vdevs[0].type, "mirror");
  ASSERT_TRUE(p->Detach(first).ok());
  EXPECT_FALSE(p->Detach("second").ok());  // the last copy stays
  ASSERT_TRUE(p->Close().ok());
  p.reset();
  auto r = Import({devs[1]});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectReads(**r, "trunk/vol", data);
}

TEST(MirrorTest, OfflineOnlineAndFailingChild) {
  auto devs = MakeDevs(2, 50);
  auto p = CreateMirrors(devs, 1, 2);
  auto [data, snap] = Fill(*p, 50);
  ASSERT_TRUE(p->Offline("dev0").ok());
  EXPECT_FALSE(p->Offline("dev1").ok());  // no valid replicas would be left
  EXPECT_EQ(p->Info().health, "DEGRADED");
  auto dev = *p->OpenVolume("trunk/vol");
  auto more = Pattern(kMiB, 51);
  ASSERT_TRUE(dev->Write(kMiB, more).ok());
  ASSERT_TRUE(dev->Flush().ok());
  std::memcpy(data.data() + kMiB, more.data(), more.size());
  ASSERT_TRUE(p->Online("dev0").ok());
  ASSERT_TRUE(p->WaitScan().ok());
  EXPECT_EQ(p->Info().health, "ONLINE");
  // A child whose writes fail is FAULTED; I/O goes on.
  devs[1]->FailOps(bdev::OpBit(bdev::OpType::kWrite));
  ASSERT_TRUE(dev->Write(2 * kMiB, more).ok());
  ASSERT_TRUE(dev->Flush().ok());
  std::memcpy(data.data() + 2 * kMiB, more.data(), more.size());
  auto info = p->Info();
  EXPECT_EQ(info.health, "DEGRADED");
  EXPECT_EQ(info.vdevs[0].children[1].state, "FAULTED");
  EXPECT_GT(info.vdevs[0].children[1].write_errors, 0u);
  devs[1]->ClearFailRules();
  ASSERT_TRUE(p->Clear().ok());
  ASSERT_TRUE(p->WaitScan().ok());
  EXPECT_EQ(p->Info().health, "ONLINE");
  dev.reset();
  ASSERT_TRUE(p->Close().ok());
  p.reset();
  // The child that was offline, then the one that failed, each alone has everything.
  for (int c = 0; c < 2; c++) {
    auto r = Import({devs[c]});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectReads(**r, "trunk/vol", data);
    ASSERT_TRUE((*r)->Close().ok());
  }
}

// A flushed write lives only in the intent log when the process dies; one child's copy of
// the log block rots. Import reads the chain from the other child and replays the write.
TEST(MirrorTest, IntentLogReadPastABadCopy) {
  for (int bad_child : {0, 1}) {
    auto devs = MakeDevs(2, 70 + bad_child);
    auto p = CreateMirrors(devs, 1, 2);
    VolumeOptions vo;
    vo.volsize = kVolSize;
    vo.volblocksize = 4096;
    ASSERT_TRUE(p->CreateVolume("trunk/vol", vo).ok());
    auto dev = *p->OpenVolume("trunk/vol");
    auto a = Pattern(4096, 71), b = Pattern(8192, 72);
    // The first flushes commit txgs, which start the chain; the last is in the log only.
    for (int i = 0; i < 3; i++) {
      ASSERT_TRUE(dev->Write(0, a).ok());
      ASSERT_TRUE(dev->Flush().ok());
    }
    const uint64_t txg = p->impl()->synced_txg.load();
    ASSERT_TRUE(dev->Write(kMiB, b).ok());
    ASSERT_TRUE(dev->Flush().ok());
    ASSERT_EQ(p->impl()->synced_txg.load(), txg) << "the flush committed a txg: no log";
    for (auto& d : devs) ASSERT_TRUE(d->CutPower(bdev::CrashMode::kKeepAll).ok());
    dev.reset();
    p->Close().IgnoreError();
    p.reset();
    for (auto& d : devs) d = *d->Reopen();
    ZilHeaderPhys zil;
    {
      PoolImportOptions o;
      o.tuning = Tuning();
      o.read_only = true;  // writes nothing, replays nothing: only to find the log's head
      auto look = Pool::Import(Ptrs(devs), o);
      ASSERT_TRUE(look.ok()) << look.status().ToString();
      zil = (*look)->impl()->volumes.at("trunk/vol")->synced_phys().zil;
    }
    ASSERT_FALSE(zil.empty());
    ASSERT_TRUE(devs[bad_child]->FlipBits(zil.head.offset, 4096, 16).ok());
    auto q = Import(Ptrs(devs));
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    EXPECT_TRUE((*q)->import_report().log_losses.empty());
    auto v = *(*q)->OpenVolume("trunk/vol");
    std::vector<uint8_t> got(b.size());
    ASSERT_TRUE(v->Read(kMiB, got).ok());
    EXPECT_TRUE(got == b) << "the logged write was lost (bad copy on child " << bad_child << ")";
  }
}

// A scrub the pool is closed in the middle of (paused here, so it cannot finish first)
// starts again at the next import and repairs everything.
TEST(MirrorTest, ScrubStartsAgainAfterClose) {
  auto devs = MakeDevs(2, 80);
  auto p = CreateMirrors(devs, 1, 2);
  auto [data, snap] = Fill(*p, 80);
  const auto blocks = AllBlocks(*p);
  ASSERT_TRUE(p->Close().ok());
  p.reset();
  for (const auto& b : blocks) ASSERT_TRUE(devs[0]->FlipBits(b.offset, b.psize, 1).ok());
  auto q = *Import(Ptrs(devs));
  ASSERT_TRUE(q->PauseScrub().IsNotFound());
  ASSERT_TRUE(q->Scrub().ok());
  ASSERT_TRUE(q->PauseScrub().ok());
  ASSERT_TRUE(q->Close().ok());
  q.reset();
  auto r = *Import(Ptrs(devs));
  ASSERT_TRUE(r->WaitScan().ok());
  const ScanInfo s = r->Info().scan;
  EXPECT_EQ(s.func, "scrub");
  EXPECT_EQ(s.state, "finished");
  EXPECT_GE(s.repaired, kVolSize);
  ASSERT_TRUE(r->Close().ok());
  r.reset();
  // Finished: the next import starts none, and finds nothing to repair.
  auto t = *Import(Ptrs(devs));
  EXPECT_TRUE(t->Info().scan.func.empty());
  EXPECT_EQ(ScrubAndWait(*t).repaired, 0u);
}

// Power cuts at many points of a scrub that repairs, and of a resilver: after reopening,
// the pool imports with its data; a scrub then finishes clean.
TEST(MirrorTest, PowerCutDuringScrubAndResilver) {
  uint64_t cuts = 0;
  for (uint64_t n : {2, 30, 300}) {
    for (bool resilver : {false, true}) {
      auto devs = MakeDevs(3, 60 + n);
      auto p = CreateMirrors(devs, 1, 2);
      auto [data, snap] = Fill(*p, 60);
      const auto blocks = AllBlocks(*p);
      ASSERT_TRUE(p->Close().ok());
      p.reset();
      if (!resilver) {
        for (const auto& b : blocks) {
          if (b.offset / 4096 % 3 == 0) {
            ASSERT_TRUE(devs[0]->FlipBits(b.offset, b.psize, 2).ok());
          }
        }
      }
      auto q = *Import({devs[0], devs[1]});
      for (auto& d : devs) d->CutPowerAfter(n, bdev::CrashMode::kTear);
      bool replaced = false;
      if (resilver) {
        replaced = q->Replace("dev1", devs[2], "dev2").ok();
      } else {
        if (q->Scrub().ok()) q->WaitScan().IgnoreError();
      }
      q->Close().IgnoreError();
      q.reset();
      std::vector<bdev::BlockDevicePtr> back;
      for (auto& d : devs) {
        if (d->powered()) {
          ASSERT_TRUE(d->CutPower(bdev::CrashMode::kTear).ok());
        }
        cuts++;
        d = *d->Reopen();
      }
      // The pool as the cache names it: the replace counts only once it returned.
      auto r = Import({devs[0], devs[replaced ? 2 : 1]});
      ASSERT_TRUE(r.ok()) << "cut after " << n << ": " << r.status().ToString();
      ExpectReads(**r, "trunk/vol", data);
      ExpectReads(**r, "trunk/vol@s", snap);
      const ScanInfo s = ScrubAndWait(**r);
      EXPECT_EQ(s.errors, 0u);
      EXPECT_EQ(ScrubAndWait(**r).repaired, 0u);
      ASSERT_TRUE((*r)->Close().ok());
    }
  }
  EXPECT_GT(cuts, 0u);
}

}  // namespace
}  // namespace volstack::pool

// Raidz vdevs on FaultDevices: create/import of raidz1 and raidz2 mixed with mirrors and
// plain vdevs; every single column (raidz1, raidz2) and every pair of columns (raidz2)
// damaged in every block is read right, counted against those children only and healed;
// one column more than the parity is EIO, never other bytes; degraded import, writes and
// the refusal naming the missing devices; replace with a resilver; offline/online; the
// fault campaign (random blocks, data and metadata, up to the parity's count of columns
// each, labels too); and power cuts during writes and during a repairing scrub.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <set>
#include <thread>

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
constexpr uint64_t kVolSize = 4 * kMiB;
using Devs = std::vector<std::shared_ptr<FaultDevice>>;

using testing::AllBlocks;
using testing::BlockRef;
using testing::ExpectReads;
using testing::Ptrs;
using testing::ScrubAndWait;

PoolTuning Tuning() { return testing::UncachedTuning(); }
Devs MakeDevs(int n, uint64_t seed) { return testing::MakeFaultDevs(n, seed, kDevSize); }
auto Import(const std::vector<bdev::BlockDevicePtr>& devs) { return testing::ImportUncached(devs); }
auto Fill(Pool& pool, uint64_t seed) { return testing::FillWithSnapshot(pool, seed, kVolSize); }

VdevSpec Raidz(const Devs& devs, uint32_t parity, int first, int n) {
  VdevSpec s;
  s.raidz = parity;
  for (int c = first; c < first + n; c++) {
    s.devices.push_back(devs[c]);
    s.paths.push_back("dev" + std::to_string(c));
  }
  return s;
}

std::shared_ptr<Pool> Create(std::vector<VdevSpec> specs) {
  PoolCreateOptions o;
  o.tuning = Tuning();
  auto p = Pool::Create("trunk", std::move(specs), o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : nullptr;
}

// Damages the column child `col` holds of block `b` (a raidz of geometry g).
void Damage(FaultDevice& child, const RaidzGeometry& g, const BlockRef& b, uint32_t bits) {
  ASSERT_TRUE(child.FlipBits(g.ChildOffset(b.offset), g.ChildLength(b.asize), bits).ok());
}

std::vector<uint64_t> ChildCksums(Pool& pool, size_t vdev) {
  std::vector<uint64_t> out;
  for (const auto& c : pool.Info().vdevs[vdev].children) out.push_back(c.checksum_errors);
  return out;
}

TEST(RaidzTest, CreateImportMixedAndStatus) {
  auto devs = MakeDevs(10, 1);
  std::vector<VdevSpec> specs;
  specs.push_back(Raidz(devs, 1, 0, 3));
  specs.push_back(Raidz(devs, 2, 3, 4));
  specs.push_back({true, {devs[7], devs[8]}, {"dev7", "dev8"}});
  specs.push_back({false, {devs[9]}, {"dev9"}});
  auto p = Create(specs);
  ASSERT_NE(p, nullptr);
  auto [data, snap] = Fill(*p, 1);
  auto info = p->Info();
  ASSERT_EQ(info.vdevs.size(), 4u);
  EXPECT_EQ(info.vdevs[0].type, "raidz1");
  EXPECT_EQ(info.vdevs[1].type, "raidz2");
  EXPECT_EQ(info.vdevs[2].type, "mirror");
  EXPECT_EQ(info.vdevs[3].type, "disk");
  EXPECT_EQ(info.vdevs[0].children.size(), 3u);
  EXPECT_EQ(info.vdevs[1].children[3].name, "dev6");
  // A raidz's size is its data capacity: 2 of 3 columns, 2 of 4.
  const uint64_t child = AllocEnd(kDevSize) - kAllocStart;
  EXPECT_EQ(info.vdevs[0].size, child / 2048 * 4096);
  EXPECT_EQ(info.vdevs[1].size, info.vdevs[0].size);
  // Every vdev took data.
  for (const auto& v : info.vdevs) EXPECT_GT(v.allocated, 0u) << v.name;
  ASSERT_TRUE(p->Export().ok());
  p.reset();
  auto q = Import(Ptrs(devs));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ((*q)->Info().health, "ONLINE");
  ExpectReads(**q, "trunk/vol", data);
  ExpectReads(**q, "trunk/vol@s", snap);
  testing::ExpectConsistent(**q);
  // The labels of a raidz child are version 3.
  std::vector<uint8_t> region(kLabelConfigSize);
  ASSERT_TRUE(devs[0]->Read(kLabelConfigOffset, region).ok());
  EXPECT_EQ(region[8], kRaidzLabelVersion);
  ASSERT_TRUE(devs[7]->Read(kLabelConfigOffset, region).ok());
  EXPECT_EQ(region[8], kMirrorLabelVersion);
}

TEST(RaidzTest, BadSpecsAreRefused) {
  auto devs = MakeDevs(3, 2);
  PoolCreateOptions o;
  o.tuning = Tuning();
  EXPECT_FALSE(Pool::Create("trunk", {Raidz(devs, 2, 0, 2)}, o).ok());
  EXPECT_FALSE(Pool::Create("trunk", {Raidz(devs, 3, 0, 3)}, o).ok());
  // Nothing was written.
  for (auto& d : devs) EXPECT_FALSE(Vdev::ReadLabelConfig(*d).ok());
}

// Damages the same columns of every block, reads, checks the counts, scrubs twice.
void HealColumns(const Devs& devs, const std::vector<int>& cols, uint32_t parity, int width,
                 const std::vector<uint8_t>& data, const std::vector<uint8_t>& snap,
                 const std::set<BlockRef>& blocks, const RaidzGeometry& g) {
  for (const auto& b : blocks) {
    for (int c : cols) Damage(*devs[c], g, b, 4);
  }
  std::string what = "columns";
  for (int c : cols) what += " " + std::to_string(c);
  SCOPED_TRACE(what);
  auto q = Import(Ptrs(devs));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ExpectReads(**q, "trunk/vol", data);
  auto damaged = [&](int c) { return std::find(cols.begin(), cols.end(), c) != cols.end(); };
  // Reads find the damaged data columns (parity is read only when data does not match).
  auto cks = ChildCksums(**q, 0);
  for (int c = 0; c < width; c++) {
    if (!damaged(c)) {
      EXPECT_EQ(cks[c], 0u) << "column " << c << " was not damaged";
    } else if (c >= static_cast<int>(parity)) {
      EXPECT_GT(cks[c], 0u) << "column " << c;
    }
  }
  // What the reads healed is healed: reading again finds nothing.
  ExpectReads(**q, "trunk/vol", data);
  EXPECT_EQ(ChildCksums(**q, 0), cks);
  const ScanInfo first = ScrubAndWait(**q);
  EXPECT_EQ(first.errors, 0u);
  // The scrub found the rest, parity included.
  cks = ChildCksums(**q, 0);
  for (int c = 0; c < width; c++) EXPECT_EQ(cks[c] > 0, damaged(c)) << "column " << c;
  ExpectReads(**q, "trunk/vol@s", snap);
  const ScanInfo second = ScrubAndWait(**q);
  EXPECT_EQ(second.repaired, 0u) << "parity " << parity << " columns " << cols.size();
  EXPECT_EQ(second.errors, 0u);
  ASSERT_TRUE((*q)->Close().ok());
}

void EveryColumnSet(uint32_t parity, int width, uint64_t seed) {
  auto devs = MakeDevs(width, seed);
  auto p = Create({Raidz(devs, parity, 0, width)});
  ASSERT_NE(p, nullptr);
  auto [data, snap] = Fill(*p, seed);
  const auto blocks = AllBlocks(*p);
  const RaidzGeometry g = p->impl()->vdevs[0]->raidz();
  ASSERT_TRUE(p->Close().ok());
  p.reset();
  std::vector<std::vector<int>> sets;
  for (int i = 0; i < width; i++) sets.push_back({i});
  if (parity == 2) {
    for (int i = 0; i < width; i++) {
      for (int j = i + 1; j < width; j++) sets.push_back({i, j});
    }
  }
  for (const auto& set : sets) HealColumns(devs, set, parity, width, data, snap, blocks, g);
}

TEST(RaidzTest, EverySingleColumnHealsRaidz1) {
  EveryColumnSet(1, 3, 10);
  EveryColumnSet(1, 4, 11);  // 3 data columns: a unit's last sector is padding
}

TEST(RaidzTest, EveryColumnAndPairHealsRaidz2) { EveryColumnSet(2, 5, 12); }

// One column more than the parity: EIO and the error list, never other bytes.
TEST(RaidzTest, TooManyBadColumnsIsEio) {
  for (uint32_t parity : {1u, 2u}) {
    const int width = static_cast<int>(parity) + 3;
    auto devs = MakeDevs(width, 20 + parity);
    auto p = Create({Raidz(devs, parity, 0, width)});
    auto [data, snap] = Fill(*p, 20);
    const RaidzGeometry g = p->impl()->vdevs[0]->raidz();
    BlockPtr victim;
    ASSERT_TRUE(p->impl()
                    ->volumes.at("trunk/vol")
                    ->Walk([&](const BlockPtr& bp) {
                      if (bp.type == BlockType::kVolData && bp.birth > 3) victim = bp;
                      return Status::Ok();
                    })
                    .ok());
    ASSERT_FALSE(victim.IsHole());
    ASSERT_TRUE(p->Close().ok());
    p.reset();
    const BlockRef b{0, victim.dva[0].offset, victim.psize, victim.dva[0].asize(), victim.type};
    for (uint32_t c = 0; c <= parity; c++) Damage(*devs[c + 1], g, b, 8);
    auto q = *Import(Ptrs(devs));
    auto dev = *q->OpenVolume("trunk/vol");
    // Block by block: every other block reads right, the victim is EIO.
    uint64_t eio = 0;
    std::vector<uint8_t> blk(4096);
    for (uint64_t off = 0; off < kVolSize; off += 4096) {
      Status st = dev->Read(off, blk);
      if (!st.ok()) {
        EXPECT_TRUE(st.IsCorruption()) << st.ToString();
        eio++;
        continue;
      }
      EXPECT_EQ(0, std::memcmp(blk.data(), data.data() + off, 4096)) << "offset " << off;
    }
    EXPECT_EQ(eio, 1u);
    auto info = q->Info();
    ASSERT_EQ(info.data_errors.size(), 1u);
    EXPECT_NE(info.data_errors[0].find("trunk/vol: offset"), std::string::npos);
    EXPECT_EQ(ScrubAndWait(*q).errors, 1u);
    dev.reset();
  }
}

TEST(RaidzTest, DegradedImportWritesAndRefusal) {
  auto devs = MakeDevs(3, 30);
  auto p = Create({Raidz(devs, 1, 0, 3)});
  auto [data, snap] = Fill(*p, 30);
  ASSERT_TRUE(p->Export().ok());
  p.reset();
  {
    auto q = Import({devs[0], devs[2]});
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    auto info = (*q)->Info();
    EXPECT_EQ(info.health, "DEGRADED");
    EXPECT_EQ(info.vdevs[0].state, "DEGRADED");
    EXPECT_EQ(info.vdevs[0].children[1].state, "UNAVAIL");
    ExpectReads(**q, "trunk/vol", data);
    auto dev = *(*q)->OpenVolume("trunk/vol");
    auto more = Pattern(kMiB, 31);
    ASSERT_TRUE(dev->Write(kMiB, more).ok());
    ASSERT_TRUE(dev->Flush().ok());
    std::memcpy(data.data() + kMiB, more.data(), more.size());
    dev.reset();
    ExpectReads(**q, "trunk/vol", data);
    ASSERT_TRUE((*q)->Export().ok());
  }
  auto bad = Import({devs[0]});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("raidz1-0"), std::string::npos) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("dev1, dev2"), std::string::npos)
      << bad.status().ToString();
  // The child that missed the writes comes back: its stale columns are rebuilt.
  auto r = Import(Ptrs(devs));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->Info().health, "ONLINE");
  ExpectReads(**r, "trunk/vol", data);
  EXPECT_EQ(ScrubAndWait(**r).errors, 0u);
  ASSERT_TRUE((*r)->Close().ok());
  (*r).reset();
  // Now each pair of children holds everything.
  for (int missing = 0; missing < 3; missing++) {
    std::vector<bdev::BlockDevicePtr> two;
    for (int c = 0; c < 3; c++) {
      if (c != missing) two.push_back(devs[c]);
    }
    auto s = Import(two);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    ExpectReads(**s, "trunk/vol", data);
    ExpectReads(**s, "trunk/vol@s", snap);
    ASSERT_TRUE((*s)->Close().ok());
  }
}

TEST(RaidzTest, ReplaceMissingChildResilvers) {
  auto devs = MakeDevs(4, 40);
  auto p = Create({Raidz(devs, 1, 0, 3)});
  auto [data, snap] = Fill(*p, 40);
  ASSERT_TRUE(p->Close().ok());
  p.reset();
  auto q = *Import({devs[0], devs[2]});
  EXPECT_FALSE(q->Attach("dev0", devs[3], "dev3").ok());  // a raidz takes no new column
  EXPECT_FALSE(q->Detach("dev0").ok());
  Status st = q->Replace("dev1", devs[3], "dev3");
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto info = q->Info();
  EXPECT_EQ(info.health, "ONLINE");
  ASSERT_EQ(info.vdevs[0].children.size(), 3u);
  EXPECT_EQ(info.vdevs[0].children[1].name, "dev3");
  EXPECT_EQ(info.scan.func, "resilver");
  EXPECT_EQ(info.scan.errors, 0u);
  ASSERT_TRUE(q->Close().ok());
  q.reset();
  // The new column is whole: without dev2, dev0 and dev3 hold the pool.
  auto r = Import({devs[0], devs[3]});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectReads(**r, "trunk/vol", data);
  ExpectReads(**r, "trunk/vol@s", snap);
  testing::ExpectConsistent(**r);
  ASSERT_TRUE((*r)->Close().ok());
  (*r).reset();
  // The replaced device is no member any more.
  auto t = Import(Ptrs(devs));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->Info().vdevs[0].children[1].name, "dev3");
}

TEST(RaidzTest, OfflineOnlineAndFailingChild) {
  auto devs = MakeDevs(4, 50);
  auto p = Create({Raidz(devs, 2, 0, 4)});
  auto [data, snap] = Fill(*p, 50);
  ASSERT_TRUE(p->Offline("dev0").ok());
  ASSERT_TRUE(p->Offline("dev3").ok());
  EXPECT_FALSE(p->Offline("dev1").ok());  // two columns left would not hold the data
  EXPECT_EQ(p->Info().health, "DEGRADED");
  auto dev = *p->OpenVolume("trunk/vol");
  auto more = Pattern(kMiB, 51);
  ASSERT_TRUE(dev->Write(kMiB, more).ok());
  ASSERT_TRUE(dev->Flush().ok());
  std::memcpy(data.data() + kMiB, more.data(), more.size());
  ExpectReads(*p, "trunk/vol", data);
  ASSERT_TRUE(p->Online("dev0").ok());
  ASSERT_TRUE(p->WaitScan().ok());
  ASSERT_TRUE(p->Online("dev3").ok());
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
  devs[1]->ClearFailRules();
  ASSERT_TRUE(p->Clear().ok());
  ASSERT_TRUE(p->WaitScan().ok());
  EXPECT_EQ(p->Info().health, "ONLINE");
  dev.reset();
  ASSERT_TRUE(p->Close().ok());
  p.reset();
  // Those that were offline and the one that failed were all brought up to date: any two
  // children hold the pool.
  for (auto pair : {std::pair{0, 3}, std::pair{1, 2}, std::pair{0, 1}}) {
    auto r = Import({devs[pair.first], devs[pair.second]});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectReads(**r, "trunk/vol", data);
    ASSERT_TRUE((*r)->Close().ok());
  }
}

// The fault campaign: random blocks (a third of them, metadata included) get up to
// `parity` random columns damaged; label configs and an uberblock ring too. Prints counts.
void Campaign(uint32_t parity, int width, uint64_t seed) {
  auto devs = MakeDevs(width, seed);
  auto p = Create({Raidz(devs, parity, 0, width)});
  auto [data, snap] = Fill(*p, seed);
  const auto blocks = AllBlocks(*p);
  const RaidzGeometry g = p->impl()->vdevs[0]->raidz();
  ASSERT_TRUE(p->Close().ok());
  p.reset();
  std::mt19937_64 rng(seed);
  uint64_t injected = 0, blocks_hit = 0, meta_hit = 0;
  for (const auto& b : blocks) {
    if (rng() % 3 != 0) continue;
    blocks_hit++;
    meta_hit += b.type != BlockType::kVolData;
    std::vector<int> kids(width);
    for (int i = 0; i < width; i++) kids[i] = i;
    std::shuffle(kids.begin(), kids.end(), rng);
    const int k = 1 + static_cast<int>(rng() % parity);
    for (int i = 0; i < k; i++) {
      Damage(*devs[kids[i]], g, b, 1 + rng() % 8);
      injected++;
    }
  }
  const uint64_t labels = testing::DamageLabels(devs, kDevSize);
  auto q = Import(Ptrs(devs));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ExpectReads(**q, "trunk/vol", data);
  ExpectReads(**q, "trunk/vol@s", snap);
  auto cksum = [&] {
    uint64_t n = 0;
    for (auto c : ChildCksums(**q, 0)) n += c;
    return n;
  };
  const uint64_t read_cksum = cksum();
  const uint64_t read_healed = (*q)->impl()->healed_bytes.load();
  EXPECT_GT(read_cksum, 0u);
  EXPECT_GT(read_healed, 0u);
  const ScanInfo first = ScrubAndWait(**q);
  EXPECT_EQ(first.state, "finished");
  EXPECT_EQ(first.errors, 0u);
  EXPECT_GT(first.repaired, 0u);
  const uint64_t total = cksum();
  // Every damaged column was found, by a read or by the scrub.
  EXPECT_GE(total, injected);
  const ScanInfo second = ScrubAndWait(**q);
  EXPECT_EQ(second.repaired, 0u);
  EXPECT_EQ(second.errors, 0u);
  EXPECT_EQ(cksum(), total) << "the second scrub found bad columns";
  EXPECT_TRUE((*q)->Info().data_errors.empty());
  ExpectReads(**q, "trunk/vol", data);
  testing::ExpectConsistent(**q);
  ASSERT_TRUE((*q)->Close().ok());
  std::printf(
      "[campaign] raidz%u of %d seed %llu: %zu blocks, %llu hit (%llu metadata), %llu bad "
      "columns injected + %llu label configs + 1 uberblock ring; reads found %llu and healed "
      "%llu bytes; scrub repaired %llu bytes, total CKSUM %llu; second scrub: %llu repaired, "
      "%llu errors\n",
      parity, width, static_cast<unsigned long long>(seed), blocks.size(),
      static_cast<unsigned long long>(blocks_hit), static_cast<unsigned long long>(meta_hit),
      static_cast<unsigned long long>(injected), static_cast<unsigned long long>(labels),
      static_cast<unsigned long long>(read_cksum), static_cast<unsigned long long>(read_healed),
      static_cast<unsigned long long>(first.repaired), static_cast<unsigned long long>(total),
      static_cast<unsigned long long>(second.repaired),
      static_cast<unsigned long long>(second.errors));
}

TEST(RaidzTest, FaultCampaignRaidz1) {
  Campaign(1, 3, 61);
  Campaign(1, 5, 62);
}

TEST(RaidzTest, FaultCampaignRaidz2) { Campaign(2, 6, 63); }

// Power cuts at many points of writes and of a scrub that repairs: after reopening, the
// pool imports, the snapshot is intact, the volume holds either the old or the new bytes
// of each block, and a scrub finishes clean.
TEST(RaidzTest, PowerCutDuringWriteAndScrub) {
  uint64_t cuts = 0;
  for (uint64_t n : {3, 60, 300}) {
    for (bool scrub : {false, true}) {
      auto devs = MakeDevs(4, 70 + n);
      auto p = Create({Raidz(devs, 2, 0, 4)});
      auto [data, snap] = Fill(*p, 70);
      const auto blocks = AllBlocks(*p);
      const RaidzGeometry g = p->impl()->vdevs[0]->raidz();
      ASSERT_TRUE(p->Close().ok());
      p.reset();
      if (scrub) {
        for (const auto& b : blocks) {
          if (b.offset / 4096 % 3 == 0) Damage(*devs[b.offset / 4096 % 4], g, b, 2);
        }
      }
      auto q = *Import(Ptrs(devs));
      for (auto& d : devs) d->CutPowerAfter(n, bdev::CrashMode::kTear);
      auto more = Pattern(kVolSize, 71);
      if (scrub) {
        if (q->Scrub().ok()) q->WaitScan().IgnoreError();
      } else {
        auto dev = *q->OpenVolume("trunk/vol");
        for (uint64_t off = 0; off < kVolSize; off += kMiB) {
          if (!dev->Write(off, std::span<const uint8_t>(more.data() + off, kMiB)).ok()) break;
          if (!dev->Flush().ok()) break;
        }
      }
      q->Close().IgnoreError();
      q.reset();
      for (auto& d : devs) {
        if (d->powered()) {
          ASSERT_TRUE(d->CutPower(bdev::CrashMode::kTear).ok());
        }
        cuts++;
        d = *d->Reopen();
      }
      auto r = Import(Ptrs(devs));
      ASSERT_TRUE(r.ok()) << "cut after " << n << ": " << r.status().ToString();
      ExpectReads(**r, "trunk/vol@s", snap);
      {
        auto dev = *(*r)->OpenVolume("trunk/vol");
        std::vector<uint8_t> got(kVolSize);
        ASSERT_TRUE(dev->Read(0, got).ok());
        for (uint64_t off = 0; off < kVolSize; off += 4096) {
          const bool old_bytes = std::memcmp(got.data() + off, data.data() + off, 4096) == 0;
          const bool new_bytes = std::memcmp(got.data() + off, more.data() + off, 4096) == 0;
          ASSERT_TRUE(old_bytes || new_bytes) << "cut after " << n << ": block at " << off;
        }
      }
      EXPECT_EQ(ScrubAndWait(**r).errors, 0u);
      EXPECT_EQ(ScrubAndWait(**r).repaired, 0u);
      testing::ExpectConsistent(**r);
      ASSERT_TRUE((*r)->Close().ok());
    }
  }
  EXPECT_GT(cuts, 0u);
}

// zpool add: a raidz and a mirror join a pool whose volume is open; new writes spread over
// them; the pool imports with them and refuses without them. Bad devices change nothing.
TEST(RaidzTest, AddVdevsToAnOpenPool) {
  auto devs = MakeDevs(7, 80);
  auto small = FaultDevice::CreateInMemory(32 * kMiB, 512, 89);
  auto p = Create({VdevSpec{false, {devs[0]}, {"dev0"}}});
  auto [data, snap] = Fill(*p, 80);
  auto dev = *p->OpenVolume("trunk/vol");
  const auto before = p->Info();
  // Refused, nothing changed: a device too small, one already in the pool, one twice.
  EXPECT_FALSE(p->Add({Raidz(devs, 1, 1, 2), VdevSpec{false, {small}, {"small"}}}).ok());
  EXPECT_FALSE(p->Add({VdevSpec{false, {devs[0]}, {"again"}}}).ok());
  EXPECT_FALSE(p->Add({VdevSpec{true, {devs[1], devs[1]}, {"a", "b"}}}).ok());
  EXPECT_EQ(p->Info().vdevs.size(), 1u);
  EXPECT_FALSE(Vdev::ReadLabelConfig(*devs[1]).ok()) << "a refused add wrote a label";
  Status st = p->Add({Raidz(devs, 1, 1, 3), VdevSpec{true, {devs[4], devs[5]}, {"dev4", "dev5"}}});
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto info = p->Info();
  ASSERT_EQ(info.vdevs.size(), 3u);
  EXPECT_EQ(info.vdevs[1].type, "raidz1");
  EXPECT_EQ(info.vdevs[2].type, "mirror");
  EXPECT_EQ(info.size, before.size + info.vdevs[1].size + info.vdevs[2].size);
  // New writes go to the new vdevs too.
  auto more = Pattern(kVolSize, 81);
  ASSERT_TRUE(dev->Write(0, more).ok());
  ASSERT_TRUE(dev->Flush().ok());
  ASSERT_TRUE(p->Sync().ok());
  info = p->Info();
  EXPECT_GT(info.vdevs[1].allocated, kVolSize / 8);
  EXPECT_GT(info.vdevs[2].allocated, kVolSize / 8);
  dev.reset();
  testing::ExpectConsistent(*p);
  ASSERT_TRUE(p->Close().ok());
  p.reset();
  auto q = Import({devs[0], devs[1], devs[2], devs[3], devs[4], devs[5]});
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  ExpectReads(**q, "trunk/vol", more);
  ExpectReads(**q, "trunk/vol@s", snap);
  ASSERT_TRUE((*q)->Close().ok());
  auto r = Import({devs[0], devs[4], devs[5]});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("vdev 1 is missing"), std::string::npos)
      << r.status().ToString();
}

// Power cuts at many points of an add: the pool imports with the old vdevs or with all of
// them, its data intact either way.
TEST(RaidzTest, PowerCutDuringAdd) {
  int added = 0, not_added = 0;
  for (uint64_t n : {1, 4, 8, 16, 40}) {
    auto devs = MakeDevs(4, 90 + n);
    auto p = Create({VdevSpec{false, {devs[0]}, {"dev0"}}});
    auto [data, snap] = Fill(*p, 90);
    for (auto& d : devs) d->CutPowerAfter(n, bdev::CrashMode::kTear);
    p->Add({Raidz(devs, 1, 1, 3)}).IgnoreError();
    p->Close().IgnoreError();
    p.reset();
    for (auto& d : devs) {
      if (d->powered()) {
        ASSERT_TRUE(d->CutPower(bdev::CrashMode::kTear).ok());
      }
      d = *d->Reopen();
    }
    auto q = Import(Ptrs(devs));
    if (!q.ok()) q = Import({devs[0]});
    ASSERT_TRUE(q.ok()) << "cut after " << n << ": " << q.status().ToString();
    ((*q)->Info().vdevs.size() == 2 ? added : not_added)++;
    ExpectReads(**q, "trunk/vol", data);
    ExpectReads(**q, "trunk/vol@s", snap);
    testing::ExpectConsistent(**q);
    ASSERT_TRUE((*q)->Close().ok());
  }
  std::printf("[add cuts] %d imported with the new raidz, %d without\n", added, not_added);
}

// While a replacing child resilvers, its column is read from the child it replaces: a
// raidz1 with the new child not yet filled and another column damaged still reads right
// (the old child and parity rebuild it), and once the old child is let go it cannot.
TEST(RaidzTest, ReplacedChildIsTheColumnsSourceUntilDropped) {
  auto devs = MakeDevs(4, 130);
  RaidzGeometry g;
  g.children = 3;
  g.parity = 1;
  g.unit = 4096;
  g.sector = 512;
  std::vector<Vdev::ChildSpec> kids;
  for (int i = 0; i < 3; i++) kids.push_back({devs[i], uint64_t(i + 1), "dev" + std::to_string(i)});
  Vdev v(std::move(kids), 0, 9, g.LogicalEnd(AllocEnd(kDevSize)), g);
  auto block = Pattern(4096, 131);
  const uint64_t off = kAllocStart + 16 * 4096;
  ASSERT_TRUE(v.device()->Write(off, block).ok());
  const BlockVerifier ok = [&](std::span<const uint8_t> b) {
    return std::equal(b.begin(), b.end(), block.begin(), block.end());
  };
  ASSERT_TRUE(v.device()->Flush().ok());  // bits are flipped on what the devices hold
  ASSERT_TRUE(v.AttachChild(1, devs[3], 4, "dev3").ok());
  // Child 2's column (data) is damaged; child 1's is on the old dev1 only.
  ASSERT_TRUE(devs[2]->FlipBits(g.ChildOffset(off), g.ChildLength(4096), 8).ok());
  std::vector<uint8_t> got(4096);
  Status st = v.ReadVerified(off, got, ok);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(got == block);
  // Written to both the new child and the old one while it resilvers.
  const auto old_writes = devs[1]->counters()[bdev::OpType::kWrite];
  ASSERT_TRUE(v.device()->Write(off, block).ok());
  EXPECT_GT(devs[1]->counters()[bdev::OpType::kWrite], old_writes);
  ASSERT_TRUE(v.device()->Flush().ok());
  v.DropReplaced(4);
  ASSERT_TRUE(devs[2]->FlipBits(g.ChildOffset(off), g.ChildLength(4096), 8).ok());
  EXPECT_FALSE(v.ReadVerified(off, got, ok).ok());  // two columns missing: beyond raidz1
}

// Power cuts during a raidz replace whose first commit writes new data, every device at
// once while the resilver fills the new child: the old child is written until the resilver
// is done, so when the cut leaves the replace undone (the labels still name the old child)
// its column is current and a scrub after the import finds no checksum error; every block
// reads old or new data either way.
TEST(RaidzTest, PowerCutDuringReplaceLeavesTheOldChildCurrent) {
  int undone = 0, done = 0;
  for (uint64_t n : {16, 64, 256, 1024}) {
    auto devs = MakeDevs(4, 120 + n);
    auto p = Create({Raidz(devs, 1, 0, 3)});
    auto [data, snap] = Fill(*p, 120);
    auto dev = *p->OpenVolume("trunk/vol");
    auto more = Pattern(kVolSize, 121);
    ASSERT_TRUE(dev->Write(0, more).ok());  // committed by the replace's first commit
    std::atomic<bool> replaced{false};
    std::thread replace([&] {
      p->Replace("dev1", devs[3], "dev3").IgnoreError();
      replaced = true;
    });
    while (!replaced && devs[3]->counters()[bdev::OpType::kWrite] < n) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    for (auto& d : devs) ASSERT_TRUE(d->CutPower(bdev::CrashMode::kDropAll).ok());
    replace.join();
    dev.reset();
    p->Close().IgnoreError();
    p.reset();
    for (auto& d : devs) d = *d->Reopen();
    auto q = Import(Ptrs(devs));
    if (!q.ok()) q = Import({devs[0], devs[1], devs[2]});
    ASSERT_TRUE(q.ok()) << "cut after " << n << ": " << q.status().ToString();
    if ((*q)->Info().vdevs[0].children[1].name == "dev1") {
      undone++;
      EXPECT_EQ(ScrubAndWait(**q).errors, 0u);
      uint64_t cksum = 0;
      for (const auto& c : (*q)->Info().vdevs[0].children) cksum += c.checksum_errors;
      EXPECT_EQ(cksum, 0u) << "cut after " << n << ": the old child's column is stale";
    } else {
      done++;
    }
    ExpectReads(**q, "trunk/vol@s", snap);
    {
      auto d = *(*q)->OpenVolume("trunk/vol");
      std::vector<uint8_t> got(kVolSize);
      ASSERT_TRUE(d->Read(0, got).ok());
      for (uint64_t off = 0; off < kVolSize; off += 4096) {
        const bool old_bytes = std::memcmp(got.data() + off, data.data() + off, 4096) == 0;
        const bool new_bytes = std::memcmp(got.data() + off, more.data() + off, 4096) == 0;
        ASSERT_TRUE(old_bytes || new_bytes) << "cut after " << n << ": block at " << off;
      }
    }
    testing::ExpectConsistent(**q);
    ASSERT_TRUE((*q)->Close().ok());
  }
  std::printf("[replace cuts] %d left the replace undone, %d done\n", undone, done);
  EXPECT_GT(undone, 0);
}

// Offline is kept across export/import: the child comes back OFFLINE (the pool DEGRADED)
// until zpool online, which resilvers it; then it is ONLINE after an import again.
TEST(RaidzTest, OfflineStatePersists) {
  for (bool mirror : {false, true}) {
    auto devs = MakeDevs(3, mirror ? 101 : 100);
    auto p = mirror
                 ? Create({VdevSpec{true, {devs[0], devs[1], devs[2]}, {"dev0", "dev1", "dev2"}}})
                 : Create({Raidz(devs, 1, 0, 3)});
    auto [data, snap] = Fill(*p, 100);
    ASSERT_TRUE(p->Offline("dev1").ok());
    ASSERT_TRUE(p->Export().ok());
    p.reset();
    auto q = *Import(Ptrs(devs));
    auto info = q->Info();
    EXPECT_EQ(info.health, "DEGRADED");
    EXPECT_EQ(info.vdevs[0].children[1].state, "OFFLINE");
    auto dev = *q->OpenVolume("trunk/vol");
    auto more = Pattern(kMiB, 102);
    ASSERT_TRUE(dev->Write(0, more).ok());
    ASSERT_TRUE(dev->Flush().ok());
    std::memcpy(data.data(), more.data(), more.size());
    dev.reset();
    ASSERT_TRUE(q->Close().ok());
    q.reset();
    q = *Import(Ptrs(devs));
    EXPECT_EQ(q->Info().vdevs[0].children[1].state, "OFFLINE");
    ASSERT_TRUE(q->Online("dev1").ok());
    ASSERT_TRUE(q->WaitScan().ok());
    EXPECT_EQ(q->Info().health, "ONLINE");
    ASSERT_TRUE(q->Close().ok());
    q.reset();
    q = *Import(Ptrs(devs));
    EXPECT_EQ(q->Info().health, "ONLINE");
    ExpectReads(*q, "trunk/vol", data);
    ASSERT_TRUE(q->Close().ok());
    q.reset();
    // dev1 is whole again: without dev0 (and for the mirror dev2) the pool reads right.
    auto r = mirror ? Import({devs[1]}) : Import({devs[1], devs[2]});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ExpectReads(**r, "trunk/vol", data);
  }
}

}  // namespace
}  // namespace volstack::pool

// FaultDevice tests. Most use a model: every written logical block is filled with one 64-bit
// tag repeated (0 = zeroes), so an image can be decoded block by block, and a block whose
// words disagree is corruption inside the tear granularity. The model tracks, per block, the
// tag that is durable and the tags written since; after a power cut every block must hold
// one of them, whatever the mode — and exactly the durable one after kDropAll, the newest
// after kKeepAll.
#include "bdev/fault_device.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <set>
#include <span>
#include <thread>
#include <tuple>

#include "bdev/memory_device.h"
#include "util/coding.h"

namespace volstack::bdev {
namespace {

constexpr uint32_t kLbs = 512;
constexpr uint64_t kBlocks = 256;

std::vector<uint8_t> TagBlocks(const std::vector<uint64_t>& tags) {
  std::vector<uint8_t> buf(tags.size() * kLbs);
  for (size_t b = 0; b < tags.size(); b++) {
    for (size_t w = 0; w < kLbs; w += 8) EncodeLE64(&buf[b * kLbs + w], tags[b]);
  }
  return buf;
}

// The tag of each block of `buf`, nullopt for a block whose words differ.
std::vector<std::optional<uint64_t>> DecodeTags(const std::vector<uint8_t>& buf) {
  std::vector<std::optional<uint64_t>> out;
  for (size_t b = 0; b < buf.size() / kLbs; b++) {
    const uint64_t t = DecodeLE64(&buf[b * kLbs]);
    bool same = true;
    for (size_t w = 8; w < kLbs && same; w += 8) same = DecodeLE64(&buf[b * kLbs + w]) == t;
    out.push_back(same ? std::optional<uint64_t>(t) : std::nullopt);
  }
  return out;
}

std::vector<std::optional<uint64_t>> ReadTags(BlockDevice& dev) {
  std::vector<uint8_t> buf(dev.size());
  EXPECT_TRUE(dev.Read(0, buf).ok());
  return DecodeTags(buf);
}

struct Model {
  std::vector<uint64_t> durable = std::vector<uint64_t>(kBlocks, 0);
  std::vector<uint64_t> latest = std::vector<uint64_t>(kBlocks, 0);
  std::vector<std::set<uint64_t>> since = std::vector<std::set<uint64_t>>(kBlocks);
  // The request being made: if it fails at a power cut it may still have landed.
  uint64_t attempt_first = 0;
  std::vector<uint64_t> attempt_tags;

  void Attempt(uint64_t first, std::vector<uint64_t> tags) {
    attempt_first = first;
    attempt_tags = std::move(tags);
  }
  bool MayHoldAttempt(uint64_t block, uint64_t tag) const {
    return block >= attempt_first && block < attempt_first + attempt_tags.size() &&
           attempt_tags[block - attempt_first] == tag;
  }

  void Wrote(uint64_t block, uint64_t tag, bool durable_now) {
    latest[block] = tag;
    if (durable_now) {
      durable[block] = tag;
      since[block].clear();
    } else {
      since[block].insert(tag);
    }
  }
  void Flushed() {
    durable = latest;
    for (auto& s : since) s.clear();
  }
};

// Runs `ops` random requests (writes, FUA writes, write-zeroes, discards, flushes, reads
// checked against the model) on `dev`. Stops early, returning false, when a request fails.
bool RunWorkload(FaultDevice& dev, Model& m, uint64_t seed, int ops, uint64_t* next_tag) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < ops; i++) {
    const uint64_t n = 1 + rng() % 8;
    const uint64_t first = rng() % (kBlocks - n + 1);
    const int kind = static_cast<int>(rng() % 20);
    Status s;
    if (kind < 12) {  // write, FUA one time in four
      const bool fua = kind % 4 == 0;
      std::vector<uint64_t> tags;
      for (uint64_t b = 0; b < n; b++) tags.push_back((*next_tag)++);
      m.Attempt(first, tags);
      s = dev.Write(first * kLbs, TagBlocks(tags), {.fua = fua});
      if (!s.ok()) return false;
      for (uint64_t b = 0; b < n; b++) m.Wrote(first + b, tags[b], fua);
    } else if (kind < 14) {
      const bool fua = kind == 13;
      m.Attempt(first, std::vector<uint64_t>(n, 0));
      s = dev.WriteZeroes(first * kLbs, n * kLbs, {.may_unmap = true, .fua = fua});
      if (!s.ok()) return false;
      for (uint64_t b = 0; b < n; b++) m.Wrote(first + b, 0, fua);
    } else if (kind < 15) {
      m.Attempt(first, std::vector<uint64_t>(n, 0));
      s = dev.Discard(first * kLbs, n * kLbs);  // a MemoryDevice below zeroes on discard
      if (!s.ok()) return false;
      for (uint64_t b = 0; b < n; b++) m.Wrote(first + b, 0, false);
    } else if (kind < 17) {
      m.Attempt(0, {});
      s = dev.Flush();
      if (!s.ok()) return false;
      m.Flushed();
    } else {
      std::vector<uint8_t> buf(n * kLbs);
      s = dev.Read(first * kLbs, buf);
      if (!s.ok()) return false;
      auto tags = DecodeTags(buf);
      for (uint64_t b = 0; b < n; b++) {
        EXPECT_EQ(tags[b], m.latest[first + b]) << "read of block " << first + b;
      }
    }
  }
  return true;
}

// Checks the surviving image against the model for `mode`.
void CheckImage(BlockDevice& image, const Model& m, CrashMode mode) {
  auto tags = ReadTags(image);
  for (uint64_t b = 0; b < kBlocks; b++) {
    ASSERT_TRUE(tags[b].has_value()) << "block " << b << " is torn inside a logical block";
    const uint64_t t = *tags[b];
    switch (mode) {
      case CrashMode::kDropAll:
        EXPECT_EQ(t, m.durable[b]) << "block " << b;
        break;
      case CrashMode::kKeepAll:
        EXPECT_EQ(t, m.latest[b]) << "block " << b;
        break;
      default:
        EXPECT_TRUE(t == m.durable[b] || m.since[b].count(t) == 1)
            << "block " << b << " holds tag " << t << ", neither durable (" << m.durable[b]
            << ") nor written since the last flush";
    }
  }
}

std::string ModeName(const ::testing::TestParamInfo<CrashMode>& info) {
  std::string name = CrashModeName(info.param);
  std::erase(name, '-');
  return name;
}

class FaultDeviceModes : public ::testing::TestWithParam<CrashMode> {};

TEST_P(FaultDeviceModes, RandomWorkloadsSurviveAsTheModeSays) {
  for (uint64_t seed = 1; seed <= 25; seed++) {
    auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs, seed);
    Model m;
    uint64_t tag = 1;
    ASSERT_TRUE(RunWorkload(*dev, m, seed * 7919, 150, &tag));
    auto report = dev->CutPower(GetParam());
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    EXPECT_EQ(report->writes, report->kept + report->dropped + report->torn);
    CheckImage(*dev->durable(), m, GetParam());
    // The reopened device shows exactly the surviving image.
    auto again = dev->Reopen();
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(ReadTags(**again), ReadTags(*dev->durable()));
    if (HasFailure()) {
      ADD_FAILURE() << "seed " << seed;
      return;
    }
  }
}

TEST_P(FaultDeviceModes, FlushedDataAlwaysSurvives) {
  for (uint64_t seed = 1; seed <= 20; seed++) {
    auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs, seed);
    std::vector<uint64_t> tags(kBlocks);
    for (uint64_t b = 0; b < kBlocks; b++) tags[b] = 1000 + b;
    ASSERT_TRUE(dev->Write(0, TagBlocks(tags)).ok());
    ASSERT_TRUE(dev->Flush().ok());
    // Unflushed traffic to other blocks only.
    std::vector<uint64_t> other(kBlocks / 2, 5);
    ASSERT_TRUE(dev->Write(kBlocks / 2 * kLbs, TagBlocks(other)).ok());
    ASSERT_TRUE(dev->WriteZeroes(kBlocks / 2 * kLbs, 8 * kLbs).ok());
    ASSERT_TRUE(dev->CutPower(GetParam()).ok());
    auto image = ReadTags(*dev->durable());
    for (uint64_t b = 0; b < kBlocks / 2; b++) ASSERT_EQ(image[b], tags[b]) << b;
  }
}

INSTANTIATE_TEST_SUITE_P(AllModes, FaultDeviceModes,
                         ::testing::Values(CrashMode::kDropAll, CrashMode::kKeepAll,
                                           CrashMode::kKeepSubset, CrashMode::kTear),
                         ModeName);

TEST(FaultDeviceTest, UnflushedWritesAreCachedUntilFlush) {
  auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs);
  ASSERT_TRUE(dev->Write(kLbs, TagBlocks({7, 8})).ok());
  EXPECT_EQ(ReadTags(*dev)[1], 7u);
  EXPECT_EQ(ReadTags(*dev->durable())[1], 0u) << "the durable image must not see the cache";
  EXPECT_EQ(dev->unflushed_writes(), 1u);
  EXPECT_EQ(dev->unflushed_bytes(), 2u * kLbs);
  ASSERT_TRUE(dev->Flush().ok());
  EXPECT_EQ(dev->unflushed_writes(), 0u);
  auto image = ReadTags(*dev->durable());
  EXPECT_EQ(image[1], 7u);
  EXPECT_EQ(image[2], 8u);
}

TEST(FaultDeviceTest, DropAllLosesUnflushedAndKeepAllKeepsThem) {
  for (CrashMode mode : {CrashMode::kDropAll, CrashMode::kKeepAll}) {
    auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs);
    ASSERT_TRUE(dev->Write(0, TagBlocks({1, 2})).ok());
    ASSERT_TRUE(dev->Flush().ok());
    ASSERT_TRUE(dev->Write(0, TagBlocks({3})).ok());
    ASSERT_TRUE(dev->WriteZeroes(kLbs, kLbs).ok());
    ASSERT_TRUE(dev->Write(4 * kLbs, TagBlocks({9})).ok());
    auto report = dev->CutPower(mode);
    ASSERT_TRUE(report.ok());
    EXPECT_EQ(report->writes, 3u);
    auto image = ReadTags(*dev->durable());
    if (mode == CrashMode::kDropAll) {
      EXPECT_EQ(report->dropped, 3u);
      EXPECT_EQ(image[0], 1u);
      EXPECT_EQ(image[1], 2u);
      EXPECT_EQ(image[4], 0u);
    } else {
      EXPECT_EQ(report->kept, 3u);
      EXPECT_EQ(image[0], 3u);
      EXPECT_EQ(image[1], 0u);
      EXPECT_EQ(image[4], 9u);
    }
  }
}

TEST(FaultDeviceTest, TearsOnlyAtLogicalBlockGranularity) {
  constexpr uint64_t kN = 64;
  std::vector<uint64_t> tags(kN);
  for (uint64_t b = 0; b < kN; b++) tags[b] = 100 + b;
  int torn = 0, prefixes = 0, holes_inside = 0;
  for (uint64_t seed = 0; seed < 200; seed++) {
    auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs, seed);
    ASSERT_TRUE(dev->Write(0, TagBlocks(tags)).ok());
    auto report = dev->CutPower(CrashMode::kTear);
    ASSERT_TRUE(report.ok());
    auto image = ReadTags(*dev->durable());
    uint64_t landed = 0;
    bool prefix = true;
    for (uint64_t b = 0; b < kN; b++) {
      ASSERT_TRUE(image[b].has_value());
      ASSERT_TRUE(*image[b] == 0 || *image[b] == tags[b]) << "block " << b;
      if (*image[b] != 0) {
        landed++;
        if (b > 0 && *image[b - 1] == 0) prefix = false;
      }
    }
    EXPECT_EQ(report->torn == 1, landed > 0 && landed < kN) << "seed " << seed;
    if (landed > 0 && landed < kN) {
      torn++;
      (prefix ? prefixes : holes_inside)++;
    }
  }
  // Half the writes tear, split between prefixes and arbitrary subsets.
  EXPECT_GT(torn, 60);
  EXPECT_GT(prefixes, 20);
  EXPECT_GT(holes_inside, 20);
}

TEST(FaultDeviceTest, KeepSubsetShowsReordering) {
  int later_only = 0, earlier_only = 0, both = 0, neither = 0;
  for (uint64_t seed = 0; seed < 64; seed++) {
    auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs, seed);
    ASSERT_TRUE(dev->Write(0, TagBlocks({1, 1})).ok());
    ASSERT_TRUE(dev->Write(10 * kLbs, TagBlocks({2})).ok());
    ASSERT_TRUE(dev->CutPower(CrashMode::kKeepSubset).ok());
    auto image = ReadTags(*dev->durable());
    ASSERT_EQ(image[0], image[1]) << "a write survives whole in kKeepSubset";
    const bool a = image[0] == 1u, b = image[10] == 2u;
    (a && b ? both : a ? earlier_only : b ? later_only : neither)++;
  }
  EXPECT_GT(later_only, 0) << "the later write must sometimes survive alone";
  EXPECT_GT(earlier_only, 0);
  EXPECT_GT(both, 0);
  EXPECT_GT(neither, 0);
}

TEST(FaultDeviceTest, FuaWritesAreDurableAndNotOverwrittenByOlderCachedWrites) {
  for (CrashMode mode :
       {CrashMode::kDropAll, CrashMode::kKeepSubset, CrashMode::kTear, CrashMode::kKeepAll}) {
    for (uint64_t seed = 0; seed < 32; seed++) {
      auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs, seed);
      ASSERT_TRUE(dev->Write(0, TagBlocks({1, 1, 1})).ok());              // cached
      ASSERT_TRUE(dev->Write(kLbs, TagBlocks({2}), {.fua = true}).ok());  // durable, on top
      EXPECT_EQ(ReadTags(*dev->durable())[1], 2u) << "FUA is durable when it returns";
      ASSERT_TRUE(dev->WriteZeroes(5 * kLbs, kLbs, {.may_unmap = true, .fua = true}).ok());
      ASSERT_TRUE(dev->Write(20 * kLbs, TagBlocks({3}), {.fua = true}).ok());  // no overlap
      ASSERT_TRUE(dev->Write(20 * kLbs, TagBlocks({4})).ok());                 // cached on top
      ASSERT_TRUE(dev->CutPower(mode).ok());
      auto image = ReadTags(*dev->durable());
      EXPECT_EQ(image[1], 2u) << "an older cached write landed over a FUA write, seed " << seed;
      EXPECT_EQ(image[5], 0u);
      EXPECT_TRUE(image[20] == 3u || image[20] == 4u);
      if (mode == CrashMode::kDropAll) {
        EXPECT_EQ(image[20], 3u);
      }
      if (mode == CrashMode::kKeepAll) {
        EXPECT_EQ(image[20], 4u);
      }
      EXPECT_TRUE(image[0] == 0u || image[0] == 1u);
    }
  }
}

TEST(FaultDeviceTest, DiscardAndWriteZeroesAreCachedLikeWrites) {
  auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs);
  ASSERT_TRUE(dev->Write(0, TagBlocks({1, 2, 3, 4})).ok());
  ASSERT_TRUE(dev->Flush().ok());
  ASSERT_TRUE(dev->WriteZeroes(0, kLbs, {.may_unmap = false}).ok());
  ASSERT_TRUE(dev->Discard(2 * kLbs, kLbs).ok());
  auto view = ReadTags(*dev);
  EXPECT_EQ(view[0], 0u);
  EXPECT_EQ(view[1], 2u);
  EXPECT_EQ(view[2], 0u);
  EXPECT_EQ(ReadTags(*dev->durable())[0], 1u);
  EXPECT_EQ(dev->unflushed_writes(), 2u);
  ASSERT_TRUE(dev->CutPower(CrashMode::kDropAll).ok());
  auto image = ReadTags(*dev->durable());
  EXPECT_EQ(image[0], 1u);
  EXPECT_EQ(image[2], 3u);
}

TEST(FaultDeviceTest, NoPowerMeansEioUntilReopenOrRecover) {
  auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs);
  ASSERT_TRUE(dev->Write(0, TagBlocks({1})).ok());
  EXPECT_EQ(dev->Reopen().status().code(), EBUSY);
  EXPECT_EQ(dev->Recover().code(), EBUSY);
  ASSERT_TRUE(dev->CutPower(CrashMode::kKeepAll).ok());
  EXPECT_FALSE(dev->powered());
  std::vector<uint8_t> buf(kLbs);
  EXPECT_EQ(dev->Read(0, buf).code(), EIO);
  EXPECT_EQ(dev->Write(0, buf).code(), EIO);
  EXPECT_EQ(dev->Write(0, buf, {.fua = true}).code(), EIO);
  EXPECT_EQ(dev->Flush().code(), EIO);
  EXPECT_EQ(dev->Discard(0, kLbs).code(), EIO);
  EXPECT_EQ(dev->WriteZeroes(0, kLbs).code(), EIO);
  EXPECT_EQ(dev->QueryAllocation(0, kLbs).status().code(), EIO);
  EXPECT_EQ(ReadTags(*dev->durable())[0], 1u) << "failed requests must not reach the image";

  auto fresh = dev->Reopen();
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE((*fresh)->powered());
  EXPECT_EQ(ReadTags(**fresh)[0], 1u);
  ASSERT_TRUE((*fresh)->Write(kLbs, TagBlocks({5})).ok());
  EXPECT_EQ(dev->Write(0, buf).code(), EIO) << "the crashed instance stays dead";

  ASSERT_TRUE(dev->Recover().ok());
  EXPECT_TRUE(dev->Read(0, buf).ok());
}

TEST(FaultDeviceTest, CutPowerAfterVisitsEveryCrashPoint) {
  // Reference run: how many mutating requests does the workload make?
  Model ref_model;
  uint64_t tag = 1;
  auto ref = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs, 3);
  ASSERT_TRUE(RunWorkload(*ref, ref_model, 99, 60, &tag));
  const auto c = ref->counters();
  const uint64_t mutating =
      c[OpType::kWrite] + c[OpType::kWriteZeroes] + c[OpType::kDiscard] + c[OpType::kFlush];
  ASSERT_GT(mutating, 20u);
  for (CrashMode mode : {CrashMode::kDropAll, CrashMode::kTear}) {
    for (uint64_t n = 0; n <= mutating; n++) {
      auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs, n);
      dev->CutPowerAfter(n, mode);
      Model m;
      uint64_t t = 1;
      const bool completed = RunWorkload(*dev, m, 99, 60, &t);
      EXPECT_EQ(completed, n == mutating) << "n=" << n;
      const auto cc = dev->counters();
      EXPECT_EQ(cc.power_cuts, completed ? 0u : 1u);
      if (completed) {
        ASSERT_TRUE(dev->CutPower(mode).ok());
      }
      // The interrupted request (m.attempt_*) may have landed too, in part or whole.
      auto image = ReadTags(*dev->durable());
      for (uint64_t b = 0; b < kBlocks; b++) {
        ASSERT_TRUE(image[b].has_value());
        const uint64_t v = *image[b];
        const bool known = v == m.durable[b] || m.since[b].count(v) == 1;
        const bool in_flight = !completed && m.MayHoldAttempt(b, v);
        if (mode == CrashMode::kDropAll && !in_flight) {
          EXPECT_EQ(v, m.durable[b]) << "n=" << n << " block " << b;
        }
        EXPECT_TRUE(known || in_flight) << "n=" << n << " block " << b << " tag " << v;
      }
      if (HasFailure()) return;
    }
  }
}

TEST(FaultDeviceTest, SameSeedSameImageDifferentSeedsDiffer) {
  auto run = [](uint64_t seed) {
    auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs, seed);
    std::mt19937_64 rng(4242);  // the same workload every time
    uint64_t tag = 1;
    for (int i = 0; i < 40; i++) {
      const uint64_t n = 1 + rng() % 8, first = rng() % (kBlocks - n + 1);
      std::vector<uint64_t> tags;
      for (uint64_t b = 0; b < n; b++) tags.push_back(tag++);
      EXPECT_TRUE(dev->Write(first * kLbs, TagBlocks(tags)).ok());
    }
    auto report = dev->CutPower(CrashMode::kTear);
    EXPECT_TRUE(report.ok());
    return std::make_pair(ReadTags(*dev->durable()),
                          std::vector<uint64_t>{report->kept, report->dropped, report->torn});
  };
  for (uint64_t seed : {1u, 2u, 77u}) EXPECT_EQ(run(seed), run(seed)) << "seed " << seed;
  std::set<std::vector<std::optional<uint64_t>>> images;
  for (uint64_t seed = 0; seed < 8; seed++) images.insert(run(seed).first);
  EXPECT_EQ(images.size(), 8u);
}

TEST(FaultDeviceTest, VectoredWritesCrashExactlyLikeTheSameWrites) {
  // The same workload twice on equally seeded devices, once with Write() and once with
  // WriteV() of the same bytes in pieces (some straddling blocks): every power cut must
  // leave the same image, and the counters and armed cuts must see one write per request.
  auto run = [](bool vectored, CrashMode mode, uint64_t cut_after) {
    auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs, 9);
    if (cut_after != UINT64_MAX) dev->CutPowerAfter(cut_after, mode);
    std::mt19937_64 rng(77), cuts(78);  // the workload; where the pieces are cut
    uint64_t tag = 1;
    for (int i = 0; i < 30; i++) {
      const uint64_t n = 1 + rng() % 8, first = rng() % (kBlocks - n + 1);
      std::vector<uint64_t> tags;
      for (uint64_t b = 0; b < n; b++) tags.push_back(tag++);
      const auto data = TagBlocks(tags);
      const WriteOptions opts{.fua = i % 11 == 5};
      if (vectored) {
        std::vector<std::span<const uint8_t>> pieces;
        for (size_t at = 0; at < data.size();) {
          const size_t len = std::min<size_t>(data.size() - at, 1 + cuts() % (2 * kLbs));
          pieces.emplace_back(data.data() + at, len);
          at += len;
        }
        dev->WriteV(first * kLbs, pieces, opts).IgnoreError();
      } else {
        dev->Write(first * kLbs, data, opts).IgnoreError();
      }
      if (i % 10 == 9) dev->Flush().IgnoreError();
    }
    const auto c = dev->counters();
    if (dev->powered()) {
      EXPECT_TRUE(dev->CutPower(mode).ok());
    }
    return std::make_tuple(ReadTags(*dev->durable()), c[OpType::kWrite], c.power_cuts);
  };
  for (CrashMode mode : kAllCrashModes) {
    for (uint64_t cut : {UINT64_MAX, uint64_t{0}, uint64_t{7}, uint64_t{20}}) {
      EXPECT_EQ(run(false, mode, cut), run(true, mode, cut))
          << CrashModeName(mode) << " cut after " << cut;
    }
  }
}

TEST(FaultDeviceTest, ForkCrashesOneStateManyWays) {
  auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs, 1);
  Model m;
  uint64_t tag = 1;
  ASSERT_TRUE(RunWorkload(*dev, m, 31337, 120, &tag));
  ASSERT_GT(dev->unflushed_writes(), 0u);
  const auto before_image = ReadTags(*dev->durable());
  const auto before_view = ReadTags(*dev);
  for (CrashMode mode : kAllCrashModes) {
    for (uint64_t seed = 0; seed < 5; seed++) {
      auto fork = dev->Fork(seed);
      ASSERT_TRUE(fork.ok()) << fork.status().ToString();
      EXPECT_EQ(ReadTags(**fork), before_view) << "a fork sees the same cached state";
      EXPECT_EQ((*fork)->unflushed_writes(), dev->unflushed_writes());
      ASSERT_TRUE((*fork)->CutPower(mode).ok());
      CheckImage(*(*fork)->durable(), m, mode);
    }
  }
  // The original is untouched by its forks' power cuts.
  EXPECT_TRUE(dev->powered());
  EXPECT_EQ(ReadTags(*dev->durable()), before_image);
  EXPECT_EQ(ReadTags(*dev), before_view);
  // Forks of the same state with the same seed crash the same way.
  auto a = dev->Fork(7), b = dev->Fork(7);
  ASSERT_TRUE((*a)->CutPower(CrashMode::kTear).ok());
  ASSERT_TRUE((*b)->CutPower(CrashMode::kTear).ok());
  EXPECT_EQ(ReadTags(*(*a)->durable()), ReadTags(*(*b)->durable()));
  // Only a MemoryDevice below can be copied.
  auto over_fault = FaultDevice::Create(dev);
  EXPECT_EQ(over_fault->Fork(1).status().code(), EOPNOTSUPP);
}

TEST(FaultDeviceTest, FlipBitsCorruptsExactlyTheChosenBitsOfTheDurableImage) {
  auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs, 5);
  std::vector<uint64_t> tags(kBlocks, 0x5555555555555555ULL);
  ASSERT_TRUE(dev->Write(0, TagBlocks(tags)).ok());
  ASSERT_TRUE(dev->Flush().ok());
  const uint64_t off = 1000, len = 300;  // byte granularity, straddling blocks
  auto bits = dev->FlipBits(off, len, 5);
  ASSERT_TRUE(bits.ok()) << bits.status().ToString();
  ASSERT_EQ(bits->size(), 5u);
  std::vector<uint8_t> before = TagBlocks(tags), after(kBlocks * kLbs);
  ASSERT_TRUE(dev->Read(0, after).ok());
  std::set<uint64_t> flipped(bits->begin(), bits->end());
  EXPECT_EQ(flipped.size(), 5u);
  for (uint64_t bit = 0; bit < after.size() * 8; bit++) {
    const bool differs = ((before[bit / 8] ^ after[bit / 8]) >> (bit % 8)) & 1;
    EXPECT_EQ(differs, flipped.count(bit) == 1) << "bit " << bit;
    if (differs) {
      EXPECT_GE(bit, off * 8);
      EXPECT_LT(bit, (off + len) * 8);
    }
  }
  EXPECT_EQ(dev->FlipBits(0, 1, 9).status().code(), EINVAL);
  EXPECT_EQ(dev->FlipBits(kBlocks * kLbs - 1, 2, 1).status().code(), ENOSPC);
}

TEST(FaultDeviceTest, FailRulesFailMatchingRequestsWithoutEffect) {
  auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs);
  const int id = dev->FailOps(OpBit(OpType::kWrite), /*after=*/2);
  EXPECT_TRUE(dev->Write(0, TagBlocks({1})).ok());
  EXPECT_TRUE(dev->Write(kLbs, TagBlocks({2})).ok());
  EXPECT_EQ(dev->Write(2 * kLbs, TagBlocks({3})).code(), EIO);
  EXPECT_EQ(dev->Write(3 * kLbs, TagBlocks({4}), {.fua = true}).code(), EIO);
  EXPECT_TRUE(dev->Flush().ok()) << "flush is not in the mask";
  auto image = ReadTags(*dev->durable());
  EXPECT_EQ(image[1], 2u);
  EXPECT_EQ(image[2], 0u);
  EXPECT_EQ(image[3], 0u);
  dev->RemoveFailRule(id);
  EXPECT_TRUE(dev->Write(2 * kLbs, TagBlocks({3})).ok());

  // A bad sector: reads of block 7 only, with a chosen errno, twice.
  FaultRule bad;
  bad.ops = OpBit(OpType::kRead);
  bad.offset = 7 * kLbs;
  bad.length = kLbs;
  bad.error = EBADMSG;
  bad.max_failures = 2;
  dev->AddFailRule(bad);
  std::vector<uint8_t> buf(kLbs);
  EXPECT_TRUE(dev->Read(6 * kLbs, buf).ok());
  EXPECT_TRUE(dev->Read(8 * kLbs, buf).ok());
  std::vector<uint8_t> big(16 * kLbs);
  EXPECT_EQ(dev->Read(0, big).code(), EBADMSG);
  EXPECT_EQ(dev->Read(7 * kLbs, buf).code(), EBADMSG);
  EXPECT_TRUE(dev->Read(7 * kLbs, buf).ok()) << "max_failures reached";
  dev->ClearFailRules();

  dev->FailAfter(3);
  EXPECT_TRUE(dev->Read(0, buf).ok());
  EXPECT_TRUE(dev->Flush().ok());
  EXPECT_TRUE(dev->QueryAllocation(0, kLbs).ok());
  EXPECT_EQ(dev->Read(0, buf).code(), EIO);
  EXPECT_EQ(dev->Flush().code(), EIO);
  const auto c = dev->counters();
  EXPECT_GE(c.failed[static_cast<size_t>(OpType::kRead)], 3u);
  EXPECT_EQ(c.failed[static_cast<size_t>(OpType::kFlush)], 1u);
}

TEST(FaultDeviceTest, ProbabilisticFailuresAreSeededAndPartial) {
  auto run = [](uint64_t seed) {
    auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs, seed);
    dev->FailOps(OpBit(OpType::kRead), 0, 0.3);
    std::vector<uint8_t> buf(kLbs);
    std::vector<bool> failed;
    for (int i = 0; i < 200; i++) failed.push_back(!dev->Read(0, buf).ok());
    return failed;
  };
  auto a = run(9);
  EXPECT_EQ(a, run(9));
  const auto n = std::count(a.begin(), a.end(), true);
  EXPECT_GT(n, 30);
  EXPECT_LT(n, 100);
}

TEST(FaultDeviceTest, CountersCountRequestsByType) {
  auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs);
  std::vector<uint8_t> buf(kLbs);
  ASSERT_TRUE(dev->Write(0, buf).ok());
  ASSERT_TRUE(dev->Write(0, buf).ok());
  ASSERT_TRUE(dev->Read(0, buf).ok());
  ASSERT_TRUE(dev->Flush().ok());
  ASSERT_TRUE(dev->Discard(0, kLbs).ok());
  ASSERT_TRUE(dev->WriteZeroes(0, kLbs).ok());
  EXPECT_EQ(dev->Read(1, buf).code(), EINVAL);  // rejected at the boundary, never counted
  auto c = dev->counters();
  EXPECT_EQ(c[OpType::kWrite], 2u);
  EXPECT_EQ(c[OpType::kRead], 1u);
  EXPECT_EQ(c[OpType::kFlush], 1u);
  EXPECT_EQ(c[OpType::kDiscard], 1u);
  EXPECT_EQ(c[OpType::kWriteZeroes], 1u);
  dev->ResetCounters();
  EXPECT_EQ(dev->counters()[OpType::kWrite], 0u);
}

TEST(FaultDeviceTest, AllocationQuerySeesTheCache) {
  auto dev = FaultDevice::CreateInMemory(1 << 20, kLbs);
  const uint64_t chunk = MemoryDevice::kChunkSize;
  ASSERT_TRUE(dev->Write(chunk, TagBlocks({1})).ok());  // cached write into a hole
  auto q = dev->QueryAllocation(0, 2 * chunk);
  ASSERT_TRUE(q.ok());
  std::vector<AllocationExtent> want = {
      {0, chunk, false}, {chunk, kLbs, true}, {chunk + kLbs, chunk - kLbs, false}};
  EXPECT_EQ(*q, want);
  std::vector<uint64_t> tags(chunk / kLbs, 9);
  ASSERT_TRUE(dev->Write(0, TagBlocks(tags)).ok());
  ASSERT_TRUE(dev->Flush().ok());
  ASSERT_TRUE(dev->WriteZeroes(kLbs, kLbs).ok());  // cached zeroes over durable data
  q = dev->QueryAllocation(0, 4 * kLbs);
  ASSERT_TRUE(q.ok());
  want = {{0, kLbs, true}, {kLbs, kLbs, false}, {2 * kLbs, 2 * kLbs, true}};
  EXPECT_EQ(*q, want);
}

TEST(FaultDeviceTest, FailedFlushKeepsTheCacheAndCanBeRetried) {
  // A fault device below a fault device: the inner one fails the outer one's flush.
  auto inner = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs);
  auto outer = FaultDevice::Create(inner);
  ASSERT_TRUE(outer->Write(0, TagBlocks({1, 2, 3})).ok());
  const int id = inner->FailOps(OpBit(OpType::kFlush));
  EXPECT_EQ(outer->Flush().code(), EIO);
  EXPECT_EQ(outer->unflushed_writes(), 1u);
  inner->RemoveFailRule(id);
  ASSERT_TRUE(outer->Flush().ok());
  EXPECT_EQ(outer->unflushed_writes(), 0u);
  ASSERT_TRUE(inner->CutPower(CrashMode::kDropAll).ok());
  EXPECT_EQ(ReadTags(*inner->durable())[2], 3u);
}

TEST(FaultDeviceTest, ConcurrentWritersThenFlushAreAllDurable) {
  auto dev = FaultDevice::CreateInMemory(kBlocks * kLbs, kLbs);
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 8; t++) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < kBlocks / 8; i++) {
        const uint64_t b = t * (kBlocks / 8) + i;
        EXPECT_TRUE(dev->Write(b * kLbs, TagBlocks({b + 1})).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(dev->Flush().ok());
  ASSERT_TRUE(dev->CutPower(CrashMode::kDropAll).ok());
  auto image = ReadTags(*dev->durable());
  for (uint64_t b = 0; b < kBlocks; b++) EXPECT_EQ(image[b], b + 1);
}

}  // namespace
}  // namespace volstack::bdev

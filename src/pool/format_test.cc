// Encoders and decoders of every on-disk structure: round trips, and garbage, truncation
// and single-bit damage -> Corruption (never a crash, never a wrong value accepted).
#include <gtest/gtest.h>

#include <random>

#include "pool/blkptr_format.h"
#include "pool/label_format.h"
#include "pool/mos_format.h"
#include "pool/range_set.h"
#include "util/coding.h"

namespace volstack::pool {
namespace {

BlockPtr SampleBp(uint64_t seed) {
  std::mt19937_64 rng(seed);
  BlockPtr bp;
  bp.dva[0] = {static_cast<uint32_t>(rng() % 4), 32, (rng() % (1ull << 40)) * 4096 + (1 << 20)};
  bp.lsize = bp.psize = 16384;
  bp.cksum = rng() % 2 ? ChecksumType::kSha256 : ChecksumType::kXxh3_128;
  bp.type = BlockType::kVolData;
  bp.fill = 1;
  bp.birth = 1 + rng() % 1000;
  bp.checksum = ComputeChecksum(bp.cksum, std::vector<uint8_t>(64, static_cast<uint8_t>(seed)));
  return bp;
}

TEST(FormatTest, BlkptrRoundTripAndHole) {
  uint8_t buf[kBlkptrSize];
  for (uint64_t s = 0; s < 50; s++) {
    BlockPtr bp = SampleBp(s);
    EncodeBlockPtr(bp, buf);
    auto back = DecodeBlockPtr(std::span<const uint8_t>(buf, kBlkptrSize));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, bp);
  }
  EncodeBlockPtr(BlockPtr{}, buf);
  for (uint8_t b : buf) EXPECT_EQ(b, 0);
  EXPECT_TRUE(DecodeBlockPtr(std::span<const uint8_t>(buf, kBlkptrSize))->IsHole());
  EXPECT_TRUE(DecodeBlockPtr(std::span<const uint8_t>(buf, 100)).status().IsCorruption());
}

TEST(FormatTest, BlkptrRejectsInconsistentFields) {
  uint8_t buf[kBlkptrSize];
  auto mutate = [&](size_t off, uint8_t v) {
    EncodeBlockPtr(SampleBp(1), buf);
    buf[off] = v;
    return DecodeBlockPtr(std::span<const uint8_t>(buf, kBlkptrSize)).status();
  };
  EXPECT_TRUE(mutate(56, 9).IsCorruption());   // compression
  EXPECT_TRUE(mutate(57, 0).IsCorruption());   // checksum type
  EXPECT_TRUE(mutate(58, 77).IsCorruption());  // block type
  EXPECT_TRUE(mutate(60, 1).IsCorruption());   // flags
  EXPECT_TRUE(mutate(4, 0).IsCorruption());    // dva[0] asize 0 ...
  // Random garbage never crashes and is mostly rejected.
  std::mt19937_64 rng(5);
  int accepted = 0;
  for (int i = 0; i < 20000; i++) {
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    accepted += DecodeBlockPtr(std::span<const uint8_t>(buf, kBlkptrSize)).ok();
  }
  EXPECT_EQ(accepted, 0);
}

TEST(FormatTest, LabelConfigRoundTripBoundToOffset) {
  LabelConfig c;
  c.name = "trunk";
  c.pool_guid = 42;
  c.vdev_guid = 7;
  c.vdev_id = 1;
  c.vdev_guids = {5, 7};
  c.ashift = 12;
  c.txg = 99;
  auto buf = EncodeLabelConfig(c, 16384);
  ASSERT_EQ(buf.size(), kLabelConfigSize);
  auto back = DecodeLabelConfig(buf, 16384);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, c);
  // The same bytes at another offset (a replayed copy) do not verify.
  EXPECT_TRUE(DecodeLabelConfig(buf, 16384 + kLabelSize).status().IsCorruption());
  for (size_t pos : {size_t{0}, size_t{30}, size_t{5000}, kLabelConfigSize - 1}) {
    auto bad = buf;
    bad[pos] ^= 0x10;
    EXPECT_TRUE(DecodeLabelConfig(bad, 16384).status().IsCorruption()) << pos;
  }
  EXPECT_TRUE(
      DecodeLabelConfig(std::span<const uint8_t>(buf.data(), 100), 16384).status().IsCorruption());
  // Valid checksum over inconsistent content is still rejected.
  c.vdev_id = 5;
  EXPECT_TRUE(DecodeLabelConfig(EncodeLabelConfig(c, 0), 0).status().IsCorruption());
}

TEST(FormatTest, UberblockRoundTripAndDamage) {
  Uberblock ub;
  ub.txg = 1234;
  ub.guid_sum = 99;
  ub.timestamp = 1700000000;
  ub.pool_guid = 42;
  ub.vdev_count = 2;
  ub.rootbp = SampleBp(3);
  ub.rootbp.type = BlockType::kMos;
  auto buf = EncodeUberblock(ub, 131072);
  auto back = DecodeUberblock(buf, 131072);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, ub);
  EXPECT_TRUE(DecodeUberblock(buf, 135168).status().IsCorruption());
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200; i++) {
    auto bad = buf;
    bad[rng() % bad.size()] ^= static_cast<uint8_t>(1 << (rng() % 8));
    EXPECT_FALSE(DecodeUberblock(bad, 131072).ok());
  }
  std::vector<uint8_t> zero(kUberSlotSize, 0);
  EXPECT_TRUE(DecodeUberblock(zero, 0).status().IsCorruption());
}

TEST(FormatTest, LabelOffsetsAtBothEnds) {
  const uint64_t size = (100ull << 20) + 4096;  // not a multiple of 256K
  const uint64_t s = size / kLabelSize * kLabelSize;
  EXPECT_EQ(LabelOffset(size, 0), 0u);
  EXPECT_EQ(LabelOffset(size, 1), kLabelSize);
  EXPECT_EQ(LabelOffset(size, 2), s - 2 * kLabelSize);
  EXPECT_EQ(LabelOffset(size, 3), s - kLabelSize);
  EXPECT_EQ(AllocEnd(size), s - 2 * kLabelSize);
}

TEST(FormatTest, MosRoundTripAndGarbage) {
  MosPhys mos;
  mos.txg = 7;
  mos.props = {{"comment", "hi"}};
  mos.next_id = 3;
  DatasetPhys d;
  d.id = 1;
  d.name = "trunk/funk";
  d.guid = 9;
  d.create_txg = 2;
  d.volsize = 1 << 30;
  d.volblocksize = 16384;
  d.levels = 3;
  d.used = 12345;
  d.lused = d.used;  // one number until compression (v5) stores "lused" apart
  d.root = SampleBp(4);
  d.root.type = BlockType::kVolIndirect;
  d.root.level = 3;
  d.props = {{"sync", "always"}};
  mos.datasets.push_back(d);
  BlockPtr sm = SampleBp(5);
  sm.type = BlockType::kSpaceMap;
  mos.space_map = {sm, sm};
  auto buf = EncodeMos(mos);
  auto back = DecodeMos(buf);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, mos);
  for (size_t cut = 0; cut < buf.size(); cut += 97) {
    EXPECT_FALSE(DecodeMos(std::span<const uint8_t>(buf.data(), cut)).ok()) << cut;
  }
  std::mt19937_64 rng(2);
  for (int i = 0; i < 500; i++) {
    auto bad = buf;
    for (int k = 0; k < 4; k++) bad[rng() % bad.size()] = static_cast<uint8_t>(rng());
    (void)DecodeMos(bad).ok();  // must not crash; checksums catch damage on disk
  }
  // Root pointer of the wrong level is rejected.
  mos.datasets[0].root.level = 2;
  EXPECT_TRUE(DecodeMos(EncodeMos(mos)).status().IsCorruption());
}

TEST(FormatTest, SpaceMapRoundTripAndGarbage) {
  std::vector<SpaceMapEntry> e = {{false, 0, 1 << 20, 4096},
                                  {true, 3, (1ull << 40) + 8192, (1ull << 47) - 1}};
  auto buf = EncodeSpaceMapBlock(e);
  auto back = DecodeSpaceMapBlock(buf);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, e);
  EncodeLE64(buf.data() + 8, 1000);  // count past the block
  EXPECT_TRUE(DecodeSpaceMapBlock(buf).status().IsCorruption());
  EXPECT_TRUE(DecodeSpaceMapBlock(std::span<const uint8_t>(buf.data(), 8)).status().IsCorruption());
}

TEST(RangeSetTest, AddRemoveMergeAndFit) {
  RangeSet s;
  EXPECT_TRUE(s.Add(0, 10));
  EXPECT_TRUE(s.Add(20, 10));
  EXPECT_TRUE(s.Add(10, 10));  // merges into [0, 30)
  EXPECT_EQ(s.extents(), 1u);
  EXPECT_EQ(s.total(), 30u);
  EXPECT_FALSE(s.Add(5, 1));
  EXPECT_FALSE(s.Add(29, 5));
  EXPECT_TRUE(s.Remove(10, 5));
  EXPECT_EQ(s.extents(), 2u);
  EXPECT_FALSE(s.Remove(8, 5));  // partly absent
  EXPECT_TRUE(s.Contains(15, 15));
  EXPECT_FALSE(s.Contains(9, 2));
  EXPECT_EQ(s.FindFit(12, 0, 4), std::optional<uint64_t>(16));  // aligned up from 15
  EXPECT_EQ(s.FindFit(10, 0, 1), std::optional<uint64_t>(0));
  EXPECT_EQ(s.FindFit(10, 5, 1), std::optional<uint64_t>(15));
  EXPECT_EQ(s.FindFit(10, 25, 1), std::optional<uint64_t>(0));  // wraps
  EXPECT_EQ(s.FindFit(16, 0, 1), std::nullopt);
  using Range = std::pair<uint64_t, uint64_t>;
  EXPECT_EQ(s.RangeAt(0), std::optional<Range>(Range(0, 10)));
  EXPECT_EQ(s.RangeAt(9), std::optional<Range>(Range(0, 10)));
  EXPECT_EQ(s.RangeAt(10), std::nullopt);  // the hole [10, 15)
  EXPECT_EQ(s.RangeAt(15), std::optional<Range>(Range(15, 30)));
  EXPECT_EQ(s.RangeAt(30), std::nullopt);
}

// With a run unit: the bytes in whole units and the runs shorter than one follow every
// merge and split.
TEST(RangeSetTest, RunUnitCountsWholeUnitsAndIndexesShortRuns) {
  RangeSet s(16);
  EXPECT_TRUE(s.Add(0, 40));  // [0, 40): two units
  EXPECT_EQ(s.unit_bytes(), 32u);
  EXPECT_EQ(s.FindFitInShortRun(4, 0, 4), std::nullopt);
  EXPECT_TRUE(s.Remove(8, 4));  // [0, 8) [12, 40): one unit and a short run
  EXPECT_EQ(s.unit_bytes(), 16u);
  EXPECT_EQ(s.FindFitInShortRun(4, 0, 4), std::optional<uint64_t>(0));
  EXPECT_EQ(s.FindFitInShortRun(4, 4, 4), std::optional<uint64_t>(0));  // wraps
  EXPECT_EQ(s.FindFitInShortRun(12, 0, 4), std::nullopt);               // longer than any
  EXPECT_TRUE(s.Add(100, 8));                                           // [100, 108)
  EXPECT_EQ(s.FindFitInShortRun(8, 50, 4), std::optional<uint64_t>(100));
  EXPECT_TRUE(s.Add(8, 4));  // merged back: [0, 40)
  EXPECT_EQ(s.unit_bytes(), 32u);
  EXPECT_EQ(s.FindFitInShortRun(4, 0, 4), std::optional<uint64_t>(100));
  EXPECT_TRUE(s.Add(108, 8));  // [100, 116): still short
  EXPECT_TRUE(s.Add(116, 4));  // [100, 120): a unit now
  EXPECT_EQ(s.unit_bytes(), 48u);
  EXPECT_EQ(s.FindFitInShortRun(4, 0, 4), std::nullopt);
  s.Clear();
  EXPECT_EQ(s.unit_bytes(), 0u);
  RangeSet plain;  // no unit: nothing is tracked
  EXPECT_TRUE(plain.Add(0, 8));
  EXPECT_EQ(plain.unit_bytes(), 0u);
  EXPECT_EQ(plain.FindFitInShortRun(4, 0, 4), std::nullopt);
}

}  // namespace
}  // namespace volstack::pool

// The pool fuzz entry (format_fuzz.h) in CI: a few thousand deterministic inputs, random
// bytes for every decoder and mutations of valid encodings, so a decoder that crashes or
// reads out of bounds (under the ASan preset) fails here and not only under libFuzzer.
#include <gtest/gtest.h>

#include <random>

#include "pool/format_fuzz.h"
#include "util/coding.h"

namespace volstack::pool {
namespace {

std::vector<uint8_t> Seed(uint8_t selector, const std::vector<uint8_t>& body) {
  std::vector<uint8_t> s(1 + body.size());
  s[0] = selector;
  std::copy(body.begin(), body.end(), s.begin() + 1);
  return s;
}

BlockPtr SampleBp() {
  BlockPtr bp;
  bp.dva[0] = {0, 32, 1 << 20};
  bp.lsize = bp.psize = 16384;
  bp.cksum = ChecksumType::kXxh3_128;
  bp.type = BlockType::kVolData;
  bp.fill = 1;
  bp.birth = 7;
  bp.checksum = ComputeChecksum(bp.cksum, std::vector<uint8_t>(64, 1));
  return bp;
}

TEST(PoolFuzzSmokeTest, RandomAndMutatedInputs) {
  std::vector<uint8_t> bp(kBlkptrSize);
  EncodeBlockPtr(SampleBp(), bp.data());
  Uberblock ub;
  ub.txg = 9;
  ub.pool_guid = 42;
  ub.vdev_count = 1;
  ub.rootbp = SampleBp();
  ub.rootbp.type = BlockType::kMos;
  LabelConfig c;
  c.name = "trunk";
  c.pool_guid = 42;
  c.vdev_guid = 7;
  c.vdev_guids = {7};
  c.ashift = 12;
  MosPhys mos;
  mos.txg = 9;
  mos.props["compression"] = "lz4";
  mos.space_map = {SampleBp()};
  const SpaceMapEntry entries[] = {{false, 0, 4096, 8192}, {true, 0, 4096, 4096}};
  // A 16 KiB block of text, compressed: 31 = 16 KiB in 512-byte units, less one.
  std::vector<uint8_t> text(16384);
  for (size_t i = 0; i < text.size(); i++) text[i] = "volume pool block\n"[i * 7 % 18 % 17];
  auto compressed = [&](const char* setting) {
    std::vector<uint8_t> out = {31, 0};
    out.resize(2 + text.size());
    const uint32_t n =
        CompressBlock(*ParseCompression(setting), text, 512, std::span(out).subspan(2));
    EXPECT_GT(n, 0u);
    out.resize(2 + n);
    return out;
  };
  // A stamped log block of two records, behind its chain guid and seq.
  std::vector<uint8_t> zil(16 + 2048);
  {
    const std::vector<uint8_t> data(700, 5);
    ZilRecordRef recs[2];
    recs[0] = {ZilRecordType::kWrite, 0, 7, 4096, data.size(), data.data()};
    recs[1] = {ZilRecordType::kZero, 0, 8, 1 << 20, 65536, nullptr};
    EncodeLE64(zil.data(), 0x1234);
    EncodeLE64(zil.data() + 8, 5);
    EncodeZilBlock({0x1234, 5, 99, Dva{0, 8, 2 << 20}}, recs, std::span(zil).subspan(16));
  }
  const std::vector<std::vector<uint8_t>> seeds = {
      Seed(0, bp),
      Seed(1, EncodeUberblock(ub, 0)),
      Seed(2, EncodeLabelConfig(c, 0)),
      Seed(3, EncodeMos(mos)),
      Seed(4, EncodeSpaceMapBlock(entries)),
      Seed(5, compressed("lz4")),
      Seed(6, compressed("zstd")),
      Seed(7, zil),
  };
  // The seeds decode, so their mutations start deep inside each decoder. (The MOS seed is
  // not checked: its format is still changing.)
  ASSERT_TRUE(DecodeBlockPtr(std::span(seeds[0]).subspan(1)).ok());
  ASSERT_TRUE(DecodeUberblock(std::span(seeds[1]).subspan(1), 0).ok());
  ASSERT_TRUE(DecodeLabelConfig(std::span(seeds[2]).subspan(1), 0).ok());
  ASSERT_TRUE(DecodeSpaceMapBlock(std::span(seeds[4]).subspan(1)).ok());
  ASSERT_TRUE(DecodeZilBlock(std::span(seeds[7]).subspan(17), 0x1234, 5).ok());
  for (int s : {5, 6}) {
    std::vector<uint8_t> out(text.size());
    ASSERT_TRUE(DecompressBlock(s == 5 ? Compression::kLz4 : Compression::kZstd,
                                std::span(seeds[s]).subspan(3), out)
                    .ok());
    ASSERT_EQ(out, text);
  }

  std::mt19937_64 rng(20261130);
  int runs = 0;
  for (int i = 0; i < 1000; i++) {
    std::vector<uint8_t> in(1 + rng() % 600);
    for (auto& b : in) b = static_cast<uint8_t>(rng());
    in[0] = static_cast<uint8_t>(i % 8);
    FuzzPoolFormat(in.data(), in.size());
    runs++;
  }
  static const uint64_t kValues[] = {0, 1, 4096, 0xffffffff, uint64_t{1} << 63, ~uint64_t{0}};
  for (const auto& seed : seeds) {
    for (int i = 0; i < 400; i++) {
      std::vector<uint8_t> in = seed;
      const size_t p = 1 + rng() % (in.size() - 1);
      switch (rng() % 3) {
        case 0:
          in[p] ^= static_cast<uint8_t>(1 + rng());
          break;
        case 1:
          if (p + 8 <= in.size()) EncodeLE64(&in[p], kValues[rng() % std::size(kValues)]);
          break;
        default:
          in.resize(p);
      }
      FuzzPoolFormat(in.data(), in.size());
      runs++;
    }
  }
  EXPECT_EQ(runs, 1000 + 8 * 400);
}

}  // namespace
}  // namespace volstack::pool

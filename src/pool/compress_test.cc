// The block codec: round trips for every setting, the store-only-if-it-saves rule, and
// hostile streams (truncated, padded, wrong declared size, garbage, bit flips) ->
// Corruption, never wrong bytes accepted as right.
#include "pool/compress.h"

#include <gtest/gtest.h>
#include <zstd.h>

#include <cstring>
#include <random>
#include <vector>

#include "pool/mos_format.h"
#include "pool/test_util.h"
#include "util/coding.h"

namespace volstack::pool {
namespace {

using testing::Random;
using testing::Text;

CompressionSetting Setting(const std::string& v) {
  auto s = ParseCompression(v);
  EXPECT_TRUE(s.ok()) << v;
  return *s;
}

std::vector<uint8_t> Compress(const std::string& setting, const std::vector<uint8_t>& in,
                              uint32_t unit = 512) {
  std::vector<uint8_t> out(in.size());
  const uint32_t n = CompressBlock(Setting(setting), in, unit, out);
  out.resize(n);
  return out;
}

TEST(CompressTest, ParsesEveryZfsSpelling) {
  EXPECT_EQ(Setting("off").algo, Compression::kNone);
  EXPECT_EQ(Setting("on").algo, Compression::kLz4);
  EXPECT_EQ(Setting("lz4").algo, Compression::kLz4);
  EXPECT_EQ(Setting("zstd"), (CompressionSetting{Compression::kZstd, 3}));
  EXPECT_EQ(Setting("zstd-1"), (CompressionSetting{Compression::kZstd, 1}));
  EXPECT_EQ(Setting("zstd-19"), (CompressionSetting{Compression::kZstd, 19}));
  EXPECT_EQ(Setting("zstd-fast"), (CompressionSetting{Compression::kZstd, -1}));
  for (const char* bad : {"", "ON", "gzip", "zstd-0", "zstd-20", "zstd-01", "zstd-", "zstd-3x",
                          "zstd--1", "lz4 ", "zstd-fast-1"}) {
    auto s = ParseCompression(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), EINVAL) << bad;
  }
}

TEST(CompressTest, RoundTripsEverySetting) {
  for (const char* setting : {"lz4", "zstd", "zstd-1", "zstd-19", "zstd-fast"}) {
    for (size_t lsize : {4096u, 16384u, 131072u}) {
      const auto in = Text(lsize, lsize);
      const auto c = Compress(setting, in);
      ASSERT_GT(c.size(), 0u) << setting;
      EXPECT_LE(c.size(), lsize / 2) << setting;  // text compresses well past the rule
      std::vector<uint8_t> back(lsize, 0xaa);
      ASSERT_TRUE(DecompressBlock(Setting(setting).algo, c, back).ok()) << setting;
      EXPECT_EQ(back, in) << setting;
    }
  }
}

TEST(CompressTest, StoresOnlyWhatSavesAUnitAndAnEighth) {
  EXPECT_EQ(MaxCompressedSize(16384, 4096), 12288u);  // one unit below
  EXPECT_EQ(MaxCompressedSize(16384, 512), 14336u);   // 7/8
  EXPECT_EQ(MaxCompressedSize(4096, 4096), 0u);       // cannot save a unit
  EXPECT_EQ(MaxCompressedSize(8192, 4096), 4096u);
  EXPECT_EQ(Compress("lz4", Random(16384, 1)).size(), 0u);
  EXPECT_EQ(Compress("zstd", Random(16384, 1)).size(), 0u);
  EXPECT_EQ(Compress("off", Text(16384, 1)).size(), 0u);
  EXPECT_EQ(Compress("lz4", Text(4096, 1), 4096).size(), 0u);
  // Half random, half text: ~50% compressible, so stored at 512-byte units, not at 16K ones.
  auto half = Random(8192, 2);
  auto t = Text(8192, 3);
  half.insert(half.end(), t.begin(), t.end());
  const auto c = Compress("lz4", half);
  EXPECT_GT(c.size(), 0u);
  EXPECT_LE(c.size(), MaxCompressedSize(16384, 512));
  EXPECT_EQ(Compress("lz4", half, 16384).size(), 0u);
}

TEST(CompressTest, HostileStreamsAreCorruptionNeverWrongBytes) {
  const auto in = Text(16384, 9);
  for (const char* setting : {"lz4", "zstd"}) {
    const Compression algo = Setting(setting).algo;
    const auto c = Compress(setting, in);
    ASSERT_GT(c.size(), 16u);
    std::vector<uint8_t> out(in.size());
    auto decode = [&](std::span<const uint8_t> s, size_t lsize) {
      std::vector<uint8_t> o(lsize);
      Status st = DecompressBlock(algo, s, o);
      EXPECT_TRUE(st.ok() || st.IsCorruption()) << st.ToString();
      return st;
    };
    // Truncated, or a byte too many.
    for (size_t cut : {size_t{1}, size_t{7}, c.size() / 2, c.size() - 1}) {
      EXPECT_TRUE(decode(std::span(c.data(), cut), in.size()).IsCorruption()) << setting << cut;
    }
    auto longer = c;
    longer.push_back(0);
    EXPECT_TRUE(decode(longer, in.size()).IsCorruption()) << setting;
    // The right stream but the pointer says another lsize.
    EXPECT_TRUE(decode(c, in.size() - 512).IsCorruption()) << setting;
    EXPECT_TRUE(decode(c, in.size() + 512).IsCorruption()) << setting;
    EXPECT_TRUE(decode({}, in.size()).IsCorruption()) << setting;
    // Garbage, and single bit flips: either Corruption or (the flip landed in a literal)
    // some 16 KiB, never a crash or an overrun. The checksum, verified before decoding,
    // is what rejects a flip that still decodes.
    std::mt19937_64 rng(11);
    for (int i = 0; i < 2000; i++) {
      auto g = Random(1 + rng() % 20000, rng());
      decode(g, in.size()).IgnoreError();  // checked inside
      auto flipped = c;
      flipped[rng() % flipped.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
      decode(flipped, in.size()).IgnoreError();
    }
    // The other codec's stream.
    const auto other = Compress(algo == Compression::kLz4 ? "zstd" : "lz4", in);
    EXPECT_TRUE(decode(other, in.size()).IsCorruption()) << setting;
  }
  // A zstd stream of two frames whose contents add up to lsize: one block is one frame.
  auto two = Compress("zstd", in);
  uint8_t empty[64];
  const size_t n = ZSTD_compress(empty, sizeof empty, nullptr, 0, 3);
  ASSERT_FALSE(ZSTD_isError(n));
  two.insert(two.end(), empty, empty + n);
  std::vector<uint8_t> whole(in.size());
  EXPECT_TRUE(DecompressBlock(Compression::kZstd, two, whole).IsCorruption());
  std::vector<uint8_t> out(100);
  EXPECT_TRUE(DecompressBlock(Compression::kNone, Text(99, 1), out).IsCorruption());
  EXPECT_TRUE(DecompressBlock(static_cast<Compression>(7), Text(99, 1), out).IsCorruption());
}

// A part read decodes the block's first bytes exactly and writes nothing past them; a
// stream that ends (or breaks) before them is Corruption.
TEST(CompressTest, Lz4PrefixDecodesExactlyThatFarAndNoFurther) {
  const auto in = Text(16384, 12);
  const auto c = Compress("lz4", in);
  ASSERT_GT(c.size(), 16u);
  for (size_t want :
       {size_t{1}, size_t{4096}, size_t{8192}, size_t{12288}, size_t{16383}, size_t{16384}}) {
    std::vector<uint8_t> out(want + 64, 0xee);
    ASSERT_TRUE(DecompressLz4Prefix(c, std::span(out.data(), want)).ok()) << want;
    EXPECT_EQ(0, std::memcmp(out.data(), in.data(), want)) << want;
    for (size_t i = want; i < out.size(); i++) ASSERT_EQ(out[i], 0xee) << want << " " << i;
  }
  std::vector<uint8_t> out(16384);
  EXPECT_TRUE(DecompressLz4Prefix(std::span(c.data(), c.size() / 2), out).IsCorruption());
  EXPECT_TRUE(DecompressLz4Prefix({}, std::span(out.data(), 10)).IsCorruption());
  std::vector<uint8_t> more(16384 + 512);
  EXPECT_TRUE(DecompressLz4Prefix(c, more).IsCorruption());  // the block holds less
  std::mt19937_64 rng(5);
  for (int i = 0; i < 1000; i++) {
    auto g = Random(1 + rng() % 20000, rng());
    Status st = DecompressLz4Prefix(g, std::span(out.data(), 1 + rng() % out.size()));
    EXPECT_TRUE(st.ok() || st.IsCorruption()) << st.ToString();
  }
}

TEST(CompressTest, BlkptrCarriesCompressionOnlyForCompressedData) {
  BlockPtr bp;
  bp.dva[0] = {0, 8, 1 << 20};
  bp.lsize = 16384;
  bp.psize = 3000;
  bp.comp = Compression::kZstd;
  bp.type = BlockType::kVolData;
  bp.fill = 1;
  bp.birth = 5;
  uint8_t buf[kBlkptrSize];
  EncodeBlockPtr(bp, buf);
  auto back = DecodeBlockPtr(std::span<const uint8_t>(buf, kBlkptrSize));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, bp);
  auto with = [&](auto change) {
    BlockPtr b = bp;
    change(b);
    EncodeBlockPtr(b, buf);
    auto r = DecodeBlockPtr(std::span<const uint8_t>(buf, kBlkptrSize));
    return r.ok() ? Status::Ok() : r.status();
  };
  EXPECT_TRUE(with([](BlockPtr& b) { b.comp = Compression::kLz4; }).ok());
  EXPECT_TRUE(with([](BlockPtr& b) { b.psize = b.lsize; }).IsCorruption());
  EXPECT_TRUE(with([](BlockPtr& b) { b.psize = b.lsize + 512; }).IsCorruption());
  EXPECT_TRUE(with([](BlockPtr& b) { b.comp = Compression::kNone; }).IsCorruption());
  EXPECT_TRUE(with([](BlockPtr& b) { b.comp = static_cast<Compression>(3); }).IsCorruption());
  EXPECT_TRUE(with([](BlockPtr& b) {
                b.type = BlockType::kVolIndirect;
                b.level = 1;
              }).IsCorruption());
  EXPECT_TRUE(with([](BlockPtr& b) { b.dva[0].asize_sectors = 5; }).IsCorruption());  // < psize
}

TEST(CompressTest, MosIsVersion5OnlyOnceCompressedBlocksExist) {
  MosPhys mos;
  mos.txg = 7;
  DatasetPhys d;
  d.id = 1;
  d.name = "trunk/v";
  d.guid = 9;
  d.volsize = 1 << 20;
  d.volblocksize = 16384;
  d.used = 40960;
  d.lused = 40960;
  mos.datasets.push_back(d);
  auto plain = EncodeMos(mos);
  EXPECT_EQ(plain[7], 2);
  EXPECT_EQ(std::string(plain.begin(), plain.end()).find("lused"), std::string::npos);
  mos.compressed = true;
  mos.datasets[0].lused = 163840;  // four 16K blocks in 40K
  auto v5 = EncodeMos(mos);
  EXPECT_EQ(v5[7], 5);
  auto back = DecodeMos(v5);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, mos);
  // The version byte and the directory must agree.
  auto as_v2 = v5;
  as_v2[7] = 2;
  EXPECT_TRUE(DecodeMos(as_v2).status().IsCorruption());
  auto as_v5 = plain;
  as_v5[7] = 5;
  EXPECT_TRUE(DecodeMos(as_v5).status().IsCorruption());
}

}  // namespace
}  // namespace volstack::pool

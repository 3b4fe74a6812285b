#include "util/size.h"

#include <gtest/gtest.h>

namespace volstack {
namespace {

uint64_t Ok(std::string_view text, uint64_t unit = 1) {
  auto r = ParseSize(text, unit);
  EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.status().ToString());
  return r.ok() ? *r : 0;
}

int Err(std::string_view text, uint64_t unit = 1) {
  auto r = ParseSize(text, unit);
  EXPECT_FALSE(r.ok()) << text << " parsed as " << (r.ok() ? *r : 0);
  return r.ok() ? 0 : r.status().code();
}

TEST(ParseSizeTest, PlainNumbersAndSuffixes) {
  EXPECT_EQ(Ok("0"), 0u);
  EXPECT_EQ(Ok("4096"), 4096u);
  EXPECT_EQ(Ok("512b"), 512u);
  EXPECT_EQ(Ok("2s"), 1024u);  // lvm2 sectors
  EXPECT_EQ(Ok("512k"), 512u << 10);
  EXPECT_EQ(Ok("1K"), 1024u);
  EXPECT_EQ(Ok("16M"), 16u << 20);
  EXPECT_EQ(Ok("1G"), 1u << 30);
  EXPECT_EQ(Ok("2t"), 2ULL << 40);
  EXPECT_EQ(Ok("1P"), 1ULL << 50);
  EXPECT_EQ(Ok("1E"), 1ULL << 60);
  EXPECT_EQ(Ok("1KB"), 1024u);
  EXPECT_EQ(Ok("1KiB"), 1024u);
  EXPECT_EQ(Ok("1gib"), 1u << 30);
  EXPECT_EQ(Ok("1Mb"), 1u << 20);
}

TEST(ParseSizeTest, FractionsAreExact) {
  EXPECT_EQ(Ok("1.5G"), 3ULL << 29);
  EXPECT_EQ(Ok("0.5K"), 512u);
  EXPECT_EQ(Ok(".5K"), 512u);
  EXPECT_EQ(Ok("1.25M"), 1310720u);
  EXPECT_EQ(Ok("1.5T"), 3ULL << 39);
  EXPECT_EQ(Ok("1.5s"), 768u);
  EXPECT_EQ(Ok("1.K"), 1024u);
}

TEST(ParseSizeTest, DefaultUnitAppliesWithoutASuffix) {
  EXPECT_EQ(Ok("4", 1 << 20), 4u << 20);  // lvcreate -L 4 = 4 MiB
  EXPECT_EQ(Ok("1.5", 1 << 20), 3u << 19);
  EXPECT_EQ(Ok("4k", 1 << 20), 4096u) << "a suffix overrides the default unit";
}

TEST(ParseSizeTest, BadInputIsEinvalAndNamesTheText) {
  for (const char* bad : {"", "abc", "G", "1X", "1GG", "-1", "+1", " 1", "1 ", "1 G", "1.5.5",
                          "1Gx", "1KiBs", ".", "0x10"}) {
    EXPECT_EQ(Err(bad), EINVAL) << "'" << bad << "'";
  }
  auto r = ParseSize("12Q");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'12Q'"), std::string::npos) << r.status().message();
}

TEST(ParseSizeTest, OverflowIsErange) {
  EXPECT_EQ(Ok("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(Err("18446744073709551616"), ERANGE);
  EXPECT_EQ(Err("99999999999999999999999"), ERANGE);
  EXPECT_EQ(Ok("15E"), 15ULL << 60);
  EXPECT_EQ(Err("16E"), ERANGE);
  EXPECT_EQ(Ok("17179869183G"), 17179869183ULL << 30);
  EXPECT_EQ(Err("17179869184G"), ERANGE);
  EXPECT_EQ(Err("18446744073709551615.9"), ERANGE) << "the fraction pushes it past 2^64";
  EXPECT_LT(Ok("15.99999999999999E"), UINT64_MAX) << "fraction digits past 12 are ignored";
  EXPECT_EQ(Err("17592186044416", 1 << 20), ERANGE) << "2^44 MiB = 2^64 bytes";
  EXPECT_EQ(Err("99999999999999999999k"), ERANGE);
}

TEST(ParseByteCountTest, DecimalDigitsOnlyAndBelowTwoToTheSixtyFour) {
  EXPECT_EQ(ParseByteCount("0"), 0u);
  EXPECT_EQ(ParseByteCount("16777216"), 16777216u);
  EXPECT_EQ(ParseByteCount("18446744073709551615"), UINT64_MAX);
  for (const char* bad : {"", "18446744073709551616", "-1", "+1", " 1", "1 ", "16M", "1.5", "x"}) {
    EXPECT_EQ(ParseByteCount(bad), std::nullopt) << "'" << bad << "'";
  }
}

TEST(FormatSizeShortTest, ThreeSignificantDigits) {
  EXPECT_EQ(FormatSizeShort(0), "0B");
  EXPECT_EQ(FormatSizeShort(1023), "1023B");
  EXPECT_EQ(FormatSizeShort(1024), "1.00K");
  EXPECT_EQ(FormatSizeShort(1536), "1.50K");
  EXPECT_EQ(FormatSizeShort(10 << 10), "10.0K");
  EXPECT_EQ(FormatSizeShort(512 << 10), "512K");
  EXPECT_EQ(FormatSizeShort(7 << 19), "3.50M");
  EXPECT_EQ(FormatSizeShort(1ULL << 30), "1.00G");
  EXPECT_EQ(FormatSizeShort(UINT64_MAX), "16.0E");
}

// Known defect in size.cc (owned elsewhere): a value just under a unit rounds up in the
// printed digits without moving to the next unit ("1024K" instead of "1.00M", "10.00K"
// with four digits). Enable when fixed.
TEST(FormatSizeShortTest, RoundingCarriesIntoTheNextUnit) {
  EXPECT_EQ(FormatSizeShort((1 << 20) - 1), "1.00M");
  EXPECT_EQ(FormatSizeShort(10239), "10.0K");
}

}  // namespace
}  // namespace volstack

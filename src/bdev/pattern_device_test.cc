#include "bdev/pattern_device.h"

#include <gtest/gtest.h>

namespace volstack::bdev {
namespace {

TEST(PatternDeviceTest, EachWordHoldsItsOwnOffsetBigEndian) {
  auto dev = PatternDevice::Create({.size = 1 << 20});
  EXPECT_TRUE(dev->read_only());
  std::vector<uint8_t> buf(1024);
  ASSERT_TRUE(dev->Read(4096, buf).ok());
  // Word at 4096 = 0x1000, big-endian: 00 00 00 00 00 00 10 00.
  const std::vector<uint8_t> first = {0, 0, 0, 0, 0, 0, 0x10, 0x00};
  EXPECT_TRUE(std::equal(first.begin(), first.end(), buf.begin()));
  const std::vector<uint8_t> second = {0, 0, 0, 0, 0, 0, 0x10, 0x08};
  EXPECT_TRUE(std::equal(second.begin(), second.end(), buf.begin() + 8));
  EXPECT_EQ(PatternDevice::CheckPattern(4096, buf), std::nullopt);
  EXPECT_EQ(PatternDevice::CheckPattern(4096 + 512, buf), 6u);  // first differing byte
  EXPECT_EQ(dev->Write(0, buf).code(), EROFS);
}

TEST(PatternDeviceTest, FillPatternAtAnyByteOffset) {
  std::vector<uint8_t> whole(64), part(13);
  PatternDevice::FillPattern(0, whole);
  PatternDevice::FillPattern(21, part);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + 21));
}

TEST(PatternDeviceTest, WritableOverlayKeepsThePatternElsewhere) {
  auto dev = PatternDevice::Create({.size = 1 << 20, .writable = true});
  std::vector<uint8_t> ones(1024, 1);
  ASSERT_TRUE(dev->Write(2048, ones).ok());
  ASSERT_TRUE(dev->Discard(8192, 512).ok());
  EXPECT_EQ(dev->overlay_blocks(), 3u);
  std::vector<uint8_t> buf(16384);
  ASSERT_TRUE(dev->Read(0, buf).ok());
  EXPECT_EQ(PatternDevice::CheckPattern(0, std::span(buf).first(2048)), std::nullopt);
  EXPECT_TRUE(
      std::all_of(buf.begin() + 2048, buf.begin() + 3072, [](uint8_t b) { return b == 1; }));
  EXPECT_EQ(PatternDevice::CheckPattern(3072, std::span(buf).subspan(3072, 8192 - 3072)),
            std::nullopt);
  EXPECT_TRUE(
      std::all_of(buf.begin() + 8192, buf.begin() + 8704, [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(PatternDevice::CheckPattern(8704, std::span(buf).subspan(8704)), std::nullopt);
}

}  // namespace
}  // namespace volstack::bdev

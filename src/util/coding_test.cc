#include "util/coding.h"

#include <gtest/gtest.h>

#include <random>

namespace volstack {
namespace {

TEST(CodingTest, LittleEndianByteOrder) {
  uint8_t b[8];
  EncodeLE16(b, 0x1234);
  EXPECT_EQ(b[0], 0x34);
  EXPECT_EQ(b[1], 0x12);
  EncodeLE32(b, 0x12345678);
  EXPECT_EQ(std::vector<uint8_t>(b, b + 4), (std::vector<uint8_t>{0x78, 0x56, 0x34, 0x12}));
  EncodeLE64(b, 0x0102030405060708ULL);
  EXPECT_EQ(std::vector<uint8_t>(b, b + 8), (std::vector<uint8_t>{8, 7, 6, 5, 4, 3, 2, 1}));
  // "LABELONE" read as a little-endian u64, as lvm2's label does.
  const uint8_t label[] = {'L', 'A', 'B', 'E', 'L', 'O', 'N', 'E'};
  EXPECT_EQ(DecodeLE64(label), 0x454e4f4c4542414cULL);
}

TEST(CodingTest, BigEndianByteOrder) {
  uint8_t b[8];
  EncodeBE16(b, 0x1234);
  EXPECT_EQ(b[0], 0x12);
  EncodeBE32(b, 0x25609513);  // NBD request magic
  EXPECT_EQ(std::vector<uint8_t>(b, b + 4), (std::vector<uint8_t>{0x25, 0x60, 0x95, 0x13}));
  EncodeBE64(b, 0x49484156454F5054ULL);  // "IHAVEOPT"
  EXPECT_EQ(std::string(b, b + 8), "IHAVEOPT");
}

TEST(CodingTest, RoundTripsIncludingExtremes) {
  uint8_t b[8];
  std::mt19937_64 rng(1);
  std::vector<uint64_t> values = {0,          1,          0xff,       0x100,
                                  UINT16_MAX, UINT32_MAX, UINT64_MAX, 0x8000000000000000ULL};
  for (int i = 0; i < 1000; i++) values.push_back(rng());
  for (uint64_t v : values) {
    EncodeLE16(b, static_cast<uint16_t>(v));
    EXPECT_EQ(DecodeLE16(b), static_cast<uint16_t>(v));
    EncodeLE32(b, static_cast<uint32_t>(v));
    EXPECT_EQ(DecodeLE32(b), static_cast<uint32_t>(v));
    EncodeLE64(b, v);
    EXPECT_EQ(DecodeLE64(b), v);
    EncodeBE16(b, static_cast<uint16_t>(v));
    EXPECT_EQ(DecodeBE16(b), static_cast<uint16_t>(v));
    EncodeBE32(b, static_cast<uint32_t>(v));
    EXPECT_EQ(DecodeBE32(b), static_cast<uint32_t>(v));
    EncodeBE64(b, v);
    EXPECT_EQ(DecodeBE64(b), v);
  }
}

TEST(CodingTest, EncodersWriteOnlyTheirBytes) {
  uint8_t b[10];
  std::fill(b, b + 10, 0xee);
  EncodeLE32(b + 1, 0);
  EXPECT_EQ(b[0], 0xee);
  EXPECT_EQ(b[5], 0xee);
  EncodeBE64(b + 1, 0);
  EXPECT_EQ(b[0], 0xee);
  EXPECT_EQ(b[9], 0xee);
}

}  // namespace
}  // namespace volstack

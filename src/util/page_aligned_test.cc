#include "util/page_aligned.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace volstack {
namespace {

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 4096 == 0; }

TEST(PageAlignedBytesTest, AppendsBytesAndZerosInOrderAndStaysAligned) {
  PageAlignedBytes b;
  EXPECT_TRUE(b.empty());
  std::vector<uint8_t> expect;
  // Grows several times over (the content must survive each move) with odd sizes.
  for (int i = 0; i < 300; i++) {
    std::vector<uint8_t> piece(1000 + i * 7, static_cast<uint8_t>(i + 1));
    b.Append(piece);
    expect.insert(expect.end(), piece.begin(), piece.end());
    b.AppendZeros(i % 5 * 3);
    expect.resize(expect.size() + i % 5 * 3, 0);
    ASSERT_TRUE(Aligned(b.data()));
  }
  ASSERT_EQ(b.size(), expect.size());
  std::span<const uint8_t> all = b;
  EXPECT_TRUE(std::equal(all.begin(), all.end(), expect.begin()));
}

TEST(PageAlignedBytesTest, ClearKeepsMemoryAndStartsOver) {
  PageAlignedBytes b;
  std::vector<uint8_t> big(64 * 1024, 0xab);
  b.Append(big);
  const uint8_t* before = b.data();
  b.clear();
  EXPECT_TRUE(b.empty());
  std::vector<uint8_t> small(4096, 0x5c);
  b.Append(small);
  EXPECT_EQ(b.data(), before);
  ASSERT_EQ(b.size(), small.size());
  EXPECT_EQ(b.data()[0], 0x5c);
  EXPECT_EQ(b.data()[4095], 0x5c);
}

}  // namespace
}  // namespace volstack

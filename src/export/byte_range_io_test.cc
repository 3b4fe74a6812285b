#include "export/byte_range_io.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <random>
#include <thread>
#include <vector>

#include "bdev/file_device.h"
#include "bdev/memory_device.h"

namespace volstack::exportfs {
namespace {

class ByteRangeIoTest : public ::testing::TestWithParam<uint32_t> {};

// Random byte-granular reads, writes and zeroes against a reference buffer.
TEST_P(ByteRangeIoTest, MatchesReferenceModel) {
  const uint32_t lbs = GetParam();
  const uint64_t size = 256 * 1024;
  auto dev = bdev::MemoryDevice::Create(size, lbs, 4096);
  ByteRangeIo io(dev);
  std::vector<uint8_t> model(size, 0);
  std::mt19937_64 rng(lbs);
  for (int i = 0; i < 2000; i++) {
    const uint64_t off = rng() % size;
    const uint64_t len = 1 + rng() % std::min<uint64_t>(size - off, 3 * lbs + 7);
    switch (rng() % 3) {
      case 0: {
        std::vector<uint8_t> data(len);
        for (auto& b : data) b = static_cast<uint8_t>(rng());
        ASSERT_TRUE(io.Write(off, data).ok());
        std::copy(data.begin(), data.end(), model.begin() + off);
        break;
      }
      case 1:
        ASSERT_TRUE(io.WriteZeroes(off, len, rng() % 2).ok());
        std::fill(model.begin() + off, model.begin() + off + len, 0);
        break;
      default: {
        std::vector<uint8_t> got(len);
        auto n = io.Read(off, got);
        ASSERT_TRUE(n.ok());
        ASSERT_EQ(*n, len);
        ASSERT_TRUE(std::equal(got.begin(), got.end(), model.begin() + off)) << off << "+" << len;
      }
    }
  }
  std::vector<uint8_t> all(size);
  ASSERT_TRUE(dev->Read(0, all).ok());
  EXPECT_EQ(all, model);
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, ByteRangeIoTest, ::testing::Values(512u, 4096u));

TEST(ByteRangeIo, ReadClipsAtTheEndAndWritesPastItFail) {
  auto dev = bdev::MemoryDevice::Create(8192);
  ByteRangeIo io(dev);
  std::vector<uint8_t> buf(1000);
  auto n = io.Read(8000, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 192u);
  n = io.Read(8192, buf);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  EXPECT_EQ(io.Write(8000, buf).code(), ENOSPC);
  EXPECT_EQ(io.WriteZeroes(9000, 10, true).code(), ENOSPC);
}

TEST(ByteRangeIo, DiscardKeepsPartialBlocks) {
  auto dev = bdev::MemoryDevice::Create(1 << 20, 512, 4096);
  ByteRangeIo io(dev);
  std::vector<uint8_t> ones(1 << 20, 1);
  ASSERT_TRUE(io.Write(0, ones).ok());
  ASSERT_TRUE(io.Discard(100, 200000).ok());
  std::vector<uint8_t> head(512);
  ASSERT_TRUE(dev->Read(0, head).ok());
  EXPECT_EQ(head, std::vector<uint8_t>(512, 1));  // the partial first block is untouched
}

// Many threads patch disjoint bytes of the same blocks: without the RMW lock, one thread's
// read-modify-write would put back stale bytes over another's.
TEST(ByteRangeIo, ConcurrentUnalignedWritesToOneBlockAllLand) {
  auto dev = bdev::MemoryDevice::Create(4096 * 4, 4096, 4096);
  ByteRangeIo io(dev);
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&io, t] {
      for (uint64_t i = static_cast<uint64_t>(t); i < 4096 * 4; i += kThreads) {
        const uint8_t b = static_cast<uint8_t>(t + 1);
        ASSERT_TRUE(io.Write(i, std::span(&b, 1)).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  std::vector<uint8_t> all(4096 * 4);
  ASSERT_TRUE(dev->Read(0, all).ok());
  for (uint64_t i = 0; i < all.size(); i++) ASSERT_EQ(all[i], i % kThreads + 1) << i;
}

TEST(ByteRangeIo, ReadOnlyDeviceRefusesMutations) {
  char path[] = "/tmp/byte_range_io_test.XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 8192), 0);
  close(fd);
  bdev::FileDeviceOptions options;
  options.read_only = true;
  auto dev = bdev::FileDevice::Open(path, options);
  unlink(path);
  ASSERT_TRUE(dev.ok());
  ByteRangeIo io(*dev);
  EXPECT_EQ(io.Write(0, std::vector<uint8_t>(512)).code(), EROFS);
  EXPECT_EQ(io.Write(1, std::vector<uint8_t>(5)).code(), EROFS);
  EXPECT_EQ(io.WriteZeroes(0, 512, true).code(), EROFS);
  std::vector<uint8_t> buf(100);
  EXPECT_TRUE(io.Read(3, buf).ok());
}

}  // namespace
}  // namespace volstack::exportfs

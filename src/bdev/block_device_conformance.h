// The BlockDevice conformance suite: a typed GoogleTest suite that every BlockDevice passes.
//
// Use it from any subsystem's tests with its own factory:
//
//   #include "bdev/block_device_conformance.h"
//   struct ZvolFactory {
//     static volstack::bdev::BlockDevicePtr Make();          // required: fresh, writable
//     static volstack::bdev::BlockDevicePtr MakeReadOnly();  // optional: a read-only one
//   };
//   using ZvolTypes = ::testing::Types<ZvolFactory>;
//   INSTANTIATE_TYPED_TEST_SUITE_P(Zvol, BlockDeviceConformance, ZvolTypes);
//
// Make() returns a new device of at least 1 MiB (the suite works in the first 8 MiB) whose
// contents the test may overwrite; it need not read as zeroes. Without MakeReadOnly() the
// read-only test is skipped. A factory whose backend is missing (no cluster to test against)
// calls GTEST_SKIP() inside a lambda and returns nullptr: the test is skipped, not failed.
// Instantiate in one .cc per test binary (the tests are templates,
// so including the header in several files is harmless).
//
// What it checks (the contract in block_device.h): geometry sanity; misaligned -> EINVAL;
// past the end (including offsets near 2^64) -> ENOSPC; zero-length requests succeed; write /
// read round trips at the edges, through unaligned memory, across 1 MiB; overlapping writes;
// write-zeroes reads zero and touches nothing else; discard leaves zeroes or old data (or is
// EOPNOTSUPP when not a capability); the allocation query covers exactly the range, in
// order, merged, with holes that read as zeroes and written data never reported as a hole;
// FUA writes and write-zeroes; flush; 8 threads writing disjoint ranges; read-only -> EROFS;
// vectored writes (WriteV) land exactly as Write() of the concatenated pieces would, with
// pieces of any length (empty, smaller than a block, straddling blocks, more than IOV_MAX
// of them, aligned in memory for O_DIRECT or not) and the same boundary checks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "bdev/block_device.h"

namespace volstack::bdev::testing {

inline std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = rng() | 1;  // never an all-zero word, so data is told from holes
    for (size_t j = 0; j < 8 && i + j < n; j++) out[i + j] = static_cast<uint8_t>(v >> (8 * j));
  }
  return out;
}

inline bool AllZero(const std::vector<uint8_t>& v, size_t from = 0, size_t to = SIZE_MAX) {
  to = std::min(to, v.size());
  return std::all_of(v.begin() + static_cast<ptrdiff_t>(from),
                     v.begin() + static_cast<ptrdiff_t>(to), [](uint8_t b) { return b == 0; });
}

// Pieces of `data` cut at the given lengths (the last piece takes the rest).
inline std::vector<std::span<const uint8_t>> CutPieces(const std::vector<uint8_t>& data,
                                                       const std::vector<size_t>& lengths) {
  std::vector<std::span<const uint8_t>> out;
  size_t pos = 0;
  for (size_t n : lengths) {
    n = std::min(n, data.size() - pos);
    out.emplace_back(data.data() + pos, n);
    pos += n;
  }
  out.emplace_back(data.data() + pos, data.size() - pos);
  return out;
}

}  // namespace volstack::bdev::testing

template <typename Factory>
class BlockDeviceConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    dev_ = Factory::Make();
    if (IsSkipped()) return;  // the factory's backend is not available here (it said why)
    ASSERT_NE(dev_, nullptr);
    lbs_ = dev_->logical_block_size();
    ASSERT_GE(dev_->size(), uint64_t{1} << 20) << "the suite needs a device of at least 1 MiB";
    span_ = std::min<uint64_t>(dev_->size(), uint64_t{8} << 20) / lbs_ * lbs_;
  }

  std::vector<uint8_t> ReadBack(uint64_t offset, uint64_t length) {
    std::vector<uint8_t> buf(length);
    volstack::Status s = dev_->Read(offset, buf);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return buf;
  }

  void WriteOk(uint64_t offset, const std::vector<uint8_t>& data,
               volstack::bdev::WriteOptions opts = {}) {
    volstack::Status s = dev_->Write(offset, data, opts);
    ASSERT_TRUE(s.ok()) << "write at " << offset << ": " << s.ToString();
  }

  volstack::bdev::BlockDevicePtr dev_;
  uint64_t lbs_ = 0;
  uint64_t span_ = 0;  // the prefix of the device the tests use
};

TYPED_TEST_SUITE_P(BlockDeviceConformance);

TYPED_TEST_P(BlockDeviceConformance, GeometryIsConsistent) {
  const auto g = this->dev_->geometry();
  EXPECT_EQ(g.size_bytes, this->dev_->size());
  EXPECT_GE(g.logical_block_size, 512u);
  EXPECT_EQ(g.logical_block_size & (g.logical_block_size - 1), 0u);
  EXPECT_GE(g.physical_block_size, g.logical_block_size);
  EXPECT_EQ(g.physical_block_size & (g.physical_block_size - 1), 0u);
  EXPECT_EQ(g.size_bytes % g.logical_block_size, 0u);
  EXPECT_FALSE(g.read_only);
  EXPECT_FALSE(this->dev_->name().empty());
}

TYPED_TEST_P(BlockDeviceConformance, MisalignedRequestsAreEinval) {
  auto& d = *this->dev_;
  const uint64_t lbs = this->lbs_;
  std::vector<uint8_t> half(lbs / 2), block(lbs), two(2 * lbs);
  EXPECT_EQ(d.Read(0, half).code(), EINVAL);
  EXPECT_EQ(d.Read(lbs / 2, block).code(), EINVAL);
  EXPECT_EQ(d.Read(1, two).code(), EINVAL);
  EXPECT_EQ(d.Write(0, half).code(), EINVAL);
  EXPECT_EQ(d.Write(lbs / 2, block).code(), EINVAL);
  EXPECT_EQ(d.Write(lbs + 1, block, {.fua = true}).code(), EINVAL);
  EXPECT_EQ(d.WriteZeroes(lbs / 2, lbs).code(), EINVAL);
  EXPECT_EQ(d.WriteZeroes(0, lbs + 1).code(), EINVAL);
  if (d.geometry().caps.discard) {
    EXPECT_EQ(d.Discard(lbs / 2, lbs).code(), EINVAL);
    EXPECT_EQ(d.Discard(0, lbs - 1).code(), EINVAL);
  }
  EXPECT_EQ(d.QueryAllocation(1, lbs).status().code(), EINVAL);
  EXPECT_EQ(d.QueryAllocation(0, lbs / 2).status().code(), EINVAL);
  // Nothing was written by the failed writes.
  std::vector<uint8_t> data = volstack::bdev::testing::RandomBytes(2 * lbs, 7);
  this->WriteOk(0, data);
  EXPECT_EQ(d.Write(lbs / 2, block).code(), EINVAL);
  EXPECT_EQ(this->ReadBack(0, 2 * lbs), data);
}

TYPED_TEST_P(BlockDeviceConformance, RequestsPastTheEndAreEnospc) {
  auto& d = *this->dev_;
  const uint64_t lbs = this->lbs_, size = d.size();
  std::vector<uint8_t> block(lbs), two(2 * lbs);
  EXPECT_EQ(d.Read(size, block).code(), ENOSPC);
  EXPECT_EQ(d.Read(size - lbs, two).code(), ENOSPC);
  EXPECT_EQ(d.Write(size, block).code(), ENOSPC);
  EXPECT_EQ(d.Write(size - lbs, two).code(), ENOSPC);
  EXPECT_EQ(d.WriteZeroes(size - lbs, 2 * lbs).code(), ENOSPC);
  EXPECT_EQ(d.QueryAllocation(size - lbs, 2 * lbs).status().code(), ENOSPC);
  if (d.geometry().caps.discard) {
    EXPECT_EQ(d.Discard(size, lbs).code(), ENOSPC);
  }
  // Offset + length must not wrap around 2^64.
  const uint64_t far = UINT64_MAX / lbs * lbs;
  EXPECT_EQ(d.Read(far, block).code(), ENOSPC);
  EXPECT_EQ(d.Write(far, block).code(), ENOSPC);
  EXPECT_EQ(d.WriteZeroes(lbs, far).code(), ENOSPC);
  EXPECT_EQ(d.QueryAllocation(far, lbs).status().code(), ENOSPC);
  // The last block is addressable.
  auto data = volstack::bdev::testing::RandomBytes(lbs, 11);
  this->WriteOk(size - lbs, data);
  EXPECT_EQ(this->ReadBack(size - lbs, lbs), data);
}

TYPED_TEST_P(BlockDeviceConformance, ZeroLengthRequestsSucceed) {
  auto& d = *this->dev_;
  const uint64_t size = d.size();
  for (uint64_t off : {uint64_t{0}, this->lbs_, size}) {
    EXPECT_TRUE(d.Read(off, std::span<uint8_t>()).ok()) << off;
    EXPECT_TRUE(d.Write(off, std::span<const uint8_t>()).ok()) << off;
    EXPECT_TRUE(d.Write(off, std::span<const uint8_t>(), {.fua = true}).ok()) << off;
    EXPECT_TRUE(d.WriteZeroes(off, 0).ok()) << off;
    auto q = d.QueryAllocation(off, 0);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    EXPECT_TRUE(q->empty());
  }
}

TYPED_TEST_P(BlockDeviceConformance, WriteReadRoundTrip) {
  using volstack::bdev::testing::RandomBytes;
  auto& d = *this->dev_;
  const uint64_t lbs = this->lbs_, span = this->span_;
  const std::vector<std::pair<uint64_t, uint64_t>> cases = {{0, lbs},
                                                            {lbs, 3 * lbs},
                                                            {span - lbs, lbs},
                                                            {span / 2 - lbs, 2 * lbs},
                                                            {d.size() - 4 * lbs, 4 * lbs},
                                                            {64 * 1024 - lbs, 2 * lbs}};
  uint64_t seed = 100;
  for (auto [off, len] : cases) {
    auto data = RandomBytes(len, seed++);
    this->WriteOk(off, data);
    EXPECT_EQ(this->ReadBack(off, len), data) << "at " << off;
  }
  // Buffers that are not aligned in memory (an O_DIRECT device must bounce them).
  std::vector<uint8_t> raw(4 * lbs + 1);
  auto data = RandomBytes(4 * lbs, 999);
  std::copy(data.begin(), data.end(), raw.begin() + 1);
  ASSERT_TRUE(d.Write(8 * lbs, std::span<const uint8_t>(raw.data() + 1, 4 * lbs)).ok());
  std::vector<uint8_t> back(4 * lbs + 1);
  ASSERT_TRUE(d.Read(8 * lbs, std::span<uint8_t>(back.data() + 1, 4 * lbs)).ok());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), back.begin() + 1));
}

TYPED_TEST_P(BlockDeviceConformance, LargeAndOverlappingWrites) {
  using volstack::bdev::testing::RandomBytes;
  const uint64_t lbs = this->lbs_;
  const uint64_t len = std::min<uint64_t>(this->span_ - lbs, (2 << 20) + 4 * lbs) / lbs * lbs;
  auto big = RandomBytes(len, 1);
  this->WriteOk(lbs, big);
  EXPECT_EQ(this->ReadBack(lbs, len), big);
  // An overlapping write replaces exactly its own blocks.
  auto patch = RandomBytes(3 * lbs, 2);
  this->WriteOk(5 * lbs, patch);
  std::copy(patch.begin(), patch.end(), big.begin() + 4 * static_cast<ptrdiff_t>(lbs));
  EXPECT_EQ(this->ReadBack(lbs, len), big);
}

TYPED_TEST_P(BlockDeviceConformance, WriteZeroesReadsZero) {
  using volstack::bdev::testing::AllZero;
  using volstack::bdev::testing::RandomBytes;
  auto& d = *this->dev_;
  const uint64_t lbs = this->lbs_;
  const uint64_t len = std::min<uint64_t>(this->span_, 1 << 20);
  for (bool may_unmap : {true, false}) {
    auto data = RandomBytes(len, may_unmap ? 3 : 4);
    this->WriteOk(0, data);
    const uint64_t zoff = 3 * lbs, zlen = len / 2 + lbs;
    auto s = d.WriteZeroes(zoff, zlen, {.may_unmap = may_unmap});
    ASSERT_TRUE(s.ok()) << s.ToString();
    auto back = this->ReadBack(0, len);
    EXPECT_TRUE(AllZero(back, zoff, zoff + zlen)) << "may_unmap=" << may_unmap;
    EXPECT_TRUE(std::equal(back.begin(), back.begin() + zoff, data.begin()));
    EXPECT_TRUE(std::equal(back.begin() + static_cast<ptrdiff_t>(zoff + zlen), back.end(),
                           data.begin() + static_cast<ptrdiff_t>(zoff + zlen)));
  }
}

TYPED_TEST_P(BlockDeviceConformance, DiscardLeavesZeroesOrOldData) {
  using volstack::bdev::testing::RandomBytes;
  auto& d = *this->dev_;
  const uint64_t lbs = this->lbs_;
  const uint64_t len = std::min<uint64_t>(this->span_, 1 << 20);
  auto data = RandomBytes(len, 5);
  this->WriteOk(0, data);
  const uint64_t doff = 2 * lbs, dlen = len - 4 * lbs;
  if (!d.geometry().caps.discard) {
    EXPECT_EQ(d.Discard(doff, dlen).code(), EOPNOTSUPP);
    return;
  }
  auto s = d.Discard(doff, dlen);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto back = this->ReadBack(0, len);
  for (uint64_t b = 0; b < len; b += lbs) {
    const auto first = back.begin() + static_cast<ptrdiff_t>(b);
    const bool old = std::equal(first, first + static_cast<ptrdiff_t>(lbs),
                                data.begin() + static_cast<ptrdiff_t>(b));
    const bool zero =
        std::all_of(first, first + static_cast<ptrdiff_t>(lbs), [](uint8_t x) { return x == 0; });
    if (b < doff || b >= doff + dlen) {
      EXPECT_TRUE(old) << "block at " << b << " outside the discard changed";
    } else {
      EXPECT_TRUE(old || zero) << "block at " << b << " is neither zeroes nor old data";
    }
  }
}

TYPED_TEST_P(BlockDeviceConformance, AllocationQueryCoversRangeInOrder) {
  using volstack::bdev::testing::AllZero;
  using volstack::bdev::testing::RandomBytes;
  auto& d = *this->dev_;
  const uint64_t lbs = this->lbs_, span = this->span_;
  std::mt19937_64 rng(42);
  for (int i = 0; i < 40; i++) {
    const uint64_t len = (1 + rng() % 16) * lbs;
    const uint64_t off = rng() % ((span - len) / lbs + 1) * lbs;
    const int kind = static_cast<int>(rng() % 4);
    if (kind == 0) {
      ASSERT_TRUE(d.WriteZeroes(off, len).ok());
    } else if (kind == 1 && d.geometry().caps.discard) {
      ASSERT_TRUE(d.Discard(off, len).ok());
    } else {
      this->WriteOk(off, RandomBytes(len, rng()));
    }
  }
  auto image = this->ReadBack(0, span);
  std::vector<std::pair<uint64_t, uint64_t>> ranges = {{0, span}, {lbs, span - 2 * lbs}};
  for (int i = 0; i < 20; i++) {
    const uint64_t a = rng() % (span / lbs), b = rng() % (span / lbs);
    ranges.push_back({std::min(a, b) * lbs, (std::max(a, b) - std::min(a, b) + 1) * lbs});
  }
  for (auto [off, len] : ranges) {
    auto q = d.QueryAllocation(off, len);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    ASSERT_FALSE(q->empty());
    uint64_t pos = off;
    for (size_t i = 0; i < q->size(); i++) {
      const auto& e = (*q)[i];
      EXPECT_EQ(e.offset, pos) << "extents must be contiguous and ordered";
      EXPECT_GT(e.length, 0u);
      if (i > 0) {
        EXPECT_NE(e.allocated, (*q)[i - 1].allocated) << "adjacent runs not merged";
      }
      if (!e.allocated) {
        EXPECT_TRUE(AllZero(image, e.offset, e.offset + e.length))
            << "hole at " << e.offset << "+" << e.length << " does not read as zeroes";
      }
      pos = e.offset + e.length;
    }
    EXPECT_EQ(pos, off + len) << "extents must cover exactly the range";
    // Every non-zero block is inside an allocated run.
    for (uint64_t b = off; b < off + len; b += lbs) {
      if (AllZero(image, b, b + lbs)) continue;
      auto it = std::find_if(q->begin(), q->end(), [b](const auto& e) {
        return e.offset <= b && b < e.offset + e.length;
      });
      ASSERT_NE(it, q->end());
      EXPECT_TRUE(it->allocated) << "data block at " << b << " reported as a hole";
    }
  }
}

TYPED_TEST_P(BlockDeviceConformance, FuaWritesAndFlush) {
  using volstack::bdev::testing::AllZero;
  using volstack::bdev::testing::RandomBytes;
  auto& d = *this->dev_;
  const uint64_t lbs = this->lbs_;
  auto a = RandomBytes(4 * lbs, 21), b = RandomBytes(2 * lbs, 22);
  this->WriteOk(0, a);
  this->WriteOk(lbs, b, {.fua = true});
  std::copy(b.begin(), b.end(), a.begin() + static_cast<ptrdiff_t>(lbs));
  EXPECT_EQ(this->ReadBack(0, 4 * lbs), a);
  auto s = d.WriteZeroes(2 * lbs, lbs, {.may_unmap = false, .fua = true});
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto back = this->ReadBack(0, 4 * lbs);
  EXPECT_TRUE(AllZero(back, 2 * lbs, 3 * lbs));
  EXPECT_TRUE(std::equal(back.begin(), back.begin() + 2 * static_cast<ptrdiff_t>(lbs), a.begin()));
  s = d.Flush();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(this->ReadBack(0, 4 * lbs), back);
  EXPECT_TRUE(d.Flush().ok());  // flushing twice, or with nothing to flush, is fine
}

// A write-back hint is only a hint: any range, clipped or not, leaves the contents alone.
TYPED_TEST_P(BlockDeviceConformance, WritebackHintsChangeNothing) {
  using volstack::bdev::testing::RandomBytes;
  auto& d = *this->dev_;
  const uint64_t lbs = this->lbs_;
  auto a = RandomBytes(8 * lbs, 23);
  this->WriteOk(0, a);
  d.StartWriteback(0, 8 * lbs);
  d.StartWriteback(3, 5);
  d.StartWriteback(d.size() - lbs, 1ull << 40);
  d.StartWriteback(d.size(), lbs);
  d.StartWriteback(~0ull - 1, 2);
  EXPECT_EQ(this->ReadBack(0, 8 * lbs), a);
  auto s = d.Flush();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(this->ReadBack(0, 8 * lbs), a);
}

TYPED_TEST_P(BlockDeviceConformance, ConcurrentWritersToDisjointRanges) {
  using volstack::bdev::testing::RandomBytes;
  auto& d = *this->dev_;
  const uint64_t lbs = this->lbs_;
  constexpr int kThreads = 8;
  const uint64_t region = this->span_ / kThreads / lbs * lbs;
  const uint64_t blocks = region / lbs;
  ASSERT_GE(blocks, 16u);
  std::vector<std::vector<uint8_t>> model(kThreads, std::vector<uint8_t>(region));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      const uint64_t base = static_cast<uint64_t>(t) * region;
      auto& m = model[t];
      auto full = RandomBytes(region, rng());
      if (!d.Write(base, full).ok()) failures++;
      m = full;
      for (int i = 0; i < 60; i++) {
        const uint64_t n = 1 + rng() % std::min<uint64_t>(8, blocks);
        const uint64_t first = rng() % (blocks - n + 1);
        auto data = RandomBytes(n * lbs, rng());
        if (!d.Write(base + first * lbs, data, {.fua = (i % 7 == 0)}).ok()) failures++;
        std::copy(data.begin(), data.end(), m.begin() + static_cast<ptrdiff_t>(first * lbs));
        std::vector<uint8_t> back(n * lbs);
        if (!d.Read(base + first * lbs, back).ok() || back != data) failures++;
        if (t == 0 && i % 10 == 0 && !d.Flush().ok()) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  for (int t = 0; t < kThreads; t++) {
    EXPECT_EQ(this->ReadBack(static_cast<uint64_t>(t) * region, region), model[t])
        << "thread " << t << "'s region";
  }
}

TYPED_TEST_P(BlockDeviceConformance, VectoredWritesLandAsOneWrite) {
  using volstack::bdev::testing::CutPieces;
  using volstack::bdev::testing::RandomBytes;
  auto& d = *this->dev_;
  const uint64_t lbs = this->lbs_;
  // Background, so that every byte the vectored writes must not touch is known.
  const uint64_t len = std::min<uint64_t>(this->span_, 1 << 20);
  auto image = RandomBytes(len, 50);
  this->WriteOk(0, image);
  auto apply = [&](uint64_t off, const std::vector<uint8_t>& data,
                   const std::vector<std::span<const uint8_t>>& pieces,
                   volstack::bdev::WriteOptions opts) {
    auto s = d.WriteV(off, pieces, opts);
    ASSERT_TRUE(s.ok()) << "writev at " << off << ": " << s.ToString();
    std::copy(data.begin(), data.end(), image.begin() + static_cast<ptrdiff_t>(off));
    EXPECT_EQ(this->ReadBack(0, len), image) << "after the writev at " << off;
  };
  // One piece; whole blocks; pieces that straddle blocks, are empty or smaller than a block.
  auto a = RandomBytes(2 * lbs, 51);
  apply(lbs, a, CutPieces(a, {}), {});
  auto b = RandomBytes(6 * lbs, 52);
  apply(4 * lbs, b, CutPieces(b, {lbs, 0, 2 * lbs}), {});
  auto c = RandomBytes(5 * lbs, 53);
  apply(11 * lbs, c, CutPieces(c, {0, 1, lbs - 1, 3, lbs + 5, 0, 7, lbs / 2, 0}), {});
  auto e = RandomBytes(3 * lbs, 54);
  apply(len - 3 * lbs, e, CutPieces(e, {lbs / 2, 2 * lbs}), {.fua = true});
  // More pieces than IOV_MAX (1024), some empty, covering 512 KiB.
  const uint64_t many = std::min<uint64_t>(len / 2, 512 * 1024) / lbs * lbs;
  auto f = RandomBytes(many, 55);
  std::vector<size_t> cuts;
  for (size_t pos = 0; pos + 256 < many; pos += 256) {
    cuts.push_back(256);
    if (cuts.size() % 5 == 0) cuts.push_back(0);
  }
  apply(len / 4 / lbs * lbs, f, CutPieces(f, cuts), {});
  // Pieces aligned in memory and to blocks: the zero-copy path of an O_DIRECT device.
  const size_t n = 8 * lbs;
  std::unique_ptr<uint8_t, decltype(&std::free)> aligned(
      static_cast<uint8_t*>(std::aligned_alloc(4096, n)), &std::free);
  ASSERT_NE(aligned, nullptr);
  auto g = RandomBytes(n, 56);
  std::copy(g.begin(), g.end(), aligned.get());
  std::vector<std::span<const uint8_t>> pieces = {{aligned.get() + 2 * lbs, 3 * lbs},
                                                  {aligned.get(), 2 * lbs},
                                                  {aligned.get() + 5 * lbs, 3 * lbs}};
  std::vector<uint8_t> g2;
  for (auto p : pieces) g2.insert(g2.end(), p.begin(), p.end());
  apply(20 * lbs, g2, pieces, {});
  ASSERT_TRUE(d.Flush().ok());
  EXPECT_EQ(this->ReadBack(0, len), image);
}

TYPED_TEST_P(BlockDeviceConformance, VectoredWritesAreCheckedAtTheBoundary) {
  using volstack::bdev::testing::CutPieces;
  using volstack::bdev::testing::RandomBytes;
  auto& d = *this->dev_;
  const uint64_t lbs = this->lbs_, size = d.size();
  auto data = RandomBytes(4 * lbs, 60);
  this->WriteOk(0, data);
  auto junk = RandomBytes(4 * lbs, 61);
  // Only the total counts: a misaligned total or offset is EINVAL and writes nothing.
  EXPECT_EQ(
      d.WriteV(0, CutPieces(std::vector<uint8_t>(junk.begin(), junk.end() - 1), {lbs})).code(),
      EINVAL);
  EXPECT_EQ(d.WriteV(lbs / 2, CutPieces(junk, {lbs})).code(), EINVAL);
  EXPECT_EQ(d.WriteV(1, CutPieces(junk, {lbs}), {.fua = true}).code(), EINVAL);
  EXPECT_EQ(this->ReadBack(0, 4 * lbs), data);
  // Past the end, and offsets near 2^64.
  EXPECT_EQ(d.WriteV(size - lbs, CutPieces(junk, {lbs, lbs})).code(), ENOSPC);
  EXPECT_EQ(d.WriteV(UINT64_MAX / lbs * lbs, CutPieces(junk, {lbs})).code(), ENOSPC);
  // No pieces, or only empty ones, is a zero-length write.
  std::vector<std::span<const uint8_t>> none, empties(3);
  EXPECT_TRUE(d.WriteV(0, none).ok());
  EXPECT_TRUE(d.WriteV(size, empties).ok());
  EXPECT_TRUE(d.WriteV(lbs, empties, {.fua = true}).ok());
  EXPECT_EQ(this->ReadBack(0, 4 * lbs), data);
}

TYPED_TEST_P(BlockDeviceConformance, ReadOnlyRejectsMutations) {
  if constexpr (requires { TypeParam::MakeReadOnly(); }) {
    auto ro = TypeParam::MakeReadOnly();
    ASSERT_NE(ro, nullptr);
    EXPECT_TRUE(ro->read_only());
    EXPECT_TRUE(ro->geometry().read_only);
    const uint64_t lbs = ro->logical_block_size();
    std::vector<uint8_t> block(lbs, 0xab);
    EXPECT_EQ(ro->Write(0, block).code(), EROFS);
    EXPECT_EQ(ro->Write(0, block, {.fua = true}).code(), EROFS);
    std::vector<std::span<const uint8_t>> pieces = {std::span<const uint8_t>(block)};
    EXPECT_EQ(ro->WriteV(0, pieces).code(), EROFS);
    EXPECT_EQ(ro->WriteZeroes(0, lbs).code(), EROFS);
    EXPECT_EQ(ro->Discard(0, lbs).code(), EROFS);
    EXPECT_TRUE(ro->Read(0, block).ok());
    EXPECT_TRUE(ro->Flush().ok());
    EXPECT_TRUE(ro->QueryAllocation(0, lbs).ok());
  } else {
    GTEST_SKIP() << "the factory has no MakeReadOnly()";
  }
}

REGISTER_TYPED_TEST_SUITE_P(BlockDeviceConformance, GeometryIsConsistent,
                            MisalignedRequestsAreEinval, RequestsPastTheEndAreEnospc,
                            ZeroLengthRequestsSucceed, WriteReadRoundTrip,
                            LargeAndOverlappingWrites, WriteZeroesReadsZero,
                            DiscardLeavesZeroesOrOldData, AllocationQueryCoversRangeInOrder,
                            FuaWritesAndFlush, WritebackHintsChangeNothing,
                            ConcurrentWritersToDisjointRanges, VectoredWritesLandAsOneWrite,
                            VectoredWritesAreCheckedAtTheBoundary, ReadOnlyRejectsMutations);

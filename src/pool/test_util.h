// What the pool's tests share: a tuning that commits only when asked, data that is never a
// hole, and the consistency check every scenario ends with.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "pool/checker.h"
#include "pool/spa.h"

namespace volstack::pool::testing {

inline constexpr uint64_t kMiB = 1 << 20;

// No sync thread (txgs commit on Sync(), Flush() or the throttle only, so tests decide when)
// and a small dirty limit.
inline PoolTuning TestTuning() {
  PoolTuning t;
  t.sync_thread = false;
  t.dirty_max_bytes = 16 * kMiB;
  return t;
}

// `n` bytes from `seed`, none of them zero: a block of it is never mistaken for a hole.
inline std::vector<uint8_t> Pattern(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng() | 1);
  return v;
}

// Text that lz4 and zstd shrink to well under half (never a whole block of zeroes).
inline std::vector<uint8_t> Text(size_t n, uint64_t seed) {
  static const char* kWords[] = {"volume ", "pool ", "block ", "pointer ", "checksum ",
                                 "txg ",    "zfs ",  "lz4 ",   "zstd ",    "\n"};
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out;
  while (out.size() < n) {
    const char* w = kWords[rng() % 10];
    out.insert(out.end(), w, w + std::strlen(w));
  }
  out.resize(n);
  return out;
}

// Bytes no codec shrinks (Pattern's are odd: 7 bits of entropy, which zstd finds).
inline std::vector<uint8_t> Random(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// Every tree, the space map and the logs agree (checker.h); with `verify_data`, every data
// block's checksum too.
inline void ExpectConsistent(Pool& pool, bool verify_data = true) {
  auto r = CheckPool(pool, verify_data);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok()) << r->Summary();
}

}  // namespace volstack::pool::testing

// AllZero: whether a buffer holds only zero bytes. A pool commit turns a block of zeroes
// into a hole instead of writing it; the early writes skip such blocks for the same reason.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace volstack {

inline bool AllZero(const uint8_t* p, size_t n) {
  static const uint8_t kZero[4096] = {};
  while (n > 0) {
    const size_t k = std::min(n, sizeof kZero);
    if (std::memcmp(p, kZero, k) != 0) return false;
    p += k;
    n -= k;
  }
  return true;
}

}  // namespace volstack

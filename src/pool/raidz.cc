#include "pool/raidz.h"

#include <array>
#include <cstring>

#include "pool/label_format.h"
#include "util/check.h"

namespace volstack::pool {

namespace {

struct GfTables {
  std::array<uint8_t, 512> exp{};
  std::array<int, 256> log{};
  GfTables() {
    uint32_t x = 1;
    for (int i = 0; i < 255; i++) {
      exp[i] = static_cast<uint8_t>(x);
      log[x] = i;
      x <<= 1;
      if (x & 0x100) x ^= 0x11d;
    }
    for (int i = 255; i < 512; i++) exp[i] = exp[i - 255];
  }
};
const GfTables& Gf() {
  static const GfTables t;
  return t;
}

uint8_t GfDiv(uint8_t a, uint8_t b) {
  if (a == 0) return 0;
  const auto& t = Gf();
  return t.exp[(t.log[a] + 255 - t.log[b]) % 255];
}

uint64_t Load(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
void Store(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

// Multiplies every byte of x by g = 2 in GF(2^8) (ZFS's VDEV_RAIDZ_64MUL_2).
uint64_t Mul2(uint64_t x) {
  uint64_t mask = x & 0x8080808080808080ull;
  mask = (mask << 1) - (mask >> 7);
  return ((x << 1) & 0xfefefefefefefefeull) ^ (mask & 0x1d1d1d1d1d1d1d1dull);
}

void XorInto(uint8_t* dst, const uint8_t* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) Store(dst + i, Load(dst + i) ^ Load(src + i));
  for (; i < n; i++) dst[i] ^= src[i];
}

// dst = c · dst, byte-wise.
void MulInPlace(uint8_t* dst, size_t n, uint8_t c) {
  std::array<uint8_t, 256> t;
  for (int x = 0; x < 256; x++) t[x] = GfMul(c, static_cast<uint8_t>(x));
  for (size_t i = 0; i < n; i++) dst[i] = t[dst[i]];
}

// P over the data columns, skipping those in `skip` (data indices).
void ComputeP(const RaidzGeometry& g, const std::vector<std::vector<uint8_t>>& cols,
              std::vector<uint8_t>& out, uint32_t skip_a = UINT32_MAX,
              uint32_t skip_b = UINT32_MAX) {
  const size_t n = cols[g.parity].size();
  out.assign(n, 0);
  for (uint32_t c = 0; c < g.data_cols(); c++) {
    if (c == skip_a || c == skip_b) continue;
    XorInto(out.data(), cols[g.parity + c].data(), n);
  }
}

// Q = sum of g^c · d_c over the data columns not skipped (Horner, highest column first).
void ComputeQ(const RaidzGeometry& g, const std::vector<std::vector<uint8_t>>& cols,
              std::vector<uint8_t>& out, uint32_t skip_a = UINT32_MAX,
              uint32_t skip_b = UINT32_MAX) {
  const size_t n = cols[g.parity].size();
  out.assign(n, 0);
  for (uint32_t c = g.data_cols(); c-- > 0;) {
    const bool skip = c == skip_a || c == skip_b;
    const uint8_t* d = cols[g.parity + c].data();
    for (size_t i = 0; i < n; i += 8) {
      const uint64_t q = Mul2(Load(out.data() + i));
      Store(out.data() + i, skip ? q : q ^ Load(d + i));
    }
  }
}

}  // namespace

uint8_t GfMul(uint8_t a, uint8_t b) {
  if (a == 0 || b == 0) return 0;
  const auto& t = Gf();
  return t.exp[t.log[a] + t.log[b]];
}

uint8_t GfPow2(uint32_t e) { return Gf().exp[e % 255]; }

uint64_t RaidzGeometry::ChildOffset(uint64_t off) const {
  return kAllocStart + (off - kAllocStart) / unit * col_bytes();
}

uint64_t RaidzGeometry::LogicalEnd(uint64_t child_end) const {
  if (child_end <= kAllocStart) return kAllocStart;
  return kAllocStart + (child_end - kAllocStart) / col_bytes() * unit;
}

void RaidzSplit(const RaidzGeometry& g, std::span<const uint8_t> data,
                std::vector<std::vector<uint8_t>>& cols) {
  const uint64_t units = data.size() / g.unit;
  const uint64_t cb = g.col_bytes();
  cols.resize(g.children);
  for (uint32_t c = 0; c < g.data_cols(); c++) {
    auto& col = cols[g.parity + c];
    col.resize(units * cb);
    const uint64_t start = uint64_t{c} * cb;
    const uint64_t len = start >= g.unit ? 0 : std::min<uint64_t>(cb, g.unit - start);
    for (uint64_t u = 0; u < units; u++) {
      uint8_t* dst = col.data() + u * cb;
      if (len > 0) std::memcpy(dst, data.data() + u * g.unit + start, len);
      if (len < cb) std::memset(dst + len, 0, cb - len);
    }
  }
}

void RaidzGather(const RaidzGeometry& g, const std::vector<std::vector<uint8_t>>& cols,
                 std::span<uint8_t> data) {
  const uint64_t units = data.size() / g.unit;
  const uint64_t cb = g.col_bytes();
  for (uint32_t c = 0; c < g.data_cols(); c++) {
    const uint64_t start = uint64_t{c} * cb;
    if (start >= g.unit) break;
    const uint64_t len = std::min<uint64_t>(cb, g.unit - start);
    const auto& col = cols[g.parity + c];
    for (uint64_t u = 0; u < units; u++) {
      std::memcpy(data.data() + u * g.unit + start, col.data() + u * cb, len);
    }
  }
}

void RaidzZeroPadding(const RaidzGeometry& g, std::vector<std::vector<uint8_t>>& cols) {
  const uint64_t cb = g.col_bytes();
  for (uint32_t c = 0; c < g.data_cols(); c++) {
    const uint64_t start = uint64_t{c} * cb;
    const uint64_t len = start >= g.unit ? 0 : std::min<uint64_t>(cb, g.unit - start);
    if (len == cb) continue;
    auto& col = cols[g.parity + c];
    for (uint64_t off = 0; off + cb <= col.size(); off += cb) {
      std::memset(col.data() + off + len, 0, cb - len);
    }
  }
}

void RaidzParity(const RaidzGeometry& g, std::vector<std::vector<uint8_t>>& cols) {
  ComputeP(g, cols, cols[0]);
  if (g.parity > 1) ComputeQ(g, cols, cols[1]);
}

bool RaidzReconstruct(const RaidzGeometry& g, std::vector<std::vector<uint8_t>>& cols,
                      const std::vector<uint32_t>& bad) {
  if (bad.size() > g.parity) return false;
  std::vector<uint32_t> data;  // data indices of the bad data columns
  bool p_bad = false, q_bad = false;
  for (uint32_t b : bad) {
    VS_CHECK_OP(b, <, g.children);
    if (b == 0) {
      p_bad = true;
    } else if (b == 1 && g.parity > 1) {
      q_bad = true;
    } else {
      data.push_back(b - g.parity);
    }
  }
  const size_t n = cols[g.parity].size();
  std::vector<uint8_t> tmp;
  if (data.size() == 1 && !p_bad) {
    const uint32_t x = data[0];
    ComputeP(g, cols, tmp, x);
    XorInto(tmp.data(), cols[0].data(), n);
    cols[g.parity + x] = std::move(tmp);
  } else if (data.size() == 1) {
    if (g.parity < 2 || q_bad) return false;
    const uint32_t x = data[0];
    ComputeQ(g, cols, tmp, x);
    XorInto(tmp.data(), cols[1].data(), n);  // g^x · d_x
    MulInPlace(tmp.data(), n, GfDiv(1, GfPow2(x)));
    cols[g.parity + x] = std::move(tmp);
  } else if (data.size() == 2) {
    if (p_bad || q_bad) return false;
    const uint32_t x = data[0], y = data[1];
    std::vector<uint8_t> pxy, qxy;
    ComputeP(g, cols, pxy, x, y);
    XorInto(pxy.data(), cols[0].data(), n);  // d_x + d_y
    ComputeQ(g, cols, qxy, x, y);
    XorInto(qxy.data(), cols[1].data(), n);  // g^x·d_x + g^y·d_y
    // d_x = (Q' + g^y·P') / (g^x + g^y); d_y = P' + d_x.
    const uint8_t gx = GfPow2(x), gy = GfPow2(y);
    const uint8_t inv = GfDiv(1, gx ^ gy);
    std::array<uint8_t, 256> mul_gy, mul_inv;
    for (int v = 0; v < 256; v++) {
      mul_gy[v] = GfMul(gy, static_cast<uint8_t>(v));
      mul_inv[v] = GfMul(inv, static_cast<uint8_t>(v));
    }
    std::vector<uint8_t> dx(n), dy(n);
    for (size_t i = 0; i < n; i++) {
      dx[i] = mul_inv[qxy[i] ^ mul_gy[pxy[i]]];
      dy[i] = pxy[i] ^ dx[i];
    }
    cols[g.parity + x] = std::move(dx);
    cols[g.parity + y] = std::move(dy);
  } else if (!data.empty()) {
    return false;
  }
  if (p_bad) ComputeP(g, cols, cols[0]);
  if (q_bad) ComputeQ(g, cols, cols[1]);
  return true;
}

}  // namespace volstack::pool

// Raidz geometry and parity: how a raidz top-level vdev lays its logical (allocatable)
// space over its children, and the P/Q parity that rebuilds up to two lost columns.
//
// Layout (docs/format/pool.md, "Raidz"). A raidz of n children with p parity (1 or 2) has
// m = n - p data columns. Its logical space is the pool's view: DVAs, the allocator and the
// space map use logical offsets in [kAllocStart, alloc_end), exactly as on a plain vdev.
// Every allocation unit U = 2^ashift of logical space is one full stripe: its bytes are cut
// into m data columns of C = ceil(U / S / m) sectors of S bytes (S = the children's sector
// size), column-major and zero-padded to m·C·S, and p parity columns of the same size:
//
//   logical unit u (U bytes)           child 0     child 1     child 2 ... child n-1
//   [d0 | d1 | ... | d(m-1)]    ->     P           Q (raidz2)  d0          d(m-1)
//                                      at child offset kAllocStart + (u - u0)·C·S
//
// P is the XOR of the data columns; Q = sum of g^c·d_c over GF(2^8) (polynomial 0x11d,
// generator g = 2), both byte-wise. A unit never holds parts of two blocks (blocks are
// whole units), so every write is a full stripe: no read-modify-write and no write hole
// (a torn write only ever tears a block no uberblock names yet). The stripe width per
// block is fixed rather than ZFS's variable one so that the vdev stays a BlockDevice over
// logical offsets: the pool's writers merge adjacent blocks into one vdev write and its
// readers read runs of blocks at once, and neither carries block boundaries, which
// ZFS's per-block raidz map needs.
//
// Every range handled here is whole units; a range of k units becomes, on every child, one
// contiguous extent of k·C·S bytes. Parity is computed over those extents as a whole (it
// is byte-wise, so that is the same as unit by unit).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace volstack::pool {

struct RaidzGeometry {
  uint32_t children = 0;  // n
  uint32_t parity = 0;    // p: 1 or 2
  uint32_t sector = 512;  // S: bytes of a column row (the children's largest sector)
  uint32_t unit = 4096;   // U: the pool's allocation unit (2^ashift)

  uint32_t data_cols() const { return children - parity; }
  // Bytes each child holds per logical unit (C·S).
  uint64_t col_bytes() const {
    const uint64_t sectors = unit / sector;
    return (sectors + data_cols() - 1) / data_cols() * sector;
  }
  // Child offset of logical offset `off` (a unit boundary at or past kAllocStart).
  uint64_t ChildOffset(uint64_t off) const;
  // The child-extent length of `len` logical bytes (whole units).
  uint64_t ChildLength(uint64_t len) const { return len / unit * col_bytes(); }
  // End of the logical space over children whose allocatable space ends at `child_end`.
  uint64_t LogicalEnd(uint64_t child_end) const;
  bool is_parity(uint32_t col) const { return col < parity; }
};

// Splits `data` (whole units) into the data columns' extents cols[p..n-1] (each resized to
// ChildLength(data.size())), zero-padding the tail of each unit.
void RaidzSplit(const RaidzGeometry& g, std::span<const uint8_t> data,
                std::vector<std::vector<uint8_t>>& cols);
// The inverse: the data columns' extents back into `data`.
void RaidzGather(const RaidzGeometry& g, const std::vector<std::vector<uint8_t>>& cols,
                 std::span<uint8_t> data);
// Zeroes the padding at the end of each unit's last data columns: it holds no data and
// was written as zeroes, so what a child returns there is ignored rather than trusted.
void RaidzZeroPadding(const RaidzGeometry& g, std::vector<std::vector<uint8_t>>& cols);
// Computes the parity columns cols[0..p-1] from the data columns (all of one length).
void RaidzParity(const RaidzGeometry& g, std::vector<std::vector<uint8_t>>& cols);
// Rebuilds the columns listed in `bad` (at most p, any mix of data and parity) from the
// others: data columns first (from P, Q or both), then parity from the data. False when
// the set cannot be solved (more than p columns).
bool RaidzReconstruct(const RaidzGeometry& g, std::vector<std::vector<uint8_t>>& cols,
                      const std::vector<uint32_t>& bad);

// GF(2^8) helpers (exposed for tests).
uint8_t GfMul(uint8_t a, uint8_t b);
uint8_t GfPow2(uint32_t e);  // g^e

}  // namespace volstack::pool

// PatternDevice: a test device whose every 8-byte word holds its own byte offset as a
// big-endian 64-bit number, like nbdkit's pattern plugin. Stacked under a remapping layer
// (slice, LV, stripe), a read shows in a hexdump exactly where it landed below, so an
// off-by-one-block mapping is visible at a glance and checkable with CheckPattern().
//
// Read-only by default (writes get EROFS, as in nbdkit). With `writable`, writes, discards
// and write-zeroes land in an in-memory overlay of logical blocks (a discarded block reads
// as zeroes); unwritten blocks keep the pattern. Nothing is volatile, so flush is a no-op.
//
// Threads: safe from any number of threads (one mutex around the overlay).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "bdev/block_device.h"

namespace volstack::bdev {

struct PatternOptions {
  uint64_t size = 64 << 20;
  uint32_t logical_block_size = 512;
  uint32_t physical_block_size = 4096;
  bool writable = false;
  std::string name = "pattern";
};

class PatternDevice final : public BlockDevice {
 public:
  // CHECK-fails on a size that is not a multiple of the logical block size (a test bug).
  static std::shared_ptr<PatternDevice> Create(const PatternOptions& options = {});

  // Fills `buf` with the pattern as it reads at device offset `offset` (any alignment).
  static void FillPattern(uint64_t offset, std::span<uint8_t> buf);
  // The first byte offset (relative to `offset`) where `buf` differs from the pattern at
  // `offset`, or nullopt when it matches.
  static std::optional<uint64_t> CheckPattern(uint64_t offset, std::span<const uint8_t> buf);

  // Logical blocks currently held in the overlay.
  size_t overlay_blocks() const;

  PatternDevice(std::string name, const Geometry& geometry);

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override;
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, WriteOptions opts) override;
  Status DoFlush() override { return Status::Ok(); }
  Status DoDiscard(uint64_t offset, uint64_t length) override;
  Status DoWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts) override;

 private:
  void ZeroLocked(uint64_t offset, uint64_t length);

  mutable std::mutex mu_;
  std::map<uint64_t, std::vector<uint8_t>> overlay_;  // GUARDED_BY(mu_); key = block index
};

}  // namespace volstack::bdev

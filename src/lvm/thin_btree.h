// ThinBtreeReader: lookups and in-order walks of persistent-data btrees (thin_format.h) on a
// pool's metadata device.
//
// Every node read is checked (checksum, its own block number, counts, key order, value size)
// and a walk refuses a tree deeper than kMaxDepth or a node outside the metadata device, so
// bad metadata gives Corruption naming the block, never a crash or an endless walk.
//
// Threads: const methods only; safe from any thread as far as the device is.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "bdev/block_device.h"
#include "lvm/thin_format.h"

namespace volstack::lvm {

class ThinBtreeReader {
 public:
  // Deeper than any tree of 2^64 keys with the smallest fan-out persistent-data builds.
  static constexpr int kMaxDepth = 32;

  // `nr_blocks`: the metadata device's blocks (the superblock's metadata_nr_blocks).
  ThinBtreeReader(bdev::BlockDevicePtr meta, uint64_t nr_blocks)
      : meta_(std::move(meta)), nr_blocks_(nr_blocks) {}

  // The value stored under `key` in the tree at `root` (leaves hold `value_size` bytes), or
  // nullopt when absent.
  Result<std::optional<std::vector<uint8_t>>> Lookup(uint64_t root, uint64_t key,
                                                     uint32_t value_size) const;

  using Visit = std::function<Status(uint64_t key, std::span<const uint8_t> value)>;
  // Calls visit for every entry in key order; stops at the first non-Ok status and returns it.
  Status Walk(uint64_t root, uint32_t value_size, const Visit& visit) const;

  // Block `blocknr`, checked as a node (internal, or a leaf with `value_size` values).
  Status ReadNode(uint64_t blocknr, uint32_t value_size, std::vector<uint8_t>& block,
                  BtreeNodeHeader& header) const;

 private:
  Status WalkNode(uint64_t blocknr, uint32_t value_size, int depth, uint64_t& budget,
                  const Visit& visit) const;

  bdev::BlockDevicePtr meta_;
  uint64_t nr_blocks_;
};

}  // namespace volstack::lvm

// Vdev: one leaf device of a pool and the label I/O on it (labels, uberblock ring). Data
// blocks are read and written through device() directly by the pool. device() is the
// caller's device behind a thin forwarding layer that counts failed operations (errors(),
// zpool status's READ and WRITE columns); the pool counts checksum mismatches itself.
// Thread-safe: all state is immutable after construction or atomic; I/O goes to the
// (thread-safe) BlockDevice.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "bdev/block_device.h"
#include "pool/label_format.h"

namespace volstack::pool {

// Error counters of one vdev since the pool was opened.
struct VdevErrors {
  std::atomic<uint64_t> read{0};      // failed reads
  std::atomic<uint64_t> write{0};     // failed writes, zeroings and flushes
  std::atomic<uint64_t> checksum{0};  // blocks read whose checksum did not match
};

class Vdev {
 public:
  Vdev(bdev::BlockDevicePtr device, uint32_t id, uint64_t guid);

  const bdev::BlockDevicePtr& device() const { return device_; }
  uint32_t id() const { return id_; }
  uint64_t guid() const { return guid_; }
  uint64_t size() const { return device_->size(); }
  uint64_t alloc_start() const { return kAllocStart; }
  uint64_t alloc_end() const { return AllocEnd(size()); }
  VdevErrors& errors() const { return *errors_; }

  // Writes the config into labels with the given parity (0: L0,L2; 1: L1,L3).
  Status WriteLabelConfigs(const LabelConfig& config, int parity);
  // Writes `ub` into slot txg % kUberSlots of all four labels.
  Status WriteUberblock(const Uberblock& ub);
  // Every uberblock that decodes, from all four labels.
  std::vector<Uberblock> ReadUberblocks();

  // The newest valid config among the four labels, or the first error.
  static Result<LabelConfig> ReadLabelConfig(bdev::BlockDevice& device);

 private:
  std::shared_ptr<VdevErrors> errors_;  // shared with the counting layer in device_
  bdev::BlockDevicePtr device_;
  uint32_t id_;
  uint64_t guid_;
};

}  // namespace volstack::pool

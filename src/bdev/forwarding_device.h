// ForwardingDevice: a BlockDevice that passes every operation unchanged to the device below,
// the base for layers that only observe (TraceDevice, stats), after leveldb's EnvWrapper.
//
// A subclass overrides the Do* hooks it wants to watch and calls the ForwardingDevice version
// to pass the request on. Vectored writes are forwarded as vectored writes (DoWriteV): an
// observer that watches writes overrides DoWriteV too, or calls BlockDevice::DoWriteV to see
// them as plain DoWrite calls. Layers that *remap* addresses (slices, LVs, pool volumes) must not
// derive from this: they implement every operation themselves, so that an operation added
// to the contract later cannot slip through a remapper unmapped.
//
// Geometry: the target's (size, block sizes, capabilities, read-only), captured at
// construction. The target's own boundary checks run again on every call; that costs a few
// compares and keeps the target safe from a subclass that shifts requests.
//
// Threads: as thread-safe as the target; the forwarding itself holds no state.
#pragma once

#include <memory>
#include <string>

#include "bdev/block_device.h"

namespace volstack::bdev {

class ForwardingDevice : public BlockDevice {
 public:
  const BlockDevicePtr& target() const { return target_; }

 protected:
  // `target` must not be null. `name` defaults to the target's name.
  explicit ForwardingDevice(BlockDevicePtr target, std::string name = {});

  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override;
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, WriteOptions opts) override;
  Status DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                  WriteOptions opts) override;
  Status DoFlush() override;
  void DoStartWriteback(uint64_t offset, uint64_t length) override;
  Status DoDiscard(uint64_t offset, uint64_t length) override;
  Status DoWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts) override;
  Result<std::vector<AllocationExtent>> DoQueryAllocation(uint64_t offset,
                                                          uint64_t length) override;

 private:
  const BlockDevicePtr target_;
};

}  // namespace volstack::bdev

// ZvolDevice: a pool volume as a bdev::BlockDevice.
//
// Geometry: size = volsize (grows with `zfs set volsize`), logical block size 512 (or
// 4096), physical block size = optimal I/O = volblocksize. Discard and write-zeroes turn
// whole blocks into holes (no space); the allocation query reads the block-pointer tree.
// Durability follows the `sync` property, read at each call: standard -> Flush() and FUA
// writes commit the txg; always -> every write commits before it returns; disabled ->
// Flush() returns at once (data reaches disk with the next timed txg).
//
// The device holds the pool (shared_ptr): the pool stays open while a device exists.
// Threads: safe from any number of threads (see volume.h for the locking).
#pragma once

#include <memory>

#include "bdev/block_device.h"
#include "pool/spa.h"

namespace volstack::pool {

class Volume;

class ZvolDevice final : public bdev::BlockDevice {
 public:
  ZvolDevice(std::shared_ptr<Pool> pool, std::shared_ptr<Volume> volume, bool read_only,
             uint32_t logical_block_size);
  ~ZvolDevice() override;

  const std::shared_ptr<Pool>& pool() const { return pool_; }

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override;
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) override;
  Status DoFlush() override;
  Status DoDiscard(uint64_t offset, uint64_t length) override;
  Status DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) override;
  Result<std::vector<bdev::AllocationExtent>> DoQueryAllocation(uint64_t offset,
                                                                uint64_t length) override;

 private:
  Status AfterWrite(bool fua);

  std::shared_ptr<Pool> pool_;  // declared first: destroyed after volume_
  std::shared_ptr<Volume> volume_;
};

}  // namespace volstack::pool

// SliceDevice: a window [offset, offset + size) onto another device, read-only if asked —
// losetup's --offset, --sizelimit and --read-only, nbdkit's offset filter.
//
// A remapper: every operation is implemented here by adding the offset and calling the
// device below, so a future operation of the contract cannot pass through unshifted. The
// window is fixed at creation: growing the device below does not grow the slice.
//
// Geometry: block sizes, optimal I/O size and capabilities are the device below's. When the
// window's offset is not a multiple of the physical block size below, the slice reports the
// largest power of two dividing the offset (at least the logical block size) instead, so a
// layer above that aligns to "physical blocks" is not misled into straddling real ones.
//
// Threads: as safe as the device below; the slice holds no mutable state.
#pragma once

#include <memory>
#include <string>

#include "bdev/block_device.h"

namespace volstack::bdev {

struct SliceOptions {
  uint64_t offset = 0;     // bytes into the device below; a multiple of its logical block size
  uint64_t size = 0;       // bytes; 0 = up to the end of the device below
  bool read_only = false;  // a slice of a read-only device is read-only regardless
  std::string name = {};   // "" = "<below>[offset+size]"
};

class SliceDevice final : public BlockDevice {
 public:
  // EINVAL when offset or size is not a multiple of the logical block size below, or the
  // window is empty; ENOSPC when the window reaches past the end of the device below.
  static Result<std::shared_ptr<SliceDevice>> Create(BlockDevicePtr below,
                                                     const SliceOptions& options);

  const BlockDevicePtr& below() const { return below_; }
  uint64_t offset() const { return offset_; }

  SliceDevice(BlockDevicePtr below, uint64_t offset, std::string name, const Geometry& geometry);

 protected:
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
  const BlockDevicePtr below_;
  const uint64_t offset_;
};

}  // namespace volstack::bdev

// ByteRangeIo: byte-granular access to a BlockDevice, for exports whose clients do not keep
// to the device's logical block size (buffered writes through FUSE, NBD clients that did not
// negotiate block sizes).
//
// Aligned requests go straight to the device. An unaligned read reads the enclosing aligned
// range into a bounce buffer. An unaligned write or zero-range is a read-modify-write of its
// partial head and tail blocks; the aligned middle goes straight to the device.
//
// Concurrency: a read-modify-write must not interleave with another write to the same
// block, or one of them is lost (the RMW would write back stale bytes next to its patch).
// Unaligned requests are rare (the kernel loop device and well-behaved NBD clients never
// send them), so every mutation takes a shared lock and an RMW takes it exclusively: the
// common path pays one uncontended reader-lock, RMWs are serialised with everything.
//
// Reads past the end are clipped (the caller gets fewer bytes, as a file's read does);
// mutations past the end fail with ENOSPC.
//
// Threads: all methods are safe from any number of threads.
#pragma once

#include <cstdint>
#include <shared_mutex>
#include <span>

#include "bdev/block_device.h"

namespace volstack::exportfs {

class ByteRangeIo {
 public:
  explicit ByteRangeIo(bdev::BlockDevicePtr device);

  const bdev::BlockDevicePtr& device() const { return device_; }
  uint64_t size() const { return device_->size(); }

  // Reads up to buf.size() bytes at `offset`; returns how many were read (short only at the
  // end of the device; 0 at or past it).
  Result<size_t> Read(uint64_t offset, std::span<uint8_t> buf);
  // Writes all of buf at `offset` (ENOSPC if it does not fit).
  Status Write(uint64_t offset, std::span<const uint8_t> buf, bool fua = false);
  // After success [offset, offset+length) reads as zeroes. `may_unmap` lets the aligned part
  // become a hole.
  Status WriteZeroes(uint64_t offset, uint64_t length, bool may_unmap, bool fua = false);
  // Discards the whole logical blocks inside the range (a hint: partial blocks are left
  // alone). OK without effect on a device that cannot discard.
  Status Discard(uint64_t offset, uint64_t length);
  Status Flush() { return device_->Flush(); }

 private:
  bool Aligned(uint64_t offset, uint64_t length) const {
    return offset % lbs_ == 0 && length % lbs_ == 0;
  }
  Status CheckWritable(const char* op, uint64_t offset, uint64_t length) const;
  // Writes `data` (or zeroes when data is null) over [offset, offset+length) inside one
  // logical block, by read-modify-write. Requires the exclusive lock.
  Status PatchBlock(uint64_t offset, uint64_t length, const uint8_t* data);

  const bdev::BlockDevicePtr device_;
  const uint64_t lbs_;
  std::shared_mutex rmw_mu_;  // shared: any mutation; exclusive: a read-modify-write
};

}  // namespace volstack::exportfs

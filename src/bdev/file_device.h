// FileDevice: a BlockDevice over a regular file or a kernel block device.
//
// Reads and writes are pread/pwrite, vectored writes pwritev (O_DIRECT optional: unaligned
// caller buffers go through an aligned bounce buffer); flush is fdatasync; FUA is
// pwritev2(RWF_DSYNC). On a regular file, discard punches a hole, write-zeroes punches or
// zero-ranges, and the allocation query walks SEEK_DATA/SEEK_HOLE. On a block device the size and
// block sizes come from the kernel (BLKGETSIZE64, BLKSSZGET, BLKPBSZGET), discard is BLKDISCARD and
// zeroing BLKZEROOUT.
//
// Failed flushes stick (sync_error_latch.h): once an fdatasync or a RWF_DSYNC write fails,
// every later flush and FUA write fails with that error until the file is opened again,
// and a flush that overlapped the failing one reports its failure. The kernel reports a
// failed write-back to one caller only and forgets the pages it could not write, so a later
// success could otherwise stand over lost writes. A FUA write's own failure (ENOSPC, say)
// sticks too: nothing tells it apart from a failed write-back.
//
// Threads: all calls are positional syscalls on one fd, safe from any number of threads.
#pragma once

#include <sys/uio.h>

#include <memory>
#include <string>

#include "bdev/block_device.h"
#include "bdev/sync_error_latch.h"

namespace volstack::bdev {

struct FileDeviceOptions {
  bool read_only = false;
  bool direct_io = false;            // O_DIRECT
  bool exclusive_lock = false;       // flock(LOCK_EX|LOCK_NB): EBUSY when another holds it
  uint32_t logical_block_size = 0;   // 0 = 512 for files, the kernel's for block devices
  uint32_t physical_block_size = 0;  // 0 = 4096 for files, the kernel's for block devices
};

class FileDevice final : public BlockDevice {
 public:
  // Opens an existing file or block device. A regular file's size is rounded down to the
  // logical block size (the tail is not addressable).
  static Result<std::shared_ptr<FileDevice>> Open(const std::string& path,
                                                  const FileDeviceOptions& options = {});
  // Creates (or truncates to) a sparse regular file of `size` bytes, then opens it.
  static Result<std::shared_ptr<FileDevice>> Create(const std::string& path, uint64_t size,
                                                    const FileDeviceOptions& options = {});

  ~FileDevice() override;

  const std::string& path() const { return path_; }
  bool is_block_device() const { return is_block_device_; }
  int fd() const { return fd_; }

  FileDevice(std::string path, int fd, bool is_block_device, bool direct_io,
             const Geometry& geometry);

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override;
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, WriteOptions opts) override;
  // pwritev2 in chunks of IOV_MAX pieces, short writes resumed; O_DIRECT with a piece that
  // is not aligned in memory or length gathers them all into one aligned bounce buffer.
  Status DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                  WriteOptions opts) override;
  Status DoFlush() override;
  void DoStartWriteback(uint64_t offset, uint64_t length) override;
  Status DoDiscard(uint64_t offset, uint64_t length) override;
  Status DoWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts) override;
  Result<std::vector<AllocationExtent>> DoQueryAllocation(uint64_t offset,
                                                          uint64_t length) override;

 private:
  Status ReadFully(uint64_t offset, uint8_t* data, size_t length);
  Status WriteFully(uint64_t offset, const uint8_t* data, size_t length, bool dsync);
  // One pwritev2 (retried on EINTR), through sync_latch_ when `dsync`.
  Status PwriteV(const iovec* iov, int count, uint64_t offset, bool dsync, ssize_t* written);

  const std::string path_;
  const int fd_;
  const bool is_block_device_;
  const bool direct_io_;
  SyncErrorLatch sync_latch_;  // fdatasync and RWF_DSYNC writes
};

}  // namespace volstack::bdev

// MemoryDevice: a sparse in-memory BlockDevice for tests. Storage is a map of fixed-size
// chunks allocated on first write; unwritten chunks are holes and read as zeroes. Discard and
// write-zeroes free whole chunks and zero partial ones, so the allocation query is exact at
// chunk granularity. Thread-safe (one mutex; it is a test device).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "bdev/block_device.h"

namespace volstack::bdev {

class MemoryDevice final : public BlockDevice {
 public:
  static constexpr uint32_t kChunkSize = 64 * 1024;

  // `size` must be a multiple of logical_block_size.
  static std::shared_ptr<MemoryDevice> Create(uint64_t size, uint32_t logical_block_size = 512,
                                              uint32_t physical_block_size = 4096,
                                              std::string name = "memory");

  // Bytes of chunks currently allocated (a test's view of space use).
  uint64_t allocated_bytes() const;

  // An independent copy of the device: same geometry, name and contents.
  std::shared_ptr<MemoryDevice> Clone() const;

  MemoryDevice(std::string name, const Geometry& geometry);

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override;
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, WriteOptions opts) override;
  Status DoFlush() override { return Status::Ok(); }
  Status DoDiscard(uint64_t offset, uint64_t length) override;
  Status DoWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts) override;
  Result<std::vector<AllocationExtent>> DoQueryAllocation(uint64_t offset,
                                                          uint64_t length) override;

 private:
  void ZeroRangeLocked(uint64_t offset, uint64_t length);

  mutable std::mutex mu_;
  std::map<uint64_t, std::vector<uint8_t>> chunks_;  // GUARDED_BY(mu_); key = chunk index
};

}  // namespace volstack::bdev

// ThinDevice: a thin LV served in userspace from its pool, as dm-thin would serve it.
//
// Theory. A thin pool is two sub-LVs: _tdata, an array of data blocks (data_block_size
// sectors each, the pool's chunk_size), and _tmeta, dm-thin's metadata (thin_format.h): a
// superblock naming the roots of a two-level mapping tree (thin device id -> virtual block ->
// data block) and of the device details tree, checksummed and copy-on-write, so the blocks
// the superblock names always form the last committed transaction.
//
// Open reads the committed transaction: it checks the superblock (magic, checksum, version,
// no needs_check flag, the data block size lvm2 recorded as chunk_size, the transaction id
// lvm2 recorded for the pool, the metadata and data devices large enough), finds the device
// in the details and mapping trees, and walks the device's tree once into memory, checking
// every data block lies inside the pool. Refused, with one error naming the LV and writing
// nothing, when any of that fails.
//
// Reads: a mapped block reads from _tdata at data block x block size; an unmapped block
// reads as zeroes (dm-thin returns zeroes for unprovisioned blocks). The allocation query
// reports unmapped blocks as holes.
//
// Limits: the device is read-only (writes, which must allocate data blocks and commit new
// metadata, are not served yet); the mapping is read once at Open, so it must not be opened
// while a kernel or another writer owns the pool.
//
// Threads: after Open nothing changes; every method is safe from any thread.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "bdev/block_device.h"
#include "lvm/thin_format.h"

namespace volstack::lvm {

class ThinDevice final : public bdev::BlockDevice {
 public:
  struct Config {
    std::string name;           // "vg/lv"
    uint64_t size = 0;          // bytes: the thin LV's extents
    bdev::BlockDevicePtr meta;  // the pool's _tmeta
    bdev::BlockDevicePtr data;  // the pool's _tdata
    uint64_t device_id = 0;
    uint64_t chunk_sectors = 0;   // the pool segment's chunk_size
    uint64_t transaction_id = 0;  // the pool segment's transaction_id
  };

  static Result<std::shared_ptr<ThinDevice>> Open(Config config);

  // Mapped virtual block -> data block, as read at Open.
  const std::map<uint64_t, uint64_t>& mapping() const { return mapping_; }
  uint64_t block_bytes() const { return block_bytes_; }
  const ThinSuperblock& superblock() const { return sb_; }

  ThinDevice(Config config, const bdev::Geometry& g)
      : BlockDevice(config.name, g), config_(std::move(config)) {}

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override;
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) override;
  Status DoFlush() override;
  Status DoDiscard(uint64_t offset, uint64_t length) override;
  Status DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) override;
  Result<std::vector<bdev::AllocationExtent>> DoQueryAllocation(uint64_t offset,
                                                                uint64_t length) override;

 private:
  Status NotWritable() const;

  Config config_;
  ThinSuperblock sb_;
  uint64_t block_bytes_ = 0;
  std::map<uint64_t, uint64_t> mapping_;
};

}  // namespace volstack::lvm

// ThinDevice: a thin LV served in userspace from its pool (thin_pool.h), as dm-thin would
// serve it.
//
// A thin pool is two sub-LVs: _tdata, an array of data blocks (the pool's chunk_size), and
// _tmeta, dm-thin's metadata (thin_format.h): a superblock naming the roots of a two-level
// mapping tree (thin device id -> virtual block -> data block) and of the device details
// tree, checksummed and copy-on-write, so the blocks the superblock names always form the
// last committed transaction.
//
// Opening the pool reads the committed transaction: it checks the superblock (magic,
// checksum, version, no needs_check flag, the data block size lvm2 recorded as chunk_size,
// the transaction id lvm2 recorded for the pool, the metadata and data LVs large enough),
// and walks every device's tree into memory, checking every node and that every data block
// lies inside the pool. Refused, with one error naming the LV and writing nothing, when any
// of that fails, or when the LV's device_id is not in the pool.
//
// Reads: a mapped block reads from _tdata at data block x block size; an unmapped block
// reads as zeroes (dm-thin returns zeroes for unprovisioned blocks). The allocation query
// reports unmapped blocks as holes. Writes and Flush: ThinPool (allocation on first write,
// copy of blocks shared with a snapshot, commit at flush). A FUA write is a write and a
// flush. Discard unmaps the blocks it covers whole, returning them to the pool at the next
// commit; write-zeroes unmaps whole blocks too (unless told not to) and writes zeroes in
// the partial ones.
//
// Limits: the mapping is read once, so the pool must not be active in a kernel or another
// process at the same time.
//
// Threads: every method is safe from any thread.
#pragma once

#include <memory>
#include <string>

#include "bdev/block_device.h"
#include "lvm/thin_pool.h"

namespace volstack::lvm {

class ThinDevice final : public bdev::BlockDevice {
 public:
  // A private pool for one device (tests, tools).
  struct Config {
    std::string name;           // "vg/lv"
    uint64_t size = 0;          // bytes: the thin LV's extents
    bdev::BlockDevicePtr meta;  // the pool's _tmeta
    bdev::BlockDevicePtr data;  // the pool's _tdata
    uint64_t device_id = 0;
    uint64_t chunk_sectors = 0;   // the pool segment's chunk_size
    uint64_t transaction_id = 0;  // the pool segment's transaction_id
    bool read_only = false;
  };
  static Result<std::shared_ptr<ThinDevice>> Open(Config config);
  // Device `id` of an open pool, `size` bytes, named "vg/lv".
  static Result<std::shared_ptr<ThinDevice>> Open(std::shared_ptr<ThinPool> pool, uint64_t id,
                                                  const std::string& name, uint64_t size,
                                                  bool read_only);

  // Mapped virtual block -> data block.
  std::map<uint64_t, uint64_t> mapping() const { return pool_->Mapping(id_); }
  const std::shared_ptr<ThinPool>& pool() const { return pool_; }

  ThinDevice(std::shared_ptr<ThinPool> pool, uint64_t id, const std::string& name,
             const bdev::Geometry& g)
      : BlockDevice(name, g), pool_(std::move(pool)), id_(id) {}

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override;
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) override;
  Status DoFlush() override;
  Status DoDiscard(uint64_t offset, uint64_t length) override;
  Status DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) override;
  Result<std::vector<bdev::AllocationExtent>> DoQueryAllocation(uint64_t offset,
                                                                uint64_t length) override;

 private:
  std::shared_ptr<ThinPool> pool_;
  uint64_t id_;
};

}  // namespace volstack::lvm

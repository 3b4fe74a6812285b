// ThinPool: a thin pool's committed metadata held in memory, its thin devices' reads and
// writes, and the commits that make writes durable (thin_commit.h).
//
// Theory. Open reads the committed transaction (thin_device.h lists the checks): every thin
// device's mapping and details, the data blocks' reference counts (one per mapping that
// names the block), and which metadata blocks the transaction uses (its metadata space map).
// From then on the pool is the only writer of the metadata; every thin LV of the pool
// activated in one process shares one ThinPool (thin_lv.cc).
//
// Writes, as dm-thin does them: a block the device owns alone (count 1, now and in the
// committed transaction) is written in place; an unmapped block gets a free data block
// (count 0, now and in the committed transaction), written whole (zeroes around the
// request: lvm2's pools zero new blocks, and a block reused after a discard must not show
// old data); a block shared with a snapshot (count > 1) is copied to a new block first.
// The new mappings live in memory until Flush: the data device is flushed (the data is on
// disk before any mapping names it), then CommitThinMetadata writes the new transaction,
// superblock last. A crash before that leaves the previous transaction: mappings made
// since are lost, as unflushed writes may be; blocks written in place keep their new data,
// as with dm-thin. Counting the committed transaction too means a crash can never show a
// write through a mapping the write was not for.
//
// Threads: every method is safe from any thread; one mutex guards the state.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "lvm/thin_commit.h"

namespace volstack::lvm {

class ThinPool {
 public:
  struct Config {
    std::string name;             // "vg/pool", for messages
    bdev::BlockDevicePtr meta;    // _tmeta
    bdev::BlockDevicePtr data;    // _tdata
    uint64_t chunk_sectors = 0;   // the pool segment's chunk_size
    uint64_t transaction_id = 0;  // the pool segment's transaction_id
  };
  static Result<std::shared_ptr<ThinPool>> Open(Config config);
  ~ThinPool();  // commits what is left (best effort)

  bool HasDevice(uint64_t id) const;
  uint64_t block_bytes() const { return block_bytes_; }
  bool writable() const { return writable_; }

  Status Read(uint64_t id, uint64_t offset, std::span<uint8_t> buf);
  Status Write(uint64_t id, uint64_t offset, std::span<const uint8_t> buf);
  // Unmaps the blocks [offset, offset + length) covers whole (they read as zeroes after);
  // partial blocks are left as they are. Their data blocks are free once no mapping, in
  // memory or in the committed transaction, names them: reused only after a commit.
  Status Unmap(uint64_t id, uint64_t offset, uint64_t length);
  // Data flushed, then the metadata committed when anything changed.
  Status Flush();
  // Mapped virtual block -> data block of device `id` (a copy).
  std::map<uint64_t, uint64_t> Mapping(uint64_t id) const;
  ThinSuperblock superblock() const;

 private:
  explicit ThinPool(Config c) : config_(std::move(c)) {}
  Status WriteBlock(ThinPoolState::Device& dev, uint64_t vblock, uint64_t in,
                    std::span<const uint8_t> piece);  // REQUIRES mu_
  Result<uint64_t> AllocateData();                    // REQUIRES mu_
  Status CommitLocked();                              // REQUIRES mu_

  const Config config_;
  uint64_t block_bytes_ = 0;
  bool writable_ = false;
  mutable std::mutex mu_;
  ThinPoolState state_;          // GUARDED_BY(mu_)
  std::vector<bool> meta_used_;  // GUARDED_BY(mu_)
  // Data blocks' counts in the committed transaction. GUARDED_BY(mu_)
  std::vector<uint32_t> committed_refs_;
  uint64_t next_data_ = 0;  // GUARDED_BY(mu_): where the free-block search resumes
  bool dirty_ = false;      // GUARDED_BY(mu_)
  Status failed_;           // GUARDED_BY(mu_): a failed commit (CommitLocked)
};

}  // namespace volstack::lvm

// ZvolDevice: a pool volume as a bdev::BlockDevice.
//
// Geometry: size = volsize (grows with `zfs set volsize`), logical block size 512 (or
// 4096), physical block size = optimal I/O = volblocksize. Discard and write-zeroes turn
// whole blocks into holes (no space); the allocation query reads the block-pointer tree.
// Durability follows the `sync` property, read at each call: standard -> Flush() and FUA
// writes are durable when they return; always -> every write is; disabled -> Flush()
// returns at once (data reaches disk with the next timed txg). How: with logbias=latency
// (the default) through the volume's intent log (zil.h: a log write and a flush of the
// vdevs written); with logbias=throughput by committing the txg. Each write is made under
// the log's range lock and recorded (zil.h) so overlapping writes log in volume order.
// VOLSTACK_LOGBIAS in the environment overrides the default (benchmarks compare both).
//
// The device holds the pool (shared_ptr): the pool stays open while a device exists.
// Threads: safe from any number of threads (see volume.h for the locking).
#pragma once

#include <functional>
#include <memory>

#include "bdev/block_device.h"
#include "pool/spa.h"

namespace volstack::pool {

class Volume;
class Zil;

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
  struct Mode {
    bool log = true;  // record writes and make them durable through the intent log
    bool always = false;
    bool disabled = false;
  };
  Mode GetMode() const;
  // The pool usable and the volume not destroyed.
  Status CheckUsable() const;
  uint64_t OpenTxg() const;
  // Zeroes [offset, offset+length) (discard / write-zeroes), logged like a write.
  Status Zero(uint64_t offset, uint64_t length, bool fua);
  Status MakeDurable(const Mode& m);
  // Runs `attempt` (a write or a zeroing of the volume) and, while it finds the pool out of
  // space but commits would free some, commits and runs it again. An overwrite needs its
  // new blocks before the old are freed, and freed space returns kTxgDefer txgs later: a
  // stream of overwrites would otherwise fail in a pool that is far from full (zfs waits
  // for the txgs too). `logged`: a successful attempt is in the intent log.
  Status RetryWhileSpaceIsComing(bool logged, const std::function<Status()>& attempt);

  std::shared_ptr<Pool> pool_;  // declared first: destroyed after volume_
  std::shared_ptr<Volume> volume_;
  std::shared_ptr<Zil> zil_;
};

}  // namespace volstack::pool

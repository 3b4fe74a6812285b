// RunWriter: writes runs of data blocks at adjacent addresses on one vdev with one vectored
// write, straight from the callers' buffers (which must stay put until Flush returns), up
// to kMaxRunBytes a write. The commit's data phase (Volume::SyncTree) and the early writes
// (early_write.cc) use it.
//
// Write-back. The commit flushes right after its writes, and an early block is flushed by
// the commit that adopts it: a long run is started for the disk at once (StartWriteback),
// so those flushes find less left to write. Short runs (random writes) would only add
// system calls. Every run is counted for the early flusher (early_flush.h), which drains
// the disk's cache while the writes go on.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "pool/pool_impl.h"

namespace volstack::pool {

class RunWriter {
 public:
  static constexpr uint64_t kMaxRunBytes = 1 << 20;

  explicit RunWriter(PoolImpl* pool) : pool_(pool) {}
  Status Add(const Dva& dva, std::span<const uint8_t> data) {
    if (!pieces_.empty() &&
        (dva.vdev != vdev_ || dva.offset != end_ || end_ - start_ + dva.asize() > kMaxRunBytes)) {
      VS_RETURN_IF_ERROR(Flush());
    }
    if (pieces_.empty()) vdev_ = dva.vdev, start_ = end_ = dva.offset;
    pieces_.push_back(data);
    // Pad to the allocated size so the next adjacent block lines up.
    if (dva.asize() > data.size()) {
      VS_CHECK_OP(dva.asize() - data.size(), <=, sizeof kZeroPad);
      pieces_.emplace_back(kZeroPad, dva.asize() - data.size());
    }
    end_ += dva.asize();
    return Status::Ok();
  }
  Status Flush() {
    if (pieces_.empty()) return Status::Ok();
    bdev::BlockDevice& vdev = *pool_->vdevs[vdev_]->device();
    Status st = vdev.WriteV(start_, pieces_);
    pieces_.clear();
    if (st.ok() && end_ - start_ >= kHintRun) vdev.StartWriteback(start_, end_ - start_);
    if (st.ok()) pool_->NoteDataWritten(vdev_, end_ - start_);
    return st;
  }

 private:
  static constexpr uint64_t kHintRun = 256 << 10;
  // asize - size < 2^ashift <= 64 KiB; page-aligned for a vdev file opened O_DIRECT.
  alignas(4096) static constexpr uint8_t kZeroPad[64 * 1024] = {};

  PoolImpl* const pool_;
  uint32_t vdev_ = 0;
  uint64_t start_ = 0, end_ = 0;
  std::vector<std::span<const uint8_t>> pieces_;
};

}  // namespace volstack::pool

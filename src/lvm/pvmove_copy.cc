// The double-buffered pvmove copy (theory in pvmove_copy.h).
//
// Data flow: the reader thread takes a free buffer, holds the region in the MirrorGate, asks
// the source which runs hold data, reads them into the buffer and queues the region; the
// calling thread (the writer) takes regions in order, writes the data runs (and zeroes the
// holes the destination still has data in), releases the region in the gate, and returns
// the buffer. A failure or a stop on either side sets `cancel`; the writer then releases every
// region still queued and joins the reader, so nothing stays held.
//
// Locking: `mu` guards the queue, the free list and `cancel`; no device I/O runs under it.
// Gate holds are taken only by the reader and released only by the writer (or the drain).
#include "lvm/pvmove_copy.h"

#include <fcntl.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "bdev/file_device.h"
#include "lvm/mirror_gate.h"

namespace volstack::lvm {

namespace {

// A file destination's write-back is started this often (sync_file_range is cheap).
constexpr uint64_t kFileWritebackBytes = 2 << 20;

struct Region {
  uint64_t offset = 0;  // in the segment
  uint64_t length = 0;
  std::vector<bdev::AllocationExtent> runs;  // offsets in the segment
  int buffer = -1;
  Status status;  // the reader's failure (the region is held anyway)
};

class Pipeline {
 public:
  explicit Pipeline(const SegmentCopy& c) : c_(c) {
    if (auto* f = dynamic_cast<bdev::FileDevice*>(c.dst.get()); f && !f->is_block_device()) {
      file_fd_ = f->fd();
    }
    const int depth = std::max(1, c.depth);
    buffers_.resize(static_cast<size_t>(depth));
    for (int i = 0; i < depth; i++) {
      buffers_[static_cast<size_t>(i)].resize(c.region_bytes);
      free_.push_back(i);
    }
  }

  Status Run() {
    std::thread reader([this] { ReadLoop(); });
    std::thread flusher;
    if (c_.flush_behind_bytes > 0) flusher = std::thread([this] { FlushLoop(); });
    Status result = WriteLoop();
    {
      std::lock_guard l(mu_);
      cancel_ = true;
    }
    cv_.notify_all();
    reader.join();
    if (flusher.joinable()) flusher.join();
    if (result.ok() && !flush_status_.ok()) result = flush_status_;
    // Regions the reader queued that were never written.
    for (const Region& r : queue_) {
      Gate().EndCopy(c_.gate_pv, c_.dst_offset + r.offset, r.length);
    }
    queue_.clear();
    return result;
  }

 private:
  void ReadLoop() {
    for (uint64_t o = 0; o < c_.length;) {
      Region r;
      r.offset = o;
      r.length = std::min<uint64_t>(c_.region_bytes, c_.length - o);
      {
        std::unique_lock l(mu_);
        cv_.wait(l, [&] { return cancel_ || !free_.empty(); });
        if (cancel_) return;
        r.buffer = free_.front();
        free_.pop_front();
      }
      if (o > 0 && c_.between_regions) c_.between_regions();
      Gate().BeginCopy(c_.gate_pv, c_.dst_offset + o, r.length);
      r.status = ReadRegion(r);
      const bool failed = !r.status.ok();
      o += r.length;
      {
        std::lock_guard l(mu_);
        queue_.push_back(std::move(r));
      }
      cv_.notify_all();
      if (failed) return;
    }
  }

  Status ReadRegion(Region& r) {
    const uint64_t soff = c_.src_offset + r.offset;
    r.runs = {{r.offset, r.length, true}};
    if (c_.src->geometry().caps.allocation_query) {
      VS_ASSIGN_OR_RETURN(auto runs, c_.src->QueryAllocation(soff, r.length));
      r.runs.clear();
      for (auto run : runs) {
        run.offset = run.offset - c_.src_offset;
        r.runs.push_back(run);
      }
    }
    std::vector<uint8_t>& buf = buffers_[static_cast<size_t>(r.buffer)];
    for (const auto& run : r.runs) {
      if (!run.allocated) continue;
      std::span<uint8_t> b(buf.data() + (run.offset - r.offset), run.length);
      VS_RETURN_IF_ERROR(c_.src->Read(c_.src_offset + run.offset, b));
    }
    return Status::Ok();
  }

  Status WriteRegion(const Region& r) {
    const std::vector<uint8_t>& buf = buffers_[static_cast<size_t>(r.buffer)];
    for (const auto& run : r.runs) {
      const uint64_t d = c_.dst_offset + run.offset;
      if (run.allocated) {
        std::span<const uint8_t> b(buf.data() + (run.offset - r.offset), run.length);
        VS_RETURN_IF_ERROR(c_.dst->Write(d, b));
        continue;
      }
      bool dst_hole = false;
      if (c_.dst->geometry().caps.allocation_query) {
        auto q = c_.dst->QueryAllocation(d, run.length);
        dst_hole = q.ok() && q->size() == 1 && !(*q)[0].allocated;
      }
      if (!dst_hole) VS_RETURN_IF_ERROR(c_.dst->WriteZeroes(d, run.length, {true, false}));
    }
    return Status::Ok();
  }

  // Write-behind, until cancelled: a file destination gets the write-back of the bytes the
  // writer wrote started (sync_file_range: only the copy's pages, not the dirty pages the
  // LV's own writes left elsewhere in the file, which a flush would force out too); any
  // other device is flushed whenever the writer asks (flush_wanted_).
  void FlushLoop() {
    for (;;) {
      uint64_t from = 0, to = 0;
      {
        std::unique_lock l(mu_);
        cv_.wait(l, [&] { return cancel_ || flush_wanted_; });
        if (cancel_) return;
        flush_wanted_ = false;
        from = writeback_from_;
        to = writeback_to_;
        writeback_from_ = to;
      }
      Status s;
      if (file_fd_ >= 0) {
        if (to > from &&
            ::sync_file_range(file_fd_, static_cast<off_t>(c_.dst_offset + from),
                              static_cast<off_t>(to - from), SYNC_FILE_RANGE_WRITE) != 0) {
          s = ErrnoStatus("sync_file_range");
        }
      } else {
        s = c_.dst->Flush();
      }
      std::lock_guard l(mu_);
      if (!s.ok() && flush_status_.ok()) flush_status_ = s;
    }
  }

  Status WriteLoop() {
    uint64_t unflushed = 0;
    for (uint64_t done = 0; done < c_.length;) {
      Region r;
      {
        std::unique_lock l(mu_);
        cv_.wait(l, [&] { return !queue_.empty(); });
        r = std::move(queue_.front());
        queue_.pop_front();
      }
      Status s = r.status.ok() ? WriteRegion(r) : r.status;
      Gate().EndCopy(c_.gate_pv, c_.dst_offset + r.offset, r.length);
      unflushed += r.length;
      const uint64_t every = file_fd_ >= 0 ? kFileWritebackBytes : c_.flush_behind_bytes;
      const bool flush = c_.flush_behind_bytes > 0 && unflushed >= every;
      if (flush) unflushed = 0;
      {
        std::lock_guard l(mu_);
        free_.push_back(r.buffer);
        writeback_to_ = r.offset + r.length;
        if (flush) flush_wanted_ = true;  // if one runs, the next starts when it ends
        if (s.ok() && !flush_status_.ok()) s = flush_status_;
      }
      cv_.notify_all();
      if (!s.ok()) return s;
      done += r.length;
      if (c_.region_done) c_.region_done(r.offset, r.length);
      if (done < c_.length && c_.stopped && c_.stopped()) {
        return Status::FromErrno(ECANCELED, "pvmove stopped");
      }
    }
    return Status::Ok();
  }

  MirrorGate& Gate() const { return c_.gate ? *c_.gate : MirrorGate::Global(); }

  const SegmentCopy& c_;
  std::vector<std::vector<uint8_t>> buffers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> free_;       // GUARDED_BY(mu_)
  std::deque<Region> queue_;   // GUARDED_BY(mu_); regions read (or failed), held in the gate
  bool cancel_ = false;        // GUARDED_BY(mu_)
  bool flush_wanted_ = false;  // GUARDED_BY(mu_)
  uint64_t writeback_from_ = 0, writeback_to_ = 0;  // GUARDED_BY(mu_); written, not yet started
  int file_fd_ = -1;     // the destination's file, when it is one (sync_file_range)
  Status flush_status_;  // GUARDED_BY(mu_); the first failed write-behind flush
};

}  // namespace

Status CopySegment(const SegmentCopy& c) {
  if (c.length == 0) return Status::Ok();
  if (c.region_bytes == 0) return Status::InvalidArgument("pvmove: region size 0");
  if (c.stopped && c.stopped()) return Status::FromErrno(ECANCELED, "pvmove stopped");
  Pipeline p(c);
  return p.Run();
}

}  // namespace volstack::lvm

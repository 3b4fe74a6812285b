// Compression on the commit path (Volume::WriteCompressed) and on the early writer's
// (Volume::WriteEarlyCompressed); the codec is compress.h.
//
// A compressing volume's new data blocks cannot be allocated before they are compressed:
// their size is known only then. So SyncTree hands them here, after its uncompressed
// blocks are out, and they go through one pipeline in groups of up to
// RunWriter::kMaxRunBytes of logical data, in block order: a thread takes a group,
// compresses each block into its own scratch, allocates the group's blocks one after the
// other (under a mutex: the allocator is the commit's), so a group's blocks still land
// adjacent and go out as one vectored write, then checksums what is stored (the compressed
// bytes, so scrub and self-heal never need to decode) and writes the group. For a large
// txg a helper thread takes groups too: the commit's two threads share compression,
// checksums and writes, and the writer threads never compress.
//
// A block that does not save enough (compress.h) is stored as it is, straight from its
// dirty buffer. An all-zero block never gets here: SyncTree makes it a hole.
//
// Early writes (early_write.cc). Most of a streaming writer's blocks never reach the commit
// here: the pool's early writer compresses runs of them while their txg is still open
// (WriteEarlyCompressed), so compression overlaps the writer instead of following it. On
// two cores the writer's thread copies into dirty buffers while the early writer
// compresses, checksums and writes; the commit's two threads take only what is left (the
// last run, partial and random blocks). The early writer compresses a group with sync_mu
// released and only tries to take it back to allocate: a commit that started meanwhile
// may be waiting for its blocks in flight, and compresses the rest itself.
//
// Received blocks (zfs receive of a `send -c` stream) come with their stored form
// (WriteStored): the sender's compressed bytes, kept beside the dirty buffer for as long
// as that buffer is unchanged, which this pipeline stores as they are, on a volume of any
// `compression`, without compressing them again (zfs receive writes such blocks raw too).
//
// Memory: one group of scratch (kMaxRunBytes) per commit thread, freed when the commit
// returns, and one kept by the early writer's thread.
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <system_error>
#include <thread>

#include "pool/pool_impl.h"
#include "pool/run_writer.h"

namespace volstack::pool {

namespace {
// Txgs with at least this much data to compress share it with a helper thread (as
// SyncTree's uncompressed data does).
constexpr uint64_t kHelperThreadBytes = 1 << 20;
}  // namespace

Status Volume::WriteCompressed(SyncContext& ctx, const CompressionSetting& setting,
                               ChecksumType cksum, std::span<const CompressJob> blocks) {
  const uint32_t unit = static_cast<uint32_t>(pool_->asize(1));
  const size_t group = std::max<uint64_t>(RunWriter::kMaxRunBytes / vbs_, 1);
  const size_t groups = (blocks.size() + group - 1) / group;
  std::atomic<size_t> next_group{0};
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> stored{0};
  std::atomic<bool> any_compressed{false};
  std::mutex alloc_mu;  // the commit's allocator, shared by the two threads
  auto work = [&](Status& st) {
    std::vector<uint8_t> scratch(group * vbs_);
    std::vector<uint32_t> psize(group);
    RunWriter writer(pool_);
    for (size_t g = next_group++; g < groups && !failed; g = next_group++) {
      const size_t first = g * group, end = std::min(first + group, blocks.size());
      for (size_t i = first; i < end; i++) {
        const StoredForm* sf = blocks[i].stored;
        psize[i - first] = sf != nullptr
                               ? static_cast<uint32_t>(sf->bytes.size())
                               : CompressBlock(setting, std::span(blocks[i].buf, vbs_), unit,
                                               std::span(&scratch[(i - first) * vbs_], vbs_));
      }
      {
        std::lock_guard l(alloc_mu);
        for (size_t i = first; i < end && st.ok(); i++) {
          BlockPtr& bp = *blocks[i].bp;
          const uint32_t p = psize[i - first];
          auto dva = ctx.Allocate(p != 0 ? p : vbs_, this, vbs_);
          if (!dva.ok()) {
            st = dva.status();
            break;
          }
          bp.dva[0] = *dva;
          bp.psize = p != 0 ? p : vbs_;
          bp.comp = blocks[i].stored != nullptr ? blocks[i].stored->comp
                    : p != 0                    ? setting.algo
                                                : Compression::kNone;
        }
      }
      for (size_t i = first; i < end && st.ok(); i++) {
        BlockPtr& bp = *blocks[i].bp;
        const uint8_t* bytes = blocks[i].stored != nullptr     ? blocks[i].stored->bytes.data()
                               : bp.comp != Compression::kNone ? &scratch[(i - first) * vbs_]
                                                               : blocks[i].buf;
        const std::span<const uint8_t> on_disk(bytes, bp.psize);
        bp.checksum = ComputeChecksum(cksum, on_disk);
        st = writer.Add(bp.dva[0], on_disk);
        stored += bp.dva[0].asize();
        if (bp.comp != Compression::kNone) any_compressed = true;
      }
      if (st.ok()) st = writer.Flush();
      if (!st.ok()) failed = true;
    }
  };
  Status mine, helpers;
  std::thread helper;
  if (blocks.size() * vbs_ >= kHelperThreadBytes) {
    try {
      helper = std::thread(work, std::ref(helpers));
    } catch (const std::system_error&) {
      // No thread to be had: this one takes every group.
    }
  }
  work(mine);
  if (helper.joinable()) helper.join();
  VS_RETURN_IF_ERROR(mine);
  VS_RETURN_IF_ERROR(helpers);
  // Before this txg's MOS is written: it is then version 5 (mos_format.h).
  if (any_compressed) pool_->compressed_blocks = true;
  ctx.data_bytes += stored;
  return Status::Ok();
}

size_t Volume::WriteEarlyCompressed(std::unique_lock<std::mutex>& sync,
                                    const CompressionSetting& setting, ChecksumType cksum,
                                    std::span<const std::pair<uint64_t, const uint8_t*>> batch,
                                    std::span<EarlyBlock> blocks, Status& written) {
  sync.unlock();
  const uint32_t unit = static_cast<uint32_t>(pool_->asize(1));
  const size_t group = std::max<uint64_t>(RunWriter::kMaxRunBytes / vbs_, 1);
  // The early writer's own (one thread per pool): reused, so no pass faults memory in.
  thread_local std::vector<uint8_t> scratch;
  if (scratch.size() < group * vbs_) scratch.resize(group * vbs_);
  std::vector<uint32_t> psize(group);
  size_t done = 0;
  while (done < batch.size() && written.ok()) {
    const size_t end = std::min(done + group, batch.size());
    for (size_t i = done; i < end; i++) {
      psize[i - done] = CompressBlock(setting, std::span(batch[i].second, vbs_), unit,
                                      std::span(&scratch[(i - done) * vbs_], vbs_));
    }
    // A commit that started meanwhile waits for these blocks' writes (in flight): it
    // compresses the rest itself.
    if (!sync.try_lock()) break;
    if (pool_->failed || destroyed) {
      sync.unlock();
      break;
    }
    size_t got = done;
    for (; got < end; got++) {
      const uint32_t p = psize[got - done];
      auto dva = pool_->AllocateEarlyLocked(p != 0 ? p : vbs_);
      if (!dva.ok()) break;
      BlockPtr& bp = blocks[got].bp;
      bp = DataBlockPtr(*dva, cksum);
      bp.psize = p != 0 ? p : vbs_;
      bp.comp = p != 0 ? setting.algo : Compression::kNone;
      blocks[got].buf = batch[got].second;
    }
    sync.unlock();
    RunWriter writer(pool_);
    for (size_t i = done; i < got && written.ok(); i++) {
      BlockPtr& bp = blocks[i].bp;
      const uint8_t* bytes =
          bp.comp != Compression::kNone ? &scratch[(i - done) * vbs_] : batch[i].second;
      const std::span<const uint8_t> on_disk(bytes, bp.psize);
      bp.checksum = ComputeChecksum(cksum, on_disk);
      written = writer.Add(bp.dva[0], on_disk);
    }
    if (written.ok()) written = writer.Flush();
    const bool full = got < end;  // no space: the commit allocates the rest
    done = got;
    if (full) break;
  }
  return done;
}

Status Volume::WriteStored(uint64_t offset, std::span<const uint8_t> buf,
                           std::vector<StoredForm>& stored, bool throttle) {
  VS_CHECK_OP(offset % vbs_, ==, 0u);
  VS_CHECK_OP(buf.size(), ==, stored.size() * vbs_);
  {
    VS_ASSIGN_OR_RETURN(DirtyReservation room, pool_->ReserveDirty(this, buf.size()));
    for (size_t k = 0; k < stored.size(); k++) {
      // Empty: moved out by an attempt that failed part way (a retry writes it plain).
      StoredForm* sf =
          stored[k].comp != Compression::kNone && !stored[k].bytes.empty() ? &stored[k] : nullptr;
      VS_RETURN_IF_ERROR(
          WriteBlock(offset / vbs_ + k, 0, buf.data() + k * vbs_, vbs_, false, room, sf));
    }
  }  // the unused room goes back before the throttle, which may wait for a commit
  if (throttle) pool_->Throttle();
  return Status::Ok();
}

}  // namespace volstack::pool

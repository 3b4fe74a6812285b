// Early writes: a streaming writer's whole blocks written to the vdevs while their txg is
// still open, so the commit's data phase overlaps the writes instead of following them.
//
// Why. A txg commit writes its data blocks (checksums, the kernel's copy into the page
// cache, write-back started) only once the txg closes; a writer that flushes after every
// 16 MiB (pool_bench SeqWrite64K) waits for all of it in its Flush, while the second CPU sat
// idle through its writes. Here a pool thread takes runs of the open txg's new whole blocks
// as they fill and does that work for them then; the commit adopts the blocks, pointer and
// checksum ready, and writes only what is left (partial blocks, random writes, the last
// run).
//
// Safety. An early block lands in space taken from the free set into PoolImpl::early (so
// the allocator hands it out to nothing else), which no tree and no space map names: it is
// the commit of its txg that adopts it (SyncContext::Adopt: into the txg's allocations and
// the live set, as if that commit had allocated it) and points a tree at it, and a crash
// before that leaves only bytes in free space. Free space never holds a block an older
// uberblock needs (deferred frees stay out of it for kTxgDefer txgs), so early writes can
// damage nothing import may read: they are the commit's own data writes, moved earlier.
//
// Validity. An early copy is valid only for the exact buffer it was written from, unchanged:
// EarlyBlock keeps the buffer's address, and every change WriteBlock makes to an open
// buffer first voids its early copy (PrepareChangeLocked: the space goes to the garbage,
// given back to the free set under sync_mu). A buffer an early write is still reading is
// never changed in place: the writer gets a copy, and the old buffer is kept (retired_)
// until that write ends, so no buffer is written while read. Quiesce hands the open txg's
// copies to the syncing map; a write in flight then finds its buffer there. SyncTree first
// waits for the writes in flight (none can start while the commit holds sync_mu), then
// adopts the copies whose buffer and checksum type still match and gives the rest back.
//
// What goes early: no received block with a stored form (the commit stores that as it came:
// WriteStored). A compressing volume's blocks go compressed, each allocated at its
// compressed size (WriteEarlyCompressed, volume_compress.cc). Otherwise runs of at
// least PoolTuning::early_write_run_bytes of whole blocks with adjacent ids, not all zero (a commit
// makes those holes), so random writes keep the commit's placement of their blocks by id. Never
// while a commit runs (it holds sync_mu, which allocation needs: the early writer only tries it),
// nor with less free space than twice the dirty limit (an early block holds its space while it is
// still counted as dirty: near full that could refuse writes a commit would have room for).
//
// Threads: PoolImpl's early writer (one per pool, started with the sync thread) runs
// WriteEarly; WriteBlock, Quiesce and SyncTree meet it under mu_ and sync_mu as above.
#include <algorithm>
#include <cstring>
#include <system_error>

#include "pool/pool_impl.h"
#include "pool/run_writer.h"
#include "pool/volume.h"
#include "util/all_zero.h"

namespace volstack::pool {

// --- Volume: the writers' side (mu_ held) ---

uint8_t* Volume::PrepareChangeLocked(std::map<uint64_t, Buf>::iterator it, bool copy) {
  const uint64_t blkid = it->first;
  stored_.erase(blkid);  // a received block's stored form is of the bytes it replaces
  if (auto e = early_.find(blkid); e != early_.end()) {
    early_garbage_.push_back(e->second.bp.dva[0]);
    early_.erase(e);
  }
  auto f = in_flight_.find(blkid);
  if (f != in_flight_.end() && it->second && f->second == it->second.get()) {
    Buf fresh = NewBufLocked();
    if (copy) std::memcpy(fresh.get(), it->second.get(), vbs_);
    const uint8_t* old = it->second.get();
    retired_.emplace(old, std::move(it->second));
    it->second = std::move(fresh);
  }
  return it->second.get();
}

void Volume::NoteWholeBlockLocked(uint64_t blkid) {
  const uint64_t run = pool_->tuning.early_write_run_bytes;
  if (run == 0) return;
  early_candidates_.push_back(blkid);
  if (early_candidates_.size() % std::max<uint64_t>(run / vbs_, 1) == 0) {
    pool_->WakeEarlyWriter();
  }
}

// --- Volume: the early writer's side ---

void Volume::WriteEarly() {
  std::unique_lock sync(pool_->sync_mu, std::try_to_lock);
  // A commit is on (it writes them), the pool is suspended, or the volume going.
  if (!sync.owns_lock() || pool_->failed || destroyed) return;
  const uint64_t run_blocks = std::max<uint64_t>(pool_->tuning.early_write_run_bytes / vbs_, 1);
  const uint64_t asize = pool_->asize(vbs_);
  std::vector<std::pair<uint64_t, const uint8_t*>> batch;  // blkid, buffer
  {
    std::lock_guard l(mu_);
    ReleaseGarbageLocked();
    std::vector<uint64_t> ids;
    ids.swap(early_candidates_);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    // Runs of adjacent ids whose blocks are whole, in the open map, not early yet.
    size_t run_start = 0;
    auto close_run = [&](size_t end) {
      if (end - run_start < run_blocks) batch.resize(run_start);
      run_start = batch.size();
    };
    for (uint64_t blkid : ids) {
      auto it = open_.find(blkid);
      const bool usable = it != open_.end() && it->second && !early_.count(blkid) &&
                          !in_flight_.count(blkid) && !stored_.count(blkid) &&
                          !AllZero(it->second.get(), vbs_);
      const bool adjacent = batch.size() > run_start && batch.back().first + 1 == blkid;
      if (!usable || !adjacent) close_run(batch.size());
      if (usable) batch.emplace_back(blkid, it->second.get());
    }
    close_run(batch.size());
    // The space must be there for what is dirty even if none of it goes early.
    const uint64_t margin = 2 * pool_->tuning.dirty_max_bytes + batch.size() * asize;
    if (pool_->free_bytes.load() < margin) batch.clear();
    for (auto& [blkid, buf] : batch) in_flight_.emplace(blkid, buf);
  }
  if (batch.empty()) return;
  const ChecksumType cksum = checksum_type();
  const CompressionSetting comp = compression();
  std::vector<EarlyBlock> blocks(batch.size());
  size_t allocated = 0;
  Status written;
  if (comp.algo != Compression::kNone) {
    // Compressed, then allocated at their size and written (volume_compress.cc).
    allocated = WriteEarlyCompressed(sync, comp, cksum, batch, blocks, written);
  } else {
    for (; allocated < batch.size(); allocated++) {
      auto dva = pool_->AllocateEarlyLocked(vbs_);
      if (!dva.ok()) break;
      blocks[allocated].bp = DataBlockPtr(*dva, cksum);
      blocks[allocated].buf = batch[allocated].second;
    }
    sync.unlock();
    RunWriter writer(pool_);
    for (size_t i = 0; i < allocated && written.ok(); i++) {
      const std::span<const uint8_t> bytes(blocks[i].buf, vbs_);
      blocks[i].bp.checksum = ComputeChecksum(cksum, bytes);
      written = writer.Add(blocks[i].bp.dva[0], bytes);
    }
    if (written.ok()) written = writer.Flush();
  }
  std::lock_guard l(mu_);
  for (size_t i = 0; i < batch.size(); i++) {
    const auto [blkid, buf] = batch[i];
    in_flight_.erase(blkid);
    retired_.erase(buf);
    if (i >= allocated) continue;
    // Its buffer, unchanged, is in the open map or (quiesced meanwhile) the syncing map.
    auto o = open_.find(blkid);
    auto y = syncing_.find(blkid);
    if (written.ok() && o != open_.end() && o->second.get() == buf) {
      early_[blkid] = blocks[i];
    } else if (written.ok() && y != syncing_.end() && y->second.get() == buf) {
      syncing_early_[blkid] = blocks[i];
    } else {
      early_garbage_.push_back(blocks[i].bp.dva[0]);
    }
  }
  early_done_cv_.notify_all();
}

std::map<uint64_t, Volume::EarlyBlock> Volume::TakeEarlyForSyncLocked() {
  std::unique_lock l(mu_);
  early_done_cv_.wait(l, [&] { return in_flight_.empty(); });
  ReleaseGarbageLocked();
  return std::exchange(syncing_early_, {});
}

void Volume::DropEarlyLocked() {
  // Quiesced already: every early copy is the syncing map's.
  for (const auto& [blkid, e] : TakeEarlyForSyncLocked()) pool_->ReleaseEarlyLocked(e.bp.dva[0]);
}

void Volume::ReleaseGarbageLocked() {
  for (const Dva& d : early_garbage_) pool_->ReleaseEarlyLocked(d);
  early_garbage_.clear();
}

// --- PoolImpl ---

Result<Dva> PoolImpl::AllocateEarlyLocked(uint64_t size) {
  VS_ASSIGN_OR_RETURN(Dva dva, AllocateLocked(size));
  VS_CHECK(early[dva.vdev].Add(dva.offset, dva.asize()));
  return dva;
}

void PoolImpl::ReleaseEarlyLocked(const Dva& dva) {
  VS_CHECK(early[dva.vdev].Remove(dva.offset, dva.asize()));
  ReleaseLocked(dva);
}

void PoolImpl::WakeEarlyWriter() {
  {
    std::lock_guard l(early_mu);
    early_wanted = true;
  }
  early_cv.notify_one();
}

void PoolImpl::WriteEarlyNow() {
  std::vector<std::shared_ptr<Volume>> vols;
  {
    std::lock_guard l(mu);
    for (auto& [name, v] : volumes) vols.push_back(v);
  }
  for (auto& v : vols) v->WriteEarly();
}

void PoolImpl::StartEarlyWriter() {
  if (!tuning.sync_thread || tuning.early_write_run_bytes == 0) return;
  try {
    early_writer = std::thread([this] {
      std::unique_lock l(early_mu);
      for (;;) {
        early_cv.wait(l, [&] { return early_stop || early_wanted; });
        if (early_stop) return;
        early_wanted = false;
        l.unlock();
        WriteEarlyNow();
        l.lock();
      }
    });
  } catch (const std::system_error&) {
    // No thread to be had: the commits write every block, as without early writes.
  }
}

void PoolImpl::StopEarlyWriter() {
  {
    std::lock_guard l(early_mu);
    early_stop = true;
  }
  early_cv.notify_all();
  if (early_writer.joinable()) early_writer.join();
}

}  // namespace volstack::pool

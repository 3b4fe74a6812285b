// Suspend and resume: undoing a failed txg commit in memory, and `zpool clear` committing
// again once the devices answer.
//
// Theory. A commit that fails (a vdev write, flush or uberblock write returned an error:
// a cluster OSD down, a disk pulled) leaves the previous txg intact on disk (spa.cc), but in
// memory it has gone part of the way: blocks allocated and written, old blocks freed, the
// volumes' cached trees pointing at the new blocks, their dirty data moved to the syncing
// maps. The pool suspends (failed = true: no reads, writes or commits) and the commit is
// undone right away, under sync_mu, so that memory again describes the last durable txg
// plus the dirty data:
//   - the txg's allocations go back to the free set and leave the live set; its frees
//     return to the live set (they are still in the durable tree). Once the commit has
//     started writing uberblocks, the txg may be durable on some label, so its blocks are
//     not handed out again (they leak until the next import, which finds them free or,
//     if that txg is the one imported, in its space map);
//   - each volume's root, synced entry, `used` and the new roots of a Grow come back as
//     saved when its SyncTree started (Volume::SyncUndo); its cached indirect blocks are
//     dropped (they may point at the undone blocks) and read again when needed;
//   - the syncing map goes back into the open map, under any write made since (the newer
//     buffer wins), and every early copy is given back, so the next commit writes every
//     block again rather than adopt one whose write a failed flush may have lost.
// What is not undone is only leaked, never reused: log blocks the commit freed (their
// chains stay readable on disk; zil.cc invariant 7 keeps a chain with a failed write
// unused until a later txg is durable), and the log reserve it carved.
// A commit that also destroyed volumes or ran snapshot operations, or during which a
// volume grew, is not undone: resuming is refused (`unresumable` says why) and the pool
// needs an export and import (a daemon restart), which finds the previous txg intact.
//
// Resume (Pool::Clear on a suspended pool) reads a block of each vdev and flushes it: a
// device that still fails refuses the resume with its error. Then, with every early copy
// dropped, it commits the dirty data in a new txg; if that commit fails too it is undone
// the same way and the pool stays suspended, with that error. Devices are not reopened:
// a file's descriptor and an RBD image's handle stay valid across an outage (librbd
// reconnects to the OSDs itself).
#include "pool/pool_impl.h"

namespace volstack::pool {

namespace {

// [start, start + len) as DVAs of at most 1 GiB (Dva::asize_sectors is 32 bits).
template <typename Fn>
void ForEachPiece(uint32_t vdev, uint64_t start, uint64_t len, Fn fn) {
  constexpr uint64_t kPiece = uint64_t{1} << 30;
  for (uint64_t o = start; o < start + len; o += kPiece) {
    Dva d;
    d.vdev = vdev;
    d.offset = o;
    d.asize_sectors = static_cast<uint32_t>(std::min(kPiece, start + len - o) >> 9);
    fn(d);
  }
}

}  // namespace

void PoolImpl::UndoCommitLocked(SyncContext& ctx, const std::vector<std::shared_ptr<Volume>>& vols,
                                bool others_changed) {
  // The cache copies read the syncing buffers that go back to the open maps below.
  ctx.cache_fill.reset();
  if (others_changed) {
    unresumable = "the failed commit (txg " + std::to_string(ctx.txg) +
                  ") also destroyed volumes or changed snapshots";
    return;
  }
  uint64_t released = 0;
  for (auto& v : vols) {
    if (!v->UndoSyncLocked(ctx.txg, &released)) {
      unresumable = "a volume grew during the failed commit (txg " + std::to_string(ctx.txg) + ")";
      return;
    }
  }
  const bool reuse = !ctx.uberblocks_started;
  auto give_back = [&](const Dva& d) {
    if (reuse) ReleaseLocked(d);
  };
  for (uint32_t v = 0; v < ctx.allocs.size(); v++) {
    for (auto [s, e] : ctx.allocs[v].ranges()) {
      if (live[v].Remove(s, e - s)) ForEachPiece(v, s, e - s, give_back);
    }
  }
  for (const Dva& d : ctx.meta_allocs) give_back(d);
  for (uint32_t v = 0; v < ctx.frees.size(); v++) {
    // Still in the durable tree. (A range this txg both allocated and freed would already
    // be out of the live set above; Add refuses nothing else.)
    for (auto [s, e] : ctx.frees[v].ranges()) live[v].Add(s, e - s);
  }
  NoteFreeRunsLocked();
  {
    std::lock_guard l(mu);
    dirty_bytes -= released;
    mos_dirty = true;  // the failed txg's directory changes are committed again
    RecomputeReservations();
  }
}

Status PoolImpl::Resume() {
  std::lock_guard s(sync_mu);
  if (closed) return Status::FromErrno(ENXIO, "pool " + name + " is closed");
  if (!failed) return Status::Ok();
  if (!unresumable.empty()) {
    return Status::IoError("pool " + name + " cannot resume: " + unresumable +
                           "; export and import it again (restart the daemon)");
  }
  std::vector<uint8_t> probe(4096);
  for (auto& v : vdevs) {
    Status st = v->device()->Read(0, probe);
    if (st.ok()) st = v->device()->Flush();
    if (!st.ok()) {
      return st.WithContext("pool " + name + " is still suspended: vdev " +
                            std::to_string(v->id()) + " does not answer");
    }
  }
  // An early flush that failed may have lost what was written before it.
  if (early_flusher) early_flusher->WaitIdle();
  std::vector<std::shared_ptr<Volume>> vols;
  {
    std::lock_guard l(mu);
    for (auto& [n, vol] : volumes) vols.push_back(vol);
  }
  for (auto& vol : vols) vol->DropEarlyCopiesLocked();
  failed = false;
  Status st = SyncLocked(/*even_if_clean=*/true);
  cv.notify_all();
  if (!st.ok()) return st.WithContext("pool " + name + " is still suspended");
  return Status::Ok();
}

// --- Volume ---

void Volume::SaveTreeForUndoLocked() {
  undo_.tree = true;
  undo_.root = phys_.root;
  undo_.synced = synced_;
  undo_.levels = phys_.levels;
  undo_.volsize = phys_.volsize;
  for (uint64_t key : grown_dirty_) {
    auto it = cache_.find(key);
    VS_CHECK(it != cache_.end());
    std::vector<BlockPtr> bps(kBpsPerIndirect);
    for (uint32_t i = 0; i < kBpsPerIndirect; i++) bps[i] = it->second->bps.Get(i);
    undo_.grown.emplace_back(key, std::move(bps));
  }
}

bool Volume::UndoSyncLocked(uint64_t txg, uint64_t* released) {
  if (undo_.txg == txg) {  // else the commit failed before this volume's SyncTree
    std::lock_guard t(tree_mu_);
    if (undo_.tree) {
      if (phys_.levels != undo_.levels || phys_.volsize != undo_.volsize) return false;
      for (auto it = cache_.begin(); it != cache_.end();) it = UncacheLocked(it);
      grown_dirty_.clear();
      for (auto& [key, bps] : undo_.grown) {
        auto ind = std::make_shared<Indirect>();
        for (uint32_t i = 0; i < kBpsPerIndirect; i++) ind->bps.Set(i, bps[i]);
        ind->dirty = true;
        InsertCacheLocked(key, std::move(ind));
        grown_dirty_.insert(key);
      }
      phys_.root = undo_.root;
      synced_ = undo_.synced;
    }
    used_ = undo_.used;
    lused_ = undo_.lused;
  }
  undo_ = SyncUndo{};
  // Early copies of the syncing map the commit did not reach, then those of the open map.
  for (const auto& [blkid, e] : TakeEarlyForSyncLocked()) pool_->ReleaseEarlyLocked(e.bp.dva[0]);
  DropEarlyCopiesLocked();
  uint64_t dropped = 0;
  {
    std::lock_guard l(mu_);
    pool_->dirty_meta_bytes -= std::exchange(syncing_meta_, 0);
    for (auto& [blkid, buf] : syncing_) {
      auto [it, inserted] = open_.try_emplace(blkid, std::move(buf));
      if (inserted) {
        CountDirtyLocked(it);
      } else {
        dropped++;  // written again since: the newer buffer stays
      }
    }
    syncing_.clear();
  }
  const uint64_t bytes = dropped * uint64_t{vbs_};
  dirty -= bytes;
  *released += bytes;
  return true;
}

void Volume::DropEarlyCopiesLocked() {
  std::unique_lock l(mu_);
  early_done_cv_.wait(l, [&] { return in_flight_.empty(); });
  ReleaseGarbageLocked();
  for (const auto& [blkid, e] : early_) pool_->ReleaseEarlyLocked(e.bp.dva[0]);
  early_.clear();
}

}  // namespace volstack::pool

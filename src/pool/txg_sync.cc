// Transaction-group commit. See spa.cc for the theory; this file is the commit itself:
//
//   1. quiesce: under mu, every volume's open map becomes its syncing map; open_txg++.
//   2. write data blocks, then indirect blocks bottom-up, to freshly allocated space
//      (never over a live block); old pointers are freed into this txg's deferred list.
//      Data blocks written early (early_write.cc), unchanged since, are adopted instead:
//      their space joins this txg's allocations and their pointer is ready.
//      Data blocks go out as runs of adjacent blocks, one vectored vdev write (WriteV) per
//      run straight from the dirty buffers, each group of up to 1 MiB checksummed and then
//      written by one thread, the commit's or, for a large txg, a helper's (SyncTree).
//      Indirect and meta blocks, built in scratch buffers, are batched by
//      SyncContext::Write below.
//   3. free the trees of destroyed volumes (snapshot destroys and rollbacks free theirs
//      before step 2, snapshots are taken after it: snapshot.cc); the intent logs
//      (zil_manager.cc) set each volume's log header and free the log blocks this txg
//      makes obsolete. Then a
//      CacheFill (cache_fill.h) drops the freed data blocks from the block cache and copies
//      the written ones into it, on a thread of its own, through steps 4 and 5.
//   4. append this txg's alloc/free records to the space map (or condense it), write this
//      txg's deferred frees (defer_map.h: the tree and log frees, the metadata it replaces),
//      write the MOS block.
//   5. flush every vdev; write the uberblock into every label of every vdev; flush again.
//      Early flushes (early_flush.h) have drained most of the data by then; one that failed
//      suspended the pool, and the first flush then fails the commit.
//   6. release frees of txg - kTxgDefer to the allocator (their list leaves the MOS); stop the
//   cache copies (without
//      waiting for the one in flight, whose buffer the fill keeps) and give the syncing
//      buffers back to their volumes; drop the log records this txg holds.
//
// A failure at any step suspends the pool (failed = true): later writes and syncs return
// EIO; what is on disk is the previous txg, intact. The commit is undone in memory
// (commit_undo.cc), so `zpool clear` can commit the same dirty data again.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "pool/pool_impl.h"

namespace volstack::pool {

Result<Dva> SyncContext::Allocate(uint64_t size, Volume* owner, uint64_t lsize) {
  VS_ASSIGN_OR_RETURN(Dva dva, pool->AllocateLocked(size));
  if (owner == nullptr) meta_allocs.push_back(dva);
  if (owner != nullptr) {
    VS_CHECK(allocs[dva.vdev].Add(dva.offset, dva.asize()));
    VS_CHECK(pool->live[dva.vdev].Add(dva.offset, dva.asize()));
    owner->AdjustUsed(static_cast<int64_t>(dva.asize()),
                      static_cast<int64_t>(lsize != 0 ? lsize : size));
  }
  return dva;
}

void SyncContext::Adopt(const Dva& dva, Volume* owner) {
  VS_CHECK(pool->early[dva.vdev].Remove(dva.offset, dva.asize()));
  VS_CHECK(allocs[dva.vdev].Add(dva.offset, dva.asize()));
  VS_CHECK(pool->live[dva.vdev].Add(dva.offset, dva.asize()));
  owner->AdjustUsed(static_cast<int64_t>(dva.asize()), owner->volblocksize());
}

Status SyncContext::Free(const BlockPtr& bp, Volume* owner) {
  // ZFS's rule: a block born after the newest snapshot (or a clone's origin) is the head's
  // alone and is freed; an older one is still in that snapshot's tree and stays allocated
  // (snapshot.cc has the theory).
  if (owner != nullptr && bp.birth <= owner->keep_txg.load()) {
    owner->AdjustUsed(-static_cast<int64_t>(bp.dva[0].asize()), -int64_t{bp.lsize});
    return Status::Ok();
  }
  for (const Dva& d : bp.dva) {
    if (d.empty()) continue;
    if (d.vdev >= pool->vdevs.size() || !pool->live[d.vdev].Remove(d.offset, d.asize())) {
      return Status::Corruption("freeing a block that is not allocated: " + bp.ToString());
    }
    VS_CHECK(frees[d.vdev].Add(d.offset, d.asize()));
    deferred.push_back(d);
    if (owner != nullptr) owner->AdjustUsed(-static_cast<int64_t>(d.asize()), 0);
  }
  if (owner != nullptr) owner->AdjustUsed(0, -int64_t{bp.lsize});
  if (pool->block_cache && bp.type == BlockType::kVolData) {
    // The cache fill forgets them, off the tree update; those beyond the bound are
    // forgotten here (a destroyed volume's tree can hold millions of blocks).
    const BlockKey key = PoolImpl::CacheKey(bp);
    if (forget.size() < pool->tuning.max_queued_forgets) {
      forget.push_back(key);
    } else {
      pool->block_cache->Forget(key);
      if (pool->cache_refill) pool->cache_refill->Forget(std::span(&key, 1));
    }
  }
  return Status::Ok();
}

Status SyncContext::Write(const Dva& dva, std::span<const uint8_t> data) {
  if (!batch.empty() && (dva.vdev != batch_vdev || dva.offset != batch_offset + batch.size() ||
                         batch.size() + data.size() > (1u << 20))) {
    VS_RETURN_IF_ERROR(FlushWrites());
  }
  if (batch.empty()) {
    batch_vdev = dva.vdev;
    batch_offset = dva.offset;
  }
  batch.Append(data);
  // Pad to the allocated size so the next contiguous block lines up.
  batch.AppendZeros(dva.asize() - data.size());
  return Status::Ok();
}

Status SyncContext::FlushWrites() {
  if (batch.empty()) return Status::Ok();
  Status st = pool->vdevs[batch_vdev]->device()->Write(batch_offset, batch);
  batch.clear();
  return st;
}

void PoolImpl::ReapCacheFillsLocked(bool all) {
  // Destroying a fill stops and joins it (at once when done) and frees the buffer it kept.
  std::erase_if(cache_fills, [all](const auto& fill) { return all || fill->done(); });
}

Result<Dva> PoolImpl::AllocateLocked(uint64_t size) {
  const uint64_t asz = asize(size);
  const uint32_t n = static_cast<uint32_t>(vdevs.size());
  const uint64_t low_water = asz < kIndirectBlockSize ? RunsLowWater() / n : 0;
  for (uint32_t k = 0; k < n; k++) {
    const uint32_t v = (rotor + k) % n;
    std::optional<uint64_t> off;
    if (asz < kIndirectBlockSize && free[v].unit_bytes() < low_water) {
      off = free[v].FindFitInShortRun(asz, cursor[v], uint64_t{1} << ashift);
    }
    if (!off) off = free[v].FindFit(asz, cursor[v], uint64_t{1} << ashift);
    if (!off) continue;
    VS_CHECK(free[v].Remove(*off, asz));
    free_bytes -= asz;
    NoteFreeRunsLocked();
    cursor[v] = *off + asz;
    if (v != rotor) {
      rotor = v;
      rotor_bytes = 0;
    }
    rotor_bytes += asz;
    if (rotor_bytes >= kStripeUnit) {
      rotor = (rotor + 1) % n;
      rotor_bytes = 0;
    }
    Dva d;
    d.vdev = v;
    d.asize_sectors = static_cast<uint32_t>(asz >> 9);
    d.offset = *off;
    return d;
  }
  return Status::NoSpace("pool " + name + ": out of space");
}

void PoolImpl::NoteFreeRunsLocked() {
  uint64_t runs = 0;
  for (const RangeSet& f : free) runs += f.unit_bytes();
  free_run_bytes = runs;
}

uint64_t PoolImpl::RunsLowWater() const {
  // Twice the indirect blocks the dirty data may need, with room for the space map and MOS,
  // and the slop: while the runs hold more, small blocks are placed next-fit as any other,
  // so a txg's blocks still land in runs.
  return 2 * (dirty_meta_bytes.load() + kMetaSlackBytes) +
         std::max<uint64_t>(total_size() / 32, 1 << 20);
}

void PoolImpl::ReleaseLocked(const Dva& dva) {
  VS_CHECK(free[dva.vdev].Add(dva.offset, dva.asize()));
  free_bytes += dva.asize();
  NoteFreeRunsLocked();
  const auto run = free[dva.vdev].RangeAt(dva.offset);
  VS_CHECK(run.has_value());
  uint64_t& c = cursor[dva.vdev];
  if (run->second - run->first >= kRewindRunBytes && run->first < c) c = run->first;
}

Status PoolImpl::WriteMetaBlock(SyncContext& ctx, BlockType type, std::vector<uint8_t> data,
                                BlockPtr* bp) {
  data.resize(asize(data.size()), 0);
  if (data.size() > kMaxMetaBlock) return Status::NoSpace("metadata block too large");
  *bp = BlockPtr{};
  VS_ASSIGN_OR_RETURN(bp->dva[0], ctx.Allocate(data.size(), nullptr));
  bp->lsize = bp->psize = static_cast<uint32_t>(data.size());
  bp->cksum = ChecksumType::kXxh3_128;
  bp->type = type;
  bp->fill = 1;
  bp->birth = ctx.txg;
  bp->checksum = ComputeChecksum(bp->cksum, data);
  VS_RETURN_IF_ERROR(ctx.Write(bp->dva[0], data));
  return ctx.FlushWrites();
}

Status PoolImpl::FlushAll() {
  for (uint32_t v = 0; v < vdevs.size(); v++) {
    if (early_flusher) early_flusher->NoteFlushed(v);
    VS_RETURN_IF_ERROR(vdevs[v]->device()->Flush());
  }
  // An early flush still running may yet fail over writes these flushes vouch for.
  if (early_flusher) early_flusher->WaitIdle();
  if (failed) return SuspendedError();
  return Status::Ok();
}

Status PoolImpl::Sync() {
  Status st;
  {
    std::lock_guard l(sync_mu);
    st = SyncLocked();
  }
  TrimHeap();
  return st;
}

void PoolImpl::TrimHeap() {
  if (heap_to_trim.exchange(false)) ::malloc_trim(0);
  dirty_buffers.Trim();
}

Status PoolImpl::SyncOnTimer() {
  Status st;
  {
    std::lock_guard l(sync_mu);
    st = SyncLocked(/*even_if_clean=*/FreesWaitingLocked());
  }
  TrimHeap();
  return st;
}

bool PoolImpl::CommitForSpace() {
  std::lock_guard l(sync_mu);
  if (dirty_bytes.load() == 0 && !FreesWaitingLocked()) return false;
  space_commits++;
  return SyncLocked(/*even_if_clean=*/true).ok();
}

Status PoolImpl::SyncLocked(bool even_if_clean,
                            const std::function<Status(uint64_t txg)>& before_durable) {
  ReapCacheFillsLocked(/*all=*/false);
  if (failed) return SuspendedError();
  // 1. quiesce
  std::vector<std::shared_ptr<Volume>> vols, destroyed;
  std::vector<SnapOp> snap_ops;
  MosPhys mos;
  uint64_t txg;
  size_t dirty_entries = 0;
  bool closing;
  {
    std::lock_guard l(mu);
    closing = stop_thread;  // Close(): the last txg also closes the intent logs
    for (auto& [n, v] : volumes) {
      dirty_entries += v->Quiesce();
      vols.push_back(v);
    }
    destroyed.swap(pending_destroy);
    for (auto& v : destroyed) dirty_entries += v->Quiesce();
    snap_ops.swap(pending_snap_ops);
    if (dirty_entries == 0 && destroyed.empty() && !mos_dirty && !zil->NeedsCommit(closing) &&
        !even_if_clean) {
      return Status::Ok();
    }
    txg = open_txg++;
    mos_dirty = false;
    mos.props = props;
    mos.next_id = next_id;
  }
  SyncContext ctx;
  ctx.txg = txg;
  ctx.pool = this;
  ctx.allocs.resize(vdevs.size());
  ctx.frees.resize(vdevs.size());
  auto fail = [&](const Status& st) {
    failed = true;  // first: no reader may see the tree while it is put back
    UndoCommitLocked(ctx, vols, !destroyed.empty() || !snap_ops.empty());
    cv.notify_all();
    return st.WithContext("pool " + name + ": commit of txg " + std::to_string(txg));
  };
  // Each step's wall time, for txg_stats (counted only once the txg is durable).
  TxgStats spent;
  auto step_start = std::chrono::steady_clock::now();
  auto end_step = [&step_start](std::chrono::nanoseconds& into) {
    const auto now = std::chrono::steady_clock::now();
    into += now - step_start;
    step_start = now;
  };
  // 2./3. trees; snapshot destroys and rollbacks before them, creates after (snapshot.cc)
  uint64_t released = 0;
  if (Status st = SnapshotsBeforeTrees(ctx, snap_ops, &released); !st.ok()) return fail(st);
  for (auto& v : vols) {
    Status st = v->SyncTree(ctx);
    if (!st.ok()) return fail(st);
  }
  for (auto& v : destroyed) {
    v->DropEarlyLocked();
    v->FinishSync(&released);  // its buffers go with it
    Status st = v->FreeTree(ctx);
    if (!st.ok()) return fail(st);
  }
  std::vector<DatasetPhys> datasets;
  for (auto& v : vols) datasets.push_back(v->synced_phys());
  zil->SyncBegin(ctx, vols, destroyed, datasets, closing);
  SnapshotsAfterTrees(ctx, snap_ops, &datasets);
  if (block_cache) {
    ctx.cache_fill =
        CacheFill::Start(block_cache.get(), cache_refill.get(), std::exchange(ctx.forget, {}),
                         std::exchange(ctx.written, {}));
  }
  end_step(spent.trees);
  // 4. space map and MOS
  std::vector<BlockPtr> old_meta;
  std::vector<SpaceMapEntry> entries;
  auto collect = [&](const std::vector<RangeSet>& sets, bool is_free) {
    for (uint32_t v = 0; v < sets.size(); v++) {
      for (auto [s, e] : sets[v].ranges()) {
        // Records hold at most 2^48-1 bytes each.
        for (uint64_t o = s; o < e; o += (uint64_t{1} << 47)) {
          entries.push_back({is_free, v, o, std::min(e - o, uint64_t{1} << 47)});
        }
      }
    }
  };
  std::vector<BlockPtr> new_sm = sm_bps;
  // Condensing rewrites the live set; a pool whose live set takes more blocks than the
  // threshold would otherwise condense at every commit, so the log must also be twice what
  // condensing it would write.
  size_t live_extents = 0;
  for (const RangeSet& l : live) live_extents += l.extents();
  const size_t condensed_blocks =
      (live_extents + kSpaceMapEntriesPerBlock - 1) / kSpaceMapEntriesPerBlock;
  if (sm_bps.size() >= std::max(tuning.condense_blocks, 2 * condensed_blocks)) {
    collect(live, false);
    old_meta = sm_bps;
    new_sm.clear();
  } else {
    collect(ctx.frees, true);
    collect(ctx.allocs, false);
  }
  // Each block fits one run of the length ReserveDirty kept room for (kSpaceMapBlockSize).
  static_assert(kSpaceMapBlockSize <= kIndirectBlockSize);
  for (size_t i = 0; i < entries.size(); i += kSpaceMapEntriesPerBlock) {
    const size_t n = std::min(kSpaceMapEntriesPerBlock, entries.size() - i);
    BlockPtr bp;
    Status st = WriteMetaBlock(
        ctx, BlockType::kSpaceMap,
        EncodeSpaceMapBlock(std::span<const SpaceMapEntry>(entries.data() + i, n)), &bp);
    if (!st.ok()) return fail(st);
    new_sm.push_back(bp);
  }
  // Frees of trees and logs (not only the metadata every commit replaces) keep the timer
  // committing until they are released.
  const bool tree_frees = !ctx.deferred.empty();
  old_meta.push_back(mos_bp);
  std::vector<BlockPtr> defer_written;
  if (Status st = WriteDeferredLocked(ctx, old_meta, &defer_written, &mos.deferred); !st.ok()) {
    return fail(st);
  }
  mos.txg = txg;
  mos.compressed = compressed_blocks.load();
  mos.space_map = new_sm;
  mos.datasets = std::move(datasets);
  BlockPtr new_mos;
  if (Status st = WriteMetaBlock(ctx, BlockType::kMos, EncodeMos(mos), &new_mos); !st.ok()) {
    return fail(st);
  }
  end_step(spent.space_maps);
  // 5. make the tree durable, then point at it.
  if (Status st = FlushAll(); !st.ok()) return fail(st);
  end_step(spent.flush);
  Uberblock ub;
  ub.txg = txg;
  ub.guid_sum = guid_sum;
  ub.timestamp = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count());
  ub.pool_guid = pool_guid;
  ub.vdev_count = vdevs.size();
  ub.rootbp = new_mos;
  ctx.uberblocks_started = true;
  for (auto& v : vdevs) {
    if (Status st = v->WriteUberblock(ub); !st.ok()) return fail(st);
  }
  if (Status st = FlushAll(); !st.ok()) return fail(st);
  if (before_durable) {
    if (Status st = before_durable(txg); !st.ok()) return fail(st);
  }
  end_step(spent.uberblocks);
  // 6. txg is durable.
  sm_bps = std::move(new_sm);
  mos_bp = new_mos;
  if (tree_frees) last_free_txg = txg;
  ReleaseDeferredLocked(ctx, std::move(defer_written));
  // The cache copies stop; the buffers go back to their volumes, but for the one block
  // whose copy may still be in flight, which the fill keeps until it ends (cache_fill.h).
  const uint8_t* in_flight = ctx.cache_fill ? ctx.cache_fill->Stop() : nullptr;
  for (auto& v : vols) {
    if (Volume::Buf kept = v->FinishSync(&released, in_flight)) {
      ctx.cache_fill->Keep(std::move(kept));
      in_flight = nullptr;
    }
  }
  VS_CHECK(in_flight == nullptr);  // else a buffer still read went back to its volume
  VS_CHECK(ctx.forget.empty());    // no data block is freed once the fill has started
  if (ctx.cache_fill && !ctx.cache_fill->done()) cache_fills.push_back(std::move(ctx.cache_fill));
  zil->SyncDone(txg);
  {
    std::lock_guard l(mu);
    dirty_bytes -= released;
    synced_txg = txg;
    RecomputeReservations();
  }
  cv.notify_all();
  end_step(spent.finish);
  txg_stats.commits++;
  txg_stats.data_bytes += ctx.data_bytes;
  txg_stats.early_bytes += ctx.early_bytes;
  txg_stats.trees += spent.trees;
  txg_stats.space_maps += spent.space_maps;
  txg_stats.flush += spent.flush;
  txg_stats.uberblocks += spent.uberblocks;
  txg_stats.finish += spent.finish;
  return Status::Ok();
}

}  // namespace volstack::pool

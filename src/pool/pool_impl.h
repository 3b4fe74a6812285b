// PoolImpl: the internals of an open pool, shared by spa.cc (API, directory), txg_sync.cc
// (commit), spa_import.cc (open) and volume.cc. Not part of the public API; tests and the
// checker use it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pool/blkptr_format.h"
#include "pool/block_cache.h"
#include "pool/cache_fill.h"
#include "pool/dirty_reservation.h"
#include "pool/early_flush.h"
#include "pool/label_format.h"
#include "pool/mos_format.h"
#include "pool/range_set.h"
#include "pool/spa.h"
#include "pool/txg_stats.h"
#include "pool/vdev.h"
#include "pool/vdev_table.h"
#include "pool/volume.h"
#include "pool/zil.h"
#include "util/page_aligned.h"

namespace volstack::pool {

class PoolImpl;

// The pool property (in the MOS) a running scrub sets and its end (finished or cancelled)
// clears: an import that finds it starts the scrub again (scan.cc).
inline constexpr const char* kScrubbingProp = "scrubbing";

// Frees of txg N become allocatable once txg N + kTxgDefer is durable, so the last
// kTxgDefer + 1 uberblocks stay importable: import -F can rewind kTxgDefer txgs, also
// across imports, as the lists are stored with the MOS (defer_map.h). Three, one more than
// OpenZFS's TXG_DEFER_SIZE: a CLI command without a daemon is an import of its own that
// commits a txg or two, so the rewind reaches back over the last few commands.
inline constexpr uint64_t kTxgDefer = 3;
// Consecutive bytes allocated on one vdev before moving to the next (striping).
inline constexpr uint64_t kStripeUnit = 1 << 20;
inline constexpr uint64_t kRewindRunBytes = 1 << 20;  // PoolImpl::cursor
// What ReserveDirty keeps for a commit's space map and MOS blocks.
inline constexpr uint64_t kMetaSlackBytes = 2 << 20;

// The most top-level vdevs a pool has (PoolImpl::vdevs has a slot for each).
inline constexpr size_t kMaxVdevs = 1024;
// Create and zpool add: checks new vdevs' shapes and devices (size, sector size against
// ashift, a label of another pool unless `force`); MakeVdev builds one with a new guid per
// leaf (spa_import.cc).
Status CheckNewVdevs(std::vector<VdevSpec>& specs, uint32_t ashift, bool force);
std::unique_ptr<Vdev> MakeVdev(const VdevSpec& spec, uint32_t id, uint64_t guid, uint32_t ashift);
uint64_t NewVdevGuid();

// What a thick volume reserves: volsize plus its indirect blocks when fully written.
uint64_t MetaOverhead(const PoolImpl& pool, uint64_t nblocks);
uint64_t FullReservation(const PoolImpl& pool, uint64_t volsize, uint32_t vbs);
// snapshot.cc: calls fn for every block of tree `a` born after `min_txg` that tree `b`
// (the same lineage, as tall or taller: volumes only grow) does not name. A hole `b` names
// nothing.
Status DiffTrees(PoolImpl& pool, const DatasetPhys& a, const BlockPtr& b_root, uint32_t b_levels,
                 uint64_t min_txg, const std::function<Status(const BlockPtr&)>& fn);
// snapshot.cc, mu held: the snapshot has a user hold (zfs hold).
bool SnapshotHeldLocked(const Volume& snap);
// Validates and normalises a settable volume property into `props` (spa.cc).
Status ApplyVolumeProp(std::map<std::string, std::string>& props, const std::string& prop,
                       const std::string& value);

// One txg's commit state (sync_mu_ held).
struct SyncContext {
  uint64_t txg = 0;
  PoolImpl* pool = nullptr;
  std::vector<RangeSet> allocs;  // per vdev: tree blocks born in this txg
  std::vector<RangeSet> frees;   // per vdev: tree blocks freed in this txg
  std::vector<Dva> deferred;     // every free (tree and meta) of this txg
  // Write batching: contiguous writes on one vdev are merged up to 1 MiB (page-aligned, so
  // an O_DIRECT vdev file writes it without a copy).
  uint32_t batch_vdev = 0;
  uint64_t batch_offset = 0;
  PageAlignedBytes batch;
  // For the block cache (cache_fill.h): the data blocks this txg wrote (SyncTree) and
  // freed (Free), and the fill that takes them once every tree is written. Destroying the
  // context stops and joins the fill: a failed commit's buffers stay in its volumes.
  std::vector<CacheFill::Block> written;
  std::vector<BlockKey> forget;
  std::unique_ptr<CacheFill> cache_fill;
  uint64_t data_bytes = 0;   // data blocks written (TxgStats)
  uint64_t early_bytes = 0;  // of those, adopted from early writes
  // Blocks allocated with no owner (space map, MOS): in no allocs set, since they are not
  // in the space map; a failed commit gives them back (commit_undo.cc).
  std::vector<Dva> meta_allocs;
  // The commit has started writing uberblocks: the txg may be durable on some label.
  bool uberblocks_started = false;

  // `lsize`: the block's logical size when it is stored compressed (0: size).
  Result<Dva> Allocate(uint64_t size, Volume* owner, uint64_t lsize = 0);
  // Takes a block written early (PoolImpl::AllocateEarlyLocked) into this txg, as Allocate
  // would have.
  void Adopt(const Dva& dva, Volume* owner);
  Status Free(const BlockPtr& bp, Volume* owner);
  Status Write(const Dva& dva, std::span<const uint8_t> data);
  Status FlushWrites();
};

class PoolImpl {
 public:
  PoolImpl() = default;
  ~PoolImpl();

  // --- immutable after open ---
  std::string name;
  uint64_t pool_guid = 0;
  uint32_t ashift = 12;
  PoolTuning tuning;
  // The top-level vdevs by id; zpool add appends (vdev_table.h has the publication rule).
  VdevTable vdevs{kMaxVdevs};
  // The sum of the vdevs' guids (the uberblocks'); grows with zpool add. GUARDED_BY(sync_mu)
  // once the pool is shared.
  uint64_t guid_sum = 0;
  uint64_t create_time = 0;
  bool read_only = false;  // imported with PoolImportOptions::read_only: never writes
  ImportReport import_report;

  uint64_t asize(uint64_t size) const {
    const uint64_t unit = uint64_t{1} << ashift;
    return (size + unit - 1) / unit * unit;
  }
  uint64_t total_size() const;

  // Reads and verifies the block `bp` points to into dst (bp.lsize bytes). EIO on a checksum
  // mismatch or an out-of-range address. Served from block_cache when it holds the block;
  // verified data blocks are offered to it. `cache_asked`: the caller's own Lookup of this
  // block just missed (and counted the access, if the caller counts), so the cache is not
  // asked again. `offer` false: a data block read from the vdev is not offered to it.
  // `prefix` (nonzero): the caller reads only dst's first `prefix` bytes, so an lz4 block
  // not offered to the cache is decoded that far only (compress.h, DecompressLz4Prefix).
  Status ReadBlock(const BlockPtr& bp, uint8_t* dst, bool cache_asked = false, bool offer = true,
                   uint32_t prefix = 0);

  // Verified block contents (block_cache.h), under the `cache` bound shared with the
  // volumes' indirect caches (cache_bytes). Created with the pool (Create/Import).
  std::unique_ptr<BlockCache> block_cache;
  static BlockKey CacheKey(const BlockPtr& bp) {
    return BlockKey{bp.dva[0].vdev, bp.lsize, bp.dva[0].offset, bp.birth};
  }
  void InitBlockCache() {
    // Below 1 MiB the fixed tables would be a large share of the bound: indirect blocks only.
    if (tuning.cache_data && tuning.cache_max_bytes >= (uint64_t{1} << 20)) {
      block_cache =
          std::make_unique<BlockCache>(tuning.cache_max_bytes, &cache_bytes, tuning.cache_reserve);
      if (!block_cache->usable()) {
        block_cache.reset();  // every data read goes to the vdevs, as with cache_data false
        return;
      }
      cache_refill = std::make_unique<CacheRefill>(
          block_cache.get(),
          [this](uint32_t vdev, uint64_t offset, std::span<uint8_t> dst) {
            return vdevs[vdev]->device()->Read(offset, dst);
          },
          tuning.cache_max_bytes, [this] { return dirty_bytes.load() > 0; });
    }
  }
  // What the commits' cache copies left out, read back (cache_refill.h). Destroyed before
  // the block cache and the vdevs it uses, and after the fills that feed it.
  std::unique_ptr<CacheRefill> cache_refill;

  // The volumes' dirty blocks (dirty_buffers.h). Declared before the volumes and the commits'
  // cache fills, which hold its buffers, so that it outlives them.
  DirtyBuffers dirty_buffers;

  // --- directory and state (mu) ---
  std::mutex mu;
  std::condition_variable cv;  // sync thread wake-ups, throttled writers, synced txgs
  std::map<std::string, std::shared_ptr<Volume>> volumes;  // GUARDED_BY(mu), by full name
  std::vector<std::shared_ptr<Volume>> pending_destroy;    // GUARDED_BY(mu)
  std::map<std::string, std::string> props;                // GUARDED_BY(mu)
  uint64_t next_id = 1;                                    // GUARDED_BY(mu)
  bool mos_dirty = false;                                  // GUARDED_BY(mu)
  // A compressed block was written since the pool was created (MosPhys::compressed).
  std::atomic<bool> compressed_blocks{false};
  uint64_t open_txg = 1;     // GUARDED_BY(mu)
  bool stop_thread = false;  // GUARDED_BY(mu)
  bool kick = false;         // GUARDED_BY(mu)
  // Snapshots (snapshot.cc): a read-only Volume over each snapshot's tree, by full name
  // "pool/vol@snap". GUARDED_BY(mu)
  std::map<std::string, std::shared_ptr<Volume>> snapshots;
  // Snapshot operations queued for the next commit, which does them all in its one txg:
  // destroys and rollbacks before the volumes' trees are written, creates after.
  struct SnapOp {
    // kRecvApply (receive.cc): volume `name`'s tree becomes `source`'s (a received hidden
    // dataset, already out of `volumes`), its blocks born after `txg` freed as by a rollback.
    enum class Kind { kCreate, kDestroy, kRollback, kRecvApply } kind;
    std::string name;   // the snapshot ("pool/vol@snap"); kRecvApply: the volume
    uint64_t id = 0;    // kCreate: its directory id
    uint64_t guid = 0;  // kCreate: its guid (a received snapshot keeps the sender's); 0: new
    uint64_t txg = 0;   // kRecvApply: the received stream's origin snapshot's txg
    // kRecvApply: the received tree's volume. kDestroy: the head the snapshot belongs to,
    // when `volumes` no longer names it (receive -F replacing a volume whose volblocksize
    // differs: the head is destroyed in the same txg); null: the head is in `volumes`.
    std::shared_ptr<Volume> source = nullptr;
  };
  std::vector<SnapOp> pending_snap_ops;  // GUARDED_BY(mu)
  // One snapshot operation (checks, queue, commit) at a time, so what one checked still
  // holds when its commit runs. Taken before sync_mu and mu.
  std::mutex snap_admin_mu;
  // mu held: `volume`'s snapshots, oldest first.
  std::vector<std::shared_ptr<Volume>> SnapshotsOfLocked(const std::string& volume) const;
  // mu held: the txg of `vol`'s origin snapshot (a clone), else 0.
  uint64_t OriginTxgLocked(const Volume& vol) const;
  // mu held: what keep_txg of `volume` must be now.
  uint64_t KeepTxgLocked(const Volume& vol) const;
  // The commit's parts (sync_mu held): `ops` taken at quiesce. Before the trees: destroys
  // and rollbacks (a rolled-back volume's dirty data is dropped, adding to *released).
  // After: creates; then every snapshot's entry is appended to `datasets`.
  Status SnapshotsBeforeTrees(SyncContext& ctx, const std::vector<SnapOp>& ops, uint64_t* released);
  void SnapshotsAfterTrees(SyncContext& ctx, const std::vector<SnapOp>& ops,
                           std::vector<DatasetPhys>* datasets);
  // sync_mu held, nothing dirty in the trees involved: the bytes destroying `snapshot`
  // frees (its `used`), the bytes it holds born since the previous snapshot (`written`).
  Result<uint64_t> SnapshotUniqueLocked(const std::string& snapshot);
  Result<uint64_t> WrittenSinceLocked(const DatasetPhys& tree, uint64_t since_txg);
  // sync_mu held: what destroying every snapshot in `names` together frees
  // (destroy_snapshots.cc).
  Result<uint64_t> SnapshotsUniqueLocked(const std::vector<std::string>& names);
  // sync_mu held: a volume's `written` (since its newest snapshot or origin) and
  // `usedbysnapshots` (what destroying all its snapshots frees), of its synced tree;
  // `logical_snapshots`, if given: the same blocks by lsize (for logicalused);
  // `usedbydataset`, if given: its blocks born after its origin (all of them for a volume
  // that is not a clone).
  Status VolumeSnapshotSpaceLocked(const std::string& volume, uint64_t* written,
                                   uint64_t* usedbysnapshots, uint64_t* logical_snapshots = nullptr,
                                   uint64_t* usedbydataset = nullptr);
  // Export or destroy found no device open: none may open from then on (OpenVolume).
  bool leaving = false;  // GUARDED_BY(mu)
  std::atomic<bool> closed{false};
  // A txg commit or an early flush failed: the pool is suspended. A failed commit is undone
  // in memory (UndoCommitLocked), so `zpool clear` can commit again once the devices answer
  // (Resume); commit_undo.cc has the theory.
  std::atomic<bool> failed{false};
  Status SuspendedError() const {
    return Status::IoError("pool " + name + " is suspended after a failed commit or flush" +
                           " (zpool clear resumes it once its devices answer)");
  }
  // GUARDED_BY(sync_mu): why a resume is impossible (the failed commit could not be undone
  // in memory); empty when `zpool clear` may resume the pool.
  std::string unresumable;
  // sync_mu held, in a commit that failed: puts the pool back as it was before the commit
  // (allocations, frees, the volumes' trees and dirty data), or records why it cannot.
  void UndoCommitLocked(SyncContext& ctx, const std::vector<std::shared_ptr<Volume>>& vols,
                        bool others_changed);
  // Resumes a suspended pool: commits its dirty data again. An error (the pool stays
  // suspended) when the devices still fail or the failed commit could not be undone.
  Status Resume();
  std::atomic<uint64_t> dirty_bytes{0};
  // The indirect blocks the dirty data will make commits write, at most (Volume::
  // CountDirtyLocked): what ReserveDirty keeps room for beyond the data.
  std::atomic<uint64_t> dirty_meta_bytes{0};
  std::atomic<uint64_t> cache_bytes{0};  // the volumes' cached indirect blocks
  // Partial-block writes that read the old block from the tree (benchmarks, tests).
  std::atomic<uint64_t> rmw_reads{0};
  // Set when the indirect caches gave up enough memory to be worth handing back to the
  // kernel (Volume::TrimCacheLocked). TrimHeap does it, after a commit, with no lock held:
  // malloc_trim walks the whole heap, and readers would wait for it. It also trims the
  // dirty blocks' memory (DirtyBuffers::Trim).
  std::atomic<bool> heap_to_trim{false};
  void TrimHeap();
  std::atomic<uint64_t> free_bytes{0};  // allocatable now (excludes deferred frees)
  // Of free_bytes, what whole kIndirectBlockSize runs hold (the free sets' unit_bytes):
  // the room for indirect blocks and for data blocks of 16 KiB and up, which small frees
  // can cut up while free_bytes stays high (ReserveDirty). Kept by NoteFreeRunsLocked.
  std::atomic<uint64_t> free_run_bytes{0};
  void NoteFreeRunsLocked();  // sync_mu held (or the pool not yet shared), after free changes
  // Small frees cut the free space into holes too short for an indirect block (16 KiB in
  // one piece), which a commit must find for every dirty L1 block and more. Small data
  // blocks go into those holes, instead of cutting up whole runs, once the bytes in whole
  // runs of kIndirectBlockSize (RangeSet::unit_bytes) are down to this (AllocateLocked).
  uint64_t RunsLowWater() const;
  std::atomic<uint64_t> unused_reservation{0};
  std::atomic<uint64_t> synced_txg{0};

  // Room for `bytes` of new dirty data in `vol`, checked and reserved in one step
  // (dirty_reservation.h): ENOSPC when the pool could not commit it.
  Result<DirtyReservation> ReserveDirty(Volume* vol, uint64_t bytes);
  std::mutex reserve_mu;                    // one ReserveDirty at a time
  std::atomic<uint64_t> reserved_bytes{0};  // reserved, not yet dirty (all volumes)
  // Dirty data plus reservations: what the space checks must find room for. A block moves
  // from reserved to dirty by adding to dirty first, so reading reserved first counts it
  // at least once (the other order could miss it).
  uint64_t PendingDirty() const {
    const uint64_t reserved = reserved_bytes.load();
    return dirty_bytes.load() + reserved;
  }
  // Blocks while dirty data is at the limit (wakes the sync thread first).
  void Throttle();
  void RecomputeReservations();  // mu held
  Status CheckUsable() const;

  // --- txg commit (sync_mu) ---
  std::mutex sync_mu;
  std::vector<RangeSet> free;  // GUARDED_BY(sync_mu) per vdev
  std::vector<RangeSet> live;  // GUARDED_BY(sync_mu) per vdev: space-map-recorded blocks
  // GUARDED_BY(sync_mu) per vdev: allocated for early writes (early_write.cc), not yet
  // adopted by a commit or given back. In no space map: a crash leaves the space free.
  std::vector<RangeSet> early;
  // Allocation is next-fit from a cursor per vdev, so a txg's blocks land in runs and one
  // vdev write carries many. A released free run of kRewindRunBytes or more below the
  // cursor pulls it back (ReleaseLocked): overwritten space is written again before
  // never-written space further on, so a vdev on a sparse file (or a thin LUN) grows only as
  // far as live data and the deferred frees need, and the host file system is not asked to
  // allocate anew on every pass over a volume (pool_bench SeqWrite64K/0:
  // docs/notes/commit-path.md). The holes random overwrites leave are smaller: filling them would
  // scatter a txg's writes.
  std::vector<uint64_t> cursor;                   // GUARDED_BY(sync_mu)
  uint32_t rotor = 0;                             // GUARDED_BY(sync_mu)
  uint64_t rotor_bytes = 0;                       // GUARDED_BY(sync_mu)
  std::vector<BlockPtr> sm_bps;                   // GUARDED_BY(sync_mu)
  BlockPtr mos_bp;                                // GUARDED_BY(sync_mu)
  std::map<uint64_t, std::vector<Dva>> deferred;  // GUARDED_BY(sync_mu): txg -> frees
  // Deferred frees made durable (defer_map.h). GUARDED_BY(sync_mu): txg -> the blocks
  // holding its list, named by the MOS until the list is released.
  std::map<uint64_t, std::vector<BlockPtr>> defer_bps;
  std::atomic<uint64_t> deferred_bytes{0};    // in `deferred`
  std::vector<uint64_t> deferred_vdev_bytes;  // GUARDED_BY(sync_mu): the same per vdev
  // The free space reported (zfs's `available` counts deferred frees as free).
  uint64_t FreeWithDeferred() const { return free_bytes.load() + deferred_bytes.load(); }
  // Whether txg `txg` releases the frees of txg `freed` (sync_mu held).
  bool ReleasesLocked(uint64_t freed, uint64_t txg) const {
    return freed + kTxgDefer <= txg && (scan_pin_txg == 0 || freed < scan_pin_txg);  // scan.cc
  }
  // Commit, before the MOS (sync_mu held): adds `old_meta` and the blocks of the lists this
  // txg releases to ctx.deferred, writes it as this txg's list into `*written` and sets
  // `*lists` to what the new MOS names.
  Status WriteDeferredLocked(SyncContext& ctx, const std::vector<BlockPtr>& old_meta,
                             std::vector<BlockPtr>* written, std::vector<DeferListPhys>* lists);
  // Commit, once txg is durable: keeps ctx.deferred as txg's list and releases the lists
  // txg releases.
  void ReleaseDeferredLocked(SyncContext& ctx, std::vector<BlockPtr> written);
  // Import: `mos`'s lists, read and taken out of `free` (after the intent-log claims);
  // `meta`: the MOS and space-map blocks. Corruption if one overlaps allocated space.
  Status LoadDeferred(const MosPhys& mos, const std::vector<BlockPtr>& meta);
  // Import: the first txg of this session is last_txg + 1 (past every txg seen).
  void RebaseDeferred(uint64_t last_txg);
  // GUARDED_BY(sync_mu): how far RebaseDeferred moved the lists' txgs past those the MOS on
  // disk names them by, until the next commit writes them under the new ones (checker.cc).
  uint64_t deferred_rebase = 0;
  // GUARDED_BY(sync_mu): the newest txg that freed blocks of a tree or a log (not only the
  // metadata every commit replaces). Its frees wait until txg + kTxgDefer is durable.
  uint64_t last_free_txg = 0;
  bool FreesWaitingLocked() const {
    return last_free_txg > 0 && synced_txg.load() < last_free_txg + kTxgDefer;
  }

  Status Sync();  // takes sync_mu
  // The sync thread's commit on its timer: as Sync(), and also when nothing changed but
  // frees wait for release, so space a discard or a destroy gave back becomes free within
  // kTxgDefer timeouts instead of at the next write. An idle pool then commits no more.
  Status SyncOnTimer();
  // sync_mu held. Commits nothing when nothing changed, unless `even_if_clean` (a txg
  // with no changes still releases the frees of txg - kTxgDefer). `before_durable` (if
  // given) runs once the txg's uberblocks are flushed and before anyone is told the txg is
  // durable (synced_txg, the intent logs' SyncDone): zpool add writes the labels that make
  // import choose the txg there (vdev_add.cc). Its failure fails the commit.
  Status SyncLocked(bool even_if_clean = false,
                    const std::function<Status(uint64_t txg)>& before_durable = {});
  // For a write that found no room: commits once if that could free space (data is dirty,
  // whose overwritten blocks the commit frees, or frees wait for release); false if the
  // commit failed or nothing could (the pool is full). kTxgDefer + 1 calls release every
  // free pending at the first.
  bool CommitForSpace();
  std::atomic<uint64_t> space_commits{0};  // txgs CommitForSpace committed (tests)
  TxgStats txg_stats;                      // GUARDED_BY(sync_mu)
  TxgStats TxgStatsSnapshot() {
    std::lock_guard l(sync_mu);
    return txg_stats;
  }
  // The sync thread's commit on a kick: skipped when, once sync_mu is held, less than
  // `bytes` is dirty (a commit that ran meanwhile took the data that kicked it).
  Status SyncIfDirtyAtLeast(uint64_t bytes);
  // Next-fit from the vdev's cursor; a block smaller than an indirect block is put in a hole
  // too short for one first while the runs are low (RunsLowWater).
  Result<Dva> AllocateLocked(uint64_t size);
  void ReleaseLocked(const Dva& dva);  // back to the free set
  // Early writes (early_write.cc), sync_mu held: space for one, taken from the free set
  // into `early`, and back.
  Result<Dva> AllocateEarlyLocked(uint64_t size);
  void ReleaseEarlyLocked(const Dva& dva);
  // The early writer: a thread started with the sync thread, woken by WakeEarlyWriter when
  // a volume has a run's worth of whole new blocks, running Volume::WriteEarly for each.
  void WakeEarlyWriter();
  // One pass over every volume, on this thread (tests, never beside StopSyncThread).
  void WriteEarlyNow();
  void StartEarlyWriter();
  void StopEarlyWriter();
  std::mutex early_mu;
  std::condition_variable early_cv;
  bool early_wanted = false;  // GUARDED_BY(early_mu)
  bool early_stop = false;    // GUARDED_BY(early_mu)
  std::thread early_writer;
  // The early flusher (early_flush.h), fed by every RunWriter. Created and destroyed with
  // the sync thread, around the early writer, so it outlives every RunWriter that notes a
  // write to it: the early writer's (joined first) and the commits' (destroyed under
  // sync_mu). A failed early flush suspends the pool.
  std::unique_ptr<EarlyFlusher> early_flusher;
  void StartEarlyFlusher();
  // What the early flusher does for `vdev`: flushes it, and suspends the pool if that fails.
  void EarlyFlush(uint32_t vdev);
  void NoteDataWritten(uint32_t vdev, uint64_t bytes) {
    if (early_flusher) early_flusher->NoteWritten(vdev, bytes);
  }
  Status WriteMetaBlock(SyncContext& ctx, BlockType type, std::vector<uint8_t> data, BlockPtr* bp);
  // The block-cache fills of durable txgs whose last copy was still in flight when their
  // commit stopped them (cache_fill.h), each keeping that block's buffer. ReapCacheFillsLocked
  // destroys those done; with `all`, every one (stopped and joined). FinishCacheFills does
  // it all under sync_mu, then clears the refill (its queue and the read in flight, waiting
  // only for an insert under way: cache_refill.h) (close; tests that look at the cache).
  std::vector<std::unique_ptr<CacheFill>> cache_fills;  // GUARDED_BY(sync_mu)
  void ReapCacheFillsLocked(bool all);
  void FinishCacheFills() {
    std::lock_guard l(sync_mu);
    ReapCacheFillsLocked(/*all=*/true);
    if (cache_refill) cache_refill->Clear();
  }
  // Flushes every vdev; IoError if the pool is suspended by then, once no early flush is
  // in flight (an early flush that failed may have lost what these flushes would
  // otherwise vouch for).
  Status FlushAll();
  // Writes every vdev's label configs (even labels, flush, odd labels, flush). Takes
  // sync_mu: label writes are serialised with zpool add's (vdev_add.cc).
  Status WriteLabels(PoolState state, uint64_t txg);
  Status WriteLabelsLocked(PoolState state, uint64_t txg);  // sync_mu held

  // Loads MOS + space map from `ub` and builds free/live/volumes. Requires no volumes yet.
  Status LoadFrom(const Uberblock& ub);
  void StartSyncThread();
  void StopSyncThread();
  std::thread sync_thread;

  // --- redundancy: self-heal, scrub and resilver (vdev.h, scan.cc, vdev_admin.cc) ---
  std::atomic<uint64_t> healed_bytes{0};  // rewritten by reads that found a bad copy
  // Data no copy could give back since the pool was opened (zpool status -v).
  std::mutex error_mu;
  std::set<std::string> data_errors;  // GUARDED_BY(error_mu)
  void NoteDataError(const std::string& what) {
    std::lock_guard l(error_mu);
    if (data_errors.size() < 1000) data_errors.insert(what);
  }
  // Nonzero while a scan walks the tree of txg scan_pin_txg - 1: the frees of that txg and
  // later are not released (txg_sync.cc), so no block of the walked tree is written over
  // before the walk reads it. Read and written under sync_mu.
  uint64_t scan_pin_txg = 0;
  std::mutex scan_mu;
  std::condition_variable scan_cv;
  ScanInfo scan;              // GUARDED_BY(scan_mu)
  bool scan_cancel = false;   // GUARDED_BY(scan_mu)
  bool scan_pause = false;    // GUARDED_BY(scan_mu)
  bool scan_running = false;  // GUARDED_BY(scan_mu)
  bool scan_closing = false;  // GUARDED_BY(scan_mu): stopped by close, not by the user
  Status scan_status;         // GUARDED_BY(scan_mu): how the last scan ended
  std::thread scan_thread;    // joined by StopScan
  ScanInfo ScanInfoSnapshot() {
    std::lock_guard l(scan_mu);
    return scan;
  }
  // Starts a scrub (or a resilver: `resilver`) on a thread of its own; EBUSY while one runs
  // (a paused scrub is resumed instead).
  Status StartScan(bool resilver);
  // Waits until no scan runs; the scan's result.
  Status WaitScan();
  void StopScan();  // cancels and joins (close)
  void RunScan(bool resilver);
  // A label config for vdev `v` as WriteLabels writes it (the vdev fills in its leaves).
  LabelConfig BaseLabelConfig(const Vdev& v, PoolState state, uint64_t txg) const;

  // The volumes' intent logs (zil.h). Declared last: destroyed before the state above.
  std::unique_ptr<ZilManager> zil = std::make_unique<ZilManager>(this);
};

// The properties a volume and a snapshot both show from DatasetInfo's numbers (used,
// referenced, volsize, volblocksize, guid, createtxg, creation; mountpoint "-").
void PutDatasetNumbers(DatasetInfo& d);

}  // namespace volstack::pool

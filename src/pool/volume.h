// Volume: one zvol's state inside an open pool: its directory entry (DatasetPhys), its dirty
// data and its cached block-pointer tree. ZvolDevice is the BlockDevice face of it.
//
// Tree. Data lives in volblocksize L0 blocks; indirect blocks (16 KiB, 128 blkptrs) at
// levels 1..levels point down; the root pointer sits in the MOS. Indirect block (l, i) covers
// L0 blocks [i*128^l, (i+1)*128^l). A hole pointer at any level is a run of zeroes. Indirect
// blocks are cached decoded, their pointers packed a line each (indirect_pointers.h), and
// charged to the pool's cache bound what the heap holds for them.
//
// Dirty data. Writes go to the open map (block id -> buffer, nullptr = hole). A txg commit
// first moves the open map to the syncing map (Quiesce), writes it out (SyncTree), and drops
// it (FinishSync) only after the tree points at the new blocks, so a reader finds every
// block in the open map, the syncing map or the tree, in that order. SyncTree writes runs of
// adjacent new blocks with one vectored vdev write straight from the syncing buffers (no
// copy), hints the vdev to start writing back long runs at once (the commit's flush
// follows); each group of up to 1 MiB of blocks is checksummed and then written by one
// thread (for a large txg the commit's and a helper take groups in turn), and the block
// cache's copies are made once every tree is written, on another thread for a large txg
// (cache_fill.h).
// Runs of whole new blocks of the open map may be written before the commit by the pool's
// early writer (WriteEarly, early_write.cc), which SyncTree then adopts; a change to such
// a block voids its early copy, and a buffer being written early is never changed in place.
// FinishSync keeps up to the txg's block count (at most 16 MiB) of buffers as spares for
// the next txg, so a streaming writer reuses warm memory instead of faulting in fresh
// pages; the one buffer whose copy into the block cache may still be in flight goes to
// that copy instead (cache_fill.h).
// A partial-block write of a block in neither map reads it from the tree under a per-block
// "loading" marker: other writers of that block wait, so read-modify-write never loses a
// concurrent write.
//
// Locks: mu_ guards the maps and the loading set; tree_mu_ guards the indirect cache, root
// and phys_. Order: mu_ is never held while taking tree_mu_ except in Quiesce (none).
// SyncTree runs only on the txg sync path (PoolImpl::sync_mu_ held).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include "bdev/block_device.h"
#include "pool/blkptr_format.h"
#include "pool/compress.h"
#include "pool/dirty_buffers.h"
#include "pool/dirty_reservation.h"
#include "pool/indirect_pointers.h"
#include "pool/mos_format.h"

namespace volstack::pool {

class PoolImpl;
struct SyncContext;

inline constexpr uint32_t kIndirectBlockSize = 16384;  // on disk: kBpsPerIndirect blkptrs

// Levels needed for `nblocks` L0 blocks (at least 1).
uint32_t LevelsFor(uint64_t nblocks);

class Volume {
 public:
  using Buf = DirtyBuffers::Buf;  // one block; nullptr in a dirty map is a hole

  Volume(PoolImpl* pool, DatasetPhys phys);
  ~Volume();

  // I/O. Requires offset/length within volsize and 512-aligned (ZvolDevice checks). Writes
  // end in the pool's dirty-data throttle unless `throttle` is false: then the caller
  // calls PoolImpl::Throttle() itself, after it has read the open txg for the intent log
  // (a throttle can kick a commit, and a txg read after it would be one too new).
  Status Read(uint64_t offset, std::span<uint8_t> buf);
  Status Write(uint64_t offset, std::span<const uint8_t> buf, bool throttle = true);
  // A received block as the sending pool stored it (send -c): psize bytes of a `comp`
  // stream that decode to the block. The commit stores these bytes as they are instead of
  // compressing the block again (whatever the volume's `compression`).
  struct StoredForm {
    Compression comp = Compression::kNone;  // kNone: no stored form, the block as written
    std::vector<uint8_t> bytes;
  };
  // Write of whole blocks (`offset` and buf's size multiples of volblocksize), the decoded
  // bytes in `buf` and block i's stored form in stored[i] (moved from). The stored form
  // holds only while the block is unchanged: a later write of it is compressed as usual.
  // Requires each stored form to decode to its block (the receiver decoded it). Its bytes
  // are held beside the dirty buffer until the commit, uncounted: at most one more block.
  Status WriteStored(uint64_t offset, std::span<const uint8_t> buf, std::vector<StoredForm>& stored,
                     bool throttle = true);
  // Full blocks become holes; partial blocks are zero-filled.
  Status Zero(uint64_t offset, uint64_t length, bool throttle = true);
  Result<std::vector<bdev::AllocationExtent>> QueryAllocation(uint64_t offset, uint64_t length);

  DatasetPhys phys() const;
  // The directory entry as of the end of the last SyncTree (or the import): what the
  // commit records in the MOS, consistent with the tree it wrote even when Grow or
  // SetProps ran since (those reach the next txg).
  DatasetPhys synced_phys() const;
  uint64_t volsize() const { return volsize_.load(); }
  uint32_t volblocksize() const { return vbs_; }
  uint64_t used() const { return used_.load(); }
  // The tree's blocks by their logical size (lsize): `used` as if nothing were compressed.
  uint64_t logical_used() const { return lused_.load(); }
  // A block of the tree allocated (+) or given up (-): its asize and its lsize.
  void AdjustUsed(int64_t delta, int64_t logical) {
    used_ += static_cast<uint64_t>(delta);
    lused_ += static_cast<uint64_t>(logical);
  }
  // Grows volsize (adds tree levels as needed); the caller syncs the MOS, then tells open
  // devices with NotifyResize: a device writes past the old end only once the new size is
  // durable (a logged write there would not replay onto the old size).
  Status Grow(uint64_t new_size);
  void NotifyResize();
  void SetProps(std::map<std::string, std::string> props);
  std::string Prop(const std::string& key, const std::string& dflt) const;
  ChecksumType checksum_type() const;
  // The `compression` property: what blocks written from now on are compressed with.
  CompressionSetting compression() const;

  // Resize notifications for open devices.
  void AddResizeListener(void* key, std::function<void(uint64_t)> fn);
  void RemoveResizeListener(void* key);

  std::atomic<int> open_count{0};
  std::atomic<uint64_t> refreservation{0};
  std::atomic<uint64_t> dirty{0};     // bytes in the open + syncing maps
  std::atomic<uint64_t> reserved{0};  // reserved by writes in progress, not dirty yet
  // dirty + reserved, read in the order PoolImpl::PendingDirty explains.
  uint64_t pending_dirty() const {
    const uint64_t r = reserved.load();
    return dirty.load() + r;
  }
  std::atomic<bool> destroyed{false};
  // Snapshots (snapshot.cc). The newest txg whose tree a snapshot or this clone's origin
  // holds: a block born at or before it that the head stops referencing stays allocated
  // (SyncContext::Free). Changed only under the pool's sync_mu.
  std::atomic<uint64_t> keep_txg{0};
  // Rollback (sync_mu held, syncing map empty): the tree becomes `snap`'s (root, volsize,
  // levels, referenced bytes) and the cached indirect blocks are dropped.
  void ResetTreeLocked(const DatasetPhys& snap);
  // A snapshot's properties (its holds): a snapshot has no tree commits, so the entry the
  // MOS records changes at once (the pool's mu held; the caller commits).
  void SetSnapshotProps(std::map<std::string, std::string> props);
  // A received hidden dataset becomes the volume `name` (receive.cc; the pool's mu held,
  // the caller commits).
  void RenameLocked(const std::string& name);
  // A clone's origin changes (promote.cc; the pool's mu held, the caller commits).
  void SetOriginLocked(const std::string& origin);

  // Where a read last found block `blkid`'s pointer, as a number (l1_hints_): the address
  // of its PackedBlockPtr, what PrefetchPointer loads. 0 if no read has noted an L1 block
  // at its entry. That L1 block may have been evicted since, or be another sharing the
  // entry: only a test that knows which L1 block is cached there may read through it.
  uintptr_t HintedPointerAddress(uint64_t blkid) const;
  // What the cache bound is charged for a cached indirect block holding `ptrs`: the block,
  // the shared_ptr's control block, the map's node, malloc's headers.
  static uint64_t CachedIndirectBytes(const IndirectPointers& ptrs);

  // --- txg sync path (PoolImpl::sync_mu_ held) ---
  // Moves the open map to the syncing map; returns the number of entries moved.
  size_t Quiesce();
  Status SyncTree(SyncContext& ctx);
  // Empties the syncing map (the commit is past it: its blocks are durable, or its volume
  // destroyed), keeps up to as many of its buffers as it had blocks (and kMaxSpareBytes)
  // as spares and frees the rest, but for the one holding `withhold`, which it returns (a
  // block the block cache's copies may still read: cache_fill.h). Adds the dirty bytes
  // released to *released.
  Buf FinishSync(uint64_t* released, const uint8_t* withhold = nullptr);
  // A commit that failed (commit_undo.cc; sync_mu held): the tree, `used` and the dirty
  // data become what they were before SyncTree of txg `txg` (the syncing map goes back
  // into the open map, under newer writes), and every early copy is given back, so the
  // next commit writes everything again. False (nothing changed) when the tree cannot be
  // put back (grown during the commit).
  bool UndoSyncLocked(uint64_t txg, uint64_t* released);
  // Gives back every early copy of the open map (a resume: a failed flush may have lost
  // them), once the early writes in flight end (sync_mu held).
  void DropEarlyCopiesLocked();
  // Frees every block of the tree (destroy). Reads indirect blocks only.
  Status FreeTree(SyncContext& ctx);
  // Calls fn for every non-hole pointer in the tree (indirect ones before their children).
  Status Walk(const std::function<Status(const BlockPtr&)>& fn);
  // Drops clean cached indirect blocks (cache pressure).
  void EvictClean();

  // --- early writes (early_write.cc) ---
  // Writes runs of the open txg's new whole blocks to space allocated now, ahead of the
  // commit, which then adopts them. Returns without waiting when a commit holds sync_mu.
  void WriteEarly();
  // Gives back every early allocation of a destroyed volume, quiesced (sync_mu held), after
  // the writes in flight end.
  void DropEarlyLocked();

 private:
  // A cached indirect block. `charged`: what cache_bytes counts for it while it is cached, 0
  // while it is not (its form, and so its size, may change while cached: SetPointerLocked).
  struct Indirect {
    IndirectPointers bps;
    bool dirty = false;
    uint64_t charged = 0;
  };
  static uint64_t Key(uint32_t level, uint64_t index) { return (uint64_t{level} << 56) | index; }

  // Read path (volume_read.cc).
  // For a read-modify-write: the block's bytes, taken from the block cache when it holds
  // them but never offered to it (the commit replaces the block, and its new bytes go to
  // the cache then; a copy of the old ones would only push out live blocks).
  Status ReadFromTree(uint64_t blkid, uint32_t in_off, uint8_t* dst, uint32_t n);
  // Reads [in_off, in_off + n) of block `blkid` whose pointer was `bp`, verified; on a
  // mismatch looks the pointer up again once (the block may have moved). `cache_asked`:
  // the block cache just missed `bp` (PoolImpl::ReadBlock); a pointer looked up again is
  // asked for in the cache as usual.
  // `offer`: a block read from the vdev is offered to the block cache.
  Status ReadBp(BlockPtr bp, uint64_t blkid, uint32_t in_off, uint8_t* dst, uint32_t n,
                bool cache_asked = false, bool offer = true);
  // EIO unless `bp` is a plausible data block pointer of this volume on an existing vdev.
  Status CheckDataBp(const BlockPtr& bp) const;
  // Records where the L1 block `l1_index` keeps its packed pointers, for PrefetchPointer
  // (nothing when `l1` is nullptr: it is not cached); tree_mu_ held.
  void NoteL1Locked(uint64_t l1_index, const Indirect* l1);
  // Starts loading block `blkid`'s pointer from where its L1 block was last found, if it
  // was (l1_hints_), and returns at once. Takes no lock and trusts nothing.
  void PrefetchPointer(uint64_t blkid) const;
  // out[i] = pointer of block first + i for every i < count with need[i] (tree_mu_ held).
  Status LookupRangeLocked(uint64_t first, size_t count, const uint8_t* need, BlockPtr* out);
  // Drops clean cached indirect blocks of this volume while the pool's cache is over its
  // bound (tree_mu_ held; never during a commit, which holds tree_mu_ throughout).
  void TrimCacheLocked();
  // A block that becomes a new dirty buffer takes its room from `room`. `stored` (a whole
  // block's write only): its stored form, kept with the buffer (stored_).
  Status WriteBlock(uint64_t blkid, uint32_t in_off, const uint8_t* src, uint32_t n, bool zero,
                    DirtyReservation& room, StoredForm* stored = nullptr);
  // The first block >= `from` in the open or syncing map or being loaded, or ~0 (mu_
  // held). A hole the tree reports is clamped to it, and it must be taken before the tree
  // lookup: a block reaches the tree before it leaves the syncing map, so looking in this
  // order misses none.
  uint64_t NextDirtyLocked(uint64_t from) const;
  // Counts the entry `it` just added to open_: the first dirty block under an L1 block adds
  // that block and, while there are fewer of them than the level has, one per level above
  // (mu_ held). Scattered 4 KiB writes dirty 16 KiB of indirect blocks each, which the
  // space checks must see before the commit needs it.
  void CountDirtyLocked(std::map<uint64_t, Buf>::iterator it);
  // A data block pointer at `dva` (lsize, psize, type, fill set; checksum and birth not).
  BlockPtr DataBlockPtr(const Dva& dva, ChecksumType cksum) const;
  // A data block SyncTree hands WriteCompressed: its pointer, its buffer, and its stored
  // form when it has one (else nullptr).
  struct CompressJob {
    BlockPtr* bp;
    const uint8_t* buf;
    const StoredForm* stored;
  };
  // SyncTree's data blocks of a compressing volume, and the blocks with a stored form of
  // any volume (volume_compress.cc): each is compressed (or takes its stored form),
  // allocated at its compressed size (or whole, when that saves too little), checksummed
  // and written; their pointers get dva, psize, comp and checksum.
  Status WriteCompressed(SyncContext& ctx, const CompressionSetting& setting, ChecksumType cksum,
                         std::span<const CompressJob> blocks);
  // A stored form, for the exact buffer it was written with (identity, as EarlyBlock).
  struct Stored {
    const uint8_t* buf = nullptr;
    StoredForm form;
  };
  // A block buffer (contents undefined) from the spares or the heap (mu_ held).
  Buf NewBufLocked();
  Result<BlockPtr> LookupL0Locked(uint64_t blkid, uint64_t* hole_span);
  Result<std::shared_ptr<Indirect>> LoadIndirect(const BlockPtr& bp);
  Result<std::shared_ptr<Indirect>> GetForWriteLocked(uint32_t level, uint64_t index);
  // With `unreadable`, an indirect block that does not read back is counted there and its
  // subtree skipped; without, the walk fails.
  Status WalkBp(const BlockPtr& bp, const std::function<Status(const BlockPtr&)>& fn,
                uint64_t* unreadable = nullptr);
  void InsertCacheLocked(uint64_t key, std::shared_ptr<Indirect> ind);
  // Drops cache_ entry `it` and its charge; returns the next entry.
  using IndirectCache = std::unordered_map<uint64_t, std::shared_ptr<Indirect>>;
  IndirectCache::iterator UncacheLocked(IndirectCache::iterator it);
  // Sets pointer i of a cached indirect block, charging a change of its form.
  void SetPointerLocked(Indirect& ind, uint32_t i, const BlockPtr& bp);
  // SyncTree, tree_mu_ held, before it changes the tree: fills undo_'s tree part.
  void SaveTreeForUndoLocked();

  // Early writes (early_write.cc). A block written early: the buffer whose bytes went out
  // (identity: a buffer changed or replaced since is not this one) and its pointer.
  struct EarlyBlock {
    const uint8_t* buf = nullptr;
    BlockPtr bp;  // dva and checksum set
  };
  // Before WriteBlock changes or drops open_[blkid]'s buffer (mu_ held): an early copy of
  // it becomes garbage; a buffer an early write is reading is replaced by a copy (with
  // `copy`) or a fresh buffer, and kept until that write ends. Returns the buffer to change.
  uint8_t* PrepareChangeLocked(std::map<uint64_t, Buf>::iterator it, bool copy);
  // Counts a new whole block of the open txg; wakes the early writer every run's worth.
  void NoteWholeBlockLocked(uint64_t blkid);
  // SyncTree's first step (sync_mu held): waits for early writes in flight, gives the
  // garbage back, and returns the early copies still valid for the syncing map.
  std::map<uint64_t, EarlyBlock> TakeEarlyForSyncLocked();
  void ReleaseGarbageLocked();  // sync_mu and mu_ held
  // WriteEarly's writes for a compressing volume (volume_compress.cc), entered with `sync`
  // held and left with it released: compresses `batch` a group at a time with sync_mu
  // released, takes it back (only tries: a commit may wait for these writes) to allocate
  // the group at its compressed size, and writes the group. Returns how many blocks, a
  // prefix of `batch`, got space (their `blocks` entries set); `written`: their writes.
  size_t WriteEarlyCompressed(std::unique_lock<std::mutex>& sync, const CompressionSetting& setting,
                              ChecksumType cksum,
                              std::span<const std::pair<uint64_t, const uint8_t*>> batch,
                              std::span<EarlyBlock> blocks, Status& written);

  std::vector<uint64_t> early_candidates_;        // GUARDED_BY(mu_): whole new blocks
  std::map<uint64_t, EarlyBlock> early_;          // GUARDED_BY(mu_): of open_
  std::map<uint64_t, EarlyBlock> syncing_early_;  // GUARDED_BY(mu_): of syncing_
  std::map<uint64_t, Stored> stored_;             // GUARDED_BY(mu_): of open_
  std::map<uint64_t, Stored> syncing_stored_;     // GUARDED_BY(mu_): of syncing_
  std::map<uint64_t, const uint8_t*> in_flight_;  // GUARDED_BY(mu_): blkid -> buffer
  std::map<const uint8_t*, Buf> retired_;         // GUARDED_BY(mu_): replaced, in flight
  std::vector<Dva> early_garbage_;                // GUARDED_BY(mu_): to give back
  std::condition_variable early_done_cv_;         // in_flight_ emptied

  PoolImpl* const pool_;
  const uint32_t vbs_;
  // Block b's name in the block cache's hints (BlockCache::PrefetchNamed) is
  // hint_base_ + b: the volume's guid, so volumes start at unrelated places in the table.
  const uint64_t hint_base_;
  // Where the cached L1 indirect block holding block b's pointer was last found (the
  // address of its first packed pointer: indirect_pointers.h), at
  // (b >> kIndirectShift) % kL1Hints. Read starts loading the pointer from there before it
  // takes a lock, so its cache miss overlaps those of the block's slot and bytes
  // (BlockCache "Hints"): without it the pointer's load was the first of the chain, the
  // rest waiting on it (HitRead4K 627 -> 598 ns a hit: docs/notes/read-path.md). One entry an L1
  // block, not one a block: the cache's hint table has none for the pointer, as a field there cost
  // it hit rate (docs/notes/read-path.md). 1024 entries (8 KiB a volume, not charged to the cache's
  // bound) cover 512 MiB of 4 KiB blocks, 2 GiB of 16 KiB ones, before two L1 blocks share one.
  // Only ever prefetched, never read through: an evicted block's address, or another L1's sharing
  // the entry, costs a wasted prefetch. Written under tree_mu_ by LookupRangeLocked, only when it
  // changed, on a line of its own (readers' loads must not contend with the commits' counters).
  static constexpr size_t kL1Hints = 1024;
  alignas(64) std::array<std::atomic<const PackedBlockPtr*>, kL1Hints> l1_hints_{};
  std::atomic<uint64_t> volsize_;
  std::atomic<uint64_t> used_;
  std::atomic<uint64_t> lused_;

  mutable std::mutex mu_;
  std::condition_variable loaded_cv_;
  std::map<uint64_t, Buf> open_;     // GUARDED_BY(mu_)
  std::map<uint64_t, Buf> syncing_;  // GUARDED_BY(mu_); read-only once quiesced
  std::set<uint64_t> loading_;       // GUARDED_BY(mu_)
  // The indirect blocks the dirty blocks of each map will make the commit write, at most
  // (CountDirtyLocked), in bytes; their sum over volumes is PoolImpl::dirty_meta_bytes.
  uint64_t open_l1s_ = 0, open_meta_ = 0;  // GUARDED_BY(mu_)
  uint64_t syncing_meta_ = 0;              // GUARDED_BY(mu_)
  // Buffers of the last synced txg kept for reuse, at most as many as it had dirty blocks
  // and kMaxSpareBytes (FinishSync).
  static constexpr uint64_t kMaxSpareBytes = 16 << 20;
  std::vector<Buf> spare_;                                    // GUARDED_BY(mu_)
  std::map<void*, std::function<void(uint64_t)>> listeners_;  // GUARDED_BY(mu_)

  mutable std::mutex tree_mu_;
  DatasetPhys phys_;     // GUARDED_BY(tree_mu_)
  DatasetPhys synced_;   // GUARDED_BY(tree_mu_): synced_phys(); its root is the tree on disk
  IndirectCache cache_;  // GUARDED_BY(tree_mu_)
  std::set<uint64_t> grown_dirty_;  // GUARDED_BY(tree_mu_): new roots made by Grow

  // What SyncTree of txg `txg` changed, saved for UndoSyncLocked (sync_mu). `tree`: the
  // tree part was reached (root, synced entry and Grow's new roots saved).
  struct SyncUndo {
    uint64_t txg = 0;
    uint64_t used = 0, lused = 0;
    bool tree = false;
    BlockPtr root;
    DatasetPhys synced;
    uint32_t levels = 0;
    uint64_t volsize = 0;
    std::vector<std::pair<uint64_t, std::vector<BlockPtr>>> grown;  // key, its pointers
  };
  SyncUndo undo_;  // GUARDED_BY(pool's sync_mu)
};

}  // namespace volstack::pool

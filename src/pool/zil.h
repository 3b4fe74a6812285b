// The intent log (ZIL): makes a volume's Flush(), FUA writes and sync=always writes durable
// by appending log records to a per-volume chain of log blocks, instead of committing a
// whole txg. Theory, invariants and lock order: zil.cc. On-disk format: zil_format.h.
//
//   Zil         one volume's log: the in-memory records not yet in a durable txg or the log
//               (itxs), the chain of log blocks (lwbs), Commit(), the range lock that
//               orders overlapping writes with their records.
//   ZilManager  the pool's logs: one Zil per volume, the space reserved for log blocks,
//               and the txg-sync, import (claim + replay) and checker hooks.
//
// Threads: every public method is safe from any thread unless it says it needs sync_mu.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pool/blkptr_format.h"
#include "pool/mos_format.h"
#include "pool/range_set.h"
#include "pool/zil_format.h"
#include "util/result.h"

namespace volstack::pool {

class PoolImpl;
class Volume;
class ZilManager;
struct SyncContext;

class Zil {
 public:
  Zil(PoolImpl* pool, ZilManager* manager, uint64_t dataset_guid);

  // Holds [offset, offset + length) against overlapping holders: a write and its record
  // are made under it, so overlapping writes reach the volume and the log in one order.
  class RangeLock {
   public:
    RangeLock(Zil& zil, uint64_t offset, uint64_t length);
    ~RangeLock();
    RangeLock(const RangeLock&) = delete;
    RangeLock& operator=(const RangeLock&) = delete;

   private:
    Zil& zil_;
    std::multimap<uint64_t, uint64_t>::iterator it_;
  };

  // Records a write / zeroing done to the volume, belonging to a txg <= `txg` (the open txg
  // read after the change was made). Call under the RangeLock of the range.
  void LogWrite(uint64_t txg, uint64_t offset, std::span<const uint8_t> data);
  void LogZero(uint64_t txg, uint64_t offset, uint64_t length);
  // A change that is not logged (logbias=throughput, sync=disabled, a failed write): the
  // next Commit() commits a txg unless txg `txg` is durable by then.
  void NoteUnlogged(uint64_t txg);

  // Makes every change recorded before the call durable: writes the pending records to the
  // log and flushes the vdevs written, or commits a txg when the log cannot be used (no
  // chain yet, unlogged changes, no log space, a failed log write).
  Status Commit();

  // Statistics (tests and benchmarks).
  uint64_t log_commits() const { return log_commits_.load(); }
  uint64_t txg_fallbacks() const { return txg_fallbacks_.load(); }
  uint64_t log_bytes() const { return log_bytes_.load(); }

 private:
  friend class ZilManager;

  struct Itx {
    uint64_t seq = 0;
    uint64_t txg = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
    bool zero = false;
    std::unique_ptr<uint8_t[]> data;
  };
  // A log block of the chain. The last one is always the pre-allocated, unwritten block
  // where the next commit starts (its asize = the space held, kZilMaxBlock).
  struct Lwb {
    Dva dva;  // issued: the claimed (written) extent; else the whole reservation
    uint64_t seq = 0;
    uint64_t max_txg = 0;  // newest txg of its records
    bool issued = false;
    // Its write may still be in flight: it is not freed until that write returns, or the
    // late write could land on space reused by then (invariant 3).
    bool writing = false;
  };
  // One block of a commit: which itx chunks go in it.
  struct Chunk {
    size_t itx;
    uint64_t skip;  // bytes of the itx before this chunk
    uint64_t length;
  };
  struct Planned {
    Dva dva;  // the written extent
    uint64_t guid = 0;
    uint64_t seq = 0;
    Dva next;
    std::vector<Chunk> chunks;
    uint32_t used = 0;
    uint64_t max_txg = 0;
  };

  void AppendLocked(Itx itx);
  // Records a change the log does not hold, in the order of the itxs (mu_ held).
  void MarkUnloggedLocked(uint64_t txg);
  // The seq of the first unlogged change whose txg is not durable yet, or ~0 (mu_ held).
  uint64_t FirstUnloggedLocked() const;
  // Lays `batch` out in blocks starting at the pre-allocated block and allocates what the
  // layout needs (mu_ held). False (nothing changed) when log space is short.
  bool PlanLocked(const std::vector<Itx>& batch, std::vector<Planned>* plan);
  Status WriteBlocks(const std::vector<Itx>& batch, const std::vector<Planned>& plan);
  // True when every change made before the Commit() that took `target` is durable (mu_
  // held).
  bool DoneLocked(uint64_t target) const;
  // Commits a txg (sync_mu taken here) unless one that ran meanwhile made it unnecessary.
  Status FallBackToTxg(uint64_t target);
  uint64_t Asize(uint64_t n) const;

  PoolImpl* const pool_;
  ZilManager* const manager_;
  const uint64_t dataset_guid_;

  std::mutex range_mu_;
  std::condition_variable range_cv_;
  std::multimap<uint64_t, uint64_t> ranges_;  // GUARDED_BY(range_mu_): offset -> end

  std::mutex commit_mu_;  // one commit (log write or fallback) at a time; taken before mu_

  std::mutex mu_;
  std::deque<Itx> itxs_;        // GUARDED_BY(mu_): recorded, not yet logged, in seq order
  uint64_t next_itx_seq_ = 1;   // GUARDED_BY(mu_)
  uint64_t pending_bytes_ = 0;  // GUARDED_BY(mu_)
  // GUARDED_BY(mu_): changes not in the log (seq -> a txg that holds them), until that txg
  // is durable. A seq orders them among the itxs, so a Commit() needs only those made
  // before it began, and logs no itx made after one (invariant 6).
  std::map<uint64_t, uint64_t> unlogged_;
  uint64_t chain_guid_ = 0;  // GUARDED_BY(mu_): 0 = no chain
  // GUARDED_BY(mu_): the txg whose commit wrote the chain's first header. Commit() uses the
  // chain only once that txg is durable: a log block written before would hang off a
  // header an import may never see.
  uint64_t chain_txg_ = 0;
  uint64_t floor_ = 0;            // GUARDED_BY(mu_): header floor while a replay commits
  std::deque<Lwb> lwbs_;          // GUARDED_BY(mu_)
  bool want_chain_ = false;       // GUARDED_BY(mu_): create a chain at the next txg
  bool claimed_ = false;          // GUARDED_BY(mu_): lwbs_ were claimed at import
  bool replay_done_ = false;      // GUARDED_BY(mu_): free the claimed chain at the next txg
  ZilHeaderPhys claimed_header_;  // GUARDED_BY(mu_): kept in the MOS until replay_done_

  std::atomic<uint64_t> log_commits_{0}, txg_fallbacks_{0}, log_bytes_{0};
};

class ZilManager {
 public:
  explicit ZilManager(PoolImpl* pool) : pool_(pool) {}

  // The log of `vol`, created on first use.
  std::shared_ptr<Zil> Get(const std::shared_ptr<Volume>& vol);

  // --- log space (any thread) ---
  // For a commit starting at the pre-allocated block `first`, of which it uses
  // `first_used` bytes: gives the unused tail back to the reserve and allocates blocks of
  // `sizes` (on first's vdev when it can, the tail first). All or nothing: false, and
  // nothing changed, when the reserve is short.
  bool AllocateChain(const Dva& first, uint64_t first_used, const std::vector<uint64_t>& sizes,
                     std::vector<Dva>* out);

  // --- txg sync (sync_mu held) ---
  // True when the txg must be committed for the logs' sake (a chain to create, free or
  // close).
  bool NeedsCommit(bool closing);
  // Refills the reserve, sets each dataset's log header for txg ctx.txg, frees the blocks
  // the txg makes obsolete (into ctx.deferred), and drops the logs of destroyed volumes.
  // `datasets[i]` is `vols[i]`'s entry.
  void SyncBegin(SyncContext& ctx, const std::vector<std::shared_ptr<Volume>>& vols,
                 const std::vector<std::shared_ptr<Volume>>& destroyed,
                 std::vector<DatasetPhys>& datasets, bool closing);
  // Txg `txg` is durable: drops the records it contains.
  void SyncDone(uint64_t txg);

  // --- import ---
  // Forgets claims of a previous attempt (LoadFrom of another uberblock).
  void ResetClaims();
  // Reads the chain of `d`'s log and claims its valid blocks out of `free` (the pool's free
  // sets being built by LoadFrom). Corruption when a valid block is not free space. A block
  // that cannot be read, or that was written whole and is damaged (its stamps say so:
  // zil_format.h), ends the chain too, but unlike an unwritten or torn one (the usual end)
  // it may hold flushed writes: it is kept in claim_error() (the first) and
  // claim_losses() (one line per volume), and import stops on it unless told to discard.
  Status Claim(const DatasetPhys& d, std::vector<RangeSet>& free);
  const Status& claim_error() const { return claim_error_; }
  const std::vector<std::string>& claim_losses() const { return claim_losses_; }
  // Applies the claimed records newer than `imported_txg` (or the header's floor) to the
  // volumes and commits; the claimed chains are freed by that commit. Call once, after
  // LoadFrom, before the sync thread starts.
  Status Replay(uint64_t imported_txg);
  // The checks Replay makes on the records, made before import writes anything.
  Status CheckReplay();
  uint64_t replayed_records() const { return replayed_records_; }

  // --- checker (sync_mu held) ---
  struct Accounting {
    std::vector<RangeSet> reserve;  // per vdev
    std::vector<RangeSet> blocks;   // per vdev: every log block held (the sum of the chains)
    std::vector<std::string> errors;
    uint64_t log_blocks = 0;
  };
  Accounting Account();

 private:
  struct Claimed {
    std::string name;  // the volume's
    std::shared_ptr<Volume> vol;
    ZilHeaderPhys header;
    std::vector<Dva> blocks;
    std::vector<ZilRecord> records;
  };
  std::shared_ptr<Zil> Find(const Volume* vol);
  std::optional<Dva> AllocateLocked(uint64_t size, uint32_t vdev);  // space_mu_ held
  void ReleaseLocked(const Dva& dva);                               // space_mu_ held
  void FreeToTxg(SyncContext& ctx, const Dva& dva);  // held block -> the txg's deferred frees
  void SizeLocked();                                 // space_mu_ held: one entry per vdev
  void RefillLocked(bool active);                    // space_mu_ held, sync_mu held
  ZilHeaderPhys SyncOne(SyncContext& ctx, Zil& z, bool closing);

  PoolImpl* const pool_;

  std::mutex map_mu_;
  std::map<const Volume*, std::pair<std::shared_ptr<Volume>, std::shared_ptr<Zil>>>
      zils_;  // GUARDED_BY(map_mu_)

  std::mutex space_mu_;            // leaf lock
  std::vector<RangeSet> reserve_;  // GUARDED_BY(space_mu_) per vdev
  std::vector<RangeSet> blocks_;   // GUARDED_BY(space_mu_) per vdev
  std::vector<uint64_t> cursor_;   // GUARDED_BY(space_mu_) per vdev
  uint32_t rotor_ = 0;             // GUARDED_BY(space_mu_)

  std::map<uint64_t, Claimed> claims_;     // import only: dataset id -> claimed chain
  Status claim_error_;                     // import only: the first log block not read
  std::vector<std::string> claim_losses_;  // import only: each chain cut short, and why
  uint64_t replayed_records_ = 0;
};

}  // namespace volstack::pool

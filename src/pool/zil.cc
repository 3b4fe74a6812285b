// The intent log (ZIL): theory.
//
// What it does. Without a log, the only way to make a write durable is to commit the whole
// open txg: data, indirect blocks, space map, MOS, two flushes and an uberblock in every
// label. The log makes a volume's Flush(), FUA writes and sync=always writes durable by
// writing the changes themselves, as records, to a chain of log blocks, and flushing only
// the vdevs written; the txg still commits later, on its timer or the dirty limit, and
// makes the records obsolete. Import replays the records newer than the imported txg. This
// is OpenZFS's ZIL in spirit (zil.c): one log per dataset, a header in the dataset naming
// the first block, blocks chained by pointers to blocks allocated ahead, each block valid
// only if its checksum verifies and its sequence number is the next one, the chain ending
// at the first invalid block; claim at import, then replay.
//
// Data flow. ZvolDevice makes each write under a RangeLock of its byte range, then records
// an itx (intent transaction: txg, offset, length, a copy of the data, or "zero") with
// the open txg read after the write, an upper bound of the txg that holds it. Commit()
// takes every itx not yet logged, lays them out in blocks starting at the chain's
// pre-allocated block (each block names the next, allocated now), writes the blocks and
// flushes their vdevs. Itxs leave memory when logged or when their txg is durable
// (SyncDone). A txg commit (ZilManager::SyncBegin) writes each volume's log header into
// the MOS: the first block still needed, i.e. past every block whose records all belong to
// txgs <= the committing txg, which it frees.
//
// Invariants (why it is crash-safe):
//   1. A block is reachable only from a durable header or from a valid block: the head of
//      a new chain is allocated in a txg and used only after that txg is durable (chain_txg_:
//      a Commit finding no durable chain commits a txg first, as zil_create does); every
//      next block is allocated before the block naming it is written.
//   2. Log blocks come from a reserve carved out of free space at txg commit, never from
//      space freed by a txg less than kTxgDefer txgs old: such space still holds the trees
//      of the uberblocks import may fall back to. And the open txg cannot reuse a log block:
//      the allocator only hands out `free`, which no longer holds the reserve or the blocks.
//   3. A block is freed only by the txg that makes it obsolete (all its records <= that
//      txg, and the header moves past it) and once its write has returned (a late write
//      must not land on reused space), into that txg's deferred frees: it is reused
//      only once txg + kTxgDefer is durable, so the chains of every uberblock import may
//      pick stay intact. Never before: until the header moving past it is durable, import
//      reads the chain through it, and a reused (overwritten) block would end the chain
//      early and lose the records after it.
//   4. Log blocks are not in the space map. Import claims them: it walks each header's
//      chain, takes each valid block out of the free space it computed (Corruption if a
//      valid block is not free), replays, and commits; that commit writes empty headers and
//      frees the claimed blocks. A crash during the replay commit imports the old txg and
//      replays again; a replay too large for one txg commits in steps, each step's header
//      keeping the chain with floor = the imported txg, so a later import replays from the
//      same point.
//   5. Replay applies the records with txg > floor in chain order. A record's txg is an
//      upper bound, and overlapping writes record in the order they hit the volume (the
//      range lock), so re-applying a record the imported tree already holds is undone by
//      the later records of the same range: each volume comes back as the state after a
//      prefix of its writes, no shorter than its last Commit(). Volumes are independent:
//      two volumes may come back at different points (as in ZFS, one log per dataset).
//   6. A Commit() is correct only if every change made before it since the last durable txg
//      is recorded: unlogged changes (logbias=throughput, sync=disabled, too much pending, a
//      failed write) make Commit() commit a txg instead, until a durable txg covers them.
//      Unlogged changes take a seq among the itxs (unlogged_), so a Commit() waits only for
//      those made before it (a streaming writer beside a flusher cannot starve it), and no
//      itx after an unlogged change goes to the log before that change is durable. The
//      fallback looks again once it holds sync_mu: a commit that ran meanwhile (typically
//      the sync thread's, kicked by the same streaming writes) may have covered them, and
//      then no txg of its own is needed. For the bound to be tight, ZvolDevice reads the
//      open txg for a record before the dirty-data throttle, which may start a commit.
//   7. A failed log write may leave a hole in the chain: the log is used again only once a
//      txg opened after the failure is durable, as that txg makes every block up to the hole
//      obsolete and moves the header past it (a txg committed during the write could not:
//      the blocks were being written).
//   8. A crash during a commit's write can tear its blocks (any subset of their sectors
//      landed); that commit never returned, so nothing in them was acknowledged, and the
//      chain ends there. A block written whole and damaged since may hold acknowledged
//      records: import must refuse rather than end the chain there. Each sector of a block
//      carries a stamp of (chain, seq, sector, sector count) twice (zil_format.h, block
//      format 2), so import tells the two apart: all sectors stamped = written whole.
//
// Block sizes. The pre-allocated block holds kZilMaxBlock (128 KiB) of reserve; a commit
// writes only what it uses (stamped, rounded to the allocation unit) and gives the unused tail
// back, so the next block is usually allocated right behind it: the log is written sequentially
// inside the reserve, one write and one flush per commit of up to ~128 KiB. Records larger
// than a block are split.
//
// Locks (in order): Zil::commit_mu_ (one commit per volume; held across I/O and the
// fallback txg) -> PoolImpl::sync_mu -> PoolImpl::mu -> ZilManager::map_mu_ ->
// Zil::mu_ (itxs, chain; short, no I/O) -> ZilManager::space_mu_ (reserve; leaf). The range
// lock is a logical lock held across a write; its mutex is held only to take or drop it.
//
// Simplifications: data is always copied into the log (no indirect records): once more
// than 4 MiB (or dirty_max/4, if less) is pending for a volume, further writes are not
// recorded and the next flush commits a txg instead, so streaming writers do not write
// their data twice. Blocks of one volume are not written in parallel with its running
// commit (later commits queue on commit_mu_ and then go out together).
#include "pool/zil.h"

#include <algorithm>
#include <cstring>

#include "pool/pool_impl.h"

namespace volstack::pool {

Zil::Zil(PoolImpl* pool, ZilManager* manager, uint64_t dataset_guid)
    : pool_(pool), manager_(manager), dataset_guid_(dataset_guid) {}

Zil::RangeLock::RangeLock(Zil& zil, uint64_t offset, uint64_t length) : zil_(zil) {
  const uint64_t end = offset + length;
  std::unique_lock l(zil.range_mu_);
  zil.range_cv_.wait(l, [&] {
    for (auto it = zil.ranges_.begin(); it != zil.ranges_.end() && it->first < end; ++it) {
      if (it->second > offset) return false;
    }
    return true;
  });
  it_ = zil.ranges_.emplace(offset, end);
}

Zil::RangeLock::~RangeLock() {
  {
    std::lock_guard l(zil_.range_mu_);
    zil_.ranges_.erase(it_);
  }
  zil_.range_cv_.notify_all();
}

uint64_t Zil::Asize(uint64_t n) const { return pool_->asize(n); }

void Zil::AppendLocked(Itx itx) {
  itx.seq = next_itx_seq_++;
  pending_bytes_ += itx.zero ? kZilRecordHeaderSize : itx.length;
  itxs_.push_back(std::move(itx));
}

void Zil::LogWrite(uint64_t txg, uint64_t offset, std::span<const uint8_t> data) {
  if (data.empty() || txg <= pool_->synced_txg.load()) return;  // already in a durable txg
  // Beyond this much pending per volume a log commit costs about what the txg does, and
  // the data would be written twice (no indirect records): let the flush commit a txg.
  const uint64_t limit = std::clamp<uint64_t>(pool_->tuning.dirty_max_bytes / 4, 1 << 20, 4 << 20);
  Itx itx;
  itx.txg = txg;
  itx.offset = offset;
  itx.length = data.size();
  {
    std::lock_guard l(mu_);
    if (pending_bytes_ + data.size() > limit) {
      // Copying more would double the dirty memory: the next Commit() commits a txg.
      MarkUnloggedLocked(txg);
      return;
    }
  }
  itx.data.reset(new uint8_t[data.size()]);
  std::memcpy(itx.data.get(), data.data(), data.size());
  std::lock_guard l(mu_);
  AppendLocked(std::move(itx));
}

void Zil::LogZero(uint64_t txg, uint64_t offset, uint64_t length) {
  if (length == 0 || txg <= pool_->synced_txg.load()) return;
  Itx itx;
  itx.txg = txg;
  itx.offset = offset;
  itx.length = length;
  itx.zero = true;
  std::lock_guard l(mu_);
  AppendLocked(std::move(itx));
}

void Zil::NoteUnlogged(uint64_t txg) {
  std::lock_guard l(mu_);
  MarkUnloggedLocked(txg);
}

void Zil::MarkUnloggedLocked(uint64_t txg) {
  // A streaming writer past the limit marks every write: one entry serves a run of marks
  // with no itx or Commit() between them.
  if (!unlogged_.empty() && unlogged_.rbegin()->first + 1 == next_itx_seq_) {
    unlogged_.rbegin()->second = std::max(unlogged_.rbegin()->second, txg);
    return;
  }
  unlogged_[next_itx_seq_++] = txg;
}

uint64_t Zil::FirstUnloggedLocked() const {
  const uint64_t synced = pool_->synced_txg.load();
  for (const auto& [seq, txg] : unlogged_) {
    if (txg > synced) return seq;
  }
  return ~uint64_t{0};
}

bool Zil::DoneLocked(uint64_t target) const {
  return FirstUnloggedLocked() >= target && (itxs_.empty() || itxs_.front().seq >= target);
}

Status Zil::FallBackToTxg(uint64_t target) {
  std::lock_guard s(pool_->sync_mu);
  {
    std::lock_guard l(mu_);
    if (chain_guid_ == 0 && !claimed_) want_chain_ = true;
    // A commit that ran while we waited for sync_mu (the sync thread's, typically kicked
    // by the very writes that went unlogged) may hold everything already: then another
    // txg would only cost two more flushes.
    if (DoneLocked(target)) return Status::Ok();
  }
  txg_fallbacks_++;
  {
    // Commit even if nothing is dirty: the txg creates the chain or covers records whose
    // data an earlier (empty) sync already holds.
    std::lock_guard l(pool_->mu);
    pool_->mos_dirty = true;
  }
  return pool_->SyncLocked();
}

Status Zil::Commit() {
  uint64_t target;
  {
    // The seq taken here orders this call after every change made so far: an unlogged
    // change made later gets a later seq and is not this call's to cover.
    std::lock_guard l(mu_);
    target = next_itx_seq_++;
  }
  std::lock_guard c(commit_mu_);
  for (int attempt = 0;; attempt++) {
    std::vector<Itx> batch;
    std::vector<Planned> plan;
    bool fallback = false;
    {
      std::lock_guard l(mu_);
      if (DoneLocked(target)) return Status::Ok();
      VS_RETURN_IF_ERROR(pool_->CheckUsable());
      if (attempt >= 4) return Status::IoError("intent log: commit does not converge");
      const bool chain_durable = chain_guid_ != 0 && chain_txg_ <= pool_->synced_txg.load();
      // Itxs up to the first change the log does not hold go out, those of later calls
      // too; none past it (replaying them without it would make a state that never was).
      const uint64_t first_unlogged = FirstUnloggedLocked();
      if (!chain_durable || claimed_ || first_unlogged < target) {
        fallback = true;
      } else {
        while (!itxs_.empty() && itxs_.front().seq < first_unlogged) {
          batch.push_back(std::move(itxs_.front()));
          itxs_.pop_front();
        }
        VS_CHECK(!batch.empty());  // not done, so an itx before `target` is pending
        if (PlanLocked(batch, &plan)) {
          for (const auto& t : batch) pending_bytes_ -= t.zero ? kZilRecordHeaderSize : t.length;
        } else {
          for (auto it = batch.rbegin(); it != batch.rend(); ++it) itxs_.push_front(std::move(*it));
          batch.clear();
          fallback = true;  // no log space: the txg refills the reserve
        }
      }
    }
    if (fallback) {
      VS_RETURN_IF_ERROR(FallBackToTxg(target));
      continue;
    }
    Status st = WriteBlocks(batch, plan);
    {
      std::lock_guard l(mu_);
      for (auto& b : lwbs_) {
        if (b.seq >= plan.front().seq && b.seq <= plan.back().seq) b.writing = false;
      }
    }
    if (st.ok()) {
      log_commits_++;
      return Status::Ok();
    }
    // The chain may have a hole now: the batch is covered only by a txg, and the log is
    // used again only once a txg has moved the header past the hole (invariant 7). A txg
    // that ran during the write kept the header on these blocks (they were being written),
    // so the txg needed is one still open now.
    uint64_t open_txg;
    {
      std::lock_guard l(pool_->mu);
      open_txg = pool_->open_txg;
    }
    {
      std::lock_guard l(mu_);
      uint64_t& needed = unlogged_[batch.front().seq];
      needed = std::max(needed, open_txg);
    }
    VS_RETURN_IF_ERROR(FallBackToTxg(target));
  }
}

bool Zil::PlanLocked(const std::vector<Itx>& batch, std::vector<Planned>* plan) {
  VS_CHECK(!lwbs_.empty() && !lwbs_.back().issued);
  const Lwb first = lwbs_.back();
  std::vector<Planned> blocks(1);
  blocks[0].seq = first.seq;
  // Capacities in logical bytes: the stamped format keeps 496 of each 512 (zil_format.h).
  uint64_t cap = ZilCapacity(kZilFormatStamped, first.dva.asize());
  uint64_t used = kZilBlockHeaderSize;
  auto next_block = [&] {
    blocks.back().used = static_cast<uint32_t>(used);
    blocks.emplace_back();
    blocks.back().seq = blocks[blocks.size() - 2].seq + 1;
    cap = ZilCapacity(kZilFormatStamped, kZilMaxBlock);
    used = kZilBlockHeaderSize;
  };
  for (size_t i = 0; i < batch.size(); i++) {
    const Itx& t = batch[i];
    uint64_t done = 0;
    do {
      const uint64_t room = cap - used;
      uint64_t n;
      if (t.zero) {
        if (room < kZilRecordHeaderSize) {
          next_block();
          continue;
        }
        n = t.length;
      } else {
        const uint64_t left = t.length - done;
        if (room >= ZilRecordSize(ZilRecordType::kWrite, left)) {
          n = left;
        } else if (room >= kZilRecordHeaderSize + 512) {
          n = (room - kZilRecordHeaderSize) / 512 * 512;  // split on sector boundaries
        } else {
          next_block();
          continue;
        }
      }
      blocks.back().chunks.push_back({i, done, n});
      blocks.back().max_txg = std::max(blocks.back().max_txg, t.txg);
      used += ZilRecordSize(t.zero ? ZilRecordType::kZero : ZilRecordType::kWrite, n);
      done += n;
    } while (done < t.length);
  }
  blocks.back().used = static_cast<uint32_t>(used);
  // Space: the first block keeps what it uses, the rest get exact sizes, and a new block
  // is pre-allocated for the next commit.
  std::vector<uint64_t> sizes;
  auto phys = [&](uint32_t used) { return Asize(ZilPhysSize(kZilFormatStamped, used)); };
  for (size_t i = 1; i < blocks.size(); i++) sizes.push_back(phys(blocks[i].used));
  sizes.push_back(kZilMaxBlock);
  std::vector<Dva> dvas;
  if (!manager_->AllocateChain(first.dva, phys(blocks[0].used), sizes, &dvas)) return false;
  blocks[0].dva = first.dva;
  blocks[0].dva.asize_sectors = static_cast<uint32_t>(phys(blocks[0].used) >> 9);
  for (size_t i = 1; i < blocks.size(); i++) blocks[i].dva = dvas[i - 1];
  for (size_t i = 0; i < blocks.size(); i++) {
    blocks[i].next = i + 1 < blocks.size() ? blocks[i + 1].dva : dvas.back();
    blocks[i].guid = chain_guid_;
  }
  lwbs_.pop_back();
  for (const auto& b : blocks) lwbs_.push_back({b.dva, b.seq, b.max_txg, true, true});
  lwbs_.push_back({dvas.back(), blocks.back().seq + 1, 0, false});
  *plan = std::move(blocks);
  return true;
}

Status Zil::WriteBlocks(const std::vector<Itx>& batch, const std::vector<Planned>& plan) {
  std::vector<uint8_t> buf;
  uint32_t buf_vdev = 0;
  uint64_t buf_offset = 0;
  std::vector<bool> touched(pool_->vdevs.size(), false);
  auto write_out = [&]() -> Status {
    if (buf.empty()) return Status::Ok();
    touched[buf_vdev] = true;
    Status st = pool_->vdevs[buf_vdev]->device()->Write(buf_offset, buf);
    log_bytes_ += buf.size();
    buf.clear();
    return st;
  };
  std::vector<ZilRecordRef> refs;
  for (const auto& b : plan) {
    if (!buf.empty() && (b.dva.vdev != buf_vdev || b.dva.offset != buf_offset + buf.size() ||
                         buf.size() + b.dva.asize() > (1u << 20))) {
      VS_RETURN_IF_ERROR(write_out());
    }
    if (buf.empty()) {
      buf_vdev = b.dva.vdev;
      buf_offset = b.dva.offset;
    }
    refs.clear();
    for (const auto& c : b.chunks) {
      const Itx& t = batch[c.itx];
      ZilRecordRef r;
      r.type = t.zero ? ZilRecordType::kZero : ZilRecordType::kWrite;
      r.txg = t.txg;
      r.offset = t.offset + c.skip;
      r.length = c.length;
      r.data = t.zero ? nullptr : t.data.get() + c.skip;
      if (c.skip + c.length < t.length) r.flags = kZilRecordContinued;
      refs.push_back(r);
    }
    ZilBlockInfo info;
    info.guid = b.guid;
    info.seq = b.seq;
    info.dataset_guid = dataset_guid_;
    info.next = b.next;
    const size_t at = buf.size();
    buf.resize(at + b.dva.asize());
    EncodeZilBlock(info, refs, std::span<uint8_t>(buf.data() + at, b.dva.asize()),
                   kZilFormatStamped);
  }
  VS_RETURN_IF_ERROR(write_out());
  for (uint32_t v = 0; v < touched.size(); v++) {
    if (touched[v]) VS_RETURN_IF_ERROR(pool_->vdevs[v]->device()->Flush());
  }
  return Status::Ok();
}

}  // namespace volstack::pool

// ZilManager: the pool's intent logs: log space, the txg-sync hooks, claim and replay at
// import, and the checker's accounting. Theory and lock order: zil.cc.
//
// Log space. A reserve carved out of the allocator's free space at txg commit (the pool's
// "log class", as OpenZFS's embedded log metaslab): clamp(pool / 32, 1 MiB, 32 MiB), only
// while some volume has a log, given back when none has. Log blocks are allocated from it
// under space_mu_ without waiting for a running txg commit. Blocks in use are in blocks_;
// freed blocks go to a txg's deferred frees and from there back to the allocator, never
// straight to the reserve (invariant 3).
#include <algorithm>
#include <random>

#include "pool/pool_impl.h"
#include "pool/zil.h"

namespace volstack::pool {

std::shared_ptr<Zil> ZilManager::Get(const std::shared_ptr<Volume>& vol) {
  std::lock_guard l(map_mu_);
  auto& e = zils_[vol.get()];
  if (!e.second) {
    e.first = vol;
    e.second = std::make_shared<Zil>(pool_, this, vol->phys().guid);
  }
  return e.second;
}

std::shared_ptr<Zil> ZilManager::Find(const Volume* vol) {
  std::lock_guard l(map_mu_);
  auto it = zils_.find(vol);
  return it == zils_.end() ? nullptr : it->second.second;
}

// ---------------------------------------------------------------------------------------
// Space

void ZilManager::SizeLocked() {
  const size_t n = pool_->vdevs.size();
  if (reserve_.size() == n) return;
  reserve_.resize(n);
  blocks_.resize(n);
  cursor_.resize(n, 0);
}

std::optional<Dva> ZilManager::AllocateLocked(uint64_t size, uint32_t vdev) {
  const uint32_t n = static_cast<uint32_t>(reserve_.size());
  for (uint32_t k = 0; k < n; k++) {
    const uint32_t v = (vdev + k) % n;
    auto off = reserve_[v].FindFit(size, cursor_[v], uint64_t{1} << pool_->ashift);
    if (!off) continue;
    VS_CHECK(reserve_[v].Remove(*off, size));
    VS_CHECK(blocks_[v].Add(*off, size));
    cursor_[v] = *off + size;
    Dva d;
    d.vdev = v;
    d.asize_sectors = static_cast<uint32_t>(size >> 9);
    d.offset = *off;
    return d;
  }
  return std::nullopt;
}

void ZilManager::ReleaseLocked(const Dva& d) {
  VS_CHECK(blocks_[d.vdev].Remove(d.offset, d.asize()));
  VS_CHECK(reserve_[d.vdev].Add(d.offset, d.asize()));
}

bool ZilManager::AllocateChain(const Dva& first, uint64_t first_used,
                               const std::vector<uint64_t>& sizes, std::vector<Dva>* out) {
  std::lock_guard l(space_mu_);
  SizeLocked();
  Dva tail;
  if (first_used < first.asize()) {
    tail = {first.vdev, static_cast<uint32_t>((first.asize() - first_used) >> 9),
            first.offset + first_used};
    ReleaseLocked(tail);
    cursor_[first.vdev] = tail.offset;
  }
  out->clear();
  for (uint64_t s : sizes) {
    auto d = AllocateLocked(s, first.vdev);
    if (!d) {
      for (const Dva& a : *out) ReleaseLocked(a);
      out->clear();
      if (!tail.empty()) {
        VS_CHECK(reserve_[tail.vdev].Remove(tail.offset, tail.asize()));
        VS_CHECK(blocks_[tail.vdev].Add(tail.offset, tail.asize()));
      }
      return false;
    }
    out->push_back(*d);
  }
  return true;
}

void ZilManager::FreeToTxg(SyncContext& ctx, const Dva& d) {
  {
    std::lock_guard l(space_mu_);
    VS_CHECK(blocks_[d.vdev].Remove(d.offset, d.asize()));
  }
  ctx.deferred.push_back(d);
}

void ZilManager::RefillLocked(bool active) {
  SizeLocked();
  PoolImpl& p = *pool_;
  if (!active) {
    for (uint32_t v = 0; v < reserve_.size(); v++) {
      for (auto [s, e] : reserve_[v].ranges()) {
        VS_CHECK(p.free[v].Add(s, e - s));
        p.free_bytes += e - s;
      }
      reserve_[v].Clear();
    }
    p.NoteFreeRunsLocked();
    return;
  }
  const uint64_t total = p.total_size();
  const uint64_t target = std::clamp<uint64_t>(total / 32, 1 << 20, 32 << 20);
  uint64_t have = 0;
  for (auto& r : reserve_) have += r.total();
  if (have >= target / 2) return;
  // Never carve into what volumes have reserved, what dirty data and writes in progress
  // need, or the slop a commit needs (twice over): the log is an optimisation, a txg the
  // fallback.
  const uint64_t keep =
      2 * std::max<uint64_t>(total / 32, 1 << 20) + p.unused_reservation.load() + p.PendingDirty();
  const uint64_t unit = uint64_t{1} << p.ashift;
  uint64_t chunk = std::min<uint64_t>(target - have, 4 << 20);
  chunk = (chunk + unit - 1) / unit * unit;
  uint32_t v = rotor_;
  int misses = 0;
  while (have < target && misses < static_cast<int>(reserve_.size()) && chunk >= kZilMaxBlock) {
    v = (v + 1) % reserve_.size();
    if (p.free_bytes.load() < keep + chunk) break;
    auto off = p.free[v].FindFit(chunk, p.vdevs[v]->alloc_end() / 2, unit);
    if (!off) {
      if (++misses == static_cast<int>(reserve_.size())) {
        chunk /= 2;
        misses = 0;
      }
      continue;
    }
    misses = 0;
    VS_CHECK(p.free[v].Remove(*off, chunk));
    p.free_bytes -= chunk;
    VS_CHECK(reserve_[v].Add(*off, chunk));
    have += chunk;
  }
  p.NoteFreeRunsLocked();
  rotor_ = v;
}

// ---------------------------------------------------------------------------------------
// txg sync

bool ZilManager::NeedsCommit(bool closing) {
  std::lock_guard l(map_mu_);
  for (auto& [k, e] : zils_) {
    Zil& z = *e.second;
    std::lock_guard zl(z.mu_);
    if (z.want_chain_ || z.replay_done_ || (closing && z.chain_guid_ != 0)) return true;
  }
  return false;
}

ZilHeaderPhys ZilManager::SyncOne(SyncContext& ctx, Zil& z, bool closing) {
  std::lock_guard l(z.mu_);
  if (z.claimed_) {
    if (!z.replay_done_) return z.claimed_header_;
    for (const auto& b : z.lwbs_) FreeToTxg(ctx, b.dva);
    z.lwbs_.clear();
    z.claimed_ = z.replay_done_ = false;
    z.claimed_header_ = {};
    return {};
  }
  if (z.want_chain_ && z.chain_guid_ == 0) {
    std::optional<Dva> head;
    {
      std::lock_guard sl(space_mu_);
      head = AllocateLocked(kZilMaxBlock, 0);
    }
    if (head) {
      std::random_device rd;
      while (z.chain_guid_ == 0) z.chain_guid_ = (uint64_t{rd()} << 32) | rd();
      z.chain_txg_ = ctx.txg;
      z.lwbs_.clear();
      z.lwbs_.push_back({*head, 1, 0, false});
    }
  }
  z.want_chain_ = false;
  if (z.chain_guid_ == 0) return {};
  // Free the blocks whose records this txg holds (invariant 3).
  while (z.lwbs_.size() > 1 && z.lwbs_.front().issued && !z.lwbs_.front().writing &&
         z.lwbs_.front().max_txg <= ctx.txg) {
    FreeToTxg(ctx, z.lwbs_.front().dva);
    z.lwbs_.pop_front();
  }
  if (closing && z.lwbs_.size() == 1 &&
      std::all_of(z.unlogged_.begin(), z.unlogged_.end(),
                  [&](const auto& u) { return u.second <= ctx.txg; }) &&
      std::all_of(z.itxs_.begin(), z.itxs_.end(),
                  [&](const Zil::Itx& t) { return t.txg <= ctx.txg; })) {
    FreeToTxg(ctx, z.lwbs_.front().dva);
    z.lwbs_.clear();
    z.chain_guid_ = 0;
    return {};
  }
  ZilHeaderPhys h;
  h.guid = z.chain_guid_;
  h.seq = z.lwbs_.front().seq;
  h.head = z.lwbs_.front().dva;
  return h;
}

void ZilManager::SyncBegin(SyncContext& ctx, const std::vector<std::shared_ptr<Volume>>& vols,
                           const std::vector<std::shared_ptr<Volume>>& destroyed,
                           std::vector<DatasetPhys>& datasets, bool closing) {
  std::vector<std::shared_ptr<Zil>> zils, dead;
  for (auto& v : vols) zils.push_back(Find(v.get()));
  {
    std::lock_guard l(map_mu_);
    for (auto& v : destroyed) {
      auto it = zils_.find(v.get());
      if (it == zils_.end()) continue;
      dead.push_back(it->second.second);
      zils_.erase(it);
    }
  }
  bool active = false;
  for (auto& z : zils) {
    if (!z) continue;
    std::lock_guard l(z->mu_);
    active |= z->chain_guid_ != 0 || z->want_chain_ || z->claimed_;
  }
  {
    std::lock_guard l(space_mu_);
    RefillLocked(active);
  }
  for (size_t i = 0; i < vols.size(); i++) {
    datasets[i].zil = zils[i] ? SyncOne(ctx, *zils[i], closing) : ZilHeaderPhys{};
  }
  // A destroyed volume has no device open, so no log write of its can be in flight.
  for (auto& z : dead) {
    std::lock_guard l(z->mu_);
    for (const auto& b : z->lwbs_) FreeToTxg(ctx, b.dva);
    z->lwbs_.clear();
    z->chain_guid_ = 0;
  }
}

void ZilManager::SyncDone(uint64_t txg) {
  std::vector<std::shared_ptr<Zil>> zils;
  {
    std::lock_guard l(map_mu_);
    for (auto& [k, e] : zils_) zils.push_back(e.second);
  }
  for (auto& z : zils) {
    std::lock_guard l(z->mu_);
    std::erase_if(z->unlogged_, [&](const auto& u) { return u.second <= txg; });
    for (auto it = z->itxs_.begin(); it != z->itxs_.end();) {
      if (it->txg <= txg) {
        z->pending_bytes_ -= it->zero ? kZilRecordHeaderSize : it->length;
        it = z->itxs_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Import: claim and replay

void ZilManager::ResetClaims() {
  claims_.clear();
  claim_error_ = Status::Ok();
  claim_losses_.clear();
}

Status ZilManager::Claim(const DatasetPhys& d, std::vector<RangeSet>& free) {
  if (d.zil.empty()) return Status::Ok();
  Claimed c;
  c.name = d.name;
  c.header = d.zil;
  Dva cur = d.zil.head;
  uint64_t seq = d.zil.seq;
  std::vector<uint8_t> buf;
  const uint32_t format = d.zil.format;
  auto lose = [&](Status st, const std::string& what) {
    claim_losses_.push_back(what);
    if (claim_error_.ok()) claim_error_ = std::move(st);
  };
  // The chain ends at the first block that is out of range, unreadable or invalid.
  while (!cur.empty() && cur.vdev < pool_->vdevs.size() && cur.asize() <= kZilMaxBlock &&
         cur.offset >= kAllocStart &&
         cur.offset + cur.asize() <= pool_->vdevs[cur.vdev]->alloc_end()) {
    buf.resize(cur.asize());
    // What the copies that are not this block are (zil_format.h): a copy written whole and
    // damaged since outweighs a torn or unwritten one.
    ZilBlockState state = ZilBlockState::kUnwritten;
    // On a mirror a child that missed this block is read past and healed (vdev.h).
    Status st = pool_->vdevs[cur.vdev]->ReadVerified(
        cur.offset, buf,
        [&](std::span<const uint8_t> b) {
          auto blk = DecodeZilBlock(b, d.zil.guid, seq, format);
          if (blk.ok() && blk->info.dataset_guid == d.guid) return true;
          state = std::max(state, ClassifyZilBlock(b, d.zil.guid, seq, format));
          return false;
        },
        nullptr, /*count=*/false);
    const std::string where = "block " + std::to_string(seq) + " (vdev " +
                              std::to_string(cur.vdev) + ", offset " + std::to_string(cur.offset) +
                              ")";
    if (!st.ok() && format == kZilFormatStamped) {
      // Piece by piece (the device's smallest unit): a torn write may read back as an I/O
      // error where a sector was cut (real media do), and what can be read still tells a
      // tear, or a block whose records are all readable, from one written whole.
      const bdev::BlockDevicePtr& dev = pool_->vdevs[cur.vdev]->device();
      const uint32_t unit = std::max<uint32_t>(512, dev->geometry().logical_block_size);
      std::vector<bool> unreadable(cur.asize() / 512, false);
      std::fill(buf.begin(), buf.end(), 0);
      for (uint64_t at = 0; at < cur.asize(); at += unit) {
        std::span<uint8_t> piece(buf.data() + at, std::min<uint64_t>(unit, cur.asize() - at));
        if (dev->Read(cur.offset + at, piece).ok()) continue;
        std::fill(piece.begin(), piece.end(), 0);
        for (uint64_t i = at / 512; i < (at + piece.size()) / 512; i++) unreadable[i] = true;
      }
      auto whole = DecodeZilBlock(buf, d.zil.guid, seq, format);
      if (whole.ok() && whole->info.dataset_guid == d.guid) {
        st = Status::Ok();  // every sector holding a record was read
      } else {
        // The worse of this and what the children's copies showed: one mirror child's copy
        // written whole and damaged is not outweighed by another's that reads as torn.
        state = std::max(state, ClassifyZilBlock(buf, d.zil.guid, seq, format, &unreadable));
        st = Status::Corruption("log block");
      }
    }
    if (st.IsCorruption()) {
      // Unwritten: the chain's end. Torn: the write of a commit that never returned, so
      // nothing acknowledged is in it. Damaged: it was written whole, so its commit may
      // have been acknowledged, and the records from here on would be lost.
      if (state == ZilBlockState::kUnknown) {
        // Too little of it could be read to tell a tear from damage: it may hold
        // acknowledged writes, so it is a loss, never the chain's quiet end.
        lose(Status::Corruption("the intent log of " + d.name + " cannot be read: " + where +
                                " is partly unreadable and fails its checksum; the flushed "
                                "writes from there on cannot be replayed"),
             "the intent log of " + d.name + " from " + where + ", which cannot be read");
      } else if (state == ZilBlockState::kDamaged) {
        lose(Status::Corruption("the intent log of " + d.name + " is damaged: " + where +
                                " was written whole and fails its checksum; the flushed "
                                "writes from there on cannot be replayed"),
             "the intent log of " + d.name + " from " + where + ", which is damaged");
      }
      break;
    }
    if (!st.ok()) {
      lose(st.WithContext("the intent log of " + d.name + " cannot be read (" + where + ")"),
           "the intent log of " + d.name + " from " + where + ", which cannot be read");
      break;
    }
    auto b = DecodeZilBlock(buf, d.zil.guid, seq, format);
    if (!b.ok() || b->info.dataset_guid != d.guid) break;
    Dva held = cur;
    held.asize_sectors = static_cast<uint32_t>(pool_->asize(ZilPhysSize(format, b->used)) >> 9);
    if (!free[held.vdev].Remove(held.offset, held.asize())) {
      return Status::Corruption("intent log of " + d.name + ": block " + std::to_string(seq) +
                                " overlaps allocated space");
    }
    c.blocks.push_back(held);
    for (auto& r : b->records) c.records.push_back(std::move(r));
    cur = b->info.next;
    seq++;
  }
  claims_[d.id] = std::move(c);
  return Status::Ok();
}

Status ZilManager::CheckReplay() {
  std::map<uint64_t, uint64_t> volsize;  // dataset id -> bytes
  {
    std::lock_guard l(pool_->mu);
    for (auto& [n, v] : pool_->volumes) volsize[v->phys().id] = v->volsize();
  }
  for (const auto& [id, c] : claims_) {
    const std::string& name = c.name;
    if (!volsize.count(id)) return Status::Corruption("intent log of " + name + ": no volume");
    const ZilRecord* first = nullptr;  // of a write split over blocks
    const ZilRecord* prev = nullptr;
    for (const auto& r : c.records) {
      if (r.offset + r.length > volsize[id]) {
        return Status::Corruption("intent log of " + name + ": record past the end");
      }
      if (first != nullptr && (r.type != ZilRecordType::kWrite || r.txg != first->txg ||
                               r.offset != prev->offset + prev->length)) {
        return Status::Corruption("intent log of " + name + ": broken split write");
      }
      if (first == nullptr) first = &r;
      prev = &r;
      if (!(r.flags & kZilRecordContinued)) first = prev = nullptr;
    }
  }
  return Status::Ok();
}

Status ZilManager::Replay(uint64_t imported_txg) {
  if (claims_.empty()) return Status::Ok();
  std::map<uint64_t, std::shared_ptr<Volume>> by_id;
  {
    std::lock_guard l(pool_->mu);
    for (auto& [n, v] : pool_->volumes) by_id[v->phys().id] = v;
  }
  std::vector<std::shared_ptr<Zil>> zils;
  for (auto& [id, c] : claims_) {
    auto it = by_id.find(id);
    VS_CHECK(it != by_id.end());
    auto z = Get(it->second);
    std::lock_guard l(z->mu_);
    std::lock_guard sl(space_mu_);
    SizeLocked();
    z->claimed_ = true;
    z->claimed_header_ = c.header;
    if (z->claimed_header_.floor == 0) z->claimed_header_.floor = imported_txg;
    for (const Dva& b : c.blocks) {
      VS_CHECK(blocks_[b.vdev].Add(b.offset, b.asize()));
      z->lwbs_.push_back({b, 0, 0, true});
    }
    zils.push_back(z);
  }
  for (auto& [id, c] : claims_) {
    Volume& vol = *by_id[id];
    const uint64_t floor = c.header.floor != 0 ? c.header.floor : imported_txg;
    std::vector<const ZilRecord*> parts;  // of a write split over blocks, so far
    for (const auto& r : c.records) {
      if (r.offset + r.length > vol.volsize()) {
        return Status::Corruption("intent log of " + vol.phys().name + ": record past the end");
      }
      if (!parts.empty() && (r.type != ZilRecordType::kWrite || r.txg != parts[0]->txg ||
                             r.offset != parts.back()->offset + parts.back()->length)) {
        return Status::Corruption("intent log of " + vol.phys().name + ": broken split write");
      }
      parts.push_back(&r);
      if (r.flags & kZilRecordContinued) continue;
      if (r.txg > floor) {
        for (const ZilRecord* part : parts) {
          VS_RETURN_IF_ERROR(part->type == ZilRecordType::kWrite
                                 ? vol.Write(part->offset, part->data)
                                 : vol.Zero(part->offset, part->length));
        }
        replayed_records_++;
      }
      parts.clear();
      // Commit in steps rather than wait for a sync thread that is not running yet; each
      // step keeps the claimed chains and their floor in the MOS (invariant 4).
      if (pool_->dirty_bytes.load() >= pool_->tuning.dirty_max_bytes / 8) {
        VS_RETURN_IF_ERROR(pool_->Sync());
      }
    }
  }
  for (auto& z : zils) {
    std::lock_guard l(z->mu_);
    z->replay_done_ = true;
  }
  claims_.clear();
  {
    std::lock_guard l(pool_->mu);
    pool_->mos_dirty = true;
  }
  return pool_->Sync();
}

// ---------------------------------------------------------------------------------------
// Checker

ZilManager::Accounting ZilManager::Account() {
  Accounting a;
  std::vector<std::shared_ptr<Zil>> zils;
  {
    std::lock_guard l(map_mu_);
    for (auto& [k, e] : zils_) zils.push_back(e.second);
  }
  const size_t n = pool_->vdevs.size();
  std::vector<RangeSet> chains(n);
  for (auto& z : zils) {
    std::lock_guard l(z->mu_);
    for (size_t i = 0; i < z->lwbs_.size(); i++) {
      const Dva& d = z->lwbs_[i].dva;
      a.log_blocks++;
      if (d.vdev >= n || !chains[d.vdev].Add(d.offset, d.asize())) {
        a.errors.push_back("intent log block held twice at " + std::to_string(d.offset));
      }
      if (i > 0 && !z->claimed_ && z->lwbs_[i].seq != z->lwbs_[i - 1].seq + 1) {
        a.errors.push_back("intent log chain out of sequence");
      }
    }
    if (!z->claimed_ && (z->chain_guid_ == 0) != z->lwbs_.empty()) {
      a.errors.push_back("intent log chain without blocks (or blocks without a chain)");
    }
  }
  std::lock_guard l(space_mu_);
  a.reserve = reserve_;
  a.blocks = blocks_;
  a.reserve.resize(n);
  a.blocks.resize(n);
  for (size_t v = 0; v < n; v++) {
    if (chains[v].ranges() != a.blocks[v].ranges()) {
      a.errors.push_back("vdev " + std::to_string(v) + ": intent log blocks held (" +
                         std::to_string(a.blocks[v].total()) + " bytes) != the chains' (" +
                         std::to_string(chains[v].total()) + " bytes)");
    }
  }
  return a;
}

}  // namespace volstack::pool

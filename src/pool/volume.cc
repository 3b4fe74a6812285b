#include "pool/volume.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <system_error>
#include <thread>

#include "pool/pool_impl.h"
#include "pool/run_writer.h"
#include "util/all_zero.h"
#include "util/coding.h"
#include "util/streaming_copy.h"

namespace volstack::pool {

namespace {
// A full indirect cache gives back 1/kTrimShare of the bound at a time (TrimCacheLocked).
constexpr uint64_t kTrimShare = 32;

// Txgs with at least this much data are checksummed and written by a helper thread and the
// commit's own thread together.
constexpr uint64_t kHelperThreadBytes = 1 << 20;

// SyncTree encodes and checksums dirty indirect blocks this many at a time (1 MiB of
// scratch), sharing a batch with a helper thread from kIndirectHelperBlocks on.
constexpr size_t kIndirectBatch = 64;
constexpr size_t kIndirectHelperBlocks = 16;

}  // namespace

uint32_t LevelsFor(uint64_t nblocks) {
  uint32_t levels = 1;
  uint64_t cap = kBpsPerIndirect;
  while (cap < nblocks) {
    levels++;
    cap <<= kIndirectShift;
  }
  return levels;
}

Volume::Volume(PoolImpl* pool, DatasetPhys phys)
    : pool_(pool),
      vbs_(phys.volblocksize),
      hint_base_(phys.guid),
      volsize_(phys.volsize),
      used_(phys.used),
      lused_(phys.lused),
      phys_(phys),
      synced_(std::move(phys)) {}

Volume::~Volume() {
  std::lock_guard l(tree_mu_);
  for (auto it = cache_.begin(); it != cache_.end();) it = UncacheLocked(it);
}

DatasetPhys Volume::phys() const {
  std::lock_guard l(tree_mu_);
  DatasetPhys p = phys_;
  p.used = used_.load();
  p.lused = lused_.load();
  p.volsize = volsize_.load();
  return p;
}

DatasetPhys Volume::synced_phys() const {
  std::lock_guard l(tree_mu_);
  return synced_;
}

void Volume::SetProps(std::map<std::string, std::string> props) {
  std::lock_guard l(tree_mu_);
  phys_.props = std::move(props);
}

std::string Volume::Prop(const std::string& key, const std::string& dflt) const {
  std::lock_guard l(tree_mu_);
  auto it = phys_.props.find(key);
  return it == phys_.props.end() ? dflt : it->second;
}

ChecksumType Volume::checksum_type() const {
  auto t = ParseChecksumName(Prop("checksum", "on"));
  return t.ok() ? *t : ChecksumType::kXxh3_128;
}

CompressionSetting Volume::compression() const {
  auto c = ParseCompression(Prop("compression", kDefaultCompression));
  return c.ok() ? *c : CompressionSetting{};
}

void Volume::AddResizeListener(void* key, std::function<void(uint64_t)> fn) {
  std::lock_guard l(mu_);
  listeners_[key] = std::move(fn);
}

void Volume::RemoveResizeListener(void* key) {
  std::lock_guard l(mu_);
  listeners_.erase(key);
}

Status Volume::Grow(uint64_t new_size) {
  {
    std::lock_guard l(tree_mu_);
    if (new_size < volsize_.load()) {
      return Status::NotSupported("shrinking a volume is not supported");
    }
    if (new_size % vbs_ != 0) {
      return Status::InvalidArgument("volsize must be a multiple of volblocksize");
    }
    const uint32_t want = LevelsFor(new_size / vbs_);
    while (phys_.levels < want) {
      // The old root becomes child 0 of a new root one level up.
      auto ind = std::make_shared<Indirect>();
      ind->bps.Set(0, phys_.root);
      ind->dirty = true;
      phys_.root = BlockPtr{};
      phys_.levels++;
      InsertCacheLocked(Key(phys_.levels, 0), ind);
      grown_dirty_.insert(Key(phys_.levels, 0));
    }
    volsize_.store(new_size);
    phys_.volsize = new_size;
  }
  return Status::Ok();
}

void Volume::NotifyResize() {
  const uint64_t size = volsize_.load();
  std::lock_guard l(mu_);
  for (auto& [k, fn] : listeners_) fn(size);
}

// ---------------------------------------------------------------------------------------
// Tree lookups (tree_mu_ held)

void Volume::InsertCacheLocked(uint64_t key, std::shared_ptr<Indirect> ind) {
  Indirect& cached = *ind;
  if (cache_.emplace(key, std::move(ind)).second) {
    cached.charged = CachedIndirectBytes(cached.bps);
    pool_->cache_bytes += cached.charged;
  }
}

namespace {
// What a cached indirect block costs past the object itself: the control block make_shared
// puts before it (a line, as the object is aligned to one), the map's node and malloc's
// headers. mallinfo2 counts about 8,450 bytes in use per block of sizeof 8,320 without
// extras (IndirectPointersTest checks the charge covers the heap).
constexpr uint64_t kIndirectOverhead = 192;
}  // namespace

uint64_t Volume::CachedIndirectBytes(const IndirectPointers& ptrs) {
  return sizeof(Indirect) - sizeof(IndirectPointers) + ptrs.Bytes() + kIndirectOverhead;
}

Volume::IndirectCache::iterator Volume::UncacheLocked(IndirectCache::iterator it) {
  pool_->cache_bytes -= it->second->charged;
  it->second->charged = 0;  // a caller may still hold it
  return cache_.erase(it);
}

void Volume::SetPointerLocked(Indirect& ind, uint32_t i, const BlockPtr& bp) {
  ind.bps.Set(i, bp);
  if (ind.charged == 0) return;
  const uint64_t bytes = CachedIndirectBytes(ind.bps);
  pool_->cache_bytes += bytes - ind.charged;  // grows or stays: extras, once made, stay
  ind.charged = bytes;
}

Result<std::shared_ptr<Volume::Indirect>> Volume::LoadIndirect(const BlockPtr& bp) {
  auto ind = std::make_shared<Indirect>();
  if (bp.IsHole()) return ind;
  if (bp.type != BlockType::kVolIndirect || bp.lsize != kIndirectBlockSize) {
    return Status::IoError(phys_.name + ": corrupt indirect block pointer " + bp.ToString());
  }
  std::vector<uint8_t> buf(kIndirectBlockSize);
  if (Status st = pool_->ReadBlock(bp, buf.data()); !st.ok()) {
    if (st.IsCorruption()) pool_->NoteDataError(phys_.name + ": <metadata> " + bp.ToString());
    return st;
  }
  for (uint32_t i = 0; i < kBpsPerIndirect; i++) {
    auto child = DecodeBlockPtr(std::span<const uint8_t>(buf.data() + i * kBlkptrSize, 128));
    if (!child.ok()) return Status::IoError(phys_.name + ": " + child.status().message());
    const BlockType want = bp.level == 1 ? BlockType::kVolData : BlockType::kVolIndirect;
    if (!child->IsHole() && (child->type != want || child->level + 1 != bp.level)) {
      return Status::IoError(phys_.name + ": indirect block holds a wrong pointer");
    }
    ind->bps.Set(i, *child);
  }
  return ind;
}

Result<BlockPtr> Volume::LookupL0Locked(uint64_t blkid, uint64_t* hole_span) {
  *hole_span = 1;
  if (auto it = cache_.find(Key(1, blkid >> kIndirectShift)); it != cache_.end()) {
    return it->second->bps.Get(blkid & (kBpsPerIndirect - 1));
  }
  BlockPtr parent = phys_.root;
  for (uint32_t l = phys_.levels; l >= 1; l--) {
    const uint64_t index = blkid >> (kIndirectShift * l);
    std::shared_ptr<Indirect> ind;
    if (auto it = cache_.find(Key(l, index)); it != cache_.end()) {
      ind = it->second;
    } else {
      if (parent.IsHole()) {
        *hole_span = ((index + 1) << (kIndirectShift * l)) - blkid;
        return BlockPtr{};
      }
      VS_ASSIGN_OR_RETURN(ind, LoadIndirect(parent));
      TrimCacheLocked();
      InsertCacheLocked(Key(l, index), ind);
    }
    parent = ind->bps.Get((blkid >> (kIndirectShift * (l - 1))) & (kBpsPerIndirect - 1));
  }
  return parent;
}

void Volume::TrimCacheLocked() {
  const uint64_t max = pool_->tuning.cache_max_bytes;
  // Room for one more block without extras.
  if (pool_->cache_bytes.load() + sizeof(Indirect) + kIndirectOverhead <= max) return;
  // Down to 31/32 of the bound, so a full cache does not trim on every miss, but no
  // further: what is freed lies in holes all over the heap, of which malloc_trim returns
  // only the whole pages (one or two of an 8.5 KiB block), while the block cache takes the
  // room in memory of its own. The blocks loaded next fill the holes again, as long as
  // there are not many more holes than they need. pool_bench ThinFill at 100 GiB: peak RSS
  // growth 378-381 MiB trimming to 7/8, against the bound of 384, and 358-360 MiB at 31/32
  // (docs/notes/memory.md). Hash order is as good as random here; the L1 block
  // a caller holds stays alive through its shared_ptr.
  const uint64_t target = max - max / kTrimShare;
  uint64_t freed = 0;
  for (auto it = cache_.begin(); it != cache_.end() && pool_->cache_bytes.load() > target;) {
    if (!it->second->dirty && !grown_dirty_.count(it->first)) {
      freed += it->second->charged;
      it = UncacheLocked(it);
    } else {
      ++it;
    }
  }
  // The space given up goes to the block cache, whose memory is mapped apart from malloc's
  // (block_arena.h): hand the freed pages back to the kernel, or the process keeps both
  // (pool_bench ThinFill, 50 GiB: peak RSS 547 MiB against the bound of 384 without this).
  if (freed >= max / kTrimShare / 2) pool_->heap_to_trim = true;
}

Result<std::shared_ptr<Volume::Indirect>> Volume::GetForWriteLocked(uint32_t level,
                                                                    uint64_t index) {
  if (auto it = cache_.find(Key(level, index)); it != cache_.end()) return it->second;
  BlockPtr bp;
  if (level == phys_.levels) {
    VS_CHECK_OP(index, ==, 0u);
    bp = phys_.root;
  } else {
    VS_ASSIGN_OR_RETURN(auto parent, GetForWriteLocked(level + 1, index >> kIndirectShift));
    bp = parent->bps.Get(index & (kBpsPerIndirect - 1));
  }
  VS_ASSIGN_OR_RETURN(auto ind, LoadIndirect(bp));
  InsertCacheLocked(Key(level, index), ind);
  return ind;
}

void Volume::EvictClean() {
  std::lock_guard l(tree_mu_);
  for (auto it = cache_.begin(); it != cache_.end();) {
    if (!it->second->dirty && !grown_dirty_.count(it->first)) {
      it = UncacheLocked(it);
    } else {
      ++it;
    }
  }
}

// ---------------------------------------------------------------------------------------
// I/O

Status Volume::WriteBlock(uint64_t blkid, uint32_t in_off, const uint8_t* src, uint32_t n,
                          bool zero, DirtyReservation& room, StoredForm* stored) {
  const bool full = in_off == 0 && n == vbs_;
  std::unique_lock l(mu_);
  for (;;) {
    loaded_cv_.wait(l, [&] { return !loading_.count(blkid); });
    if (destroyed) return Status::FromErrno(ENXIO, phys_.name + ": volume destroyed");
    VS_RETURN_IF_ERROR(pool_->CheckUsable());
    auto it = open_.find(blkid);
    if (it != open_.end()) {
      // An early copy of the old bytes is void, and a buffer an early write still reads
      // must stay as it is (early_write.cc).
      uint8_t* dst = PrepareChangeLocked(it, /*copy=*/!full);
      if (full && zero) {
        it->second.reset();
      } else {
        if (dst == nullptr) {
          it->second = NewBufLocked();
          dst = it->second.get();
          std::memset(dst, 0, vbs_);
        }
        if (zero) {
          std::memset(dst + in_off, 0, n);
        } else if (full) {
          StreamingCopy(dst, src, n);  // read next by the commit, much later
          if (stored != nullptr) stored_[blkid] = {dst, std::move(*stored)};
          NoteWholeBlockLocked(blkid);
        } else {
          std::memcpy(dst + in_off, src, n);
        }
      }
      return Status::Ok();
    }
    Buf buf;
    if (full) {
      if (!zero) {
        buf = NewBufLocked();
        StreamingCopy(buf.get(), src, n);
      }
    } else {
      buf = NewBufLocked();
      auto s = syncing_.find(blkid);
      if (s != syncing_.end()) {
        if (s->second) {
          std::memcpy(buf.get(), s->second.get(), vbs_);
        } else {
          std::memset(buf.get(), 0, vbs_);
        }
      } else {
        // Read-modify-write from the tree: other writers of this block wait for us.
        pool_->rmw_reads++;
        loading_.insert(blkid);
        l.unlock();
        Status st = ReadFromTree(blkid, 0, buf.get(), vbs_);
        l.lock();
        loading_.erase(blkid);
        loaded_cv_.notify_all();
        if (!st.ok()) return st;
        VS_CHECK(!open_.count(blkid));
      }
      if (zero) {
        std::memset(buf.get() + in_off, 0, n);
      } else {
        std::memcpy(buf.get() + in_off, src, n);
      }
    }
    const bool needs_space = buf != nullptr;  // holes never need space
    if (stored != nullptr && full && !zero) stored_[blkid] = {buf.get(), std::move(*stored)};
    CountDirtyLocked(open_.emplace(blkid, std::move(buf)).first);
    if (full && !zero) NoteWholeBlockLocked(blkid);
    pool_->dirty_bytes += vbs_;
    dirty += vbs_;
    if (needs_space) room.Take(vbs_);
    return Status::Ok();
  }
}

Status Volume::Write(uint64_t offset, std::span<const uint8_t> buf, bool throttle) {
  // A write that fails for want of space changes nothing (zfs, too, reserves a
  // transaction's space before it changes anything): room for every block it may dirty is
  // reserved first.
  {
    const uint64_t blocks = (offset + buf.size() + vbs_ - 1) / vbs_ - offset / vbs_;
    VS_ASSIGN_OR_RETURN(DirtyReservation room, pool_->ReserveDirty(this, blocks * vbs_));
    size_t done = 0;
    while (done < buf.size()) {
      const uint64_t pos = offset + done;
      const uint32_t in_off = static_cast<uint32_t>(pos % vbs_);
      const uint32_t n =
          static_cast<uint32_t>(std::min<uint64_t>(buf.size() - done, vbs_ - in_off));
      VS_RETURN_IF_ERROR(WriteBlock(pos / vbs_, in_off, buf.data() + done, n, false, room));
      done += n;
    }
  }  // the unused room goes back before the throttle, which may wait for a commit
  if (throttle) pool_->Throttle();
  return Status::Ok();
}

Status Volume::Zero(uint64_t offset, uint64_t length, bool throttle) {
  if (length == 0) return Status::Ok();
  const uint64_t end = offset + length;
  const uint64_t first = offset / vbs_, last = (end - 1) / vbs_;
  // Whole blocks become holes, which take no space; partial ones are rewritten and need
  // room, reserved first as in Write, so a zero that finds none changes nothing.
  const bool first_partial = offset % vbs_ != 0 || (first == last && end % vbs_ != 0);
  const bool last_partial = last != first && end % vbs_ != 0;
  const uint64_t partial = uint64_t{first_partial} + uint64_t{last_partial};
  DirtyReservation room;
  if (partial > 0) {
    VS_ASSIGN_OR_RETURN(room, pool_->ReserveDirty(this, partial * vbs_));
  }
  if (first_partial) {
    const uint64_t n = std::min(end, (first + 1) * vbs_) - offset;
    VS_RETURN_IF_ERROR(WriteBlock(first, static_cast<uint32_t>(offset % vbs_), nullptr,
                                  static_cast<uint32_t>(n), true, room));
  }
  if (last_partial) {
    VS_RETURN_IF_ERROR(WriteBlock(last, 0, nullptr, static_cast<uint32_t>(end % vbs_), true, room));
  }
  // The whole blocks: [pos, whole_end), both block-aligned.
  uint64_t pos = first_partial ? (first + 1) * vbs_ : offset;
  const uint64_t whole_end = last_partial ? last * vbs_ : end;
  while (pos < whole_end) {
    const uint64_t blkid = pos / vbs_;
    // Skip blocks that are holes already (and whole hole subtrees at once).
    uint64_t next_dirty;
    {
      std::lock_guard l(mu_);
      next_dirty = NextDirtyLocked(blkid);
    }
    if (next_dirty != blkid) {
      uint64_t span = 1;
      BlockPtr bp;
      {
        std::lock_guard l(tree_mu_);
        VS_ASSIGN_OR_RETURN(bp, LookupL0Locked(blkid, &span));
      }
      if (bp.IsHole()) {
        // The hole ends at the first block that was dirty before the lookup: a block the
        // tree did not hold yet was in a dirty map then (it leaves them only after the tree
        // has it), so none is skipped.
        span = std::min({span, next_dirty - blkid, whole_end / vbs_ - blkid});
        pos = (blkid + std::max<uint64_t>(span, 1)) * vbs_;
        continue;
      }
    }
    VS_RETURN_IF_ERROR(WriteBlock(blkid, 0, nullptr, vbs_, true, room));
    pos += vbs_;
  }
  room = DirtyReservation();  // the unused room goes back before the throttle
  if (throttle) pool_->Throttle();
  return Status::Ok();
}

Result<std::vector<bdev::AllocationExtent>> Volume::QueryAllocation(uint64_t offset,
                                                                    uint64_t length) {
  std::vector<bdev::AllocationExtent> out;
  uint64_t blkid = offset / vbs_;
  const uint64_t end = offset + length;
  const uint64_t end_blk = (end + vbs_ - 1) / vbs_;
  while (blkid < end_blk) {
    std::optional<bool> allocated;
    uint64_t next_dirty = end_blk;
    {
      std::lock_guard l(mu_);
      auto it = open_.find(blkid);
      if (it != open_.end()) {
        allocated = it->second != nullptr;
      } else if (auto s = syncing_.find(blkid); s != syncing_.end()) {
        allocated = s->second != nullptr;
      } else {
        next_dirty = NextDirtyLocked(blkid + 1);
      }
    }
    uint64_t span = 1;
    if (!allocated) {
      std::lock_guard l(tree_mu_);
      VS_ASSIGN_OR_RETURN(auto bp, LookupL0Locked(blkid, &span));
      allocated = !bp.IsHole();
      // A hole ends at the first block dirty before the lookup (as in Zero).
      span = *allocated ? 1 : std::min({span, next_dirty - blkid, end_blk - blkid});
    }
    out.push_back({blkid * vbs_, span * vbs_, *allocated});
    blkid += span;
  }
  return out;
}

uint64_t Volume::NextDirtyLocked(uint64_t from) const {
  uint64_t first = ~uint64_t{0};
  for (const auto* m : {&open_, &syncing_}) {
    auto a = m->lower_bound(from);
    if (a != m->end()) first = std::min(first, a->first);
  }
  auto c = loading_.lower_bound(from);
  if (c != loading_.end()) first = std::min(first, *c);
  return first;
}

// ---------------------------------------------------------------------------------------
// txg sync path

void Volume::CountDirtyLocked(std::map<uint64_t, Buf>::iterator it) {
  const uint64_t l1 = it->first >> kIndirectShift;
  if (it != open_.begin() && (std::prev(it)->first >> kIndirectShift) == l1) return;
  if (auto next = std::next(it); next != open_.end() && (next->first >> kIndirectShift) == l1) {
    return;
  }
  open_l1s_++;
  const uint64_t nblocks = volsize_.load() / vbs_;
  const uint32_t levels = LevelsFor(nblocks);
  uint64_t blocks = 1;
  uint64_t at_level = (nblocks + kBpsPerIndirect - 1) / kBpsPerIndirect;  // L1 blocks
  for (uint32_t l = 2; l <= levels; l++) {
    at_level = (at_level + kBpsPerIndirect - 1) / kBpsPerIndirect;
    if (open_l1s_ <= at_level) blocks++;
  }
  const uint64_t bytes = blocks * pool_->asize(kIndirectBlockSize);
  open_meta_ += bytes;
  pool_->dirty_meta_bytes += bytes;
}

size_t Volume::Quiesce() {
  std::lock_guard l(mu_);
  VS_CHECK(syncing_.empty());
  syncing_.swap(open_);
  // The open txg's early copies now belong to the syncing map; a write in flight finds its
  // buffer there when it ends.
  VS_CHECK(syncing_early_.empty());
  syncing_early_.swap(early_);
  VS_CHECK(syncing_stored_.empty());
  syncing_stored_.swap(stored_);
  early_candidates_.clear();
  open_l1s_ = 0;
  syncing_meta_ = std::exchange(open_meta_, 0);
  return syncing_.size();
}

BlockPtr Volume::DataBlockPtr(const Dva& dva, ChecksumType cksum) const {
  BlockPtr bp;
  bp.dva[0] = dva;
  bp.lsize = bp.psize = vbs_;
  bp.cksum = cksum;
  bp.type = BlockType::kVolData;
  bp.level = 0;
  bp.fill = 1;
  return bp;
}

Volume::Buf Volume::NewBufLocked() {
  if (spare_.empty()) return pool_->dirty_buffers.Allocate(vbs_);
  Buf b = std::move(spare_.back());
  spare_.pop_back();
  return b;
}

Volume::Buf Volume::FinishSync(uint64_t* released, const uint8_t* withhold) {
  std::map<uint64_t, Buf> old;
  Buf withheld;
  {
    std::lock_guard l(mu_);
    old.swap(syncing_);
    syncing_stored_.clear();
    pool_->dirty_meta_bytes -= std::exchange(syncing_meta_, 0);
    // Keep as many buffers as this txg used (up to kMaxSpareBytes) for the next one: a
    // streaming writer then dirties recycled memory instead of fresh pages (the pool's
    // DirtyBuffers unmap emptied chunks, and every new page faults and is zeroed again).
    const size_t keep = std::min<size_t>(old.size(), std::max<uint64_t>(kMaxSpareBytes / vbs_, 1));
    if (spare_.size() > keep) spare_.resize(keep);
    for (auto& [blkid, buf] : old) {
      if (withhold == nullptr && spare_.size() >= keep) break;
      if (!buf) continue;
      if (buf.get() == withhold) {
        withheld = std::move(buf);
        withhold = nullptr;
      } else if (spare_.size() < keep) {
        spare_.push_back(std::move(buf));
      }
    }
  }
  const uint64_t bytes = old.size() * uint64_t{vbs_};
  dirty -= bytes;
  *released += bytes;
  return withheld;
}

Status Volume::SyncTree(SyncContext& ctx) {
  // syncing_ is only read by others now; this thread is its only writer-to-be (FinishSync).
  const ChecksumType cksum = checksum_type();
  const CompressionSetting comp = compression();
  undo_ = SyncUndo{};
  undo_.txg = ctx.txg;
  undo_.used = used_.load();
  undo_.lused = lused_.load();
  // Blocks written early (early_write.cc) are adopted: their space and checksum are ready.
  std::map<uint64_t, EarlyBlock> early = TakeEarlyForSyncLocked();
  // Received blocks with their stored form (WriteStored) are stored as they came.
  std::map<uint64_t, Stored> stored;
  {
    std::lock_guard l(mu_);
    stored.swap(syncing_stored_);
  }
  std::vector<std::pair<uint64_t, BlockPtr>> fresh;
  fresh.reserve(syncing_.size());
  std::vector<std::pair<BlockPtr*, const uint8_t*>> data;  // blocks to write and checksum
  std::vector<CompressJob> compress;  // the same, to compress first or stored as they came
  std::vector<std::pair<BlockPtr, const uint8_t*>> adopted;
  for (auto& [blkid, buf] : syncing_) {
    BlockPtr bp;
    auto sf = stored.find(blkid);
    const StoredForm* form =
        sf != stored.end() && buf && sf->second.buf == buf.get() ? &sf->second.form : nullptr;
    auto e = early.find(blkid);
    const bool adopt = form == nullptr && e != early.end() && e->second.buf == buf.get() &&
                       e->second.bp.cksum == cksum;
    if (adopt) {
      bp = e->second.bp;
      ctx.Adopt(bp.dva[0], this);
      // Before this txg's MOS is written (volume_compress.cc, WriteCompressed).
      if (bp.comp != Compression::kNone) pool_->compressed_blocks = true;
      early.erase(e);
      bp.birth = ctx.txg;
      adopted.emplace_back(bp, buf.get());
    } else if (buf && !AllZero(buf.get(), vbs_)) {
      Dva dva;  // a block to compress is allocated once its size is known
      if (comp.algo == Compression::kNone && form == nullptr) {
        VS_ASSIGN_OR_RETURN(dva, ctx.Allocate(vbs_, this));
      }
      bp = DataBlockPtr(dva, cksum);
      bp.birth = ctx.txg;
    }
    fresh.emplace_back(blkid, bp);  // reserved: the pointer below stays valid
    if (!bp.IsHole() && !adopt) {
      if (comp.algo == Compression::kNone && form == nullptr) {
        data.emplace_back(&fresh.back().second, buf.get());
      } else {
        compress.push_back({&fresh.back().second, buf.get(), form});
      }
    }
  }
  for (auto& [blkid, e] : early) pool_->ReleaseEarlyLocked(e.bp.dva[0]);  // stale
  // The writes, the checksums and the copies into the block cache only read the buffers.
  // The blocks are taken in groups of up to RunWriter::kMaxRunBytes, in block order; a thread
  // checksums a group and then writes it (RunWriter: its adjacent blocks in one vectored
  // write), so the kernel's copy finds the bytes in that CPU's caches (the writer's
  // streaming copies left them in memory only). For a large txg a helper thread takes
  // groups too. The written blocks go to ctx.written, for the block cache's copies, which
  // start once every tree is written and run on through the flushes (cache_fill.h).
  // Caching before the commit completes is safe: the bytes are final, the key (address,
  // txg) is new and no tree points at it before this commit's indirect blocks do, and a
  // failed commit suspends the pool (no reads).
  const size_t group =
      std::max<uint64_t>(RunWriter::kMaxRunBytes / pool_->asize(vbs_), 1);  // blocks
  const size_t groups = (data.size() + group - 1) / group;
  std::atomic<size_t> next_group{0};
  std::atomic<bool> failed{false};
  auto write_groups = [&](Status& st) {
    RunWriter writer(pool_);
    for (size_t g = next_group++; g < groups && !failed; g = next_group++) {
      const size_t first = g * group, end = std::min(first + group, data.size());
      for (size_t i = first; i < end; i++) {
        data[i].first->checksum =
            ComputeChecksum(cksum, std::span<const uint8_t>(data[i].second, vbs_));
      }
      for (size_t i = first; i < end && st.ok(); i++) {
        st = writer.Add(data[i].first->dva[0], std::span<const uint8_t>(data[i].second, vbs_));
      }
      if (st.ok()) st = writer.Flush();
      if (!st.ok()) failed = true;
    }
  };
  Status written, helper_written;
  std::thread helper;
  if (data.size() * vbs_ >= kHelperThreadBytes) {
    try {
      helper = std::thread(write_groups, std::ref(helper_written));
    } catch (const std::system_error&) {
      // No thread to be had: this one takes every group.
    }
  }
  write_groups(written);
  if (helper.joinable()) helper.join();
  VS_RETURN_IF_ERROR(written);
  VS_RETURN_IF_ERROR(helper_written);
  if (!compress.empty()) VS_RETURN_IF_ERROR(WriteCompressed(ctx, comp, cksum, compress));
  uint64_t adopted_bytes = 0;  // an early block of a compressing volume may be smaller
  for (const auto& [bp, buf] : adopted) adopted_bytes += bp.dva[0].asize();
  ctx.data_bytes += data.size() * pool_->asize(vbs_) + adopted_bytes;
  ctx.early_bytes += adopted_bytes;
  if (pool_->block_cache) {
    auto add = [&](const BlockPtr& bp, const uint8_t* buf) {
      ctx.written.push_back({WrittenBlock{PoolImpl::CacheKey(bp), bp.cksum, bp.checksum, bp.comp,
                                          bp.psize, static_cast<uint32_t>(bp.dva[0].asize())},
                             std::span(buf, vbs_)});
    };
    for (auto& [bp, buf] : data) add(*bp, buf);
    for (auto& [bp, buf] : adopted) add(bp, buf);
    for (const CompressJob& j : compress) add(*j.bp, j.buf);
  }

  std::lock_guard l(tree_mu_);
  SaveTreeForUndoLocked();
  std::vector<std::set<uint64_t>> dirty(phys_.levels + 2);
  for (uint64_t key : grown_dirty_) dirty[key >> 56].insert(key & ((uint64_t{1} << 56) - 1));
  grown_dirty_.clear();
  for (auto& [blkid, bp] : fresh) {
    VS_ASSIGN_OR_RETURN(auto ind, GetForWriteLocked(1, blkid >> kIndirectShift));
    const uint32_t i = blkid & (kBpsPerIndirect - 1);
    const BlockPtr old = ind->bps.Get(i);
    if (old.IsHole() && bp.IsHole()) continue;
    if (!old.IsHole()) VS_RETURN_IF_ERROR(ctx.Free(old, this));
    SetPointerLocked(*ind, i, bp);
    ind->dirty = true;
    dirty[1].insert(blkid >> kIndirectShift);
  }
  // The dirty indirect blocks, bottom-up, a batch at a time: each batch is encoded and
  // checksummed (on both cores when it is large: scattered small writes dirty an L1 block
  // for every few data blocks), then allocated, written and hung in its parent here.
  std::vector<uint8_t> scratch(kIndirectBatch * kIndirectBlockSize);
  std::vector<Indirect*> inds(kIndirectBatch);
  std::vector<uint64_t> fills(kIndirectBatch);
  std::vector<Checksum> sums(kIndirectBatch);
  for (uint32_t level = 1; level <= phys_.levels; level++) {
    const std::vector<uint64_t> indexes(dirty[level].begin(), dirty[level].end());
    for (size_t first = 0; first < indexes.size(); first += kIndirectBatch) {
      const size_t count = std::min(kIndirectBatch, indexes.size() - first);
      for (size_t k = 0; k < count; k++) {
        auto it = cache_.find(Key(level, indexes[first + k]));
        VS_CHECK(it != cache_.end());
        inds[k] = it->second.get();
      }
      // Only reads the cached blocks, which nothing changes while tree_mu_ is held here.
      auto encode = [&](size_t from, size_t to) {
        for (size_t k = from; k < to; k++) {
          uint8_t* out = &scratch[k * kIndirectBlockSize];
          uint64_t fill = 0;
          for (uint32_t i = 0; i < kBpsPerIndirect; i++) {
            const BlockPtr c = inds[k]->bps.Get(i);
            fill += c.fill;
            EncodeBlockPtr(c, out + i * kBlkptrSize);
          }
          fills[k] = fill;
          if (fill > 0) {
            sums[k] = ComputeChecksum(cksum, std::span<const uint8_t>(out, kIndirectBlockSize));
          }
        }
      };
      std::thread helper;
      const size_t mine = count >= kIndirectHelperBlocks ? count / 2 : count;
      if (mine < count) {
        try {
          helper = std::thread(encode, mine, count);
        } catch (const std::system_error&) {
          encode(mine, count);  // no thread to be had
        }
      }
      encode(0, mine);
      if (helper.joinable()) helper.join();
      for (size_t k = 0; k < count; k++) {
        const uint64_t index = indexes[first + k];
        Indirect& ind = *inds[k];
        BlockPtr nbp;
        if (fills[k] > 0) {
          VS_ASSIGN_OR_RETURN(nbp.dva[0], ctx.Allocate(kIndirectBlockSize, this));
          nbp.lsize = nbp.psize = kIndirectBlockSize;
          nbp.cksum = cksum;
          nbp.type = BlockType::kVolIndirect;
          nbp.level = static_cast<uint8_t>(level);
          nbp.fill = fills[k];
          nbp.birth = ctx.txg;
          nbp.checksum = sums[k];
          VS_RETURN_IF_ERROR(ctx.Write(
              nbp.dva[0],
              std::span<const uint8_t>(&scratch[k * kIndirectBlockSize], kIndirectBlockSize)));
        }
        ind.dirty = false;
        if (level == phys_.levels) {
          if (!phys_.root.IsHole()) VS_RETURN_IF_ERROR(ctx.Free(phys_.root, this));
          phys_.root = nbp;
        } else {
          VS_ASSIGN_OR_RETURN(auto parent, GetForWriteLocked(level + 1, index >> kIndirectShift));
          parent->dirty = true;
          const uint32_t i = index & (kBpsPerIndirect - 1);
          const BlockPtr old = parent->bps.Get(i);
          if (!old.IsHole()) VS_RETURN_IF_ERROR(ctx.Free(old, this));
          SetPointerLocked(*parent, i, nbp);
          dirty[level + 1].insert(index >> kIndirectShift);
        }
      }
    }
  }
  VS_RETURN_IF_ERROR(ctx.FlushWrites());
  TrimCacheLocked();
  synced_ = phys_;
  synced_.used = used_.load();
  synced_.lused = lused_.load();
  return Status::Ok();
}

Status Volume::WalkBp(const BlockPtr& bp, const std::function<Status(const BlockPtr&)>& fn,
                      uint64_t* unreadable) {
  if (bp.IsHole()) return Status::Ok();
  VS_RETURN_IF_ERROR(fn(bp));
  if (bp.level == 0) return Status::Ok();
  auto ind = LoadIndirect(bp);
  if (!ind.ok() && unreadable != nullptr) {
    ++*unreadable;
    return Status::Ok();
  }
  if (!ind.ok()) return ind.status();
  for (uint32_t i = 0; i < kBpsPerIndirect; i++) {
    VS_RETURN_IF_ERROR(WalkBp((*ind)->bps.Get(i), fn, unreadable));
  }
  return Status::Ok();
}

Status Volume::Walk(const std::function<Status(const BlockPtr&)>& fn) {
  BlockPtr root;
  {
    std::lock_guard l(tree_mu_);
    root = phys_.root;
  }
  return WalkBp(root, fn);
}

Status Volume::FreeTree(SyncContext& ctx) {
  // The tree on disk: a Grow not yet committed has moved the root into a new cached block.
  BlockPtr root;
  {
    std::lock_guard l(tree_mu_);
    root = synced_.root;
  }
  // An indirect block that does not read back (damaged) is freed, but what it points to
  // cannot be found and stays allocated: that space leaks (the checker reports it), where
  // failing would fail this commit and every later one, and the pool with them.
  std::vector<BlockPtr> bps;
  uint64_t unreadable = 0;
  VS_RETURN_IF_ERROR(WalkBp(
      root,
      [&](const BlockPtr& bp) {
        bps.push_back(bp);
        return Status::Ok();
      },
      &unreadable));
  for (const auto& bp : bps) VS_RETURN_IF_ERROR(ctx.Free(bp, this));
  std::lock_guard l(tree_mu_);
  phys_.root = synced_.root = BlockPtr{};
  for (auto it = cache_.begin(); it != cache_.end();) it = UncacheLocked(it);
  grown_dirty_.clear();
  return Status::Ok();
}

}  // namespace volstack::pool

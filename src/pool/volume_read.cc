// Volume::Read: the read path of a volume (see volume.h for the tree and the dirty maps).
//
// One request costs one pass under each lock, not one per block:
//   1. under mu_, the dirty maps are probed once for the whole block range (a lower_bound
//      each; the common case, nothing dirty in range, ends there) and dirty blocks are
//      copied out;
//   2. under tree_mu_, the block pointers of the remaining blocks are collected, fetching
//      each cached L1 indirect block once per run of up to 128 pointers;
//   3. with no lock held, whole blocks the pool's block cache holds (block_cache.h: verified
//      contents, keyed by address and birth txg) are copied from it, without I/O or
//      checksum; the other whole blocks whose DVAs are adjacent on one vdev are read with one
//      vdev read (up to kMaxRunBytes) straight into the caller's buffer, verified there block
//      by block in place, and offered to the cache (which admits them or not: TinyLFU; and
//      leaves them out rather than have a read wait for fresh memory to fault in); a
//      partial head/tail block is copied from the cache in part, or read whole through a
//      per-thread bounce buffer of one block. Before anything else the first block's pointer
//      and bytes start loading from where they were last found (l1_hints_, BlockCache
//      "Hints"). Requests longer than kMaxRunBytes are streams: they take the cache's hits
//      but are not counted, and offer nothing; past a hit a miss's run ends at the next
//      block the cache holds, past a miss it is read whole without probing the cache block
//      by block.
// A checksum mismatch on a merged read is retried block by block through the slow path,
// which looks the pointer up again (the block may have been rewritten and its old copy
// reused meanwhile) before it reports Corruption (EUCLEAN; devfs and NBD send EIO).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "pool/pool_impl.h"
#include "pool/volume.h"

namespace volstack::pool {

namespace {

// Per-thread scratch, reused across requests so a 4 KiB read allocates nothing.
struct ReadScratch {
  std::vector<BlockPtr> bps;
  std::vector<uint8_t> need;  // 1: read from the tree
  uint8_t* bounce = nullptr;  // one block, 4 KiB aligned (O_DIRECT vdevs read into it as is)
  uint32_t bounce_size = 0;
  ~ReadScratch() { std::free(bounce); }
  uint8_t* Bounce(uint32_t size) {
    if (bounce_size < size) {
      std::free(bounce);
      bounce = static_cast<uint8_t*>(std::aligned_alloc(4096, size));
      VS_CHECK(bounce != nullptr);
      bounce_size = size;
    }
    return bounce;
  }
};

// A stack of scratch areas per thread: a pool whose vdev is another pool's volume (stacking)
// reads that volume from inside this read, on the same thread.
thread_local std::vector<std::unique_ptr<ReadScratch>> t_scratch;
thread_local size_t t_depth = 0;

class ScratchLease {
 public:
  ScratchLease() {
    if (t_scratch.size() <= t_depth) t_scratch.push_back(std::make_unique<ReadScratch>());
    s_ = t_scratch[t_depth++].get();
  }
  ~ScratchLease() { t_depth--; }
  ReadScratch* operator->() const { return s_; }

 private:
  ReadScratch* s_;
};

// Longest merged vdev read. The blocks are verified right after the read, while they are
// still in the CPU's L2 cache: with 1 MiB runs the checksum pass re-read them from memory
// and cost as much as the copy out of the page cache (docs/notes/read-path.md).
constexpr uint64_t kMaxRunBytes = 128 * 1024;

// How far ahead of its copies a multi-block read prefetches the block cache's slots
// (BlockCache::Prefetch): enough to cover a slot's miss with one block's copy, few enough
// that the prefetches do not queue behind each other.
constexpr size_t kPrefetchBlocks = 4;

}  // namespace

Status Volume::CheckDataBp(const BlockPtr& bp) const {
  const Dva& d = bp.dva[0];
  if (bp.lsize != vbs_ || bp.psize > bp.lsize || d.vdev >= pool_->vdevs.size() ||
      d.offset < kAllocStart || d.offset + d.asize() > pool_->vdevs[d.vdev]->alloc_end()) {
    return Status::IoError(phys_.name + ": corrupt data block pointer " + bp.ToString());
  }
  return Status::Ok();
}

Status Volume::ReadBp(BlockPtr bp, uint64_t blkid, uint32_t in_off, uint8_t* dst, uint32_t n,
                      bool cache_asked, bool offer) {
  for (int attempt = 0;; attempt++) {
    if (bp.IsHole()) {
      std::memset(dst, 0, n);
      return Status::Ok();
    }
    if (bp.lsize != vbs_) return Status::IoError(phys_.name + ": corrupt data block pointer");
    Status st;
    const bool asked = cache_asked && attempt == 0;  // a pointer looked up again was not
    if (in_off == 0 && n == vbs_) {
      st = pool_->ReadBlock(bp, dst, asked, offer);
    } else {
      ScratchLease scratch;
      uint8_t* tmp = scratch->Bounce(vbs_);
      st = pool_->ReadBlock(bp, tmp, asked, offer, in_off + n);
      if (st.ok()) std::memcpy(dst, tmp + in_off, n);
    }
    if (st.ok()) return st;
    if (attempt > 0) {
      if (st.IsCorruption())
        pool_->NoteDataError(phys_.name + ": offset " + std::to_string(blkid * vbs_));
      return st;
    }
    // The block may have been rewritten and its old copy reused meanwhile: look again.
    std::lock_guard l(tree_mu_);
    uint64_t span;
    auto again = LookupL0Locked(blkid, &span);
    if (!again.ok() || *again == bp) {
      if (st.IsCorruption())
        pool_->NoteDataError(phys_.name + ": offset " + std::to_string(blkid * vbs_));
      return st;
    }
    bp = *again;
  }
}

Status Volume::ReadFromTree(uint64_t blkid, uint32_t in_off, uint8_t* dst, uint32_t n) {
  BlockPtr bp;
  {
    std::lock_guard l(tree_mu_);
    uint64_t span;
    VS_ASSIGN_OR_RETURN(bp, LookupL0Locked(blkid, &span));
  }
  return ReadBp(bp, blkid, in_off, dst, n, /*cache_asked=*/false, /*offer=*/false);
}

Status Volume::LookupRangeLocked(uint64_t first, size_t count, const uint8_t* need, BlockPtr* out) {
  // A plain pointer: tree_mu_ keeps the cached block alive, and copying the shared_ptr
  // cost each read two atomic updates of a count in a cache line of its own (perf,
  // RandRead4K: a fifth of this function's time).
  const Indirect* l1 = nullptr;
  uint64_t l1_index = ~uint64_t{0};
  for (size_t i = 0; i < count; i++) {
    if (!need[i]) continue;
    const uint64_t blkid = first + i;
    if ((blkid >> kIndirectShift) != l1_index) {
      l1_index = blkid >> kIndirectShift;
      auto it = cache_.find(Key(1, l1_index));
      l1 = it == cache_.end() ? nullptr : it->second.get();
      NoteL1Locked(l1_index, l1);
    }
    if (l1) {
      out[i] = l1->bps.Get(blkid & (kBpsPerIndirect - 1));
      continue;
    }
    // Not cached: the full walk loads (and caches) the L1 block, or finds a hole above it.
    uint64_t span;
    VS_ASSIGN_OR_RETURN(out[i], LookupL0Locked(blkid, &span));
    auto it = cache_.find(Key(1, l1_index));
    if (it != cache_.end()) l1 = it->second.get();
    NoteL1Locked(l1_index, l1);
  }
  return Status::Ok();
}

void Volume::NoteL1Locked(uint64_t l1_index, const Indirect* l1) {
  if (l1 == nullptr) return;
  std::atomic<const PackedBlockPtr*>& hint = l1_hints_[l1_index % kL1Hints];
  const PackedBlockPtr* first = l1->bps.PackedAt(0);
  // Written only when it changed: readers on several CPUs share the line.
  if (hint.load(std::memory_order_relaxed) != first) hint.store(first, std::memory_order_relaxed);
}

uintptr_t Volume::HintedPointerAddress(uint64_t blkid) const {
  const PackedBlockPtr* first =
      l1_hints_[(blkid >> kIndirectShift) % kL1Hints].load(std::memory_order_relaxed);
  if (first == nullptr) return 0;
  // A number, not a pointer: the block may be gone (see l1_hints_).
  return reinterpret_cast<uintptr_t>(first) +
         (blkid & (kBpsPerIndirect - 1)) * sizeof(PackedBlockPtr);
}

void Volume::PrefetchPointer(uint64_t blkid) const {
  const uintptr_t at = HintedPointerAddress(blkid);
  // One line: the packed pointer (a block with extras has a second, not prefetched).
  if (at != 0) __builtin_prefetch(reinterpret_cast<const void*>(at));
}

Status Volume::Read(uint64_t offset, std::span<uint8_t> buf) {
  if (buf.empty()) return Status::Ok();
  const uint64_t first = offset / vbs_;
  const uint64_t last = (offset + buf.size() - 1) / vbs_;
  const size_t count = static_cast<size_t>(last - first + 1);
  BlockCache* const cache = pool_->block_cache.get();
  // The first block's pointer and bytes start loading now, from where they were last
  // found: they arrive while the locks are taken, and each while the other is fetched.
  PrefetchPointer(first);
  if (cache != nullptr) cache->PrefetchNamed(hint_base_ + first, offset - first * vbs_);
  ScratchLease lease;
  ReadScratch& s = *lease.operator->();
  s.need.assign(count, 1);
  if (s.bps.size() < count) s.bps.resize(count);

  // Where block i of the request lands in buf, and which part of it.
  auto piece = [&](size_t i, uint32_t* in_off, uint32_t* n) -> uint8_t* {
    const uint64_t bstart = (first + i) * vbs_;
    const uint64_t from = std::max(bstart, offset);
    const uint64_t to = std::min(bstart + vbs_, offset + buf.size());
    *in_off = static_cast<uint32_t>(from - bstart);
    *n = static_cast<uint32_t>(to - from);
    return buf.data() + (from - offset);
  };

  // 1. Dirty blocks (open map first, then syncing), one lock for the request.
  size_t from_tree = count;
  {
    std::lock_guard l(mu_);
    auto o = open_.lower_bound(first);
    auto y = syncing_.lower_bound(first);
    const bool any =
        (o != open_.end() && o->first <= last) || (y != syncing_.end() && y->first <= last);
    if (any) {
      for (size_t i = 0; i < count; i++) {
        const uint64_t blkid = first + i;
        while (o != open_.end() && o->first < blkid) ++o;
        while (y != syncing_.end() && y->first < blkid) ++y;
        const Buf* src = nullptr;
        if (o != open_.end() && o->first == blkid) {
          src = &o->second;
        } else if (y != syncing_.end() && y->first == blkid) {
          src = &y->second;
        } else {
          continue;
        }
        uint32_t in_off, n;
        uint8_t* dst = piece(i, &in_off, &n);
        if (*src) {
          std::memcpy(dst, src->get() + in_off, n);
        } else {
          std::memset(dst, 0, n);
        }
        s.need[i] = 0;
        from_tree--;
      }
    }
  }
  if (from_tree == 0) return Status::Ok();

  // 2. Block pointers of the rest, one lock for the request.
  {
    std::lock_guard l(tree_mu_);
    VS_RETURN_IF_ERROR(LookupRangeLocked(first, count, s.need.data(), s.bps.data()));
  }

  // 3. No lock held: blocks the block cache holds (whole or the part asked for) are copied
  // from it; runs of adjacent uncached whole blocks become one vdev read, verified in place
  // and offered to the cache; uncached partial blocks go through ReadBp.
  // Requests longer than one merged vdev read (sequential I/O) use hits but admit nothing:
  // a hit spares the vdev read and the checksum (SeqRead1M 0.60 -> 0.75-0.84 of raw with
  // the data cached at commit), while filling the cache from a stream costs a second copy
  // and a scan bigger than the cache would only push out blocks asked for more often.
  // A stream that misses right after a miss reads the run whole from the vdev without asking
  // the cache about each following block: it is usually past what the cache holds, and
  // there a probe per block cost more than the odd block read twice (SeqRead1M/2). A miss
  // right after a hit is more likely a hole in what the cache holds: reading its whole run
  // read and verified again the rest of 128 KiB the cache had: 11 MiB a pass for the 0.6 %
  // of blocks the bound leaves out of pool_bench's SeqRead1M/0 (0.80 -> 0.87 of raw in one
  // comparison, within the host's noise in another: docs/notes/read-path.md). A
  // request's first block, or one after a run that ended for another reason (a hole, a
  // dirty block, a jump on disk), counts as after a miss: nothing says the cache holds what
  // follows. A partial first block that hits counts as a hit.
  const bool stream = buf.size() > kMaxRunBytes;
  // The cache's table slot of a block a few ahead is loaded while this one is copied (a
  // single block has nothing to overlap with).
  size_t prefetched = count > 1 ? 0 : count;
  auto prefetch_until = [&](size_t end) {
    for (end = std::min(end, count); prefetched < end; prefetched++) {
      const BlockPtr& b = s.bps[prefetched];
      if (s.need[prefetched] && !b.IsHole()) cache->Prefetch(PoolImpl::CacheKey(b), !stream);
    }
  };
  bool probe_run = !stream;  // a miss's run ends at the next block the cache holds
  for (size_t i = 0; i < count;) {
    if (cache != nullptr) prefetch_until(i + kPrefetchBlocks);
    if (!s.need[i]) {
      i++;
      continue;
    }
    uint32_t in_off, n;
    uint8_t* dst = piece(i, &in_off, &n);
    const BlockPtr& bp = s.bps[i];
    // Only the first block is named: the rest of a request follows it in order, which the
    // CPU's own prefetcher and the slot prefetches above serve.
    const uint64_t name = i == 0 ? hint_base_ + first : BlockCache::kUnnamed;
    if (bp.IsHole() || n != vbs_) {
      // The part of a cached block asked for is copied straight out of the cache (a 4 KiB
      // read of a 16 KiB block copied all of it into the bounce buffer first).
      const bool ask = cache != nullptr && !bp.IsHole() && CheckDataBp(bp).ok();
      if (ask && cache->Lookup(PoolImpl::CacheKey(bp), dst, in_off, n, !stream, name)) {
        probe_run = true;
      } else {
        VS_RETURN_IF_ERROR(ReadBp(bp, first + i, in_off, dst, n, ask));
      }
      i++;
      continue;
    }
    VS_RETURN_IF_ERROR(CheckDataBp(bp));
    if (cache != nullptr && cache->Lookup(PoolImpl::CacheKey(bp), dst, 0, vbs_, !stream, name)) {
      probe_run = true;
      i++;
      continue;
    }
    if (bp.comp != Compression::kNone) {
      // Read, verified and decoded alone (PoolImpl::ReadBlock); runs are of raw blocks.
      VS_RETURN_IF_ERROR(ReadBp(bp, first + i, 0, dst, vbs_, cache != nullptr, !stream));
      probe_run = !stream;
      i++;
      continue;
    }
    // A miss: extend it with the following whole blocks that are adjacent on disk and, when
    // probing (probe_run), not cached: a cached block ends the run, copied out by the lookup.
    const Dva& d0 = bp.dva[0];
    bool ends_at_hit = false;
    size_t j = i + 1;
    uint64_t next = d0.offset + d0.asize();
    while (j < count && s.need[j] && d0.asize() == vbs_ && (j - i + 1) * vbs_ <= kMaxRunBytes) {
      const BlockPtr& b = s.bps[j];
      uint32_t jo, jn;
      uint8_t* jdst = piece(j, &jo, &jn);
      if (b.IsHole() || jn != vbs_ || b.comp != Compression::kNone || b.dva[0].vdev != d0.vdev ||
          b.dva[0].offset != next || !CheckDataBp(b).ok()) {
        break;
      }
      if (cache != nullptr && probe_run &&
          cache->Lookup(PoolImpl::CacheKey(b), jdst, 0, vbs_, !stream)) {
        s.need[j] = 0;
        ends_at_hit = true;
        break;
      }
      next += vbs_;
      j++;
    }
    const size_t run = j - i;
    probe_run = !stream || ends_at_hit;
    Status st = pool_->vdevs[d0.vdev]->device()->Read(
        d0.offset, std::span<uint8_t>(dst, run * uint64_t{vbs_}));
    for (size_t k = 0; k < run; k++) {
      uint8_t* p = dst + k * uint64_t{vbs_};
      const BlockPtr& b = s.bps[i + k];
      if (st.ok() && ComputeChecksum(b.cksum, std::span<const uint8_t>(p, vbs_)) == b.checksum) {
        if (cache != nullptr && !stream) {
          cache->Insert(PoolImpl::CacheKey(b), p, /*count_access=*/false, Offer::kRead);
        }
        continue;
      }
      // A failed read or a mismatch: retry this block alone (it looks the pointer up again;
      // a mismatch that persists is counted against the vdev there).
      VS_RETURN_IF_ERROR(ReadBp(b, first + i + k, 0, p, vbs_));
    }
    i = j;
  }
  return Status::Ok();
}

}  // namespace volstack::pool

// Deferred frees made durable: the commit's and the import's parts (theory: defer_map.h).
#include "pool/defer_map.h"

#include <algorithm>

#include "pool/pool_impl.h"

namespace volstack::pool {

namespace {
constexpr uint64_t kMaxDeferDva = uint64_t{1} << 30;
}  // namespace

std::vector<std::vector<SpaceMapEntry>> DeferBlockRecords(const std::vector<Dva>& freed,
                                                          size_t nvdevs) {
  std::vector<RangeSet> sets(nvdevs);
  for (const Dva& d : freed) VS_CHECK(sets[d.vdev].Add(d.offset, d.asize()));
  std::vector<std::vector<SpaceMapEntry>> blocks;
  for (uint32_t v = 0; v < nvdevs; v++) {
    for (auto [s, e] : sets[v].ranges()) {
      // A record holds at most 2^48-1 bytes.
      for (uint64_t o = s; o < e; o += (uint64_t{1} << 47)) {
        if (blocks.empty() || blocks.back().size() == kSpaceMapEntriesPerBlock) {
          blocks.emplace_back();
        }
        blocks.back().push_back({true, v, o, std::min(e - o, uint64_t{1} << 47)});
      }
    }
  }
  return blocks;
}

std::vector<Dva> DeferRecordDvas(const std::vector<SpaceMapEntry>& records) {
  std::vector<Dva> out;
  for (const auto& r : records) {
    for (uint64_t o = r.offset; o < r.offset + r.length; o += kMaxDeferDva) {
      Dva d;
      d.vdev = r.vdev;
      d.offset = o;
      d.asize_sectors = static_cast<uint32_t>(std::min(kMaxDeferDva, r.offset + r.length - o) >> 9);
      out.push_back(d);
    }
  }
  return out;
}

Status PoolImpl::WriteDeferredLocked(SyncContext& ctx, const std::vector<BlockPtr>& old_meta,
                                     std::vector<BlockPtr>* written,
                                     std::vector<DeferListPhys>* lists) {
  auto free_meta = [&](const BlockPtr& bp) {
    for (const Dva& d : bp.dva) {
      if (!d.empty()) ctx.deferred.push_back(d);
    }
  };
  for (const auto& bp : old_meta) free_meta(bp);
  // A list this txg releases is not in the new MOS: its blocks are freed with the rest.
  for (const auto& [t, bps] : defer_bps) {
    if (!ReleasesLocked(t, ctx.txg)) break;
    for (const auto& bp : bps) free_meta(bp);
  }
  written->clear();
  for (const auto& records : DeferBlockRecords(ctx.deferred, vdevs.size())) {
    BlockPtr bp;
    VS_RETURN_IF_ERROR(
        WriteMetaBlock(ctx, BlockType::kSpaceMap, EncodeSpaceMapBlock(records), &bp));
    written->push_back(bp);
  }
  lists->clear();
  for (const auto& [t, bps] : defer_bps) {
    if (!ReleasesLocked(t, ctx.txg)) lists->push_back({t, bps});
  }
  if (!written->empty()) lists->push_back({ctx.txg, *written});
  return Status::Ok();
}

void PoolImpl::ReleaseDeferredLocked(SyncContext& ctx, std::vector<BlockPtr> written) {
  deferred_vdev_bytes.resize(vdevs.size(), 0);
  for (const Dva& d : ctx.deferred) {
    deferred_bytes += d.asize();
    deferred_vdev_bytes[d.vdev] += d.asize();
  }
  deferred[ctx.txg] = std::move(ctx.deferred);
  deferred_rebase = 0;  // the new MOS names every list by its txg in memory
  if (!written.empty()) defer_bps[ctx.txg] = std::move(written);
  while (!deferred.empty() && ReleasesLocked(deferred.begin()->first, ctx.txg)) {
    for (const Dva& d : deferred.begin()->second) {
      ReleaseLocked(d);
      deferred_bytes -= d.asize();
      deferred_vdev_bytes[d.vdev] -= d.asize();
    }
    defer_bps.erase(deferred.begin()->first);
    deferred.erase(deferred.begin());
  }
}

Status PoolImpl::LoadDeferred(const MosPhys& mos, const std::vector<BlockPtr>& meta) {
  const size_t n = vdevs.size();
  deferred.clear();
  defer_bps.clear();
  deferred_bytes = 0;
  deferred_vdev_bytes.assign(n, 0);
  last_free_txg = 0;
  std::vector<RangeSet> meta_set(n), listed(n);
  for (const auto& bp : meta)
    VS_CHECK(meta_set[bp.dva[0].vdev].Add(bp.dva[0].offset, bp.dva[0].asize()));
  std::vector<uint8_t> buf;
  for (const auto& list : mos.deferred) {
    std::vector<Dva>& dvas = deferred[list.txg];
    for (const auto& bp : list.blocks) {
      if (bp.lsize > kMaxMetaBlock) return Status::Corruption("deferred frees: block too large");
      buf.resize(bp.lsize);
      VS_RETURN_IF_ERROR(ReadBlock(bp, buf.data()).WithContext("deferred frees"));
      VS_ASSIGN_OR_RETURN(auto records, DecodeSpaceMapBlock(buf));
      for (const auto& r : records) {
        if (!r.free || r.vdev >= n || r.offset < kAllocStart || r.offset + r.length < r.offset ||
            r.offset + r.length > vdevs[r.vdev]->alloc_end() ||
            live[r.vdev].Overlaps(r.offset, r.length) ||
            meta_set[r.vdev].Overlaps(r.offset, r.length) ||
            !listed[r.vdev].Add(r.offset, r.length)) {
          return Status::Corruption("deferred frees of txg " + std::to_string(list.txg) +
                                    ": bad extent at vdev " + std::to_string(r.vdev) + " offset " +
                                    std::to_string(r.offset));
        }
        // Only what is free here: the rest is held by a claimed intent-log block.
        std::vector<std::pair<uint64_t, uint64_t>> parts;
        const uint64_t end = r.offset + r.length;
        const auto& ranges = free[r.vdev].ranges();
        auto it = ranges.upper_bound(r.offset);
        if (it != ranges.begin()) --it;
        for (; it != ranges.end() && it->first < end; ++it) {
          const uint64_t s = std::max(it->first, r.offset), e = std::min(it->second, end);
          if (s < e) parts.emplace_back(s, e);
        }
        for (auto [s, e] : parts) {
          VS_CHECK(free[r.vdev].Remove(s, e - s));
          for (const Dva& d : DeferRecordDvas({{true, r.vdev, s, e - s}})) {
            dvas.push_back(d);
            deferred_bytes += d.asize();
            deferred_vdev_bytes[d.vdev] += d.asize();
          }
        }
      }
    }
    defer_bps[list.txg] = list.blocks;
    last_free_txg = list.txg;
  }
  return Status::Ok();
}

void PoolImpl::RebaseDeferred(uint64_t last_txg) {
  const uint64_t base = synced_txg.load();
  if (last_txg <= base) return;
  const uint64_t shift = last_txg - base;
  std::map<uint64_t, std::vector<Dva>> lists;
  for (auto& [t, dvas] : deferred) lists[t + shift] = std::move(dvas);
  deferred = std::move(lists);
  std::map<uint64_t, std::vector<BlockPtr>> blocks;
  for (auto& [t, bps] : defer_bps) blocks[t + shift] = std::move(bps);
  defer_bps = std::move(blocks);
  if (last_free_txg != 0) last_free_txg += shift;
  deferred_rebase = shift;
}

}  // namespace volstack::pool

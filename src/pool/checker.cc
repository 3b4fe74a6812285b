#include "pool/checker.h"

#include "pool/pool_impl.h"

namespace volstack::pool {

std::string CheckReport::Summary() const {
  std::string s = std::to_string(data_blocks) + " data blocks, " + std::to_string(indirect_blocks) +
                  " indirect blocks, " + std::to_string(log_blocks) + " log blocks, " +
                  std::to_string(referenced_bytes) + " bytes referenced";
  for (const auto& e : errors) s += "\n  " + e;
  return s;
}

Result<CheckReport> CheckPool(Pool& pool, bool verify_data) {
  VS_RETURN_IF_ERROR(pool.Sync());
  PoolImpl& p = *pool.impl();
  std::lock_guard sync_lock(p.sync_mu);
  CheckReport r;
  const size_t n = p.vdevs.size();
  std::vector<RangeSet> referenced(n), meta(n), deferred(n);
  auto err = [&](std::string e) {
    if (r.errors.size() < 20) r.errors.push_back(std::move(e));
  };
  std::vector<std::shared_ptr<Volume>> vols;
  {
    std::lock_guard l(p.mu);
    for (auto& [name, v] : p.volumes) vols.push_back(v);
  }
  std::vector<uint8_t> buf;
  for (auto& v : vols) {
    uint64_t used = 0;
    Status st = v->Walk([&](const BlockPtr& bp) {
      const Dva& d = bp.dva[0];
      if (d.vdev >= n) {
        err(v->phys().name + ": pointer to vdev " + std::to_string(d.vdev));
        return Status::Ok();
      }
      if (!referenced[d.vdev].Add(d.offset, d.asize())) {
        err(v->phys().name + ": block referenced twice: " + bp.ToString());
      }
      used += d.asize();
      r.referenced_bytes += d.asize();
      if (bp.birth > p.synced_txg) err("block born after the synced txg: " + bp.ToString());
      if (bp.level == 0) {
        r.data_blocks++;
        if (verify_data) {
          buf.resize(bp.lsize);
          if (Status rs = p.ReadBlock(bp, buf.data()); !rs.ok()) err(rs.message());
        }
      } else {
        r.indirect_blocks++;
      }
      return Status::Ok();
    });
    if (!st.ok()) err(v->phys().name + ": walk: " + st.ToString());
    if (used != v->used()) {
      err(v->phys().name + ": used " + std::to_string(v->used()) + " but tree holds " +
          std::to_string(used));
    }
  }
  // The on-disk space map must replay to the in-memory live set, which must equal the
  // referenced set.
  std::vector<RangeSet> replay(n);
  for (const auto& bp : p.sm_bps) {
    buf.resize(bp.lsize);
    if (Status st = p.ReadBlock(bp, buf.data()); !st.ok()) {
      err("space map: " + st.ToString());
      continue;
    }
    auto entries = DecodeSpaceMapBlock(buf);
    if (!entries.ok()) {
      err(entries.status().ToString());
      continue;
    }
    for (const auto& e : *entries) {
      const bool ok = e.vdev < n && (e.free ? replay[e.vdev].Remove(e.offset, e.length)
                                            : replay[e.vdev].Add(e.offset, e.length));
      if (!ok) err("space map replay inconsistent at " + std::to_string(e.offset));
    }
  }
  for (const auto& bp : p.sm_bps) meta[bp.dva[0].vdev].Add(bp.dva[0].offset, bp.dva[0].asize());
  if (!p.mos_bp.IsHole()) {
    meta[p.mos_bp.dva[0].vdev].Add(p.mos_bp.dva[0].offset, p.mos_bp.dva[0].asize());
  }
  for (const auto& [txg, dvas] : p.deferred) {
    for (const Dva& d : dvas) {
      if (!deferred[d.vdev].Add(d.offset, d.asize())) err("deferred free listed twice");
    }
  }
  // Intent logs: every block a chain holds is accounted exactly once (zil_manager.cc).
  ZilManager::Accounting zil = p.zil->Account();
  r.log_blocks = zil.log_blocks;
  for (auto& e : zil.errors) err(std::move(e));
  for (size_t v = 0; v < n; v++) {
    if (replay[v].ranges() != p.live[v].ranges())
      err("vdev " + std::to_string(v) + ": on-disk space map != live set");
    if (referenced[v].ranges() != p.live[v].ranges()) {
      err("vdev " + std::to_string(v) + ": referenced blocks (" +
          std::to_string(referenced[v].total()) + " bytes) != space map live set (" +
          std::to_string(p.live[v].total()) + " bytes): leak or double allocation");
    }
    // live, meta, deferred and free must tile the allocatable range.
    RangeSet all;
    uint64_t sum = 0;
    for (const RangeSet* s : {&p.live[v], &meta[v], &deferred[v], &p.free[v], &p.early[v],
                              &zil.reserve[v], &zil.blocks[v]}) {
      for (auto [a, b] : s->ranges()) {
        if (!all.Add(a, b - a))
          err("vdev " + std::to_string(v) + ": overlap at " + std::to_string(a));
        sum += b - a;
      }
    }
    const uint64_t want = p.vdevs[v]->alloc_end() - p.vdevs[v]->alloc_start();
    if (sum != want || all.extents() != 1) {
      err("vdev " + std::to_string(v) + ": accounted " + std::to_string(sum) + " of " +
          std::to_string(want) + " bytes (leak)");
    }
  }
  uint64_t free_total = 0;
  for (auto& f : p.free) free_total += f.total();
  if (free_total != p.free_bytes) err("free_bytes counter disagrees with the free sets");
  return r;
}

}  // namespace volstack::pool

#include "pool/checker.h"

#include <map>
#include <set>

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
  // Heads and snapshots: a block may be named by several trees (snapshot.cc), always by
  // the same pointer, and once per tree.
  std::vector<std::shared_ptr<Volume>> vols, snaps;
  {
    std::lock_guard l(p.mu);
    for (auto& [name, v] : p.volumes) vols.push_back(v);
    for (auto& [name, v] : p.snapshots) snaps.push_back(v);
  }
  struct Ref {
    uint64_t asize, birth;
    const Volume* last;  // the last tree that named it
    int trees;
  };
  std::map<std::pair<uint32_t, uint64_t>, Ref> refs;
  std::vector<uint8_t> buf;
  r.volumes = vols.size();
  auto walk = [&](const std::shared_ptr<Volume>& v, bool head) {
    uint64_t used = 0, lused = 0;
    const std::string name = v->phys().name;
    Status st = v->Walk([&](const BlockPtr& bp) {
      const Dva& d = bp.dva[0];
      if (d.vdev >= n) {
        err(name + ": pointer to vdev " + std::to_string(d.vdev));
        return Status::Ok();
      }
      used += d.asize();
      lused += bp.lsize;
      auto [it, fresh] = refs.try_emplace({d.vdev, d.offset}, Ref{d.asize(), bp.birth, v.get(), 1});
      if (!fresh) {
        if (it->second.asize != d.asize() || it->second.birth != bp.birth) {
          err(name + ": block named by two different pointers: " + bp.ToString());
        } else if (it->second.last == v.get()) {
          err(name + ": block referenced twice: " + bp.ToString());
        }
        it->second.last = v.get();
        it->second.trees++;
        return Status::Ok();
      }
      if (!referenced[d.vdev].Add(d.offset, d.asize())) {
        err(name + ": block overlaps another: " + bp.ToString());
      }
      r.referenced_bytes += d.asize();
      if (bp.birth > p.synced_txg) err("block born after the synced txg: " + bp.ToString());
      if (!head && bp.birth > v->synced_phys().create_txg) {
        err(name + ": block born after its snapshot: " + bp.ToString());
      }
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
    if (!st.ok()) err(name + ": walk: " + st.ToString());
    if (used != v->used()) {
      err(name + ": used " + std::to_string(v->used()) + " but tree holds " + std::to_string(used));
    }
    if (lused != v->logical_used()) {
      err(name + ": logical used " + std::to_string(v->logical_used()) + " but tree holds " +
          std::to_string(lused));
    }
  };
  for (auto& v : vols) walk(v, true);
  for (auto& s : snaps) walk(s, false);
  // A snapshot's `used` (what destroying it frees, found by its birth-pruned walk) must be
  // exactly the blocks no other tree names.
  std::map<const Volume*, uint64_t> unique;
  for (const auto& [k, ref] : refs) {
    if (ref.trees == 1) unique[ref.last] += ref.asize;
  }
  std::set<std::string> origins;
  for (auto& v : vols) origins.insert(v->synced_phys().origin);
  for (auto& s : snaps) {
    r.snapshots++;
    const std::string name = s->synced_phys().name;
    // An origin's walk counts what only its clones share with it: it cannot be destroyed.
    if (origins.count(name)) continue;
    auto u = p.SnapshotUniqueLocked(name);
    if (!u.ok()) {
      err(name + ": used: " + u.status().ToString());
    } else if (*u != unique[s.get()]) {
      err(name + ": used " + std::to_string(*u) + " but " + std::to_string(unique[s.get()]) +
          " bytes are named by no other tree");
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
  for (const auto& [t, bps] : p.defer_bps) {
    for (const auto& bp : bps) meta[bp.dva[0].vdev].Add(bp.dva[0].offset, bp.dva[0].asize());
  }
  if (!p.mos_bp.IsHole()) {
    meta[p.mos_bp.dva[0].vdev].Add(p.mos_bp.dva[0].offset, p.mos_bp.dva[0].asize());
  }
  uint64_t deferred_total = 0;
  for (const auto& [txg, dvas] : p.deferred) {
    for (const Dva& d : dvas) {
      if (!deferred[d.vdev].Add(d.offset, d.asize())) err("deferred free listed twice");
      deferred_total += d.asize();
    }
  }
  if (deferred_total != p.deferred_bytes) err("deferred_bytes counter disagrees with the lists");
  // The MOS on disk lists the deferred frees in memory (defer_map.h).
  if (!p.mos_bp.IsHole()) {
    buf.resize(p.mos_bp.lsize);
    auto mos = p.ReadBlock(p.mos_bp, buf.data()).ok() ? DecodeMos(buf)
                                                      : Result<MosPhys>(Status::Corruption("read"));
    if (!mos.ok()) {
      err("MOS: " + mos.status().ToString());
    } else {
      std::map<uint64_t, std::vector<RangeSet>> on_disk;
      for (const auto& list : mos->deferred) {
        auto& sets = on_disk[list.txg + p.deferred_rebase];
        sets.resize(n);
        for (const auto& bp : list.blocks) {
          buf.resize(bp.lsize);
          auto recs = p.ReadBlock(bp, buf.data()).ok()
                          ? DecodeSpaceMapBlock(buf)
                          : Result<std::vector<SpaceMapEntry>>(Status::Corruption("read"));
          if (!recs.ok()) {
            err("deferred frees: " + recs.status().ToString());
            continue;
          }
          for (const auto& e : *recs) {
            if (e.vdev >= n || !sets[e.vdev].Add(e.offset, e.length))
              err("deferred frees: bad record");
          }
        }
      }
      // Each extent in memory is in its txg's list on disk (an import leaves out of a list
      // what a claimed log block holds: defer_map.h).
      bool equal = true;
      for (const auto& [txg, dvas] : p.deferred) {
        auto it = on_disk.find(txg);
        for (const Dva& d : dvas) {
          equal = equal && it != on_disk.end() && it->second[d.vdev].Contains(d.offset, d.asize());
        }
      }
      for (const auto& [txg, sets] : on_disk) equal = equal && p.deferred.count(txg);
      if (!equal) err("deferred frees in the MOS != deferred frees in memory");
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

// zfs destroy of several snapshots at once (a list, or the a%b ranges the CLI resolves):
// one txg destroys them all, or, when any one cannot go, none is touched.
//
// Space. Destroying a set frees, per volume, each maximal run of consecutive snapshots in
// the set (S_i..S_j, with P the surviving snapshot or origin before the run and N the
// surviving snapshot or head after it): every block a snapshot S_k of the run names that
// was born in S_k's own interval (after the snapshot just before it, destroyed or not) and
// that N does not name. A block of the run born in S_k's interval is named by S_k (it was
// alive at S_k's txg if a later one names it), so counting it in its birth interval alone
// counts it once; and within one lineage a block N still names is named at the same place
// (snapshot.cc), so the walk of S_k against N finds exactly the blocks N lost. This is
// what zfs's `zfs destroy -nv a%b` reports (its snaprange space), and more than the sum
// of the snapshots' `used` when they share blocks no survivor holds.
//
// The commit destroys them one after another in its txg (SnapshotsBeforeTrees), each walk
// against its neighbours as they are by then; the blocks freed are the same set.
#include <algorithm>
#include <set>

#include "pool/pool_impl.h"

namespace volstack::pool {

Result<uint64_t> PoolImpl::SnapshotsUniqueLocked(const std::vector<std::string>& names) {
  const std::set<std::string> doomed(names.begin(), names.end());
  std::set<std::string> volumes;
  for (const auto& n : names) volumes.insert(n.substr(0, n.find('@')));
  uint64_t bytes = 0;
  auto count = [&](const BlockPtr& bp) {
    bytes += bp.dva[0].asize();
    return Status::Ok();
  };
  for (const auto& v : volumes) {
    std::vector<DatasetPhys> snaps;
    DatasetPhys head;
    uint64_t prev_txg = 0;
    {
      std::lock_guard l(mu);
      auto h = this->volumes.find(v);
      if (h == this->volumes.end()) return Status::NotFound("no volume '" + v + "'");
      for (const auto& s : SnapshotsOfLocked(v)) snaps.push_back(s->synced_phys());
      head = h->second->synced_phys();
      prev_txg = OriginTxgLocked(*h->second);
    }
    // (snapshot, the txg before it) of the current run
    std::vector<std::pair<const DatasetPhys*, uint64_t>> run;
    auto flush = [&](const DatasetPhys& next) -> Status {
      for (const auto& [s, prev] : run) {
        VS_RETURN_IF_ERROR(DiffTrees(*this, *s, next.root, next.levels, prev, count));
      }
      run.clear();
      return Status::Ok();
    };
    for (const auto& s : snaps) {
      if (doomed.count(s.name)) {
        run.emplace_back(&s, prev_txg);
      } else {
        VS_RETURN_IF_ERROR(flush(s));
      }
      prev_txg = s.create_txg;
    }
    VS_RETURN_IF_ERROR(flush(head));
  }
  return bytes;
}

Status Pool::DestroySnapshots(const std::vector<std::string>& names, bool dry_run,
                              uint64_t* freed) {
  PoolImpl& p = *impl_;
  std::lock_guard admin(p.snap_admin_mu);
  VS_RETURN_IF_ERROR(p.CheckUsable());
  if (names.empty()) return Status::InvalidArgument("no snapshot named");
  std::vector<std::string> list;
  for (const auto& n : names) {
    VS_RETURN_IF_ERROR(ValidateSnapshotName(n));
    if (std::find(list.begin(), list.end(), n) == list.end()) list.push_back(n);
  }
  {
    std::lock_guard l(p.mu);
    for (const auto& name : list) {
      auto it = p.snapshots.find(name);
      if (it == p.snapshots.end()) {
        return Status::NotFound("could not find snapshot '" + name +
                                "'; check snapshot names; nothing destroyed");
      }
      if (dry_run) continue;  // what it would free, whatever would refuse it now (zfs -n)
      const bool held = SnapshotHeldLocked(*it->second);
      if (it->second->open_count > 0 || held) {
        return Status::Busy("cannot destroy snapshot " + name + ": dataset is busy" +
                            (held ? " (held: zfs holds)" : ""));
      }
      for (const auto& [vn, v] : p.volumes) {
        if (v->synced_phys().origin == name) {
          return Status::Exists("cannot destroy '" + name + "': snapshot has dependent clones (" +
                                vn + ")");
        }
      }
    }
  }
  if (freed != nullptr) {
    std::lock_guard s(p.sync_mu);
    VS_ASSIGN_OR_RETURN(*freed, p.SnapshotsUniqueLocked(list));
  }
  if (dry_run) return Status::Ok();
  {
    std::lock_guard l(p.mu);
    for (const auto& name : list) {
      p.pending_snap_ops.push_back({PoolImpl::SnapOp::Kind::kDestroy, name, 0});
    }
    p.mos_dirty = true;
  }
  return p.Sync();
}

}  // namespace volstack::pool

// zfs promote: a clone takes its origin's place in the lineage.
//
// Before (O the origin volume, S the clone C's origin snapshot, O@a older, O@c younger):
//
//     O@a -- O@s -- O@c -- O          C's origin: O@s
//              `--- C@x -- C
//
// After: the snapshots of O up to and including S (create_txg <= S's) become C's, under
// the same short names; C takes O's old origin (none, or O's own origin); O becomes a
// clone of C@s; every other clone of a moved snapshot follows its new name:
//
//     C@a -- C@s -- C@x -- C          O's origin: C@s
//              `--- O@c -- O
//
// Why the space rules of snapshot.cc still hold, with no block moved or rewritten. The
// trees are unchanged; only names and origins move. C's tree descends from S, so C's
// lineage (C@a, C@s, C@x, C) is a chain of trees in which each later tree was made from
// the earlier by the commits of one lineage, which is all the destroy walk and the
// born-after rule need. The previous tree of C@a is C's new origin (or none): the same as
// O@a's before. The previous tree of O@c is O's new origin C@s, whose txg is the one
// O@c's previous snapshot had. So every snapshot keeps the same (previous txg, next tree)
// pair, except that the first snapshot of O's remaining lineage now takes S as its
// previous by origin rather than by list: the same txg. keep_txg (the newest snapshot or
// origin txg) of C and of O is therefore unchanged too; it is recomputed anyway.
// The space columns are computed by those walks, so `used`, `usedbysnapshots` and the
// snapshots' `used` move with the names, as zfs's accounting moves with its dead lists.
//
// Atomicity. The renames and origins are directory entries: they change in memory with
// the commit lock (sync_mu) held, so no commit writes half of them, and the next commit
// writes them all in one MOS. A crash before its uberblock leaves the pool as it was, one
// after it the promote complete.
//
// Refused, with nothing changed: a name that is not a clone; a short name C already uses
// (zfs's "conflicting snapshot"); a moved snapshot that is open (the Volume object would
// follow the rename, but the devfs file, loop binding and NBD export records above it are
// kept by name and do not: docs/snapshots.md); a receive in progress whose hidden dataset is a
// clone of a moved snapshot (its resume state names the origin's volume).
#include <algorithm>

#include "pool/pool_impl.h"

namespace volstack::pool {

void Volume::SetOriginLocked(const std::string& origin) {
  std::lock_guard l(tree_mu_);
  phys_.origin = origin;
  synced_.origin = origin;
}

Status Pool::Promote(const std::string& clone) {
  PoolImpl& p = *impl_;
  const std::string what = "cannot promote '" + clone + "': ";
  if (clone.find('@') != std::string::npos) {
    return Status::InvalidArgument(what + "snapshots can not be promoted");
  }
  VS_RETURN_IF_ERROR(ValidateDatasetName(clone));
  std::lock_guard admin(p.snap_admin_mu);
  VS_RETURN_IF_ERROR(p.CheckUsable());
  if (p.read_only) return Status::ReadOnly(what + "the pool is imported read-only");
  {
    // The commit lock: no commit may write a MOS with part of the renames.
    std::lock_guard sync(p.sync_mu);
    std::lock_guard l(p.mu);
    auto c = p.volumes.find(clone);
    if (c == p.volumes.end()) {
      return Status::NotFound("cannot open '" + clone + "': dataset does not exist");
    }
    const std::string origin = c->second->synced_phys().origin;
    if (origin.empty()) return Status::InvalidArgument(what + "not a cloned filesystem");
    const std::string parent = origin.substr(0, origin.find('@'));
    auto o = p.volumes.find(parent);
    auto s = p.snapshots.find(origin);
    if (o == p.volumes.end() || s == p.snapshots.end()) {
      return Status::Corruption(what + "its origin '" + origin + "' is missing");
    }
    if (!p.pending_snap_ops.empty()) {
      return Status::Busy(what + "another snapshot operation is being committed");
    }
    const uint64_t origin_txg = s->second->synced_phys().create_txg;
    std::map<std::string, std::string> renamed;  // old full name -> new
    std::vector<std::shared_ptr<Volume>> moving;
    for (const auto& snap : p.SnapshotsOfLocked(parent)) {
      const DatasetPhys sp = snap->synced_phys();
      if (sp.create_txg > origin_txg) continue;
      const std::string short_name = sp.name.substr(sp.name.find('@') + 1);
      const std::string to = clone + "@" + short_name;
      if (p.snapshots.count(to)) {
        return Status::Exists(what + "conflicting snapshot '" + short_name + "' from parent '" +
                              parent + "'");
      }
      if (snap->open_count > 0) {
        return Status::Busy(what + "snapshot '" + sp.name + "' is busy (open)");
      }
      renamed[sp.name] = to;
      moving.push_back(snap);
    }
    for (const auto& [vn, v] : p.volumes) {
      const std::string vo = v->synced_phys().origin;
      if (vn.find('%') != std::string::npos && renamed.count(vo)) {
        return Status::Busy(what + "a receive into '" + vn.substr(0, vn.find('%')) +
                            "' is in progress from '" + vo + "'");
      }
    }
    // Everything checked: from here on nothing fails.
    const std::string parent_origin = o->second->synced_phys().origin;
    for (const auto& snap : moving) {
      const std::string from = snap->synced_phys().name;
      p.snapshots.erase(from);
      snap->RenameLocked(renamed[from]);
      p.snapshots[renamed[from]] = snap;
    }
    for (const auto& [vn, v] : p.volumes) {
      if (auto r = renamed.find(v->synced_phys().origin); r != renamed.end()) {
        v->SetOriginLocked(r->second);
      }
    }
    // After the loop above, which pointed both at the renamed S: the parent becomes a clone
    // of it, the clone takes the parent's old origin.
    o->second->SetOriginLocked(renamed[origin]);
    c->second->SetOriginLocked(parent_origin);
    for (const auto& [vn, v] : p.volumes) v->keep_txg = p.KeepTxgLocked(*v);
    p.mos_dirty = true;
  }
  return p.Sync();
}

}  // namespace volstack::pool

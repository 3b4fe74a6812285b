// written@snap (zfs's property): the bytes a dataset references that were born after an
// earlier snapshot of its lineage — what an incremental send from that snapshot would carry.
// The lineage of a volume or snapshot is its volume's earlier snapshots, then its origin
// snapshot and that volume's snapshots up to the origin, and so on: within it, a block of
// the dataset born after the snapshot's txg is one the snapshot does not name (snapshot.cc),
// so the birth-pruned walk WrittenSinceLocked counts exactly them.
#include "pool/pool_impl.h"

namespace volstack::pool {

Result<uint64_t> Pool::WrittenSince(const std::string& dataset, const std::string& snapshot) {
  PoolImpl& p = *impl_;
  const std::string volume = dataset.substr(0, dataset.find('@'));
  // "@snap" or "snap" name a snapshot of the dataset's own volume.
  std::string full = snapshot;
  if (full.find('@') == std::string::npos) full = volume + "@" + full;
  if (full.front() == '@') full = volume + full;
  std::lock_guard s(p.sync_mu);
  DatasetPhys tree;
  uint64_t since = 0;
  {
    std::lock_guard l(p.mu);
    const bool is_snapshot = dataset.find('@') != std::string::npos;
    auto& map = is_snapshot ? p.snapshots : p.volumes;
    auto d = map.find(dataset);
    if (d == map.end()) {
      return Status::NotFound("cannot open '" + dataset + "': dataset does not exist");
    }
    auto t = p.snapshots.find(full);
    if (t == p.snapshots.end()) {
      return Status::NotFound("cannot open '" + full + "': dataset does not exist");
    }
    tree = d->second->synced_phys();
    since = t->second->synced_phys().create_txg;
    // Up the lineage: each step's trees descend from the origin snapshot, taken at `limit`.
    std::string v = volume;
    uint64_t limit = is_snapshot ? tree.create_txg : ~uint64_t{0};
    bool found = false;
    for (int depth = 0; depth < 1000 && !found; depth++) {
      if (full.compare(0, v.size() + 1, v + "@") == 0) {
        found = since <= limit && full != dataset;
        break;
      }
      auto h = p.volumes.find(v);
      if (h == p.volumes.end()) break;
      const std::string origin = h->second->synced_phys().origin;
      auto o = p.snapshots.find(origin);
      if (origin.empty() || o == p.snapshots.end()) break;
      limit = o->second->synced_phys().create_txg;
      v = origin.substr(0, origin.find('@'));
    }
    if (!found) {
      return Status::InvalidArgument("cannot get 'written@" + snapshot + "' of '" + dataset +
                                     "': '" + full +
                                     "' is not an earlier snapshot of it or of its origins");
    }
  }
  return p.WrittenSinceLocked(tree, since);
}

}  // namespace volstack::pool

// Volume snapshots, clones and rollback: theory.
//
// What a snapshot is. Blocks are never changed in place and every pointer carries its
// block's birth txg, so the snapshot taken in txg T is the root pointer T's commit wrote
// for the volume, kept in the MOS directory as an entry "pool/vol@snap" (create_txg = T).
// Every block reachable from it stays allocated while any tree names it. Taking one
// writes no block and reads none: O(1) in the volume's size. A snapshot is read-only: a
// Volume object over its tree serves reads (OpenVolume of "pool/vol@snap").
//
// Freeing: ZFS's born-after rule (SyncContext::Free). When a head's commit stops naming a
// block (overwrite, discard), the block is freed only if it was born after the volume's
// keep_txg: its newest snapshot's txg, or for a clone without one its origin's. An older
// block was the head's at that snapshot's txg, so the snapshot's tree names it: it stays.
//
// Destroying snapshot S. Let P be the previous snapshot of the volume (for a clone's first
// one, its origin; none: txg 0) and N the next (a later snapshot, or the head). A block of
// S born at or before P's txg is in P's tree too (same argument). A block of S born after
// P's txg is S's alone unless N names it, and then at the same place in the tree: within
// one lineage a block is never named at two places, and indirect block (l, i) covers the
// same data blocks at any tree height. So destroy walks S and N side by side, skipping
// subtrees born by P's txg (an indirect block is never older than its children) and
// subtrees N shares (the same pointer), and frees the rest. The work is proportional to
// what changed between P and N, not to the volume. These are the numbers ZFS's dead lists
// give ("unique" space: born in (P, S], dead before N), found without storing dead lists:
// S's `used` is the same walk summed instead of freed, `written` the walk against nothing.
//
// Rollback to S (the newest, later ones destroyed first in the same txg with -r): the
// head's blocks born after S's txg are the head's alone and are freed; the head's tree
// becomes S's (volsize with it; properties stay). The volume is not open (EBUSY); dirty
// data left from before it was closed is dropped with the rest of the head.
//
// Clones. A volume whose tree starts as its origin snapshot's; keep_txg keeps it from ever
// freeing a block born by the origin's txg, and the origin cannot be destroyed while it
// has clones; `zfs promote` (promote.cc) turns a clone into its origin's parent.
//
// Atomicity. Each operation is directory entries plus frees in one txg's commit
// (txg_sync.cc), so after a crash it happened entirely or not at all. In the commit,
// destroys and rollbacks come before the volumes' trees are written (the heads' frees then
// see the keep_txg a destroy leaves), creates after them (the snapshot of txg T holds T's
// writes, as ZFS takes snapshots in syncing context after the datasets are synced). Frees
// go through the deferred lists like every other free.
//
// Format: MOS version 3 (docs/format/pool.md), written only while the pool holds a
// snapshot or a clone.
//
// Locks: snap_admin_mu (one operation, from its checks through its commit) -> sync_mu ->
// mu. The walks read blocks with no lock but sync_mu, which keeps every tree they read
// from changing.
#include <algorithm>
#include <chrono>
#include <random>
#include <set>

#include "pool/pool_impl.h"

namespace volstack::pool {

namespace {

using BpFn = std::function<Status(const BlockPtr&)>;

uint64_t NowSeconds() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

uint64_t NewGuid() {
  std::random_device rd;
  uint64_t g = 0;
  while (g == 0) g = (uint64_t{rd()} << 32) | rd();
  return g;
}

std::string VolumeOf(const std::string& snapshot) { return snapshot.substr(0, snapshot.find('@')); }

Status ReadIndirect(PoolImpl& pool, const BlockPtr& bp, std::vector<BlockPtr>* out) {
  if (bp.lsize != kIndirectBlockSize || bp.type != BlockType::kVolIndirect) {
    return Status::Corruption("not an indirect block: " + bp.ToString());
  }
  std::vector<uint8_t> buf(bp.lsize);
  VS_RETURN_IF_ERROR(pool.ReadBlock(bp, buf.data()));
  out->resize(kBpsPerIndirect);
  for (uint32_t i = 0; i < kBpsPerIndirect; i++) {
    VS_ASSIGN_OR_RETURN((*out)[i], DecodeBlockPtr(std::span<const uint8_t>(buf).subspan(
                                       i * kBlkptrSize, kBlkptrSize)));
  }
  return Status::Ok();
}

Status DiffBp(PoolImpl& pool, const BlockPtr& a, const BlockPtr& b, uint64_t min_txg,
              const BpFn& fn) {
  if (a.IsHole() || a.birth <= min_txg) return Status::Ok();
  if (!b.IsHole() && a.dva[0] == b.dva[0] && a.birth == b.birth) return Status::Ok();
  VS_RETURN_IF_ERROR(fn(a));
  if (a.level == 0) return Status::Ok();
  std::vector<BlockPtr> ac, bc;
  VS_RETURN_IF_ERROR(ReadIndirect(pool, a, &ac));
  if (!b.IsHole() && b.level == a.level) VS_RETURN_IF_ERROR(ReadIndirect(pool, b, &bc));
  for (uint32_t i = 0; i < kBpsPerIndirect; i++) {
    VS_RETURN_IF_ERROR(DiffBp(pool, ac[i], bc.empty() ? BlockPtr{} : bc[i], min_txg, fn));
  }
  return Status::Ok();
}

}  // namespace

// Calls fn for every block of tree `a` born after `min_txg` that tree `b` (the same
// lineage, as tall or taller: volumes only grow) does not name. A hole `b` names nothing.
Status DiffTrees(PoolImpl& pool, const DatasetPhys& a, const BlockPtr& b_root, uint32_t b_levels,
                 uint64_t min_txg, const BpFn& fn) {
  BlockPtr b = b_root;
  if (!b.IsHole() && b_levels < a.levels) {
    return Status::Corruption(a.name + ": a later tree is shorter than its snapshot's");
  }
  for (uint32_t l = b_levels; l > a.levels && !b.IsHole(); l--) {
    std::vector<BlockPtr> c;
    VS_RETURN_IF_ERROR(ReadIndirect(pool, b, &c));
    b = c[0];  // a grown tree's first pointer is the shorter tree's root
  }
  return DiffBp(pool, a.root, b, min_txg, fn);
}

Status ValidateSnapshotName(const std::string& name) {
  const auto at = name.find('@');
  if (at == std::string::npos) {
    return Status::InvalidArgument("invalid snapshot name '" + name + "': expected pool/vol@snap");
  }
  if (name.find('@', at + 1) != std::string::npos) {
    return Status::InvalidArgument("invalid snapshot name '" + name +
                                   "': multiple '@' delimiters in name");
  }
  if (name.size() > 255) {
    return Status::InvalidArgument("invalid snapshot name '" + name.substr(0, 40) +
                                   "...': name is too long");
  }
  const std::string vol = name.substr(0, at), snap = name.substr(at + 1);
  if (vol.find('/') == std::string::npos) {
    return Status::InvalidArgument("invalid snapshot name '" + name +
                                   "': snapshots of the pool's root dataset are not supported");
  }
  VS_RETURN_IF_ERROR(ValidateDatasetName(vol));
  const bool ok = !snap.empty() && std::all_of(snap.begin(), snap.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
           c == ':';
  });
  if (!ok) {
    return Status::InvalidArgument("invalid snapshot name '" + name +
                                   "': invalid character in the snapshot's name");
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------
// PoolImpl

std::vector<std::shared_ptr<Volume>> PoolImpl::SnapshotsOfLocked(const std::string& volume) const {
  std::vector<std::shared_ptr<Volume>> out;
  const std::string prefix = volume + "@";
  for (auto it = snapshots.lower_bound(prefix);
       it != snapshots.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    out.push_back(it->second);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a->synced_phys().create_txg < b->synced_phys().create_txg;
  });
  return out;
}

uint64_t PoolImpl::OriginTxgLocked(const Volume& vol) const {
  const std::string origin = vol.synced_phys().origin;
  if (origin.empty()) return 0;
  auto it = snapshots.find(origin);
  // A clone whose origin is gone (a damaged directory) keeps every block: leaking space is
  // better than freeing blocks another tree may name.
  if (it == snapshots.end()) return ~uint64_t{0};
  return it->second->synced_phys().create_txg;
}

uint64_t PoolImpl::KeepTxgLocked(const Volume& vol) const {
  auto snaps = SnapshotsOfLocked(vol.synced_phys().name);
  const uint64_t newest = snaps.empty() ? 0 : snaps.back()->synced_phys().create_txg;
  return std::max(newest, OriginTxgLocked(vol));
}

namespace {
// A snapshot and its neighbours (mu held): the tree after it and the previous one's txg.
struct Neighbours {
  std::shared_ptr<Volume> snap, head;
  DatasetPhys next;
  uint64_t prev_txg = 0;
};

// `head`: the snapshot's head when `volumes` no longer holds it (SnapOp::source).
Result<Neighbours> FindNeighboursLocked(PoolImpl& p, const std::string& name,
                                        std::shared_ptr<Volume> head = nullptr) {
  Neighbours n;
  auto s = p.snapshots.find(name);
  if (head == nullptr) {
    auto h = p.volumes.find(VolumeOf(name));
    if (h != p.volumes.end()) head = h->second;
  }
  if (s == p.snapshots.end() || head == nullptr) {
    return Status::NotFound("could not find snapshot '" + name + "'");
  }
  n.snap = s->second;
  n.head = head;
  auto list = p.SnapshotsOfLocked(VolumeOf(name));
  const size_t i = std::find(list.begin(), list.end(), n.snap) - list.begin();
  VS_CHECK_OP(i, <, list.size());
  n.prev_txg = i > 0 ? list[i - 1]->synced_phys().create_txg : p.OriginTxgLocked(*n.head);
  n.next = i + 1 < list.size() ? list[i + 1]->synced_phys() : n.head->synced_phys();
  return n;
}
}  // namespace

Result<uint64_t> PoolImpl::SnapshotUniqueLocked(const std::string& snapshot) {
  Neighbours n;
  {
    std::lock_guard l(mu);
    VS_ASSIGN_OR_RETURN(n, FindNeighboursLocked(*this, snapshot));
  }
  uint64_t bytes = 0;
  VS_RETURN_IF_ERROR(DiffTrees(*this, n.snap->synced_phys(), n.next.root, n.next.levels, n.prev_txg,
                               [&](const BlockPtr& bp) {
                                 bytes += bp.dva[0].asize();
                                 return Status::Ok();
                               }));
  return bytes;
}

Result<uint64_t> PoolImpl::WrittenSinceLocked(const DatasetPhys& tree, uint64_t since_txg) {
  uint64_t bytes = 0;
  VS_RETURN_IF_ERROR(
      DiffTrees(*this, tree, BlockPtr{}, tree.levels, since_txg, [&](const BlockPtr& bp) {
        bytes += bp.dva[0].asize();
        return Status::Ok();
      }));
  return bytes;
}

Status PoolImpl::SnapshotsBeforeTrees(SyncContext& ctx, const std::vector<SnapOp>& ops,
                                      uint64_t* released) {
  auto free = [&](const BlockPtr& bp) { return ctx.Free(bp, nullptr); };
  for (const SnapOp& op : ops) {
    if (op.kind == SnapOp::Kind::kDestroy) {
      Neighbours n;
      {
        std::lock_guard l(mu);
        VS_ASSIGN_OR_RETURN(n, FindNeighboursLocked(*this, op.name, op.source));
      }
      VS_RETURN_IF_ERROR(
          DiffTrees(*this, n.snap->synced_phys(), n.next.root, n.next.levels, n.prev_txg, free));
      n.snap->destroyed = true;
      std::lock_guard l(mu);
      snapshots.erase(op.name);
      n.head->keep_txg = KeepTxgLocked(*n.head);
    } else if (op.kind == SnapOp::Kind::kRollback) {
      std::shared_ptr<Volume> snap, head;
      {
        std::lock_guard l(mu);
        auto s = snapshots.find(op.name);
        auto h = volumes.find(VolumeOf(op.name));
        if (s == snapshots.end() || h == volumes.end()) {
          return Status::NotFound("rollback: '" + op.name + "' is gone");
        }
        snap = s->second;
        head = h->second;
      }
      head->DropEarlyLocked();
      head->FinishSync(released);
      const DatasetPhys s = snap->synced_phys();
      VS_RETURN_IF_ERROR(DiffTrees(*this, head->synced_phys(), BlockPtr{}, 0, s.create_txg, free));
      head->ResetTreeLocked(s);
    } else if (op.kind == SnapOp::Kind::kRecvApply) {
      // As a rollback to the stream's origin, then the received tree in the head's place:
      // the source's blocks born after the origin are its own, now the head's.
      std::shared_ptr<Volume> head;
      {
        std::lock_guard l(mu);
        auto h = volumes.find(op.name);
        if (h == volumes.end()) return Status::NotFound("receive: '" + op.name + "' is gone");
        head = h->second;
      }
      head->DropEarlyLocked();
      head->FinishSync(released);
      op.source->DropEarlyLocked();
      op.source->FinishSync(released);
      VS_RETURN_IF_ERROR(DiffTrees(*this, head->synced_phys(), BlockPtr{}, 0, op.txg, free));
      head->ResetTreeLocked(op.source->synced_phys());
    }
  }
  return Status::Ok();
}

void PoolImpl::SnapshotsAfterTrees(SyncContext& ctx, const std::vector<SnapOp>& ops,
                                   std::vector<DatasetPhys>* datasets) {
  for (const SnapOp& op : ops) {
    if (op.kind != SnapOp::Kind::kCreate) continue;
    std::shared_ptr<Volume> head;
    {
      std::lock_guard l(mu);
      auto h = volumes.find(VolumeOf(op.name));
      if (h == volumes.end()) continue;  // destroyed since (DestroyVolume waits for us)
      head = h->second;
    }
    DatasetPhys p = head->synced_phys();
    p.name = op.name;
    p.id = op.id;
    p.guid = op.guid != 0 ? op.guid : NewGuid();
    p.create_txg = ctx.txg;
    p.zil = ZilHeaderPhys{};
    p.origin.clear();
    p.props = {{"creation", std::to_string(NowSeconds())}};
    auto snap = std::make_shared<Volume>(this, p);
    std::lock_guard l(mu);
    snapshots[op.name] = snap;
    head->keep_txg = ctx.txg;
  }
  std::lock_guard l(mu);
  for (const auto& [name, s] : snapshots) datasets->push_back(s->synced_phys());
}

Status PoolImpl::VolumeSnapshotSpaceLocked(const std::string& volume, uint64_t* written,
                                           uint64_t* usedbysnapshots, uint64_t* logical_snapshots,
                                           uint64_t* usedbydataset) {
  std::vector<std::shared_ptr<Volume>> snaps;
  std::shared_ptr<Volume> head;
  uint64_t prev_txg = 0;
  {
    std::lock_guard l(mu);
    auto h = volumes.find(volume);
    if (h == volumes.end()) return Status::NotFound("no volume '" + volume + "'");
    head = h->second;
    snaps = SnapshotsOfLocked(volume);
    prev_txg = OriginTxgLocked(*head);
  }
  const DatasetPhys hp = head->synced_phys();
  if (usedbydataset != nullptr) {
    // zfs's usedbydataset: what destroying the volume frees once its snapshots are gone,
    // so for a clone only its blocks born after the origin (the rest is the origin's).
    *usedbydataset = hp.used;
    if (prev_txg > 0) {
      VS_ASSIGN_OR_RETURN(*usedbydataset, WrittenSinceLocked(hp, prev_txg));
    }
  }
  *usedbysnapshots = 0;
  uint64_t logical = 0;
  for (const auto& sn : snaps) {
    // What destroying them all frees: every snapshot's blocks born in its own interval
    // (after the previous snapshot) that the head does not name; each block has one birth
    // interval, so none is counted twice.
    const DatasetPhys sp = sn->synced_phys();
    VS_RETURN_IF_ERROR(DiffTrees(*this, sp, hp.root, hp.levels, prev_txg, [&](const BlockPtr& bp) {
      *usedbysnapshots += bp.dva[0].asize();
      logical += bp.lsize;
      return Status::Ok();
    }));
    prev_txg = sp.create_txg;
  }
  if (logical_snapshots != nullptr) *logical_snapshots = logical;
  VS_ASSIGN_OR_RETURN(*written, WrittenSinceLocked(hp, prev_txg));
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------
// Volume

void Volume::ResetTreeLocked(const DatasetPhys& snap) {
  std::lock_guard l(tree_mu_);
  for (auto it = cache_.begin(); it != cache_.end();) it = UncacheLocked(it);
  grown_dirty_.clear();
  phys_.root = synced_.root = snap.root;
  phys_.levels = synced_.levels = snap.levels;
  phys_.volsize = synced_.volsize = snap.volsize;
  volsize_ = snap.volsize;
  used_ = snap.used;
  synced_.used = snap.used;
  lused_ = snap.lused;
  synced_.lused = snap.lused;
}

void Volume::SetSnapshotProps(std::map<std::string, std::string> props) {
  std::lock_guard l(tree_mu_);
  phys_.props = props;
  synced_.props = std::move(props);
}

// ---------------------------------------------------------------------------------------
// Pool

Status Pool::Snapshot(const std::vector<std::string>& names) {
  PoolImpl& p = *impl_;
  std::lock_guard admin(p.snap_admin_mu);
  VS_RETURN_IF_ERROR(p.CheckUsable());
  if (names.empty()) return Status::InvalidArgument("no snapshot named");
  std::set<std::string> vols;
  for (const auto& n : names) {
    VS_RETURN_IF_ERROR(ValidateSnapshotName(n));
    if (n.substr(0, n.find('/')) != p.name) {
      return Status::NotFound("cannot create snapshot '" + n + "': no such pool '" +
                              n.substr(0, n.find('/')) + "'");
    }
    if (!vols.insert(VolumeOf(n)).second) {
      return Status::InvalidArgument("cannot create snapshots: more than one snapshot of '" +
                                     VolumeOf(n) + "' in one request");
    }
  }
  {
    std::lock_guard l(p.mu);
    for (const auto& n : names) {
      if (!p.volumes.count(VolumeOf(n))) {
        return Status::NotFound("cannot open '" + VolumeOf(n) + "': dataset does not exist");
      }
      if (p.snapshots.count(n)) {
        return Status::Exists("cannot create snapshot '" + n + "': dataset already exists");
      }
    }
    for (const auto& n : names) {
      p.pending_snap_ops.push_back({PoolImpl::SnapOp::Kind::kCreate, n, p.next_id++});
    }
    p.mos_dirty = true;
  }
  return p.Sync();
}

Result<DatasetInfo> Pool::Clone(const std::string& snapshot, const std::string& name,
                                const VolumeOptions& options) {
  PoolImpl& p = *impl_;
  {
    std::lock_guard admin(p.snap_admin_mu);
    VS_RETURN_IF_ERROR(p.CheckUsable());
    VS_RETURN_IF_ERROR(ValidateSnapshotName(snapshot));
    VS_RETURN_IF_ERROR(ValidateDatasetName(name));
    if (name.substr(0, name.find('/')) != p.name) {
      return Status::InvalidArgument("cannot create '" + name +
                                     "': source and target pools differ");
    }
    std::map<std::string, std::string> props;
    for (const auto& [k, v] : options.props) {
      if (k == "volsize" || k == "volblocksize") continue;
      VS_RETURN_IF_ERROR(ApplyVolumeProp(props, k, v));
    }
    if (!props.count("refreservation")) props["refreservation"] = "0";
    props["creation"] = std::to_string(NowSeconds());
    std::lock_guard l(p.mu);
    auto s = p.snapshots.find(snapshot);
    if (s == p.snapshots.end()) {
      return Status::NotFound("cannot open '" + snapshot + "': dataset does not exist");
    }
    if (p.volumes.count(name)) {
      return Status::Exists("cannot create '" + name + "': dataset already exists");
    }
    DatasetPhys phys = s->second->synced_phys();
    const std::string& r = props["refreservation"];
    const uint64_t refres =
        r == "auto" ? FullReservation(p, phys.volsize, phys.volblocksize) : std::stoull(r);
    const uint64_t slop = std::max<uint64_t>(p.total_size() / 32, 1 << 20);
    if (refres > phys.used && p.FreeWithDeferred() < refres - phys.used +
                                                         p.unused_reservation.load() + slop +
                                                         p.PendingDirty()) {
      return Status::NoSpace("cannot create '" + name + "': out of space");
    }
    phys.id = p.next_id++;
    phys.name = name;
    phys.guid = NewGuid();
    phys.create_txg = p.open_txg;
    phys.props = props;
    // A clone carries on its origin's data, so it keeps the origin's compression unless
    // the clone is given its own (zfs would inherit it from the parent filesystem, which
    // here holds no such property).
    if (!phys.props.count("compression")) {
      if (auto h = p.volumes.find(VolumeOf(snapshot)); h != p.volumes.end()) {
        const std::string c = h->second->Prop("compression", "");
        if (!c.empty()) phys.props["compression"] = c;
      }
    }
    phys.origin = snapshot;
    auto vol = std::make_shared<Volume>(&p, phys);
    vol->refreservation = refres;
    vol->keep_txg = s->second->synced_phys().create_txg;
    p.volumes[name] = vol;
    p.mos_dirty = true;
    p.RecomputeReservations();
  }
  VS_RETURN_IF_ERROR(p.Sync());
  return GetDataset(name);
}

namespace {
constexpr char kHoldPrefix[] = "hold:";

// How many holds (zfs hold's tags) a snapshot's properties carry.
template <typename Props>
size_t HoldCount(const Props& props) {
  return std::count_if(props.begin(), props.end(),
                       [](const auto& kv) { return kv.first.rfind(kHoldPrefix, 0) == 0; });
}

bool HeldLocked(const Volume& snap) { return HoldCount(snap.synced_phys().props) > 0; }
}  // namespace

bool SnapshotHeldLocked(const Volume& snap) { return HeldLocked(snap); }

std::vector<DatasetInfo> Pool::ListSnapshots(const std::string& volume) {
  PoolImpl& p = *impl_;
  std::vector<DatasetInfo> out;
  std::lock_guard s(p.sync_mu);
  std::vector<std::shared_ptr<Volume>> snaps;
  std::map<std::string, std::vector<std::string>> clones;
  {
    std::lock_guard l(p.mu);
    for (const auto& [vn, v] : p.volumes) {
      if (!volume.empty() && vn != volume) continue;
      for (auto& sn : p.SnapshotsOfLocked(vn)) snaps.push_back(sn);
    }
    for (const auto& [vn, v] : p.volumes) {
      const std::string o = v->synced_phys().origin;
      if (!o.empty()) clones[o].push_back(vn);
    }
  }
  uint64_t prev_txg = 0;
  std::string prev_vol;
  for (const auto& sn : snaps) {
    const DatasetPhys ph = sn->synced_phys();
    DatasetInfo d;
    d.name = ph.name;
    d.type = "snapshot";
    d.guid = ph.guid;
    d.create_txg = ph.create_txg;
    d.creation_time = std::strtoull(sn->Prop("creation", "0").c_str(), nullptr, 10);
    d.referenced = ph.used;
    d.logical_referenced = ph.lused;
    d.volsize = ph.volsize;
    d.volblocksize = ph.volblocksize;
    d.clones = clones[ph.name];
    if (VolumeOf(ph.name) != prev_vol) {
      prev_vol = VolumeOf(ph.name);
      std::lock_guard l(p.mu);
      auto h = p.volumes.find(prev_vol);
      prev_txg = h == p.volumes.end() ? 0 : p.OriginTxgLocked(*h->second);
    }
    // A walk that fails (an unreadable block) leaves the column 0 rather than the listing
    // empty; the checker and destroy report the damage.
    if (auto u = p.SnapshotUniqueLocked(ph.name); u.ok()) d.used = *u;
    if (auto w = p.WrittenSinceLocked(ph, prev_txg); w.ok()) d.written = *w;
    prev_txg = ph.create_txg;
    d.props["type"] = "snapshot";
    d.props["written"] = std::to_string(d.written);
    d.props["available"] = "-";
    PutDatasetNumbers(d);
    std::string cl;
    for (const auto& c : d.clones) cl += (cl.empty() ? "" : ",") + c;
    d.props["clones"] = cl;
    d.props["userrefs"] = std::to_string(HoldCount(ph.props));
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::string> Pool::SnapshotNames(const std::string& volume) {
  PoolImpl& p = *impl_;
  std::vector<std::string> out;
  std::lock_guard l(p.mu);
  for (const auto& [vn, v] : p.volumes) {
    if (!volume.empty() && vn != volume) continue;
    for (const auto& sn : p.SnapshotsOfLocked(vn)) out.push_back(sn->synced_phys().name);
  }
  return out;
}

Result<std::map<std::string, std::string>> Pool::StoredProperties(const std::string& dataset) {
  PoolImpl& p = *impl_;
  std::lock_guard l(p.mu);
  auto& map = dataset.find('@') == std::string::npos ? p.volumes : p.snapshots;
  auto it = map.find(dataset);
  if (it == map.end()) {
    return Status::NotFound("cannot open '" + dataset + "': dataset does not exist");
  }
  return it->second->phys().props;
}

Status Pool::Hold(const std::string& snapshot, const std::string& tag) {
  PoolImpl& p = *impl_;
  std::lock_guard admin(p.snap_admin_mu);
  VS_RETURN_IF_ERROR(p.CheckUsable());
  VS_RETURN_IF_ERROR(ValidateSnapshotName(snapshot));
  if (tag.empty() || tag.size() > 255) {
    return Status::InvalidArgument("invalid hold tag '" + tag + "'");
  }
  {
    std::lock_guard l(p.mu);
    auto s = p.snapshots.find(snapshot);
    if (s == p.snapshots.end()) {
      return Status::NotFound("cannot hold snapshot '" + snapshot + "': dataset does not exist");
    }
    auto props = s->second->synced_phys().props;
    if (!props.emplace(kHoldPrefix + tag, std::to_string(NowSeconds())).second) {
      return Status::Exists("cannot hold snapshot '" + snapshot +
                            "': tag already exists on "
                            "this dataset");
    }
    s->second->SetSnapshotProps(std::move(props));
    p.mos_dirty = true;
  }
  return p.Sync();
}

Status Pool::Release(const std::string& snapshot, const std::string& tag) {
  PoolImpl& p = *impl_;
  std::lock_guard admin(p.snap_admin_mu);
  VS_RETURN_IF_ERROR(p.CheckUsable());
  VS_RETURN_IF_ERROR(ValidateSnapshotName(snapshot));
  {
    std::lock_guard l(p.mu);
    auto s = p.snapshots.find(snapshot);
    if (s == p.snapshots.end()) {
      return Status::NotFound("cannot release hold from snapshot '" + snapshot +
                              "': dataset does not exist");
    }
    auto props = s->second->synced_phys().props;
    if (props.erase(kHoldPrefix + tag) == 0) {
      return Status::NotFound("cannot release hold from snapshot '" + snapshot +
                              "': no such tag on this dataset");
    }
    s->second->SetSnapshotProps(std::move(props));
    p.mos_dirty = true;
  }
  return p.Sync();
}

Result<std::map<std::string, uint64_t>> Pool::Holds(const std::string& snapshot) {
  PoolImpl& p = *impl_;
  std::lock_guard l(p.mu);
  auto s = p.snapshots.find(snapshot);
  if (s == p.snapshots.end()) {
    return Status::NotFound("cannot open '" + snapshot + "': dataset does not exist");
  }
  std::map<std::string, uint64_t> out;
  for (const auto& [k, v] : s->second->synced_phys().props) {
    if (k.rfind(kHoldPrefix, 0) == 0) {
      out[k.substr(sizeof(kHoldPrefix) - 1)] = std::strtoull(v.c_str(), nullptr, 10);
    }
  }
  return out;
}

Status Pool::DestroySnapshot(const std::string& name, bool dry_run, uint64_t* freed) {
  return DestroySnapshots({name}, dry_run, freed);
}

namespace {
// Checks a rollback and queues it with the destroys it implies (snap_admin_mu held).
Status QueueRollbackLocked(PoolImpl& p, const std::string& snapshot, bool destroy_later);
}  // namespace

Status Pool::Rollback(const std::string& snapshot, bool destroy_later) {
  PoolImpl& p = *impl_;
  std::lock_guard admin(p.snap_admin_mu);
  VS_RETURN_IF_ERROR(p.CheckUsable());
  VS_RETURN_IF_ERROR(ValidateSnapshotName(snapshot));
  VS_RETURN_IF_ERROR(QueueRollbackLocked(p, snapshot, destroy_later));
  return p.Sync();
}

namespace {
Status QueueRollbackLocked(PoolImpl& p, const std::string& snapshot, bool destroy_later) {
  std::lock_guard l(p.mu);
  auto s = p.snapshots.find(snapshot);
  auto h = p.volumes.find(VolumeOf(snapshot));
  if (s == p.snapshots.end() || h == p.volumes.end()) {
    return Status::NotFound("cannot open '" + snapshot + "': dataset does not exist");
  }
  if (h->second->open_count > 0) {
    return Status::Busy("cannot rollback '" + h->first + "': dataset is busy");
  }
  auto list = p.SnapshotsOfLocked(h->first);
  std::vector<std::string> later;
  bool after = false;
  for (const auto& v : list) {
    const std::string n = v->synced_phys().name;
    if (after) later.push_back(n);
    if (n == snapshot) after = true;
  }
  if (!later.empty() && !destroy_later) {
    std::string msg = "cannot rollback to '" + snapshot +
                      "': more recent snapshots exist\nuse '-r' to force deletion of the "
                      "following snapshots:";
    for (const auto& n : later) msg += "\n" + n;
    return Status::Exists(msg);
  }
  for (const auto& n : later) {
    if (p.snapshots[n]->open_count > 0 || HeldLocked(*p.snapshots[n])) {
      return Status::Busy("cannot destroy snapshot " + n + ": dataset is busy");
    }
    for (const auto& [vn, v] : p.volumes) {
      if (v->synced_phys().origin == n) {
        return Status::Exists("cannot destroy '" + n + "': snapshot has dependent clones (" + vn +
                              ")");
      }
    }
  }
  // Newest first: each destroy's next tree is then the head.
  for (auto it = later.rbegin(); it != later.rend(); ++it) {
    p.pending_snap_ops.push_back({PoolImpl::SnapOp::Kind::kDestroy, *it, 0});
  }
  p.pending_snap_ops.push_back({PoolImpl::SnapOp::Kind::kRollback, snapshot, 0});
  p.mos_dirty = true;
  return Status::Ok();
}
}  // namespace

}  // namespace volstack::pool

// Changing the vdevs of an open pool: scrub control, offline/online/clear (which also
// resumes a suspended pool: commit_undo.cc), and the children of mirrors (attach, replace,
// detach).
//
// Attach and replace add the new device as a RESILVERING child (written by every commit
// from then on, read by nobody), commit a txg (so data written early to the old children
// just before is in the tree the walk reads: scan.cc), and resilver, waiting for the walk
// to end. Only then are the labels rewritten to name the new child (and, for a replace,
// no longer the old one, which is detached). A crash before that leaves the labels as
// they were: the pool imports from its old children and the replace is cleanly not done;
// the new device carries no config and is no member.
//
// Offline and faulted children keep no list of what they missed: when one comes back
// (online, clear) it is marked RESILVERING and a scan rewrites every block on it.
// Offline is recorded in the labels (the child's entry in `children`), written to the
// children still in use, so a restart or import brings the child back OFFLINE.
#include <algorithm>
#include <random>

#include "pool/pool_impl.h"

namespace volstack::pool {

namespace {

uint64_t NewGuid() {
  std::random_device rd;
  uint64_t g = 0;
  while (g == 0) g = (uint64_t{rd()} << 32) | rd();
  return g;
}

struct Found {
  Vdev* vdev = nullptr;
  LeafPtr leaf;
};

Result<Found> FindLeaf(PoolImpl& p, const std::string& device) {
  for (auto& v : p.vdevs) {
    if (auto leaf = v->FindChild(device)) return Found{v.get(), leaf};
  }
  return Status::NotFound("no such device in pool '" + p.name + "': " + device);
}

Status Writable(PoolImpl& p) {
  if (p.read_only) return Status::ReadOnly("pool " + p.name + " is imported read-only");
  return p.CheckUsable();
}

// Marks `leaf` to be filled and starts the scan that fills it (or leaves it to the one
// running, which fills every resilvering child it meets from where it is; a later scan
// finishes the rest, so it stays RESILVERING until a scan that started after it ends).
Status Refill(PoolImpl& p, Leaf& leaf) {
  leaf.resilvering = true;
  Status st = p.StartScan(/*resilver=*/true);
  return st.code() == EBUSY ? Status::Ok() : st;
}

// Rewrites the labels with the children's offline states, at a new txg so that they are
// the newest config an import finds.
Status RecordStates(PoolImpl& p) {
  {
    std::lock_guard l(p.mu);
    p.mos_dirty = true;
  }
  VS_RETURN_IF_ERROR(p.Sync());
  return p.WriteLabels(PoolState::kActive, p.synced_txg.load());
}

}  // namespace

Status Pool::Scrub() { return impl_->StartScan(/*resilver=*/false); }

Status Pool::CancelScrub() {
  std::lock_guard l(impl_->scan_mu);
  if (!impl_->scan_running || impl_->scan.func != "scrub") {
    return Status::NotFound("there is no active scrub");
  }
  impl_->scan_cancel = true;
  impl_->scan_cv.notify_all();
  return Status::Ok();
}

Status Pool::PauseScrub() {
  std::lock_guard l(impl_->scan_mu);
  if (!impl_->scan_running || impl_->scan.func != "scrub") {
    return Status::NotFound("there is no active scrub");
  }
  impl_->scan_pause = true;
  impl_->scan.state = "paused";
  impl_->scan_cv.notify_all();
  return Status::Ok();
}

Status Pool::WaitScan() { return impl_->WaitScan(); }

Status Pool::Offline(const std::string& device) {
  VS_RETURN_IF_ERROR(Writable(*impl_));
  VS_ASSIGN_OR_RETURN(Found f, FindLeaf(*impl_, device));
  if (!f.vdev->CanLose(*f.leaf)) return Status::Busy("no valid replicas");
  f.leaf->state = LeafState::kOffline;
  // Recorded in the other children's labels, so an import (a restart) keeps it offline.
  return RecordStates(*impl_);
}

Status Pool::Online(const std::string& device) {
  VS_RETURN_IF_ERROR(Writable(*impl_));
  VS_ASSIGN_OR_RETURN(Found f, FindLeaf(*impl_, device));
  if (!f.leaf->device) return Status::NotFound("device is missing");
  if (f.leaf->state == LeafState::kOnline) return Status::Ok();
  const bool was_offline = f.leaf->state == LeafState::kOffline;
  f.leaf->state = LeafState::kOnline;
  VS_RETURN_IF_ERROR(Refill(*impl_, *f.leaf));
  return was_offline ? RecordStates(*impl_) : Status::Ok();
}

Status Pool::Clear() {
  // A suspended pool commits its dirty data again first (commit_undo.cc); an error leaves
  // it suspended and the counters as they were.
  if (!impl_->read_only) VS_RETURN_IF_ERROR(impl_->Resume());
  VS_RETURN_IF_ERROR(Writable(*impl_));
  {
    std::lock_guard l(impl_->error_mu);
    impl_->data_errors.clear();
  }
  Status st;
  for (auto& v : impl_->vdevs) {
    for (auto& k : v->children()) {
      k->errors->read = 0;
      k->errors->write = 0;
      k->errors->checksum = 0;
      if (k->device && k->state == LeafState::kFaulted) {
        k->state = LeafState::kOnline;
        if (Status s = Refill(*impl_, *k); !s.ok() && st.ok()) st = s;
      }
    }
  }
  return st;
}

namespace {

// Attach (`old_guid` 0) or replace: adds `dev` beside the existing child, resilvers, then
// names it in the labels (and for a replace detaches the old child).
Status AddChild(Pool& pool, const std::string& existing, bdev::BlockDevicePtr dev,
                const std::string& path, bool replace) {
  PoolImpl& p = *pool.impl();
  VS_RETURN_IF_ERROR(Writable(p));
  if (dev->read_only()) return Status::ReadOnly(dev->name() + " is read-only");
  if (dev->logical_block_size() > (1u << p.ashift)) {
    return Status::InvalidArgument(dev->name() + ": logical block size exceeds the pool's ashift");
  }
  VS_ASSIGN_OR_RETURN(Found f, FindLeaf(p, existing));
  for (auto& v : p.vdevs) {
    for (auto& k : v->children()) {
      if (k->path == path) return Status::InvalidArgument(path + " is already in the pool");
    }
  }
  {
    std::lock_guard l(p.scan_mu);
    if (p.scan_running) {
      return Status::Busy("cannot " + std::string(replace ? "replace" : "attach") + " " + existing +
                          ": a " + p.scan.func + " is running");
    }
  }
  const uint64_t guid = NewGuid();
  // A raidz's replacement takes the old child's column at once (raidz.h: a column has one
  // place), the old child kept beside it as the column's source (vdev_raidz.cc) until its
  // resilver is done; a mirror's sits beside the old child as one more copy.
  const bool in_place = replace && f.vdev->is_raidz();
  {
    // No commit writes while the children change: a commit's writes go to the children it
    // found when it started each one, and this one must see every later write.
    std::lock_guard s(p.sync_mu);
    auto kids = f.vdev->children();
    const size_t index =
        in_place ? static_cast<size_t>(std::find(kids.begin(), kids.end(), f.leaf) - kids.begin())
                 : kids.size();
    VS_RETURN_IF_ERROR(f.vdev->AttachChild(index, dev, guid, path));
  }
  VS_RETURN_IF_ERROR(p.Sync());
  VS_RETURN_IF_ERROR(p.StartScan(/*resilver=*/true));
  VS_RETURN_IF_ERROR(p.WaitScan());
  if (f.vdev->FindChild(std::to_string(guid))->resilvering) {
    return Status::IoError("the resilver of " + path + " did not finish");
  }
  if (replace && !in_place) VS_RETURN_IF_ERROR(f.vdev->DetachChild(f.leaf->guid));
  // The old child is written by every commit until the labels naming the new one are
  // durable: until then an import would take the old child as the column.
  Status labels = p.WriteLabels(PoolState::kActive, p.synced_txg.load());
  if (in_place && labels.ok()) f.vdev->DropReplaced(guid);
  return labels;
}

}  // namespace

Status Pool::Replace(const std::string& old_device, bdev::BlockDevicePtr new_device,
                     const std::string& new_path) {
  return AddChild(*this, old_device, std::move(new_device), new_path, /*replace=*/true);
}

Status Pool::Attach(const std::string& existing, bdev::BlockDevicePtr new_device,
                    const std::string& new_path) {
  return AddChild(*this, existing, std::move(new_device), new_path, /*replace=*/false);
}

Status Pool::Detach(const std::string& device) {
  VS_RETURN_IF_ERROR(Writable(*impl_));
  VS_ASSIGN_OR_RETURN(Found f, FindLeaf(*impl_, device));
  {
    std::lock_guard s(impl_->sync_mu);
    VS_RETURN_IF_ERROR(f.vdev->DetachChild(f.leaf->guid));
  }
  return impl_->WriteLabels(PoolState::kActive, impl_->synced_txg.load());
}

}  // namespace volstack::pool

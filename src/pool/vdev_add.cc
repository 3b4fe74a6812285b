// zpool add: new top-level vdevs for an open pool.
//
// What decides a pool's vdev set on disk: the labels' `vdev_guids` (the newest config by
// txg) and, in every uberblock, the guid sum and vdev count of that set; import uses only
// uberblocks that match the set its newest label names. So the add is ordered:
//
//   1. every device is checked (CheckNewVdevs, and not already this pool's): a bad one is
//      the error, nothing written;
//   2. the sync thread stops and, under sync_mu, the pending changes commit as txg T with
//      the old set;
//   3. the new vdevs join in memory (free space, guid sum) and txg T+1 commits: its
//      uberblock, naming the new set, reaches every vdev, the new ones included, and is
//      flushed;
//   4. the new vdevs' labels are written (even, flush, odd, flush), then those of every
//      vdev with the new set (WriteLabels: even labels, flush, odd labels, flush).
//
// A crash before 4 leaves labels naming the old set: import ignores T+1's uberblocks (their
// guid sum is the new set's) and opens T, as if the add had not been asked (what T+1 held
// besides it was not yet acknowledged by a txg; flushed writes are in the intent log, whose
// chain T names). A crash during 4 leaves labels with the new set only once T+1 is durable
// and every new vdev is labelled, so an import that finds one finds T+1 and every vdev. The new
// vdevs take new writes from T+1 on: the allocator's rotor spreads each txg's blocks over every
// vdev.
//
// The vdevs vector grows only here, under sync_mu with the sync thread, early writer and
// early flusher stopped and no scan running, and within the capacity reserved at open
// (kMaxVdevs), so readers that index it by a DVA's vdev never see it move.
#include "pool/pool_impl.h"

namespace volstack::pool {

Status Pool::Add(std::vector<VdevSpec> specs, bool force) {
  PoolImpl& p = *impl_;
  if (p.read_only) return Status::ReadOnly("pool " + p.name + " is imported read-only");
  VS_RETURN_IF_ERROR(p.CheckUsable());
  if (specs.empty()) return Status::InvalidArgument("no vdevs to add");
  if (p.vdevs.size() + specs.size() > kMaxVdevs) return Status::InvalidArgument("too many vdevs");
  for (const auto& spec : specs) {
    for (size_t i = 0; i < spec.devices.size(); i++) {
      const std::string path = i < spec.paths.size() ? spec.paths[i] : "";
      auto label = Vdev::ReadLabelConfig(*spec.devices[i]);
      if (label.ok() && label->pool_guid == p.pool_guid && label->state != PoolState::kDestroyed) {
        return Status::Busy(spec.devices[i]->name() + " is already in pool '" + p.name + "'");
      }
      for (auto& v : p.vdevs) {
        for (auto& k : v->children()) {
          if ((!path.empty() && k->path == path) || k->path == spec.devices[i]->name()) {
            return Status::Busy(spec.devices[i]->name() + " is already in pool '" + p.name + "'");
          }
        }
      }
    }
  }
  VS_RETURN_IF_ERROR(CheckNewVdevs(specs, p.ashift, force));
  {
    std::lock_guard l(p.scan_mu);
    if (p.scan_running) return Status::Busy("cannot add to " + p.name + ": a scan is running");
  }
  p.StopSyncThread();
  Status st;
  {
    std::lock_guard s(p.sync_mu);
    st = p.SyncLocked();
    const size_t base = p.vdevs.size();
    if (st.ok()) {
      for (auto& spec : specs) {
        const auto id = static_cast<uint32_t>(p.vdevs.size());
        const uint64_t g = NewVdevGuid();
        auto v = MakeVdev(spec, id, g, p.ashift);
        v->set_repair(true);
        RangeSet free{kIndirectBlockSize};
        free.Add(v->alloc_start(), v->alloc_end() - v->alloc_start());
        p.free_bytes += free.total();
        p.free.push_back(std::move(free));
        p.live.emplace_back();
        p.early.emplace_back();
        p.cursor.push_back(kAllocStart);
        p.vdevs.push_back(std::move(v));
        p.vdev_guids.push_back(g);
        p.guid_sum += g;
      }
      p.NoteFreeRunsLocked();
      {
        std::lock_guard m(p.mu);
        p.mos_dirty = true;
      }
      st = p.SyncLocked(/*even_if_clean=*/true);
      // The new vdevs' labels first, so a label of an old vdev never names a vdev that has
      // none (an import given every device then finds each one).
      for (int parity = 0; parity < 2 && st.ok(); parity++) {
        for (size_t i = base; i < p.vdevs.size() && st.ok(); i++) {
          st = p.vdevs[i]->WriteLabelConfigs(
              p.BaseLabelConfig(*p.vdevs[i], PoolState::kActive, p.synced_txg.load()), parity);
        }
        if (st.ok()) st = p.FlushAll();
      }
      if (st.ok()) st = p.WriteLabels(PoolState::kActive, p.synced_txg.load());
    }
  }
  {
    std::lock_guard m(p.mu);
    p.stop_thread = false;
  }
  {
    std::lock_guard e(p.early_mu);
    p.early_stop = false;
  }
  p.StartSyncThread();
  return st;
}

}  // namespace volstack::pool

// zpool add: new top-level vdevs for an open pool.
//
// What decides a pool's vdev set on disk: the labels' `vdev_guids` (the newest config by
// txg) and, in every uberblock, the guid sum and vdev count of that set; import uses only
// uberblocks that match the set its newest label names. So the add is ordered, all under
// sync_mu (no other commit, no other label write):
//
//   1. every device is checked (CheckNewVdevs, and not already this pool's): a bad one is
//      the error, nothing written;
//   2. the pending changes commit as txg T with the old set;
//   3. the new vdevs join in memory (free space, guid sum; published in the vdev table)
//      and txg T+1 commits: its uberblock, naming the new set, reaches every vdev, the new
//      ones included, and is flushed;
//   4. still inside T+1's commit, before T+1 counts as durable: the new vdevs' labels are
//      written (even, flush, odd, flush), then those of every vdev with the new set
//      (WriteLabelsLocked: even labels, flush, odd labels, flush), all at txg T+1.
//
// A crash before 4 leaves labels naming the old set: import ignores T+1's uberblocks (their
// guid sum is the new set's) and opens T, as if the add had not been asked. Nothing T+1
// held was acknowledged: until 4 is done synced_txg is still T, so the intent logs keep
// every record past T and a Flush() logs them (the chain T names; its blocks are freed only
// into T+1's deferred frees, zil.cc invariant 3) rather than count on T+1. A crash during
// 4 leaves labels with the new set only once T+1 is durable and every new vdev is
// labelled, so an import that finds one finds T+1 and every vdev. The new vdevs take new
// writes from T+1 on: the allocator's rotor spreads each txg's blocks over every vdev.
//
// Readers of the vdev table (I/O, status, scans) run on beside the add: the table publishes
// each new vdev whole (vdev_table.h), and the per-vdev allocation state grows under sync_mu,
// which guards it. Only a scan is refused, since it walks the vdev set it started with.
#include "pool/pool_impl.h"

namespace volstack::pool {

Status Pool::Add(std::vector<VdevSpec> specs, bool force) {
  PoolImpl& p = *impl_;
  if (p.read_only) return Status::ReadOnly("pool " + p.name + " is imported read-only");
  VS_RETURN_IF_ERROR(p.CheckUsable());
  if (specs.empty()) return Status::InvalidArgument("no vdevs to add");
  {
    std::lock_guard l(p.scan_mu);
    if (p.scan_running) return Status::Busy("cannot add to " + p.name + ": a scan is running");
  }
  // The checks too under sync_mu, so two adds of one device cannot both pass them.
  std::lock_guard s(p.sync_mu);
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
  VS_RETURN_IF_ERROR(p.SyncLocked());
  const size_t base = p.vdevs.size();
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
    p.guid_sum += g;
  }
  p.NoteFreeRunsLocked();
  {
    std::lock_guard m(p.mu);
    p.mos_dirty = true;
  }
  return p.SyncLocked(/*even_if_clean=*/true, [&](uint64_t txg) -> Status {
    // The new vdevs' labels first, so a label of an old vdev never names a vdev that has
    // none (an import given every device then finds each one).
    for (int parity = 0; parity < 2; parity++) {
      for (size_t i = base; i < p.vdevs.size(); i++) {
        VS_RETURN_IF_ERROR(p.vdevs[i]->WriteLabelConfigs(
            p.BaseLabelConfig(*p.vdevs[i], PoolState::kActive, txg), parity));
      }
      VS_RETURN_IF_ERROR(p.FlushAll());
    }
    return p.WriteLabelsLocked(PoolState::kActive, txg);
  });
}

}  // namespace volstack::pool

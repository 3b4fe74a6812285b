// Pool creation, discovery and import: everything that turns devices into an open pool.
//
// Import reads labels (to learn the vdev set), then every uberblock in every label ring of
// every vdev. Candidates are tried newest first; one is accepted when its checksum verifies,
// its MOS and every space-map block read back with matching checksums, the space-map
// replay is consistent (no double allocation, no free of a free extent, everything inside
// the allocatable range, meta blocks disjoint from it) and every volume's root indirect
// block reads back. Only metadata is read; data blocks are verified when read. The block
// cache is built once a candidate is accepted, sized by the pool's own memory bounds
// (memory_bounds.h), which are known only from its MOS; until then reads go to the vdevs.
//
// Only the newest valid uberblock is taken without asking: an older one discards committed
// txgs, so it needs PoolImportOptions::rewind. Nothing is written (labels, replay) until
// every check has passed, and nothing at all by a read-only import.
//
// Then the intent logs (zil.h): while building the free space of a candidate, each
// volume's log chain is walked from the header in its MOS entry and every valid block is
// claimed (taken out of the free space, so nothing allocated during the replay can
// overwrite it). Once a candidate is accepted, the claimed records newer than its txg are
// replayed into the volumes and committed, which frees the chains.
#include <algorithm>
#include <random>
#include <set>

#include "pool/memory_bounds.h"
#include "pool/pool_impl.h"
#include "util/size.h"

namespace volstack::pool {

namespace {
uint64_t RandomGuid() {
  std::random_device rd;
  uint64_t g = 0;
  while (g == 0) g = (uint64_t{rd()} << 32) | rd();
  return g;
}

// The directory entries must describe volumes the pool could have made: the checksums only
// say the bytes are the ones written, and a tree read with the wrong shape would return
// other blocks' data.
Status CheckDatasets(const MosPhys& mos, const std::string& pool) {
  std::set<std::string> names;
  std::set<uint64_t> ids;
  for (const auto& d : mos.datasets) {
    auto bad = [&](const std::string& why) {
      return Status::Corruption("MOS: dataset '" + d.name + "': " + why);
    };
    // A receive in progress is "pool/vol%recv" (receive.cc), a volume's name and a suffix.
    const bool recv =
        !d.is_snapshot() && d.name.size() > 5 && d.name.compare(d.name.size() - 5, 5, "%recv") == 0;
    const Status name_ok =
        d.is_snapshot() ? ValidateSnapshotName(d.name)
                        : ValidateDatasetName(recv ? d.name.substr(0, d.name.size() - 5) : d.name);
    if (!name_ok.ok() || d.name.substr(0, d.name.find('/')) != pool) return bad("invalid name");
    if (d.is_snapshot() && !d.zil.empty()) return bad("a snapshot with an intent log");
    if (!names.insert(d.name).second || !ids.insert(d.id).second) return bad("listed twice");
    const uint32_t vbs = d.volblocksize;
    if (vbs < 4096 || vbs > 131072 || (vbs & (vbs - 1)) != 0) return bad("bad volblocksize");
    if (d.volsize == 0 || d.volsize % vbs != 0 || d.volsize >= (uint64_t{1} << 63)) {
      return bad("bad volsize");
    }
    if (d.levels != LevelsFor(d.volsize / vbs)) return bad("tree levels do not match volsize");
    if (!d.root.IsHole() && d.root.level != d.levels) return bad("root at the wrong level");
    if (auto r = d.props.find("refreservation");
        r != d.props.end() && r->second != "auto" && !ParseByteCount(r->second)) {
      return bad("bad refreservation");
    }
  }
  // A snapshot's volume and a clone's origin are in the directory (snapshot.cc).
  for (const auto& d : mos.datasets) {
    if (d.is_snapshot() && !names.count(d.name.substr(0, d.name.find('@')))) {
      return Status::Corruption("MOS: snapshot '" + d.name + "' of a missing volume");
    }
    if (!d.origin.empty() && !names.count(d.origin)) {
      return Status::Corruption("MOS: clone '" + d.name + "' of a missing snapshot");
    }
  }
  return Status::Ok();
}

// A new raidz over spec's devices: its sector is the largest child sector, its logical
// space ends where the smallest child's allocatable space does (raidz.h).
std::unique_ptr<Vdev> MakeRaidzVdev(const VdevSpec& spec, uint32_t id, uint64_t guid,
                                    uint32_t ashift) {
  RaidzGeometry g;
  g.children = static_cast<uint32_t>(spec.devices.size());
  g.parity = spec.raidz;
  g.unit = 1u << ashift;
  g.sector = 512;
  uint64_t child_end = UINT64_MAX;
  std::vector<Vdev::ChildSpec> kids;
  for (size_t k = 0; k < spec.devices.size(); k++) {
    g.sector = std::max(g.sector, spec.devices[k]->logical_block_size());
    child_end = std::min(child_end, AllocEnd(spec.devices[k]->size()));
    kids.push_back({spec.devices[k], RandomGuid(), spec.paths[k]});
  }
  return std::make_unique<Vdev>(std::move(kids), id, guid, g.LogicalEnd(child_end), g);
}

void ResetSpace(PoolImpl& p) {
  const size_t n = p.vdevs.size();
  p.free.assign(n, RangeSet{kIndirectBlockSize});
  p.live.assign(n, RangeSet{});
  p.early.assign(n, RangeSet{});
  p.cursor.assign(n, kAllocStart);
  uint64_t total = 0;
  for (auto& v : p.vdevs) {
    p.free[v->id()].Add(v->alloc_start(), v->alloc_end() - v->alloc_start());
    total += v->alloc_end() - v->alloc_start();
  }
  p.free_bytes = total;
  p.NoteFreeRunsLocked();
}
}  // namespace

Status CheckNewVdevs(std::vector<VdevSpec>& specs, uint32_t ashift, bool force) {
  std::vector<bdev::BlockDevicePtr> devices;
  for (auto& spec : specs) {
    if (spec.raidz > 0) {
      if (spec.mirror || spec.raidz > 2) return Status::InvalidArgument("raidz1 or raidz2 only");
      if (spec.devices.size() < spec.raidz + 1 || spec.devices.size() > 16) {
        return Status::InvalidArgument("a raidz" + std::to_string(spec.raidz) + " needs " +
                                       std::to_string(spec.raidz + 1) + " to 16 devices");
      }
      spec.paths.resize(spec.devices.size());
      for (auto& d : spec.devices) devices.push_back(d);
      continue;
    }
    if (spec.devices.empty() || (!spec.mirror && spec.devices.size() != 1)) {
      return Status::InvalidArgument("a vdev is one device");
    }
    if (spec.mirror && (spec.devices.size() < 2 || spec.devices.size() > 16)) {
      return Status::InvalidArgument("a mirror needs 2 to 16 devices");
    }
    spec.paths.resize(spec.devices.size());
    for (auto& d : spec.devices) devices.push_back(d);
  }
  for (size_t i = 0; i < devices.size(); i++) {
    auto& d = devices[i];
    for (size_t j = 0; j < i; j++) {
      if (devices[j] == d) return Status::InvalidArgument(d->name() + " is given twice");
    }
    if (d->read_only()) return Status::ReadOnly(d->name() + " is read-only");
    if (d->size() < kMinVdevSize) {
      return Status::InvalidArgument(d->name() + " is too small: a vdev needs at least 64M");
    }
    if (d->logical_block_size() > (1u << ashift)) {
      return Status::InvalidArgument(d->name() + ": logical block size " +
                                     std::to_string(d->logical_block_size()) + " exceeds ashift " +
                                     std::to_string(ashift));
    }
    if (!force) {
      auto c = Vdev::ReadLabelConfig(*d);
      if (c.ok() && c->state != PoolState::kDestroyed) {
        return Status::Busy(d->name() + " is part of " + PoolStateName(c->state) + " pool '" +
                            c->name + "' (use -f to overwrite)");
      }
    }
  }
  return Status::Ok();
}

std::unique_ptr<Vdev> MakeVdev(const VdevSpec& spec, uint32_t id, uint64_t guid, uint32_t ashift) {
  if (spec.raidz > 0) return MakeRaidzVdev(spec, id, guid, ashift);
  if (spec.mirror) {
    std::vector<Vdev::ChildSpec> kids;
    uint64_t end = UINT64_MAX;
    for (size_t k = 0; k < spec.devices.size(); k++) {
      end = std::min(end, AllocEnd(spec.devices[k]->size()));
      kids.push_back({spec.devices[k], RandomGuid(), spec.paths[k]});
    }
    return std::make_unique<Vdev>(std::move(kids), id, guid, end);
  }
  return std::make_unique<Vdev>(spec.devices[0], id, guid, spec.paths[0]);
}

uint64_t NewVdevGuid() { return RandomGuid(); }

Result<std::shared_ptr<Pool>> Pool::Create(const std::string& name,
                                           std::vector<bdev::BlockDevicePtr> devices,
                                           const PoolCreateOptions& options) {
  std::vector<VdevSpec> specs;
  for (auto& d : devices) specs.push_back(VdevSpec{false, {std::move(d)}, {}});
  return Create(name, std::move(specs), options);
}

Result<std::shared_ptr<Pool>> Pool::Create(const std::string& name, std::vector<VdevSpec> specs,
                                           const PoolCreateOptions& options) {
  VS_RETURN_IF_ERROR(ValidatePoolName(name));
  if (options.ashift < 9 || options.ashift > 16) {
    return Status::InvalidArgument("invalid ashift " + std::to_string(options.ashift) +
                                   ": expected 9..16");
  }
  if (specs.empty()) return Status::InvalidArgument("a pool needs at least one vdev");
  if (specs.size() > kMaxVdevs) return Status::InvalidArgument("too many vdevs");
  VS_RETURN_IF_ERROR(CheckNewVdevs(specs, options.ashift, options.force));
  std::map<std::string, std::string> props;
  for (const auto& [k, v] : options.props) {
    VS_ASSIGN_OR_RETURN(props[k], StoredPoolProperty(k, v));
  }
  auto impl = std::make_unique<PoolImpl>();
  impl->name = name;
  impl->pool_guid = RandomGuid();
  impl->ashift = options.ashift;
  impl->tuning = options.tuning;
  ApplyMemoryBounds(props, impl->tuning);
  impl->InitBlockCache();
  impl->props = std::move(props);
  impl->props["creation"] = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count());
  for (size_t i = 0; i < specs.size(); i++) {
    const uint64_t g = RandomGuid();
    auto& spec = specs[i];
    const auto id = static_cast<uint32_t>(i);
    impl->vdevs.push_back(MakeVdev(spec, id, g, impl->ashift));
    impl->guid_sum += g;
  }
  for (auto& v : impl->vdevs) v->set_repair(true);
  ResetSpace(*impl);
  impl->open_txg = 1;
  impl->mos_dirty = true;
  VS_RETURN_IF_ERROR(impl->WriteLabels(PoolState::kActive, 1));
  VS_RETURN_IF_ERROR(impl->Sync());
  impl->create_time = std::strtoull(impl->props["creation"].c_str(), nullptr, 10);
  impl->StartSyncThread();
  return std::make_shared<Pool>(std::move(impl));
}

Status PoolImpl::LoadFrom(const Uberblock& ub) {
  ResetSpace(*this);
  zil->ResetClaims();
  auto read_meta = [&](const BlockPtr& bp, BlockType type) -> Result<std::vector<uint8_t>> {
    if (bp.type != type || bp.lsize > kMaxMetaBlock) {
      return Status::Corruption("unexpected block pointer " + bp.ToString());
    }
    std::vector<uint8_t> buf(bp.lsize);
    VS_RETURN_IF_ERROR(ReadBlock(bp, buf.data()));
    return buf;
  };
  VS_ASSIGN_OR_RETURN(auto mos_buf, read_meta(ub.rootbp, BlockType::kMos));
  VS_ASSIGN_OR_RETURN(MosPhys mos, DecodeMos(mos_buf));
  if (mos.txg != ub.txg) return Status::Corruption("MOS txg does not match the uberblock");
  for (const auto& bp : mos.space_map) {
    VS_ASSIGN_OR_RETURN(auto buf, read_meta(bp, BlockType::kSpaceMap));
    VS_ASSIGN_OR_RETURN(auto entries, DecodeSpaceMapBlock(buf));
    for (const auto& e : entries) {
      if (e.vdev >= vdevs.size() || e.offset < kAllocStart ||
          e.offset + e.length > vdevs[e.vdev]->alloc_end() || e.offset + e.length < e.offset) {
        return Status::Corruption("space map record out of range");
      }
      const bool ok =
          e.free ? live[e.vdev].Remove(e.offset, e.length) : live[e.vdev].Add(e.offset, e.length);
      if (!ok) {
        return Status::Corruption(
            std::string("space map: ") + (e.free ? "free of unallocated" : "double allocation") +
            " at vdev " + std::to_string(e.vdev) + " offset " + std::to_string(e.offset));
      }
    }
  }
  uint64_t total_free = 0;
  for (auto& v : vdevs) {
    for (auto [s, e] : live[v->id()].ranges()) {
      if (!free[v->id()].Remove(s, e - s)) {
        // A vdev cut shorter since (a truncated file) lost the blocks past its new end.
        return Status::Corruption("space map: allocated space at vdev " + std::to_string(v->id()) +
                                  " offset " + std::to_string(s) +
                                  " lies outside the vdev (was it truncated?)");
      }
    }
  }
  std::vector<BlockPtr> meta = mos.space_map;
  meta.push_back(ub.rootbp);
  for (const auto& list : mos.deferred)
    meta.insert(meta.end(), list.blocks.begin(), list.blocks.end());
  for (const auto& bp : meta) {
    const Dva& d = bp.dva[0];
    if (!free[d.vdev].Remove(d.offset, d.asize())) {
      return Status::Corruption("metadata block overlaps allocated space: " + bp.ToString());
    }
  }
  VS_RETURN_IF_ERROR(CheckDatasets(mos, name));
  for (const auto& d : mos.datasets) VS_RETURN_IF_ERROR(zil->Claim(d, free));
  VS_RETURN_IF_ERROR(LoadDeferred(mos, meta));  // after the claims (defer_map.h)
  for (auto& f : free) total_free += f.total();
  free_bytes = total_free;
  NoteFreeRunsLocked();
  for (const auto& d : mos.datasets) {
    if (!d.root.IsHole()) {
      std::vector<uint8_t> buf(kIndirectBlockSize);
      if (d.root.lsize != kIndirectBlockSize) return Status::Corruption("bad root of " + d.name);
      VS_RETURN_IF_ERROR(ReadBlock(d.root, buf.data()).WithContext(d.name));
    }
  }
  sm_bps = mos.space_map;
  mos_bp = ub.rootbp;
  props = mos.props;
  next_id = mos.next_id;
  compressed_blocks = mos.compressed;
  volumes.clear();
  snapshots.clear();
  for (const auto& d : mos.datasets) {
    auto vol = std::make_shared<Volume>(this, d);
    if (d.is_snapshot()) {
      snapshots[d.name] = vol;
      continue;
    }
    auto it = d.props.find("refreservation");
    const std::string r = it == d.props.end() ? "0" : it->second;
    vol->refreservation =
        r == "auto" ? FullReservation(*this, d.volsize, d.volblocksize) : std::stoull(r);
    volumes[d.name] = vol;
  }
  for (auto& [n, v] : volumes) v->keep_txg = KeepTxgLocked(*v);
  create_time = std::strtoull(props["creation"].c_str(), nullptr, 10);
  synced_txg = ub.txg;
  RecomputeReservations();
  return Status::Ok();
}

Result<std::shared_ptr<Pool>> Pool::Import(std::vector<bdev::BlockDevicePtr> devices,
                                           const PoolImportOptions& options) {
  if (devices.empty()) return Status::InvalidArgument("no devices to import from");
  std::vector<LabelConfig> configs;
  for (auto& d : devices) {
    auto c = Vdev::ReadLabelConfig(*d);
    if (!c.ok()) {
      return Status::InvalidArgument(d->name() + " is not a pool vdev: " + c.status().message());
    }
    if (d->size() < c->vdev_size) {
      return Status::Corruption(d->name() + " is smaller than when pool '" + c->name +
                                "' was written (" + std::to_string(d->size()) + " < " +
                                std::to_string(c->vdev_size) + " bytes): was it truncated?");
    }
    configs.push_back(*c);
  }
  const LabelConfig* newest = &configs[0];
  for (auto& c : configs) {
    if (options.expected_guid != 0 && c.pool_guid != options.expected_guid) {
      return Status::NotFound(devices[&c - &configs[0]]->name() + " now holds another pool ('" +
                              c.name + "'), not this one");
    }
    if (c.pool_guid != configs[0].pool_guid) {
      return Status::InvalidArgument(devices[&c - &configs[0]]->name() +
                                     " belongs to another pool ('" + c.name + "')");
    }
    if (c.txg > newest->txg) newest = &c;
  }
  if (newest->state == PoolState::kDestroyed) {
    return Status::NotFound("pool '" + newest->name + "' was destroyed");
  }
  if (newest->state == PoolState::kActive && !options.allow_active) {
    return Status::Busy("pool '" + newest->name +
                        "' is marked active (in use or not exported); use -f to import");
  }
  const size_t n = newest->vdev_guids.size();
  if (n > kMaxVdevs) {
    return Status::Corruption("pool '" + newest->name + "': its label names " + std::to_string(n) +
                              " vdevs, more than " + std::to_string(kMaxVdevs));
  }
  // Each top-level vdev's devices, and its newest config (a mirror's children list).
  std::vector<std::vector<size_t>> by_id(n);
  std::vector<const LabelConfig*> vdev_config(n, nullptr);
  for (size_t i = 0; i < devices.size(); i++) {
    const auto& c = configs[i];
    if (c.vdev_id >= n || newest->vdev_guids[c.vdev_id] != c.vdev_guid) {
      return Status::InvalidArgument(devices[i]->name() + " is not a vdev of pool '" +
                                     newest->name + "'");
    }
    by_id[c.vdev_id].push_back(i);
    if (!vdev_config[c.vdev_id] || c.txg > vdev_config[c.vdev_id]->txg) vdev_config[c.vdev_id] = &c;
  }
  auto impl = std::make_unique<PoolImpl>();
  impl->name = newest->name;
  impl->pool_guid = newest->pool_guid;
  impl->ashift = newest->ashift;
  impl->tuning = options.tuning;
  std::vector<std::string> missing;
  for (size_t id = 0; id < n; id++) {
    const auto vid = static_cast<uint32_t>(id);
    const LabelConfig* vc = vdev_config[id];
    if (vc == nullptr) {
      missing.push_back("vdev " + std::to_string(id) + " is missing");
      continue;
    }
    if (!vc->has_children()) {
      if (by_id[id].size() > 1) {
        return Status::InvalidArgument(devices[by_id[id][1]]->name() + ": vdev " +
                                       std::to_string(id) + " given twice");
      }
      impl->vdevs.push_back(
          std::make_unique<Vdev>(devices[by_id[id][0]], vid, newest->vdev_guids[id]));
      continue;
    }
    // A mirror: each child of the newest children list, found by its leaf guid.
    std::vector<Vdev::ChildSpec> kids;
    size_t present = 0;
    for (const auto& child : vc->children) {
      kids.push_back({nullptr, child.guid, child.path, child.offline});
    }
    for (size_t i : by_id[id]) {
      const auto& c = configs[i];
      auto it = std::find_if(kids.begin(), kids.end(),
                             [&](const Vdev::ChildSpec& k) { return k.guid == c.leaf_guid; });
      // Detached or replaced since (its own label is older): its copy is stale, as when a
      // crash cut a replace short after the new labels were written. Left out.
      if (it == kids.end()) continue;
      if (it->device) {
        return Status::InvalidArgument(devices[i]->name() + ": a child of vdev " +
                                       std::to_string(id) + " given twice");
      }
      it->device = devices[i];
      present++;
    }
    const size_t need = vc->is_raidz() ? kids.size() - vc->nparity : 1;
    const std::string vname =
        (vc->is_raidz() ? "raidz" + std::to_string(vc->nparity) : std::string("mirror")) + "-" +
        std::to_string(id);
    if (present < need) {
      std::string names;
      for (const auto& k : kids) {
        if (!k.device) names += (names.empty() ? "" : ", ") + k.path;
      }
      missing.push_back(vname + (present == 0 ? " has none of its devices" : " lacks devices") +
                        " (missing " + names + "): more are missing than its redundancy allows");
      continue;
    }
    if (vc->is_raidz()) {
      RaidzGeometry g;
      g.children = static_cast<uint32_t>(kids.size());
      g.parity = vc->nparity;
      g.sector = vc->sector;
      g.unit = 1u << newest->ashift;
      impl->vdevs.push_back(
          std::make_unique<Vdev>(std::move(kids), vid, newest->vdev_guids[id], vc->alloc_end, g));
      continue;
    }
    impl->vdevs.push_back(
        std::make_unique<Vdev>(std::move(kids), vid, newest->vdev_guids[id], vc->alloc_end));
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : "; ") + m;
    return Status::NotFound("pool '" + newest->name + "': " + list);
  }
  for (size_t i = 0; i < n; i++) impl->guid_sum += newest->vdev_guids[i];
  std::vector<Uberblock> ubs;
  uint64_t max_txg = 0;
  for (auto& v : impl->vdevs) {
    for (auto& ub : v->ReadUberblocks()) {
      if (ub.pool_guid != impl->pool_guid || ub.guid_sum != impl->guid_sum || ub.vdev_count != n) {
        continue;
      }
      max_txg = std::max(max_txg, ub.txg);
      ubs.push_back(ub);
    }
  }
  std::sort(ubs.begin(), ubs.end(),
            [](const Uberblock& a, const Uberblock& b) { return a.txg > b.txg; });
  Status last = Status::Corruption("no valid uberblock");
  Status newest_error;
  const Uberblock* loaded = nullptr;
  const Uberblock* newest_ub = nullptr;
  std::vector<Uberblock> tried;
  for (const auto& ub : ubs) {
    if (options.max_txg != 0 && ub.txg > options.max_txg) continue;
    if (newest_ub == nullptr) newest_ub = &ub;
    if (std::find(tried.begin(), tried.end(), ub) != tried.end()) continue;
    tried.push_back(ub);
    Status st = impl->LoadFrom(ub);
    if (st.ok()) {
      loaded = &ub;
      break;
    }
    last = st.WithContext("txg " + std::to_string(ub.txg));
    if (newest_error.ok()) newest_error = last;
  }
  if (loaded == nullptr) {
    return Status::Corruption("pool '" + impl->name + "' cannot be imported: " + last.message());
  }
  // A valid uberblock is written only after its tree is flushed (txg_sync.cc), so one whose
  // tree cannot be read was damaged since: falling back to an older one would silently
  // discard committed txgs. That takes the user's word (zpool import -F), as in OpenZFS.
  ImportReport& report = impl->import_report;
  report.newest_txg = newest_ub->txg;
  report.imported_txg = loaded->txg;
  report.imported_time = loaded->timestamp;
  report.lost_seconds =
      newest_ub->timestamp > loaded->timestamp ? newest_ub->timestamp - loaded->timestamp : 0;
  report.newest_error = newest_error.ok() ? "" : newest_error.message();
  if (report.rewound() && !options.rewind) {
    return Status::Corruption(
        "pool '" + impl->name + "': its newest txg cannot be read (" + report.newest_error +
        "); importing would discard " + std::to_string(report.newest_txg - report.imported_txg) +
        " committed txg(s) (" + report.LostTxgs() + ", about " +
        std::to_string(report.lost_seconds) +
        " seconds of changes); recovery by rewinding to txg " +
        std::to_string(report.imported_txg) +
        " is possible with 'zpool import -F' ('-F -n' checks it without importing)");
  }
  // The cache is sized for the pool's own bound, known once the MOS is read; until then
  // every read went to the vdevs.
  ApplyMemoryBounds(impl->props, impl->tuning);
  impl->InitBlockCache();
  // Importing without the rest of a log would drop flushed writes for good (the replay's
  // commit frees the chain): refuse, having written nothing, so a retry can read it, unless
  // the user accepts the loss (zpool import -F), which the report then lists.
  if (const Status& st = impl->zil->claim_error(); !st.ok()) {
    if (!options.rewind) {
      return Status::FromErrno(st.code(), "pool '" + impl->name +
                                              "' not imported: " + st.message() +
                                              "; 'zpool import -F' imports it without them "
                                              "('-F -n' checks first)");
    }
    report.log_losses = impl->zil->claim_losses();
  }
  impl->open_txg = max_txg + 1;
  impl->RebaseDeferred(max_txg);
  if (!options.read_only) {
    // Reads heal from here on; the checks above wrote nothing.
    for (auto& v : impl->vdevs) v->set_repair(true);
  }
  if (options.read_only) {
    // Looking only: the pool reads as of its last txg; a writable import replays the log.
    impl->read_only = true;
    return std::make_shared<Pool>(std::move(impl));
  }
  // The last check before the first write: records a replay could not apply.
  if (Status st = impl->zil->CheckReplay(); !st.ok()) {
    return st.WithContext("pool '" + impl->name + "' not imported");
  }
  if (newest->state != PoolState::kActive) {
    VS_RETURN_IF_ERROR(impl->WriteLabels(PoolState::kActive, impl->synced_txg));
  }
  if (Status st = impl->zil->Replay(impl->synced_txg); !st.ok()) {
    return st.WithContext("pool '" + impl->name + "': intent log replay");
  }
  if (report.rewound()) {
    // A txg past the damaged ones, so the next import starts from the rewound state
    // instead of finding them newest again.
    {
      std::lock_guard l(impl->mu);
      impl->mos_dirty = true;
    }
    VS_RETURN_IF_ERROR(impl->Sync());
  }
  impl->StartSyncThread();
  // A scrub the pool was closed in the middle of starts again (scan.cc).
  if (impl->props.count(kScrubbingProp)) impl->StartScan(/*resilver=*/false).IgnoreError();
  return std::make_shared<Pool>(std::move(impl));
}

std::vector<DiscoveredPool> DiscoverPools(
    const std::vector<std::pair<std::string, bdev::BlockDevicePtr>>& devices) {
  std::map<uint64_t, DiscoveredPool> pools;
  std::map<uint64_t, uint64_t> newest;
  std::map<uint64_t, std::set<uint64_t>> seen;
  for (const auto& [path, dev] : devices) {
    auto c = Vdev::ReadLabelConfig(*dev);
    if (!c.ok()) continue;
    auto& p = pools[c->pool_guid];
    if (p.vdevs.empty() || c->txg >= newest[c->pool_guid]) {
      newest[c->pool_guid] = c->txg;
      p.name = c->name;
      p.guid = c->pool_guid;
      p.state = PoolStateName(c->state);
      p.txg = c->txg;
      p.vdev_count = c->vdev_guids.size();
    }
    // A mirror's children share its vdev id: each is listed once (by its leaf guid).
    const uint64_t leaf = c->has_children() ? c->leaf_guid : c->vdev_guid;
    if (seen[c->pool_guid].insert(leaf).second) p.vdevs.emplace_back(c->vdev_id, path);
  }
  std::vector<DiscoveredPool> out;
  for (auto& [g, p] : pools) {
    std::sort(p.vdevs.begin(), p.vdevs.end());
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(),
            [](const DiscoveredPool& a, const DiscoveredPool& b) { return a.name < b.name; });
  return out;
}

}  // namespace volstack::pool

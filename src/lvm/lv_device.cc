#include "lvm/lv_device.h"

#include <algorithm>
#include <bit>
#include <map>
#include <optional>
#include <set>

#include "lvm/activations.h"
#include "lvm/mirror_gate.h"

namespace volstack::lvm {

Result<std::shared_ptr<LvDevice>> CreateLvDevice(const VolumeGroup& vg, const LogicalVolume& lv,
                                                 const std::vector<bdev::BlockDevicePtr>& pv_devs,
                                                 const LvActivation& activation, int depth);

namespace {

bool HasTag(const std::vector<std::string>& tags, std::string_view t) {
  return std::find(tags.begin(), tags.end(), t) != tags.end();
}

// Builds the map entries of one LV from metadata.
struct Builder {
  const VolumeGroup& vg;
  const std::vector<bdev::BlockDevicePtr>& pv_devs;
  const LvActivation& act;
  int depth = 0;
  std::set<bdev::BlockDevice*> seen;
  std::vector<bdev::BlockDevicePtr> lower;

  void Note(const bdev::BlockDevicePtr& d) {
    if (d && seen.insert(d.get()).second) lower.push_back(d);
  }

  Result<LvDevice::Target> MakeTarget(const LogicalVolume& lv, const SegmentArea& a,
                                      uint64_t area_bytes) {
    const uint64_t ext = vg.extent_bytes();
    LvDevice::Target t;
    if (a.is_pv()) {
      if (a.pv >= static_cast<int>(vg.pvs.size())) {
        return Status::Corruption("LV " + lv.name + ": unknown PV index");
      }
      const PhysicalVolume& pv = vg.pvs[a.pv];
      t.dev = a.pv < static_cast<int>(pv_devs.size()) ? pv_devs[a.pv] : nullptr;
      t.offset = pv.pe_start * kSector + uint64_t{a.start} * ext;
      if (!t.dev && !act.partial) {
        return Status::NotFound("LV " + vg.name + "/" + lv.name + " uses missing PV " + pv.device +
                                "; refusing to activate (use partial activation)");
      }
      if (t.dev && t.offset + area_bytes > t.dev->size()) {
        return Status::Corruption("LV " + vg.name + "/" + lv.name + ": extents beyond the end of " +
                                  t.dev->name());
      }
    } else {
      const LogicalVolume* sub = vg.FindLv(a.lv);
      if (!sub) return Status::Corruption("LV " + lv.name + ": unknown LV " + a.lv);
      VS_ASSIGN_OR_RETURN(auto sub_dev, CreateLvDevice(vg, *sub, pv_devs, act, depth));
      t.dev = sub_dev;
      t.offset = uint64_t{a.start} * ext;
    }
    Note(t.dev);
    return t;
  }

  Result<std::vector<LvDevice::MapEntry>> Build(const LogicalVolume& lv) {
    if (++depth > 4) return Status::Corruption("LV " + lv.name + ": areas nest too deeply");
    const uint64_t ext = vg.extent_bytes();
    const bool pvmove = lv.HasStatus("PVMOVE");
    const bool atomic = HasTag(lv.tags, kAtomicMoveTag);
    bool running_taken = false;
    std::vector<LvDevice::MapEntry> map;
    for (const Segment& seg : lv.segments) {
      LvDevice::MapEntry e;
      e.start = uint64_t{seg.start_extent} * ext;
      e.length = uint64_t{seg.extent_count} * ext;
      e.chunk = seg.is_striped() && seg.areas.size() > 1 ? uint64_t{seg.stripe_size} * kSector : 0;
      const uint64_t area_bytes = uint64_t{seg.area_len()} * ext;
      std::vector<SegmentArea> areas = seg.areas;
      if (seg.is_mirror()) {
        e.mirror = true;
        if (pvmove && !atomic && seg.extents_moved >= seg.extent_count) {
          areas = {seg.areas.back()};  // complete: the destination only
          e.mirror = false;
        } else if (pvmove && !atomic && running_taken) {
          areas = {seg.areas.front()};  // pending: the source only
          e.mirror = false;
        }
        if (pvmove && e.mirror) running_taken = true;
      }
      for (const SegmentArea& a : areas) {
        VS_ASSIGN_OR_RETURN(auto t, MakeTarget(lv, a, area_bytes));
        e.areas.push_back(std::move(t));
      }
      if (e.mirror && areas.back().is_pv()) {
        e.gate_pv = vg.pvs[areas.back().pv].id;
        e.gate_offset =
            vg.pvs[areas.back().pv].pe_start * kSector + uint64_t{areas.back().start} * ext;
      }
      map.push_back(std::move(e));
    }
    return map;
  }
};

bdev::Geometry GeometryOf(const VolumeGroup& vg, const LogicalVolume& lv,
                          const std::vector<bdev::BlockDevicePtr>& lower,
                          const LvActivation& activation) {
  bdev::Geometry g;
  g.size_bytes = uint64_t{lv.le_count()} * vg.extent_bytes();
  g.logical_block_size = 512;
  g.physical_block_size = 512;
  g.optimal_io_size = 0;
  g.read_only = activation.read_only;
  g.caps = {true, true, true, false};
  bool any_alloc = false;
  for (const auto& d : lower) {
    const bdev::Geometry dg = d->geometry();
    g.logical_block_size = std::max(g.logical_block_size, dg.logical_block_size);
    g.physical_block_size = std::max(g.physical_block_size, dg.physical_block_size);
    g.optimal_io_size = std::max(g.optimal_io_size, dg.optimal_io_size);
    g.read_only |= dg.read_only;
    g.caps.fua &= dg.caps.fua;
    g.caps.discard &= dg.caps.discard;
    g.caps.write_zeroes &= dg.caps.write_zeroes;
    any_alloc |= dg.caps.allocation_query;
  }
  g.caps.allocation_query = any_alloc;
  return g;
}

Status CheckChunks(const VolumeGroup& vg, const LogicalVolume& lv,
                   const std::vector<LvDevice::MapEntry>& map, uint32_t lbs,
                   uint64_t* stripe_width) {
  for (const auto& e : map) {
    if (!e.chunk) continue;
    if (e.chunk % lbs != 0) {
      return Status::InvalidArgument("LV " + vg.name + "/" + lv.name + ": stripe size " +
                                     std::to_string(e.chunk) +
                                     " is not a multiple of the PVs' logical block size");
    }
    *stripe_width = std::max<uint64_t>(*stripe_width, e.chunk * e.areas.size());
  }
  return Status::Ok();
}

Activations& ActivationsOf(Activations* activations) {
  return activations ? *activations : *Activations::Default();
}

}  // namespace

Result<std::shared_ptr<LvDevice>> CreateLvDevice(const VolumeGroup& vg, const LogicalVolume& lv,
                                                 const std::vector<bdev::BlockDevicePtr>& pv_devs,
                                                 const LvActivation& activation, int depth) {
  Builder b{vg, pv_devs, activation, depth, {}, {}};
  b.depth = depth;
  VS_ASSIGN_OR_RETURN(auto map, b.Build(lv));
  bdev::Geometry g = GeometryOf(vg, lv, b.lower, activation);
  uint64_t stripe_width = 0;
  VS_RETURN_IF_ERROR(CheckChunks(vg, lv, map, g.logical_block_size, &stripe_width));
  if (stripe_width)
    g.optimal_io_size = static_cast<uint32_t>(std::min<uint64_t>(stripe_width, UINT32_MAX));
  auto dev =
      std::make_shared<LvDevice>(vg.name + "/" + lv.name, g, std::move(map), std::move(b.lower));
  dev->vg_id_ = vg.id;
  dev->lv_id_ = lv.id;
  dev->activation_ = activation;
  return dev;
}

Result<std::shared_ptr<LvDevice>> LvDevice::Create(const VolumeGroup& vg,
                                                   const std::string& lv_name,
                                                   const std::vector<bdev::BlockDevicePtr>& pv_devs,
                                                   const LvActivation& activation) {
  const LogicalVolume* lv = vg.FindLv(lv_name);
  if (!lv) return Status::NotFound("no LV " + vg.name + "/" + lv_name);
  LvActivation act = activation;
  if (!act.activations) act.activations = Activations::Default();
  VS_ASSIGN_OR_RETURN(auto dev, CreateLvDevice(vg, *lv, pv_devs, act, 0));
  act.activations->AddLive(vg.id + lv->id, dev);
  return dev;
}

MirrorGate& LvDevice::Gate() const {
  return activation_.activations ? activation_.activations->gate() : MirrorGate::Global();
}

LvDevice::LvDevice(std::string name, const bdev::Geometry& geometry, std::vector<MapEntry> map,
                   std::vector<bdev::BlockDevicePtr> lower)
    : BlockDevice(std::move(name), geometry) {
  auto m = std::make_unique<Map>();
  m->entries = std::move(map);
  m->lower = std::move(lower);
  m->size = geometry.size_bytes;
  m->BuildFast();
  map_.store(m.get());
  maps_.push_back(std::move(m));
}

LvDevice::~LvDevice() = default;

namespace {
bool PowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }
uint32_t Log2(uint64_t v) { return static_cast<uint32_t>(std::countr_zero(v)); }
}  // namespace

void LvDevice::Map::BuildFast() {
  std::vector<FastEntry> all;
  for (const MapEntry& e : entries) {
    const size_t n = e.areas.size();
    if (e.mirror || n == 0 || n > kFastAreas || !PowerOfTwo(n)) return;
    if (n > 1 && !PowerOfTwo(e.chunk)) return;
    FastEntry f;
    f.start = e.start;
    f.end = e.start + e.length;
    if (n > 1) {
      f.chunk_mask = e.chunk - 1;
      f.chunk_shift = Log2(e.chunk);
      f.areas_shift = Log2(n);
    }
    for (size_t i = 0; i < n; i++) f.areas[i] = {e.areas[i].dev.get(), e.areas[i].offset};
    all.push_back(f);
  }
  if (all.empty()) return;
  n_fast = static_cast<uint32_t>(all.size());
  if (all.size() == 1) {
    first = all[0];
    fast = &first;
  } else {
    more = std::move(all);
    fast = more.data();
  }
}

// Holds a map for the duration of one request (see the theory in the header).
class LvDevice::Pin {
 public:
  explicit Pin(const std::atomic<const Map*>& current) {
    for (;;) {
      map_ = current.load();
      // The fast entry of a one-segment map is the line after the counter: ask for both at
      // once rather than one after the other.
      __builtin_prefetch(&map_->first);
      map_->inflight.fetch_add(1);
      if (current.load() == map_) return;
      Release();
    }
  }
  ~Pin() { Release(); }
  const Map& map() const { return *map_; }

 private:
  void Release() {
    // seq_cst on both sides (Dekker): either Remap sees inflight at 0, or this sees draining.
    if (map_->inflight.fetch_sub(1) == 1 && map_->draining.load()) [[unlikely]]
      map_->inflight.notify_all();
  }
  const Map* map_;
};

std::vector<LvDevice::MapEntry> LvDevice::map() const {
  Pin pin(map_);
  return pin.map().entries;
}

Status LvDevice::Remap(const VolumeGroup& vg, const std::vector<bdev::BlockDevicePtr>& pv_devs) {
  std::lock_guard lock(remap_mu_);
  const LogicalVolume* lv = nullptr;
  for (const auto& l : vg.lvs) {
    if (l.id == lv_id_) lv = &l;
  }
  if (vg.id != vg_id_ || !lv) return Status::NotFound(name() + ": LV is not in the new metadata");
  Builder b{vg, pv_devs, activation_, 0, {}, {}};
  VS_ASSIGN_OR_RETURN(auto entries, b.Build(*lv));
  const bdev::Geometry now = geometry();
  const bdev::Geometry g = GeometryOf(vg, *lv, b.lower, activation_);
  if (g.logical_block_size > now.logical_block_size) {
    return Status::InvalidArgument(
        name() + ": the new PVs need " + std::to_string(g.logical_block_size) +
        "-byte blocks; the active LV has " + std::to_string(now.logical_block_size));
  }
  uint64_t stripe_width = 0;
  VS_RETURN_IF_ERROR(CheckChunks(vg, *lv, entries, now.logical_block_size, &stripe_width));
  auto m = std::make_unique<Map>();
  m->entries = std::move(entries);
  m->lower = std::move(b.lower);
  m->size = g.size_bytes;
  m->BuildFast();
  const Map* old = map_.load();
  // A request checks its range against size() before it pins a map: shrink the size before
  // publishing the smaller map, grow it after publishing the larger one.
  if (m->size < old->size) SetSize(m->size);
  map_.store(m.get());
  if (m->size >= old->size) SetSize(m->size);
  maps_.push_back(std::move(m));
  generation_++;
  old->draining.store(true);
  for (int64_t v = old->inflight.load(); v != 0; v = old->inflight.load()) old->inflight.wait(v);
  return Status::Ok();
}

template <typename Fn>
Status LvDevice::ForEachPiece(const Map& map, uint64_t offset, uint64_t length, bool all_legs,
                              Fn&& fn) {
  if (offset + length > map.size) {
    return Status::FromErrno(ENOSPC, name() + ": request beyond the end (the LV was reduced)");
  }
  const auto& entries = map.entries;
  auto it = std::upper_bound(entries.begin(), entries.end(), offset,
                             [](uint64_t off, const MapEntry& e) { return off < e.start; });
  VS_CHECK(it != entries.begin());
  --it;
  uint64_t done = 0;
  while (done < length) {
    VS_CHECK(it != entries.end());
    const MapEntry& e = *it;
    const uint64_t pos = offset + done;
    const uint64_t r = pos - e.start;
    uint64_t piece = std::min(length - done, e.length - r);
    if (e.chunk == 0) {
      if (e.mirror && all_legs) {
        std::optional<MirrorWriteGuard> guard;
        if (!e.gate_pv.empty()) guard.emplace(Gate(), e.gate_pv, e.gate_offset + r, piece);
        for (const Target& t : e.areas) VS_RETURN_IF_ERROR(fn(t, t.offset + r, done, piece));
      } else {
        const Target& t = e.areas[0];
        VS_RETURN_IF_ERROR(fn(t, t.offset + r, done, piece));
      }
    } else {
      const uint64_t k = r / e.chunk;
      const uint64_t in_chunk = r % e.chunk;
      piece = std::min(piece, e.chunk - in_chunk);
      const Target& t = e.areas[k % e.areas.size()];
      VS_RETURN_IF_ERROR(fn(t, t.offset + (k / e.areas.size()) * e.chunk + in_chunk, done, piece));
    }
    done += piece;
    if (pos + piece == e.start + e.length) ++it;
  }
  return Status::Ok();
}

namespace {
Status Missing(const std::string& name) {
  return Status::IoError(name + ": I/O to an extent on a missing PV");
}
}  // namespace

template <typename Fn>
Status LvDevice::ForEachFastPiece(const Map& map, uint64_t offset, uint64_t length, Fn&& fn) {
  if (offset + length > map.size) [[unlikely]] {
    return Status::FromErrno(ENOSPC, name() + ": request beyond the end (the LV was reduced)");
  }
  const FastEntry* e = map.fast;
  if (map.n_fast > 1) {
    e = std::upper_bound(e, e + map.n_fast, offset,
                         [](uint64_t off, const FastEntry& f) { return off < f.start; }) -
        1;
  }
  uint64_t done = 0;
  for (;;) {
    const uint64_t pos = offset + done;
    const uint64_t r = pos - e->start;
    uint64_t piece = std::min(length - done, e->end - pos);
    const FastArea* a = &e->areas[0];
    uint64_t at = a->offset + r;
    if (e->chunk_mask != 0) {
      const uint64_t k = r >> e->chunk_shift;
      const uint64_t in_chunk = r & e->chunk_mask;
      piece = std::min(piece, e->chunk_mask + 1 - in_chunk);
      a = &e->areas[k & ((1u << e->areas_shift) - 1)];
      at = a->offset + ((k >> e->areas_shift) << e->chunk_shift) + in_chunk;
    }
    if (!a->dev) [[unlikely]]
      return Missing(name());
    VS_RETURN_IF_ERROR(fn(a->dev, at, done, piece));
    done += piece;
    if (done == length) return Status::Ok();
    if (pos + piece == e->end) ++e;
  }
}

Status LvDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  Pin pin(map_);
  const Map& map = pin.map();
  if (map.fast) [[likely]] {
    return ForEachFastPiece(map, offset, buf.size(),
                            [&](bdev::BlockDevice* d, uint64_t at, uint64_t done, uint64_t len) {
                              return d->Read(at, buf.subspan(done, len));
                            });
  }
  return ForEachPiece(pin.map(), offset, buf.size(), false,
                      [&](const Target& t, uint64_t toff, uint64_t done, uint64_t len) {
                        if (!t.dev) return Missing(name());
                        return t.dev->Read(toff, buf.subspan(done, len));
                      });
}

Status LvDevice::DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) {
  Pin pin(map_);
  const Map& map = pin.map();
  if (map.fast) [[likely]] {  // no mirror: no gate
    return ForEachFastPiece(map, offset, buf.size(),
                            [&](bdev::BlockDevice* d, uint64_t at, uint64_t done, uint64_t len) {
                              return d->Write(at, buf.subspan(done, len), opts);
                            });
  }
  return ForEachPiece(pin.map(), offset, buf.size(), true,
                      [&](const Target& t, uint64_t toff, uint64_t done, uint64_t len) {
                        if (!t.dev) return Missing(name());
                        return t.dev->Write(toff, buf.subspan(done, len), opts);
                      });
}

Status LvDevice::DoFlush() {
  Pin pin(map_);
  Status first;
  for (const auto& d : pin.map().lower) {
    Status s = d->Flush();
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

Status LvDevice::DoDiscard(uint64_t offset, uint64_t length) {
  Pin pin(map_);
  return ForEachPiece(pin.map(), offset, length, true,
                      [&](const Target& t, uint64_t toff, uint64_t, uint64_t len) {
                        if (!t.dev) return Missing(name());
                        return t.dev->Discard(toff, len);
                      });
}

Status LvDevice::DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) {
  Pin pin(map_);
  return ForEachPiece(pin.map(), offset, length, true,
                      [&](const Target& t, uint64_t toff, uint64_t, uint64_t len) {
                        if (!t.dev) return Missing(name());
                        return t.dev->WriteZeroes(toff, len, opts);
                      });
}

Result<std::vector<bdev::AllocationExtent>> LvDevice::DoQueryAllocation(uint64_t offset,
                                                                        uint64_t length) {
  Pin pin(map_);
  std::vector<bdev::AllocationExtent> out;
  Status s = ForEachPiece(
      pin.map(), offset, length, false,
      [&](const Target& t, uint64_t toff, uint64_t done, uint64_t len) -> Status {
        if (!t.dev) {
          out.push_back({offset + done, len, true});
          return Status::Ok();
        }
        VS_ASSIGN_OR_RETURN(auto runs, t.dev->QueryAllocation(toff, len));
        for (const auto& run : runs) {
          out.push_back({offset + done + (run.offset - toff), run.length, run.allocated});
        }
        return Status::Ok();
      });
  if (!s.ok()) return s;
  return out;
}

std::vector<std::shared_ptr<LvDevice>> FindLiveLvs(const std::string& vg_id,
                                                   const std::string& lv_id,
                                                   Activations* activations) {
  return ActivationsOf(activations).FindLive(vg_id + lv_id);
}

Status RemapLiveLvs(const VolumeGroup& vg, const std::vector<bdev::BlockDevicePtr>& pv_devs,
                    Activations* activations) {
  std::vector<std::shared_ptr<LvDevice>> devs;
  for (const auto& lv : vg.lvs) {
    for (auto& d : FindLiveLvs(vg.id, lv.id, activations)) devs.push_back(std::move(d));
  }
  Status first;
  for (const auto& d : devs) {
    Status s = d->Remap(vg, pv_devs);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

}  // namespace volstack::lvm

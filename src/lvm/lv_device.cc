#include "lvm/lv_device.h"

#include <algorithm>
#include <set>

namespace volstack::lvm {

namespace {

Result<std::shared_ptr<LvDevice>> CreateLv(const VolumeGroup& vg, const LogicalVolume& lv,
                                           const std::vector<bdev::BlockDevicePtr>& pv_devs,
                                           const LvActivation& activation, int depth);

struct Builder {
  const VolumeGroup& vg;
  const std::vector<bdev::BlockDevicePtr>& pv_devs;
  const LvActivation& act;
  std::set<bdev::BlockDevice*> seen;
  std::vector<bdev::BlockDevicePtr> lower;
  int depth = 0;

  void Note(const bdev::BlockDevicePtr& d) {
    if (d && seen.insert(d.get()).second) lower.push_back(d);
  }

  Result<std::vector<LvDevice::MapEntry>> Build(const LogicalVolume& lv) {
    if (++depth > 4) return Status::Corruption("LV " + lv.name + ": areas nest too deeply");
    const uint64_t ext = vg.extent_bytes();
    std::vector<LvDevice::MapEntry> map;
    for (const Segment& seg : lv.segments) {
      LvDevice::MapEntry e;
      e.start = uint64_t{seg.start_extent} * ext;
      e.length = uint64_t{seg.extent_count} * ext;
      e.mirror = seg.is_mirror();
      e.chunk = seg.is_striped() && seg.areas.size() > 1 ? uint64_t{seg.stripe_size} * kSector : 0;
      const uint64_t area_bytes = uint64_t{seg.area_len()} * ext;
      for (const SegmentArea& a : seg.areas) {
        LvDevice::Target t;
        if (a.is_pv()) {
          const PhysicalVolume& pv = vg.pvs[a.pv];
          t.dev = a.pv < static_cast<int>(pv_devs.size()) ? pv_devs[a.pv] : nullptr;
          t.offset = pv.pe_start * kSector + uint64_t{a.start} * ext;
          if (!t.dev && !act.partial) {
            return Status::NotFound("LV " + vg.name + "/" + lv.name + " uses missing PV " +
                                    pv.device +
                                    "; refusing to activate "
                                    "(use partial activation)");
          }
          if (t.dev && t.offset + area_bytes > t.dev->size()) {
            return Status::Corruption("LV " + vg.name + "/" + lv.name +
                                      ": extents beyond the end of " + t.dev->name());
          }
        } else {
          const LogicalVolume* sub = vg.FindLv(a.lv);
          if (!sub) return Status::Corruption("LV " + lv.name + ": unknown LV " + a.lv);
          VS_ASSIGN_OR_RETURN(auto sub_dev, CreateLv(vg, *sub, pv_devs, act, depth));
          t.dev = sub_dev;
          t.offset = uint64_t{a.start} * ext;
        }
        Note(t.dev);
        e.areas.push_back(std::move(t));
      }
      map.push_back(std::move(e));
    }
    return map;
  }
};

Result<std::shared_ptr<LvDevice>> CreateLvImpl(const VolumeGroup& vg, const LogicalVolume* lv,
                                               const std::vector<bdev::BlockDevicePtr>& pv_devs,
                                               const LvActivation& activation, int depth) {
  const std::string& lv_name = lv->name;
  Builder b{vg, pv_devs, activation, {}, {}, 0};
  b.depth = depth;
  VS_ASSIGN_OR_RETURN(auto map, b.Build(*lv));
  bdev::Geometry g;
  g.size_bytes = uint64_t{lv->le_count()} * vg.extent_bytes();
  g.logical_block_size = 512;
  g.physical_block_size = 512;
  g.optimal_io_size = 0;
  g.read_only = activation.read_only;
  g.caps = {true, true, true, false};
  bool any_alloc = false;
  uint64_t stripe_width = 0;
  for (const auto& d : b.lower) {
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
  for (const auto& e : map) {
    if (e.chunk) {
      if (e.chunk % g.logical_block_size != 0) {
        return Status::InvalidArgument("LV " + vg.name + "/" + lv_name + ": stripe size " +
                                       std::to_string(e.chunk) +
                                       " is not a multiple of the PVs' logical block size");
      }
      stripe_width = std::max<uint64_t>(stripe_width, e.chunk * e.areas.size());
    }
  }
  if (stripe_width)
    g.optimal_io_size = static_cast<uint32_t>(std::min<uint64_t>(stripe_width, UINT32_MAX));
  return std::make_shared<LvDevice>(vg.name + "/" + lv_name, g, std::move(map), std::move(b.lower));
}

Result<std::shared_ptr<LvDevice>> CreateLv(const VolumeGroup& vg, const LogicalVolume& lv,
                                           const std::vector<bdev::BlockDevicePtr>& pv_devs,
                                           const LvActivation& activation, int depth) {
  return CreateLvImpl(vg, &lv, pv_devs, activation, depth);
}

}  // namespace

Result<std::shared_ptr<LvDevice>> LvDevice::Create(const VolumeGroup& vg,
                                                   const std::string& lv_name,
                                                   const std::vector<bdev::BlockDevicePtr>& pv_devs,
                                                   const LvActivation& activation) {
  const LogicalVolume* lv = vg.FindLv(lv_name);
  if (!lv) return Status::NotFound("no LV " + vg.name + "/" + lv_name);
  return CreateLvImpl(vg, lv, pv_devs, activation, 0);
}

LvDevice::LvDevice(std::string name, const bdev::Geometry& geometry, std::vector<MapEntry> map,
                   std::vector<bdev::BlockDevicePtr> lower)
    : BlockDevice(std::move(name), geometry), map_(std::move(map)), lower_(std::move(lower)) {}

template <typename Fn>
Status LvDevice::ForEachPiece(uint64_t offset, uint64_t length, bool all_legs, Fn&& fn) {
  auto it = std::upper_bound(map_.begin(), map_.end(), offset,
                             [](uint64_t off, const MapEntry& e) { return off < e.start; });
  VS_CHECK(it != map_.begin());
  --it;
  uint64_t done = 0;
  while (done < length) {
    VS_CHECK(it != map_.end());
    const MapEntry& e = *it;
    const uint64_t pos = offset + done;
    const uint64_t r = pos - e.start;
    uint64_t piece = std::min(length - done, e.length - r);
    if (e.chunk == 0) {
      if (e.mirror && all_legs) {
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

Status LvDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  return ForEachPiece(offset, buf.size(), false,
                      [&](const Target& t, uint64_t toff, uint64_t done, uint64_t len) {
                        if (!t.dev) return Missing(name());
                        return t.dev->Read(toff, buf.subspan(done, len));
                      });
}

Status LvDevice::DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) {
  return ForEachPiece(offset, buf.size(), true,
                      [&](const Target& t, uint64_t toff, uint64_t done, uint64_t len) {
                        if (!t.dev) return Missing(name());
                        return t.dev->Write(toff, buf.subspan(done, len), opts);
                      });
}

Status LvDevice::DoFlush() {
  Status first;
  for (const auto& d : lower_) {
    Status s = d->Flush();
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

Status LvDevice::DoDiscard(uint64_t offset, uint64_t length) {
  return ForEachPiece(offset, length, true,
                      [&](const Target& t, uint64_t toff, uint64_t, uint64_t len) {
                        if (!t.dev) return Missing(name());
                        return t.dev->Discard(toff, len);
                      });
}

Status LvDevice::DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) {
  return ForEachPiece(offset, length, true,
                      [&](const Target& t, uint64_t toff, uint64_t, uint64_t len) {
                        if (!t.dev) return Missing(name());
                        return t.dev->WriteZeroes(toff, len, opts);
                      });
}

Result<std::vector<bdev::AllocationExtent>> LvDevice::DoQueryAllocation(uint64_t offset,
                                                                        uint64_t length) {
  std::vector<bdev::AllocationExtent> out;
  Status s = ForEachPiece(
      offset, length, false,
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

}  // namespace volstack::lvm

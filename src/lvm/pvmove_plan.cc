// The metadata side of pvmove (see pvmove.h): pure transforms of a VolumeGroup copy.
#include <sys/utsname.h>

#include <algorithm>
#include <ctime>

#include "lvm/allocator.h"
#include "lvm/lv_device.h"
#include "lvm/pvmove.h"
#include "lvm/uuid.h"

namespace volstack::lvm {

namespace {

bool ParseU32(const std::string& s, uint32_t* out) {
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  const uint64_t v = std::stoull(s);
  if (v > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

bool Overlap(const PeRange& a, const PeRange& b) {
  return a.start < b.start + b.count && b.start < a.start + a.count;
}

// Splits segment `si` of `lv` into two at `area_off` extents into each area.
Status SplitSegment(LogicalVolume& lv, size_t si, uint32_t area_off, uint64_t extent_bytes) {
  Segment& s = lv.segments[si];
  VS_CHECK(area_off > 0 && area_off < s.area_len());
  if (s.is_striped() && s.stripe_count() > 1 &&
      extent_bytes % (uint64_t{s.stripe_size} * kSector) != 0) {
    return Status::NotSupported("LV " + lv.name + ": cannot split a striped segment whose " +
                                "extent size is not a multiple of its stripe size");
  }
  if (!s.is_striped()) return Status::NotSupported("LV " + lv.name + ": cannot split a " + s.type);
  Segment tail = s;
  const uint32_t n = s.stripe_count();
  s.extent_count = area_off * n;
  tail.start_extent = s.start_extent + s.extent_count;
  tail.extent_count -= s.extent_count;
  for (auto& a : tail.areas) a.start += area_off;
  lv.segments.insert(lv.segments.begin() + static_cast<std::ptrdiff_t>(si) + 1, std::move(tail));
  return Status::Ok();
}

// Within [0, len) of an area starting at `base`, the first offset where `inside` changes.
uint32_t FirstBoundary(uint32_t base, uint32_t len, const std::vector<PeRange>& sel) {
  uint32_t best = len;
  for (const auto& r : sel) {
    for (uint64_t edge : {uint64_t{r.start}, uint64_t{r.start} + r.count}) {
      if (edge > base && edge < uint64_t{base} + len) best = std::min<uint32_t>(best, edge - base);
    }
  }
  return best;
}

bool Inside(uint32_t pe, const std::vector<PeRange>& sel) {
  return std::any_of(sel.begin(), sel.end(),
                     [&](const PeRange& r) { return pe >= r.start && pe - r.start < r.count; });
}

std::vector<PeRange> Whole(const PhysicalVolume& pv) { return {{0, pv.pe_count}}; }

Status CheckRanges(const VolumeGroup& vg, const PvSelection& sel) {
  for (size_t i = 0; i < sel.ranges.size(); i++) {
    const PeRange& r = sel.ranges[i];
    if (r.count == 0 || uint64_t{r.start} + r.count > vg.pvs[sel.pv].pe_count) {
      return Status::InvalidArgument("PE range " + std::to_string(r.start) + "-" +
                                     std::to_string(uint64_t{r.start} + r.count - 1) +
                                     " is beyond the end of PV " + vg.pvs[sel.pv].device);
    }
    for (size_t j = 0; j < i; j++) {
      if (Overlap(r, sel.ranges[j])) {
        return Status::InvalidArgument("Overlapping PE ranges on PV " + vg.pvs[sel.pv].device);
      }
    }
  }
  return Status::Ok();
}

uint32_t RegionSectors(uint32_t extent_size) {
  uint32_t r = 4096;  // lvm2's default mirror region: 2 MiB
  while (r > 1 && extent_size % r != 0) r /= 2;
  return r;
}

}  // namespace

Result<std::vector<PeRange>> ParsePeRanges(const std::string& text) {
  std::vector<PeRange> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t colon = text.find(':', pos);
    if (colon == std::string::npos) colon = text.size();
    const std::string item = text.substr(pos, colon - pos);
    pos = colon + 1;
    PeRange r;
    const size_t op = item.find_first_of("-+");
    uint32_t a = 0, b = 0;
    if (!ParseU32(item.substr(0, op), &a) ||
        (op != std::string::npos && !ParseU32(item.substr(op + 1), &b))) {
      return Status::InvalidArgument("Invalid PE range '" + item + "'");
    }
    r.start = a;
    if (op == std::string::npos) {
      r.count = 1;
    } else if (item[op] == '-') {
      if (b < a) return Status::InvalidArgument("Invalid PE range '" + item + "'");
      r.count = b - a + 1;
    } else {
      if (b == 0) return Status::InvalidArgument("Invalid PE range '" + item + "'");
      r.count = b;
    }
    for (const auto& o : out) {
      if (Overlap(o, r)) return Status::InvalidArgument("Overlapping PE ranges: '" + text + "'");
    }
    out.push_back(r);
  }
  return out;
}

const LogicalVolume* FindPvmoveLv(const VolumeGroup& vg) {
  for (const auto& lv : vg.lvs) {
    if (lv.HasStatus("PVMOVE")) return &lv;
  }
  return nullptr;
}

Result<std::string> PlanMove(VolumeGroup& vg_in, const MovePlan& plan) {
  if (const LogicalVolume* busy = FindPvmoveLv(vg_in)) {
    return Status::Busy("pvmove in progress in volume group " + vg_in.name + " (" + busy->name +
                        "); run pvmove without arguments to resume it, or pvmove --abort");
  }
  VolumeGroup vg = vg_in;
  if (plan.source.pv < 0 || plan.source.pv >= static_cast<int>(vg.pvs.size())) {
    return Status::InvalidArgument("source PV is not in volume group " + vg.name);
  }
  VS_RETURN_IF_ERROR(CheckRanges(vg, plan.source));
  const std::vector<PeRange> src_sel =
      plan.source.ranges.empty() ? Whole(vg.pvs[plan.source.pv]) : plan.source.ranges;
  const uint64_t ext = vg.extent_bytes();
  if (!plan.lv_name.empty()) {
    const LogicalVolume* lv = vg.FindLv(plan.lv_name);
    if (!lv) {
      return Status::NotFound("Logical volume " + plan.lv_name + " not found in volume group " +
                              vg.name);
    }
  }
  // 1. Split segments so every source area is wholly inside or outside the selection.
  struct Moved {
    size_t lv, seg, area;
  };
  std::vector<Moved> moved;
  for (size_t li = 0; li < vg.lvs.size(); li++) {
    LogicalVolume& lv = vg.lvs[li];
    if (!plan.lv_name.empty() && lv.name != plan.lv_name) continue;
    if (lv.HasStatus("LOCKED") || lv.HasStatus("PVMOVE")) continue;
    for (size_t si = 0; si < lv.segments.size(); si++) {
      bool split = false;
      for (const SegmentArea& a : lv.segments[si].areas) {
        if (a.pv != plan.source.pv) continue;
        const uint32_t b = FirstBoundary(a.start, lv.segments[si].area_len(), src_sel);
        if (b < lv.segments[si].area_len()) {
          VS_RETURN_IF_ERROR(SplitSegment(lv, si, b, ext));
          split = true;
          break;
        }
      }
      if (split) {
        si--;  // look at the head again (other areas may need splits too)
        continue;
      }
    }
    for (size_t si = 0; si < lv.segments.size(); si++) {
      const Segment& s = lv.segments[si];
      if (!s.is_striped()) continue;
      for (size_t ai = 0; ai < s.areas.size(); ai++) {
        if (s.areas[ai].pv == plan.source.pv && Inside(s.areas[ai].start, src_sel)) {
          moved.push_back({li, si, ai});
        }
      }
    }
  }
  if (moved.empty()) return Status::NotFound("No data to move for " + vg.name + ".");
  // 2. Free extents on the destinations.
  std::vector<PvSelection> dests = plan.dests;
  if (dests.empty()) {
    for (int i = 0; i < static_cast<int>(vg.pvs.size()); i++) {
      if (i != plan.source.pv) dests.push_back({i, {}});
    }
  }
  auto free = FreeExtents(vg);
  struct Avail {
    int pv;
    std::vector<FreeRun> runs;
  };
  std::vector<Avail> avail;
  uint64_t total_free = 0;
  for (const PvSelection& d : dests) {
    if (d.pv < 0 || d.pv >= static_cast<int>(vg.pvs.size())) {
      return Status::InvalidArgument("destination PV is not in volume group " + vg.name);
    }
    VS_RETURN_IF_ERROR(CheckRanges(vg, d));
    if (d.pv == plan.source.pv) {
      if (d.ranges.empty()) {
        return Status::InvalidArgument("Cannot move PV " + vg.pvs[d.pv].device + " onto itself");
      }
      for (const auto& r : d.ranges) {
        for (const auto& s : src_sel) {
          if (Overlap(r, s)) {
            return Status::InvalidArgument("Destination PE ranges overlap the source on " +
                                           vg.pvs[d.pv].device);
          }
        }
      }
    }
    if (!vg.pvs[d.pv].allocatable()) continue;
    Avail a{d.pv, {}};
    const std::vector<PeRange> sel = d.ranges.empty() ? Whole(vg.pvs[d.pv]) : d.ranges;
    for (const FreeRun& f : free[d.pv]) {
      for (const PeRange& r : sel) {
        const uint32_t lo = std::max(f.start, r.start);
        const uint64_t hi =
            std::min<uint64_t>(uint64_t{f.start} + f.count, uint64_t{r.start} + r.count);
        if (hi > lo) a.runs.push_back({lo, static_cast<uint32_t>(hi - lo)});
      }
    }
    std::sort(a.runs.begin(), a.runs.end(),
              [](const FreeRun& x, const FreeRun& y) { return x.start < y.start; });
    for (const auto& r : a.runs) total_free += r.count;
    bool listed = false;
    for (auto& other : avail) {
      if (other.pv == a.pv) {
        listed = true;
        other.runs.insert(other.runs.end(), a.runs.begin(), a.runs.end());
      }
    }
    if (!listed) avail.push_back(std::move(a));
  }
  uint64_t needed = 0;
  for (const Moved& m : moved) needed += vg.lvs[m.lv].segments[m.seg].area_len();
  if (needed > total_free) {
    return Status::NoSpace("Insufficient free space: " + std::to_string(needed) +
                           " extents needed, but only " + std::to_string(total_free) +
                           " available");
  }
  // 3. Allocate and build the pvmove LV.
  std::string name;
  for (int i = 0;; i++) {
    name = "pvmove" + std::to_string(i);
    if (!vg.FindLv(name)) break;
  }
  LogicalVolume pm;
  pm.name = name;
  pm.id = GenerateId();
  pm.status = {"READ", "WRITE", "PVMOVE", "LOCKED"};
  pm.creation_time = static_cast<uint64_t>(::time(nullptr));
  struct utsname u;
  if (::uname(&u) == 0) pm.creation_host = u.nodename;
  pm.allocation_policy = "contiguous";
  if (plan.atomic) pm.tags.push_back(kAtomicMoveTag);
  uint32_t le = 0;
  const uint32_t region = RegionSectors(vg.extent_size);
  for (const Moved& m : moved) {
    Segment& s = vg.lvs[m.lv].segments[m.seg];
    SegmentArea& area = s.areas[m.area];
    const uint32_t len = s.area_len();
    // PVs the segment's other areas use: a stripe should not land on a PV another stripe uses.
    std::vector<int> others;
    for (size_t ai = 0; ai < s.areas.size(); ai++) {
      if (ai != m.area && s.areas[ai].is_pv()) others.push_back(s.areas[ai].pv);
    }
    const uint32_t first_le = le;
    uint32_t done = 0;
    for (int pass = 0; pass < 2 && done < len; pass++) {
      for (Avail& a : avail) {
        const bool shared = std::find(others.begin(), others.end(), a.pv) != others.end();
        if ((pass == 0) == shared) continue;  // pass 0: PVs no other stripe uses
        while (done < len && !a.runs.empty()) {
          FreeRun& r = a.runs.front();
          uint32_t n = std::min(len - done, r.count);
          if (plan.max_segment_extents) n = std::min(n, plan.max_segment_extents);
          Segment ms;
          ms.start_extent = le;
          ms.extent_count = n;
          ms.type = "mirror";
          ms.region_size = region;
          ms.areas.push_back({area.pv, "", area.start + done});
          ms.areas.push_back({a.pv, "", r.start});
          pm.segments.push_back(std::move(ms));
          le += n;
          done += n;
          r.start += n;
          r.count -= n;
          if (r.count == 0) a.runs.erase(a.runs.begin());
        }
      }
    }
    VS_CHECK_OP(done, ==, len);  // total_free >= needed
    area = SegmentArea{-1, name, first_le};
    LogicalVolume& lv = vg.lvs[m.lv];
    if (!lv.HasStatus("LOCKED")) lv.status.push_back("LOCKED");
  }
  vg.lvs.push_back(std::move(pm));
  VS_RETURN_IF_ERROR(ValidateVg(vg));
  vg_in = std::move(vg);
  return name;
}

Status MarkSegmentMoved(VolumeGroup& vg, const std::string& name, size_t index) {
  LogicalVolume* pm = vg.FindLv(name);
  if (!pm || !pm->HasStatus("PVMOVE") || index >= pm->segments.size()) {
    return Status::NotFound("no pvmove segment " + std::to_string(index) + " in " + name);
  }
  pm->segments[index].extents_moved = pm->segments[index].extent_count;
  return Status::Ok();
}

Status FinishMove(VolumeGroup& vg_in, const std::string& name, bool abort) {
  VolumeGroup vg = vg_in;
  const LogicalVolume* pm = vg.FindLv(name);
  if (!pm || !pm->HasStatus("PVMOVE")) return Status::NotFound("no pvmove LV " + name);
  const LogicalVolume pmv = *pm;
  const bool atomic = std::find(pmv.tags.begin(), pmv.tags.end(), kAtomicMoveTag) != pmv.tags.end();
  const uint64_t ext = vg.extent_bytes();
  auto seg_at = [&](uint32_t le) -> const Segment* {
    for (const auto& s : pmv.segments) {
      if (le >= s.start_extent && le - s.start_extent < s.extent_count) return &s;
    }
    return nullptr;
  };
  for (const auto& s : pmv.segments) {
    if (!s.is_mirror() || s.areas.size() < 2 || !s.areas.front().is_pv() ||
        !s.areas.back().is_pv()) {
      return Status::Corruption(name + ": a pvmove segment is not a mirror of two PV areas");
    }
    if (!abort && s.extents_moved < s.extent_count) {
      return Status::FromErrno(EAGAIN, name + ": segment at LE " + std::to_string(s.start_extent) +
                                           " is not copied yet");
    }
  }
  for (auto& lv : vg.lvs) {
    if (lv.name == name) continue;
    bool uses = false;
    for (size_t si = 0; si < lv.segments.size(); si++) {
      Segment& s = lv.segments[si];
      bool split = false;
      for (SegmentArea& a : s.areas) {
        if (a.is_pv() || a.lv != name) continue;
        uses = true;
        const Segment* ms = seg_at(a.start);
        if (!ms) return Status::Corruption("LV " + lv.name + ": area beyond the end of " + name);
        const uint32_t in_seg = ms->start_extent + ms->extent_count - a.start;
        if (in_seg < s.area_len()) {
          VS_RETURN_IF_ERROR(SplitSegment(lv, si, in_seg, ext));
          split = true;
          break;
        }
      }
      if (split) {
        si--;
        continue;
      }
      for (SegmentArea& a : lv.segments[si].areas) {
        if (a.is_pv() || a.lv != name) continue;
        const Segment* ms = seg_at(a.start);
        const bool copied = !(abort && atomic) && ms->extents_moved >= ms->extent_count;
        const SegmentArea& leg = copied ? ms->areas.back() : ms->areas.front();
        a = SegmentArea{leg.pv, "", leg.start + (a.start - ms->start_extent)};
      }
    }
    if (uses) {
      lv.status.erase(std::remove(lv.status.begin(), lv.status.end(), "LOCKED"), lv.status.end());
      MergeSegments(lv);
    }
  }
  vg.lvs.erase(std::remove_if(vg.lvs.begin(), vg.lvs.end(),
                              [&](const LogicalVolume& l) { return l.name == name; }),
               vg.lvs.end());
  VS_RETURN_IF_ERROR(ValidateVg(vg));
  vg_in = std::move(vg);
  return Status::Ok();
}

}  // namespace volstack::lvm

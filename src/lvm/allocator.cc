#include "lvm/allocator.h"

#include <algorithm>
#include <map>

namespace volstack::lvm {

Result<AllocPolicy> ParseAllocPolicy(const std::string& name) {
  if (name == "normal" || name == "inherit" || name.empty()) return AllocPolicy::kNormal;
  if (name == "contiguous") return AllocPolicy::kContiguous;
  return Status::InvalidArgument("unsupported allocation policy '" + name + "'");
}

std::vector<std::vector<FreeRun>> FreeExtents(const VolumeGroup& vg) {
  std::vector<std::map<uint32_t, uint32_t>> used(vg.pvs.size());  // start -> count
  for (const auto& lv : vg.lvs) {
    for (const auto& seg : lv.segments) {
      for (const auto& a : seg.areas) {
        if (a.is_pv() && a.pv < static_cast<int>(vg.pvs.size()))
          used[a.pv][a.start] += seg.area_len();
      }
    }
  }
  std::vector<std::vector<FreeRun>> free(vg.pvs.size());
  for (size_t i = 0; i < vg.pvs.size(); i++) {
    uint32_t pos = 0;
    for (auto [start, count] : used[i]) {
      if (start > pos) free[i].push_back({pos, start - pos});
      pos = std::max(pos, start + count);
    }
    if (pos < vg.pvs[i].pe_count) free[i].push_back({pos, vg.pvs[i].pe_count - pos});
  }
  return free;
}

namespace {

void Take(std::vector<FreeRun>& runs, uint32_t start, uint32_t count) {
  for (size_t i = 0; i < runs.size(); i++) {
    FreeRun r = runs[i];
    if (start < r.start || start + count > r.start + r.count) continue;
    runs.erase(runs.begin() + i);
    if (start + count < r.start + r.count) {
      runs.insert(runs.begin() + i, {start + count, r.start + r.count - start - count});
    }
    if (start > r.start) runs.insert(runs.begin() + i, {r.start, start - r.start});
    return;
  }
  VS_CHECK(false);
}

// The free run that starts exactly at `pe` on `pv`, if any.
const FreeRun* RunAt(const std::vector<FreeRun>& runs, uint32_t pe) {
  for (const auto& r : runs) {
    if (r.start == pe) return &r;
  }
  return nullptr;
}

}  // namespace

Status AllocateExtents(VolumeGroup& vg, const std::string& lv_name, const AllocRequest& req) {
  LogicalVolume* lv = vg.FindLv(lv_name);
  if (!lv) return Status::NotFound("no LV " + lv_name);
  if (req.extents == 0) return Status::Ok();
  if (req.stripes == 0 || req.extents % req.stripes != 0) {
    return Status::InvalidArgument("extent count is not a multiple of the stripe count");
  }
  auto free = FreeExtents(vg);
  std::vector<int> allowed;
  for (int i = 0; i < static_cast<int>(vg.pvs.size()); i++) {
    bool listed = req.pvs.empty() || std::find(req.pvs.begin(), req.pvs.end(), i) != req.pvs.end();
    if (listed && vg.pvs[i].allocatable()) allowed.push_back(i);
  }
  const uint32_t base = lv->le_count();
  std::vector<Segment> added;
  uint32_t le = base;
  auto nospace = [&](uint32_t have) {
    return Status::NoSpace("Volume group \"" + vg.name + "\" has insufficient free space (" +
                           std::to_string(have) + " extents): " + std::to_string(req.extents) +
                           " required.");
  };
  uint64_t total_free = 0;
  for (int p : allowed) {
    for (const auto& r : free[p]) total_free += r.count;
  }
  const Segment* last = lv->segments.empty() ? nullptr : &lv->segments.back();
  const bool continues = last && last->is_striped() && last->stripe_count() == req.stripes &&
                         (req.stripes == 1 || last->stripe_size == req.stripe_size) &&
                         std::all_of(last->areas.begin(), last->areas.end(),
                                     [](const SegmentArea& a) { return a.is_pv(); });

  if (req.stripes == 1) {
    uint32_t remaining = req.extents;
    auto take = [&](int pv, uint32_t start, uint32_t count) {
      Take(free[pv], start, count);
      Segment s;
      s.start_extent = le;
      s.extent_count = count;
      s.areas.push_back({pv, "", start});
      added.push_back(std::move(s));
      le += count;
      remaining -= count;
    };
    if (continues) {
      const SegmentArea& a = last->areas[0];
      if (std::find(allowed.begin(), allowed.end(), a.pv) != allowed.end()) {
        if (const FreeRun* r = RunAt(free[a.pv], a.start + last->area_len())) {
          take(a.pv, r->start, std::min(remaining, r->count));
        }
      }
    }
    if (req.policy == AllocPolicy::kContiguous) {
      if (remaining > 0 && !lv->segments.empty()) return nospace(static_cast<uint32_t>(total_free));
      for (int p : allowed) {
        if (remaining == 0) break;
        for (const auto& r : free[p]) {
          if (r.count >= remaining) {
            take(p, r.start, remaining);
            break;
          }
        }
      }
    } else {
      for (int p : allowed) {
        while (remaining > 0 && !free[p].empty()) {
          const FreeRun r = free[p].front();
          take(p, r.start, std::min(remaining, r.count));
        }
      }
    }
    if (remaining > 0) return nospace(static_cast<uint32_t>(total_free));
  } else {
    uint32_t per_stripe = req.extents / req.stripes;
    if (continues) {
      uint32_t run = per_stripe;
      for (const auto& a : last->areas) {
        if (std::find(allowed.begin(), allowed.end(), a.pv) == allowed.end()) {
          run = 0;
          break;
        }
        const FreeRun* r = RunAt(free[a.pv], a.start + last->area_len());
        run = std::min(run, r ? r->count : 0);
      }
      if (run > 0) {
        Segment s;
        s.start_extent = le;
        s.extent_count = run * req.stripes;
        s.stripe_size = req.stripe_size;
        for (const auto& a : last->areas) {
          Take(free[a.pv], a.start + last->area_len(), run);
          s.areas.push_back({a.pv, "", a.start + last->area_len()});
        }
        added.push_back(std::move(s));
        le += run * req.stripes;
        per_stripe -= run;
      }
    }
    if (per_stripe > 0 && req.policy == AllocPolicy::kContiguous && !lv->segments.empty()) {
      return nospace(static_cast<uint32_t>(total_free));
    }
    while (per_stripe > 0) {
      // The largest free run of each PV, largest first.
      std::vector<std::pair<FreeRun, int>> best;
      for (int p : allowed) {
        const FreeRun* big = nullptr;
        for (const auto& r : free[p]) {
          if (!big || r.count > big->count) big = &r;
        }
        if (big) best.push_back({*big, p});
      }
      std::stable_sort(best.begin(), best.end(),
                       [](const auto& a, const auto& b) { return a.first.count > b.first.count; });
      if (best.size() < req.stripes) {
        if (added.empty() && lv->segments.empty() && best.size() < req.stripes) {
          return Status::NoSpace("Insufficient suitable allocatable extents for logical volume " +
                                 lv_name + ": " + std::to_string(req.stripes) +
                                 " stripes need as many PVs with free space");
        }
        return nospace(static_cast<uint32_t>(total_free));
      }
      best.resize(req.stripes);
      std::sort(best.begin(), best.end(),
                [](const auto& a, const auto& b) { return a.second < b.second; });
      uint32_t run = per_stripe;
      for (const auto& [r, p] : best) run = std::min(run, r.count);
      if (req.policy == AllocPolicy::kContiguous && run < per_stripe) {
        return nospace(static_cast<uint32_t>(total_free));
      }
      Segment s;
      s.start_extent = le;
      s.extent_count = run * req.stripes;
      s.stripe_size = req.stripe_size;
      for (const auto& [r, p] : best) {
        Take(free[p], r.start, run);
        s.areas.push_back({p, "", r.start});
      }
      added.push_back(std::move(s));
      le += run * req.stripes;
      per_stripe -= run;
    }
  }
  for (auto& s : added) lv->segments.push_back(std::move(s));
  MergeSegments(*lv);
  return Status::Ok();
}

void MergeSegments(LogicalVolume& lv) {
  std::vector<Segment> out;
  for (auto& s : lv.segments) {
    if (!out.empty()) {
      Segment& p = out.back();
      bool same = p.is_striped() && s.is_striped() && p.areas.size() == s.areas.size() &&
                  p.stripe_size == s.stripe_size && p.tags.empty() && s.tags.empty();
      for (size_t i = 0; same && i < p.areas.size(); i++) {
        same = p.areas[i].is_pv() && s.areas[i].pv == p.areas[i].pv &&
               s.areas[i].start == p.areas[i].start + p.area_len();
      }
      if (same) {
        p.extent_count += s.extent_count;
        continue;
      }
    }
    out.push_back(std::move(s));
  }
  lv.segments = std::move(out);
}

Status ReduceExtents(VolumeGroup& vg, const std::string& lv_name, uint32_t new_le_count) {
  LogicalVolume* lv = vg.FindLv(lv_name);
  if (!lv) return Status::NotFound("no LV " + lv_name);
  if (new_le_count == 0 || new_le_count > lv->le_count()) {
    return Status::InvalidArgument("new size must be between 1 extent and the current size");
  }
  while (!lv->segments.empty()) {
    Segment& s = lv->segments.back();
    if (s.start_extent >= new_le_count) {
      lv->segments.pop_back();
      continue;
    }
    uint32_t keep = new_le_count - s.start_extent;
    if (keep < s.extent_count) {
      if (s.is_striped() && keep % s.stripe_count() != 0) {
        return Status::InvalidArgument("new size is not a multiple of the stripe count (" +
                                       std::to_string(s.stripe_count()) + ")");
      }
      if (!s.is_striped()) return Status::NotSupported("cannot reduce a " + s.type + " segment");
      s.extent_count = keep;
    }
    break;
  }
  return Status::Ok();
}

}  // namespace volstack::lvm

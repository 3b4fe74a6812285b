#include "lvm/metadata.h"

#include <algorithm>
#include <map>
#include <set>

#include "lvm/uuid.h"

namespace volstack::lvm {

namespace {
bool Has(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

bool PhysicalVolume::HasStatus(std::string_view s) const { return Has(status, s); }
bool LogicalVolume::HasStatus(std::string_view s) const { return Has(status, s); }
bool VolumeGroup::HasStatus(std::string_view s) const { return Has(status, s); }

uint32_t Segment::area_len() const {
  if (areas.empty()) return 0;
  return is_mirror() ? extent_count : extent_count / stripe_count();
}

uint32_t LogicalVolume::le_count() const {
  uint32_t n = 0;
  for (const auto& s : segments) n += s.extent_count;
  return n;
}

int VolumeGroup::FindPvById(std::string_view raw_id) const {
  for (size_t i = 0; i < pvs.size(); i++) {
    if (pvs[i].id == raw_id) return static_cast<int>(i);
  }
  return -1;
}

LogicalVolume* VolumeGroup::FindLv(std::string_view n) {
  for (auto& lv : lvs) {
    if (lv.name == n) return &lv;
  }
  return nullptr;
}
const LogicalVolume* VolumeGroup::FindLv(std::string_view n) const {
  return const_cast<VolumeGroup*>(this)->FindLv(n);
}

uint64_t VolumeGroup::total_extents() const {
  uint64_t n = 0;
  for (const auto& pv : pvs) n += pv.pe_count;
  return n;
}

uint32_t VolumeGroup::pv_allocated_extents(int pv) const {
  uint32_t n = 0;
  for (const auto& lv : lvs) {
    for (const auto& seg : lv.segments) {
      for (const auto& a : seg.areas) {
        if (a.pv == pv) n += seg.area_len();
      }
    }
  }
  return n;
}

uint64_t VolumeGroup::allocated_extents() const {
  uint64_t n = 0;
  for (size_t i = 0; i < pvs.size(); i++) n += pv_allocated_extents(static_cast<int>(i));
  return n;
}

bool IsValidLvmName(std::string_view name) {
  if (name.empty() || name.size() >= 128 || name == "." || name == ".." || name[0] == '-') {
    return false;
  }
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '+' ||
          c == '-')) {
      return false;
    }
  }
  return true;
}

bool IsValidNewLvName(std::string_view name) {
  if (!IsValidLvmName(name)) return false;
  if (name.starts_with("pvmove") || name.starts_with("snapshot")) return false;
  for (std::string_view r :
       {"_cdata", "_cmeta", "_corig", "_cpool", "_cvol", "_mimage", "_mlog", "_pmspare", "_rimage",
        "_rmeta", "_tdata", "_tmeta", "_vdata", "_vorigin", "_wcorig"}) {
    if (name.find(r) != std::string_view::npos) return false;
  }
  return true;
}

Status ValidateVg(const VolumeGroup& vg) {
  auto bad = [&](const std::string& m) {
    return Status::InvalidArgument("VG " + vg.name + ": " + m);
  };
  if (!IsValidLvmName(vg.name)) return bad("invalid VG name");
  if (!IsValidRawId(vg.id)) return bad("invalid VG UUID");
  if (vg.extent_size == 0) return bad("extent size is 0");
  if (vg.pvs.empty()) return bad("no physical volumes");
  std::set<std::string> pv_ids;
  for (const auto& pv : vg.pvs) {
    if (!IsValidRawId(pv.id)) return bad("invalid PV UUID");
    if (!pv_ids.insert(pv.id).second) return bad("PV " + FormatId(pv.id) + " listed twice");
  }
  std::set<std::string> lv_names;
  // Per PV: PE ranges [start, end) -> owner, to find overlaps.
  std::vector<std::map<uint32_t, std::pair<uint32_t, std::string>>> used(vg.pvs.size());
  for (const auto& lv : vg.lvs) {
    if (!IsValidLvmName(lv.name)) return bad("invalid LV name '" + lv.name + "'");
    if (!lv_names.insert(lv.name).second) return bad("LV " + lv.name + " listed twice");
    if (!IsValidRawId(lv.id)) return bad("LV " + lv.name + ": invalid UUID");
    if (lv.segments.empty()) return bad("LV " + lv.name + " has no segments");
    uint32_t le = 0;
    for (const auto& seg : lv.segments) {
      const std::string where =
          "LV " + lv.name + " segment at LE " + std::to_string(seg.start_extent);
      if (seg.start_extent != le) return bad(where + ": segments do not cover the LV contiguously");
      if (seg.extent_count == 0) return bad(where + ": no extents");
      if (seg.kept) {
        // Written back as read, with start_extent, extent_count and type from the fields.
        for (const char* key : {"start_extent", "extent_count", "type"}) {
          if (std::none_of(seg.kept_items.begin(), seg.kept_items.end(),
                           [key](const ConfigNode& n) { return n.key == key; })) {
            return bad(where + ": kept segment without '" + key + "'");
          }
        }
        if (!seg.areas.empty()) return bad(where + ": kept segment with areas");
        if (uint64_t{le} + seg.extent_count > UINT32_MAX) return bad(where + ": too many extents");
        le += seg.extent_count;
        continue;
      }
      if (seg.areas.empty()) return bad(where + ": no areas");
      if (seg.is_striped()) {
        if (seg.extent_count % seg.stripe_count() != 0) {
          return bad(where + ": extent count not a multiple of the stripe count");
        }
        if (seg.stripe_count() > 1 &&
            (seg.stripe_size == 0 || (seg.stripe_size & (seg.stripe_size - 1)) != 0)) {
          return bad(where + ": stripe size must be a power of two");
        }
      } else if (seg.is_mirror()) {
        if (seg.areas.size() < 2) return bad(where + ": a mirror needs two legs");
      } else {
        return bad(where + ": unsupported segment type '" + seg.type + "'");
      }
      if (uint64_t{le} + seg.extent_count > UINT32_MAX) return bad(where + ": too many extents");
      le += seg.extent_count;
      const uint32_t len = seg.area_len();
      for (const auto& a : seg.areas) {
        if (a.is_pv()) {
          if (a.pv >= static_cast<int>(vg.pvs.size())) return bad(where + ": unknown PV");
          if (uint64_t{a.start} + len > vg.pvs[a.pv].pe_count) {
            return bad(where + ": extents beyond the end of PV " + FormatId(vg.pvs[a.pv].id));
          }
          auto& m = used[a.pv];
          auto next = m.lower_bound(a.start);
          if (next != m.end() && next->first < a.start + len) {
            return bad(where + ": PEs overlap LV " + next->second.second);
          }
          if (next != m.begin()) {
            auto prev = std::prev(next);
            if (prev->second.first > a.start) {
              return bad(where + ": PEs overlap LV " + prev->second.second);
            }
          }
          m[a.start] = {a.start + len, lv.name};
        } else {
          const LogicalVolume* sub = vg.FindLv(a.lv);
          if (!sub || sub == &lv) return bad(where + ": area names unknown LV '" + a.lv + "'");
          if (uint64_t{a.start} + len > sub->le_count()) {
            return bad(where + ": area beyond the end of LV " + a.lv);
          }
        }
      }
    }
  }
  // Historical LVs name live LVs (their thin descendants or origin) without the '-' that
  // marks another historical LV: lvm2 refuses the VG when one of those is gone.
  if (vg.historical_lvs) {
    for (const auto& h : vg.historical_lvs->children) {
      if (!h.is_section) continue;
      for (const auto& item : h.children) {
        if (item.key != "origin" && item.key != "descendants") continue;
        for (const auto& v : item.values) {
          if (v.type != ConfigValue::Type::kString || v.text.starts_with("-")) continue;
          if (!vg.FindLv(v.text)) {
            return bad("historical LV " + h.key + " names LV " + v.text +
                       ", which is not in the VG");
          }
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace volstack::lvm

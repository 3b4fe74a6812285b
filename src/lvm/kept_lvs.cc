#include "lvm/kept_lvs.h"

#include <deque>

#include "lvm/mirrored_lv.h"
#include "lvm/thin_lv.h"

namespace volstack::lvm {

namespace {

void CollectStrings(const ConfigNode& n, std::vector<std::string>* out) {
  for (const auto& v : n.values) {
    if (v.type == ConfigValue::Type::kString) out->push_back(v.text);
  }
  for (const auto& c : n.children) CollectStrings(c, out);
}

std::string Describe(const VolumeGroup& vg, const std::string& lv_name, const UnservedLv& u) {
  const std::string full = vg.name + "/" + lv_name;
  if (u.owner == lv_name) return "LV " + full + " has segment type " + u.type;
  return "LV " + full + " is part of LV " + vg.name + "/" + u.owner + " (segment type " + u.type +
         ")";
}

bool SameArea(const VolumeGroup& va, const SegmentArea& a, const VolumeGroup& vb,
              const SegmentArea& b) {
  if (a.is_pv() != b.is_pv() || a.start != b.start) return false;
  if (!a.is_pv()) return a.lv == b.lv;
  return a.pv < static_cast<int>(va.pvs.size()) && b.pv < static_cast<int>(vb.pvs.size()) &&
         va.pvs[a.pv].id == vb.pvs[b.pv].id;
}

bool SameLv(const VolumeGroup& va, const LogicalVolume& a, const VolumeGroup& vb,
            const LogicalVolume& b) {
  if (a.id != b.id || a.status != b.status || a.flags != b.flags || a.tags != b.tags ||
      a.creation_time != b.creation_time || a.creation_host != b.creation_host ||
      a.allocation_policy != b.allocation_policy || a.read_ahead != b.read_ahead ||
      a.lock_args != b.lock_args || a.profile != b.profile || a.major != b.major ||
      a.minor != b.minor || a.segments.size() != b.segments.size()) {
    return false;
  }
  for (size_t i = 0; i < a.segments.size(); i++) {
    const Segment &x = a.segments[i], &y = b.segments[i];
    if (x.start_extent != y.start_extent || x.extent_count != y.extent_count || x.type != y.type ||
        x.stripe_size != y.stripe_size || x.tags != y.tags || x.extents_moved != y.extents_moved ||
        x.region_size != y.region_size || x.mirror_log != y.mirror_log || x.kept != y.kept ||
        x.kept_items != y.kept_items || x.areas.size() != y.areas.size()) {
      return false;
    }
    for (size_t j = 0; j < x.areas.size(); j++) {
      if (!SameArea(va, x.areas[j], vb, y.areas[j])) return false;
    }
  }
  return true;
}

}  // namespace

std::vector<std::string> KeptReferences(const VolumeGroup& vg, const Segment& seg) {
  std::vector<std::string> strings, out;
  for (const auto& item : seg.kept_items) {
    if (item.key != "type") CollectStrings(item, &strings);
  }
  for (const auto& s : strings) {
    if (vg.FindLv(s)) out.push_back(s);
  }
  return out;
}

std::string KeptString(const Segment& seg, std::string_view key) {
  for (const auto& item : seg.kept_items) {
    if (item.key == key && !item.is_section && !item.is_array && item.values.size() == 1 &&
        item.values[0].type == ConfigValue::Type::kString) {
      return item.values[0].text;
    }
  }
  return "";
}

std::map<std::string, UnservedLv> FindUnservedLvs(const VolumeGroup& vg) {
  std::map<std::string, UnservedLv> out;
  std::deque<std::string> todo;
  for (const auto& lv : vg.lvs) {
    for (const auto& seg : lv.segments) {
      if (!seg.kept) continue;
      out.emplace(lv.name, UnservedLv{seg.type, lv.name});
      todo.push_back(lv.name);
      break;
    }
  }
  // Breadth first, so a sub-LV is attributed to the nearest kept LV naming it.
  while (!todo.empty()) {
    const LogicalVolume* lv = vg.FindLv(todo.front());
    todo.pop_front();
    const UnservedLv owner = out.at(lv->name);
    for (const auto& seg : lv->segments) {
      if (!seg.kept) continue;
      for (const auto& ref : KeptReferences(vg, seg)) {
        if (out.emplace(ref, owner).second) todo.push_back(ref);
      }
    }
  }
  return out;
}

Status CheckServed(const VolumeGroup& vg, const std::string& lv_name, std::string_view verb) {
  const auto unserved = FindUnservedLvs(vg);
  const auto it = unserved.find(lv_name);
  if (it == unserved.end()) return Status::Ok();
  return Status::NotSupported(Describe(vg, lv_name, it->second) +
                              ", which volstack does not serve: not " + std::string(verb));
}

Status CheckKeptUnchanged(const VolumeGroup& before, const VolumeGroup& after) {
  for (const auto& [name, u] : FindUnservedLvs(before)) {
    const LogicalVolume* a = before.FindLv(name);
    const LogicalVolume* b = after.FindLv(name);
    if (!b || !SameLv(before, *a, after, *b)) {
      const LogicalVolume* owner = before.FindLv(u.owner);
      const bool served = owner && (IsServedMirroredLv(*owner) || IsServedThinLv(*owner));
      return Status::NotSupported(Describe(before, name, u) +
                                  (served ? ", which volstack serves but does not change"
                                          : ", which volstack does not serve: not changed"));
    }
  }
  return Status::Ok();
}

}  // namespace volstack::lvm

namespace volstack::lvm {

namespace {

// The LV names in array `key` of a kept segment, every `stride`-th from `first`.
std::vector<std::string> KeptArrayNames(const Segment& seg, std::string_view key, size_t first,
                                        size_t stride) {
  std::vector<std::string> out;
  for (const auto& item : seg.kept_items) {
    if (item.key != key) continue;
    for (size_t i = first; i < item.values.size(); i += stride) {
      if (item.values[i].type == ConfigValue::Type::kString) out.push_back(item.values[i].text);
    }
  }
  return out;
}

int64_t KeptInt(const Segment& seg, std::string_view key) {
  for (const auto& item : seg.kept_items) {
    if (item.key == key && !item.is_array && item.values.size() == 1 &&
        item.values[0].type == ConfigValue::Type::kInt) {
      return item.values[0].integer;
    }
  }
  return 0;
}

}  // namespace

std::string ReportedSegType(const std::string& type) { return type.substr(0, type.find('+')); }

std::map<std::string, LvReportRole> LvReportRoles(const VolumeGroup& vg) {
  std::map<std::string, LvReportRole> roles;
  for (const auto& lv : vg.lvs) roles[lv.name].visible = lv.visible();
  // A role set on an LV that the text does not hold is dropped below.
  auto role = [&](const std::string& name) -> LvReportRole& { return roles[name]; };
  auto set = [&](const std::string& name, char type, char target) {
    LvReportRole& r = role(name);
    // lv_attr_dup tests origin first and metadata next: those win over later roles.
    if (r.volume_type == 'o' || r.volume_type == 'e') return;
    r.volume_type = type;
    if (target != '-') r.target_type = target;
  };
  std::map<std::string, std::string> cow_origin;  // COW LV -> origin
  for (const auto& lv : vg.lvs) {
    if (lv.name.ends_with("_pmspare")) set(lv.name, 'e', '-');
    for (const auto& seg : lv.segments) {
      if (!seg.kept) continue;
      const std::string t = ReportedSegType(seg.type);
      LvReportRole& self = role(lv.name);
      if (t.starts_with("raid")) {
        set(lv.name, 'r', 'r');
        for (const auto& m : KeptArrayNames(seg, "raids", 0, 2)) set(m, 'e', 'r');
        for (const auto& i : KeptArrayNames(seg, "raids", 1, 2)) set(i, 'I', 'r');
      } else if (t == "mirror") {
        set(lv.name, 'm', 'm');
        for (const auto& i : KeptArrayNames(seg, "mirrors", 0, 2)) set(i, 'I', 'm');
        if (auto log = KeptString(seg, "mirror_log"); !log.empty()) {
          set(log, 'l', 'm');
          self.log = log;
        }
      } else if (t == "snapshot") {
        self.listed = false;
        self.visible = false;
        const std::string origin = KeptString(seg, "origin");
        std::string cow = KeptString(seg, "cow_store");
        if (cow.empty()) cow = KeptString(seg, "merging_store");
        if (!origin.empty()) set(origin, 'o', 's');
        if (!cow.empty()) {
          set(cow, 's', 's');
          role(cow).origin = origin;
          cow_origin[cow] = origin;
        }
      } else if (t == "thin-pool") {
        set(lv.name, 't', 't');
        if (KeptInt(seg, "zero_new_blocks")) self.zero = 'z';
        set(KeptString(seg, "pool"), 'T', '-');
        set(KeptString(seg, "metadata"), 'e', '-');
      } else if (t == "thin") {
        set(lv.name, 'V', 't');
        self.pool = KeptString(seg, "thin_pool");
        self.origin = KeptString(seg, "origin");
        if (self.origin.empty()) self.origin = KeptString(seg, "external_origin");
        if (!self.origin.empty()) set(self.origin, 'o', '-');
      } else if (t == "cache" || t == "writecache") {
        set(lv.name, 'C', 'C');
        self.pool = KeptString(seg, t == "cache" ? "cache_pool" : "writecache");
        self.origin = KeptString(seg, "origin");
        set(self.origin, 'o', 'C');
      } else if (t == "cache-pool") {
        set(lv.name, 'C', 'C');
        set(KeptString(seg, "data"), 'C', '-');
        set(KeptString(seg, "metadata"), 'e', '-');
      } else if (t == "integrity") {
        set(lv.name, 'g', '-');
        self.origin = KeptString(seg, "origin");
      } else if (t == "vdo-pool") {
        set(lv.name, 'd', '-');
        set(KeptString(seg, "data"), 'D', '-');
      } else if (t == "vdo") {
        set(lv.name, 'v', 'v');
        self.pool = KeptString(seg, "vdo_pool");
      } else if (t == "error" || t == "zero") {
        set(lv.name, 'v', 'v');
      } else {
        set(lv.name, 'v', 'u');  // lvm2's "unknown" segment type: virtual, target 'u'
      }
      break;
    }
  }
  // Thin LVs show their pool's zeroing.
  for (const auto& lv : vg.lvs) {
    LvReportRole& r = roles[lv.name];
    if (r.volume_type == 'V' && roles.count(r.pool)) r.zero = roles[r.pool].zero;
  }
  for (const auto& [cow, origin] : cow_origin) {
    if (roles.count(origin)) roles[cow].visible = roles[origin].visible;
  }
  std::erase_if(roles, [&](const auto& kv) { return !vg.FindLv(kv.first); });
  return roles;
}

}  // namespace volstack::lvm

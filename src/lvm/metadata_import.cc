// Text metadata -> VolumeGroup (after lvm2's import_vsn1.c). Required fields missing or of
// the wrong type are Corruption naming the field; unknown keys are ignored, as lvm2 does.
#include <map>

#include "lvm/config_text.h"
#include "lvm/metadata.h"
#include "lvm/uuid.h"

namespace volstack::lvm {

namespace {

std::vector<std::string> OptionalList(const ConfigNode& n, std::string_view key) {
  auto l = n.GetStringList(key);
  return l.ok() ? *l : std::vector<std::string>{};
}

Result<std::vector<std::string>> RequiredList(const ConfigNode& n, std::string_view key) {
  return n.GetStringList(key);
}

template <typename T>
Status OptionalUint(const ConfigNode& n, std::string_view key, uint64_t max, T* out) {
  auto v = n.GetUint(key, max);
  if (v.ok()) {
    *out = static_cast<T>(*v);
    return Status::Ok();
  }
  return v.status().IsNotFound() ? Status::Ok() : v.status();
}

Result<PhysicalVolume> ImportPv(const ConfigNode& n) {
  PhysicalVolume pv;
  VS_ASSIGN_OR_RETURN(std::string id, n.GetString("id"));
  VS_ASSIGN_OR_RETURN(pv.id, ParseId(id));
  if (auto d = n.GetString("device"); d.ok()) pv.device = *d;
  VS_ASSIGN_OR_RETURN(pv.status, RequiredList(n, "status"));
  pv.flags = OptionalList(n, "flags");
  pv.tags = OptionalList(n, "tags");
  if (auto d = n.GetString("device_id_type"); d.ok()) pv.device_id_type = *d;
  if (auto d = n.GetString("device_id"); d.ok()) pv.device_id = *d;
  VS_RETURN_IF_ERROR(OptionalUint(n, "dev_size", INT64_MAX, &pv.dev_size));
  VS_ASSIGN_OR_RETURN(pv.pe_start, n.GetUint("pe_start", INT64_MAX / kSector));
  VS_ASSIGN_OR_RETURN(uint64_t pe_count, n.GetUint("pe_count", UINT32_MAX));
  pv.pe_count = static_cast<uint32_t>(pe_count);
  if (n.Find("ba_start")) {
    uint64_t v = 0;
    VS_RETURN_IF_ERROR(OptionalUint(n, "ba_start", INT64_MAX, &v));
    pv.ba_start = v;
    VS_RETURN_IF_ERROR(OptionalUint(n, "ba_size", INT64_MAX, &v));
    pv.ba_size = v;
  }
  return pv;
}

Status ImportAreas(const ConfigNode& seg, std::string_view key,
                   const std::map<std::string, int>& pv_names, Segment* out) {
  const ConfigNode* list = seg.Find(key);
  if (!list || list->is_section) {
    return Status::Corruption("'" + seg.key + "': missing '" + std::string(key) + "'");
  }
  if (list->values.size() % 2 != 0) {
    return Status::Corruption("'" + seg.key + "': '" + std::string(key) + "' is not pairs");
  }
  for (size_t i = 0; i < list->values.size(); i += 2) {
    const ConfigValue& name = list->values[i];
    const ConfigValue& start = list->values[i + 1];
    if (name.type != ConfigValue::Type::kString || start.type != ConfigValue::Type::kInt ||
        start.integer < 0 || start.integer > UINT32_MAX) {
      return Status::Corruption("'" + seg.key + "': bad area in '" + std::string(key) + "'");
    }
    SegmentArea a;
    a.start = static_cast<uint32_t>(start.integer);
    if (auto it = pv_names.find(name.text); it != pv_names.end()) {
      a.pv = it->second;
    } else {
      a.lv = name.text;  // checked against the LV list in ValidateVg
    }
    out->areas.push_back(std::move(a));
  }
  return Status::Ok();
}

// Whether any string in `n` (a value, an array element, or one in a subsection) is `name`.
bool NamesString(const ConfigNode& n, const std::string& name) {
  for (const auto& v : n.values) {
    if (v.type == ConfigValue::Type::kString && v.text == name) return true;
  }
  for (const auto& c : n.children) {
    if (NamesString(c, name)) return true;
  }
  return false;
}

// `pvmove_lv`: the segment belongs to lvm2's pvmove LV, the only place volstack serves
// "mirror" (a mirror LV's mirror segment is kept: volstack does not keep its legs in sync).
Result<Segment> ImportSegment(const ConfigNode& n, const std::map<std::string, int>& pv_names,
                              bool pvmove_lv) {
  Segment seg;
  VS_ASSIGN_OR_RETURN(uint64_t start, n.GetUint("start_extent", UINT32_MAX));
  VS_ASSIGN_OR_RETURN(uint64_t count, n.GetUint("extent_count", UINT32_MAX));
  seg.start_extent = static_cast<uint32_t>(start);
  seg.extent_count = static_cast<uint32_t>(count);
  VS_ASSIGN_OR_RETURN(seg.type, n.GetString("type"));
  if (seg.type != "striped" && !(seg.type == "mirror" && pvmove_lv)) {
    // Kept as read. lvm2 writes such segments over sub-LVs only; one naming a PV directly
    // would map extents that volstack could not account for or renumber, so it is refused.
    for (const auto& [pv_name, index] : pv_names) {
      for (const auto& c : n.children) {
        if (c.key != "type" && NamesString(c, pv_name)) {
          return Status::NotSupported("'" + n.key + "': segment type '" + seg.type +
                                      "' naming PV " + pv_name + " directly is not supported");
        }
      }
    }
    seg.kept = true;
    seg.kept_items = n.children;
    return seg;
  }
  seg.tags = OptionalList(n, "tags");
  if (seg.is_striped()) {
    VS_ASSIGN_OR_RETURN(uint64_t stripes, n.GetUint("stripe_count", 1 << 16));
    if (stripes == 0) return Status::Corruption("'" + n.key + "': stripe_count is 0");
    if (stripes > 1) {
      VS_ASSIGN_OR_RETURN(uint64_t ss, n.GetUint("stripe_size", UINT32_MAX));
      seg.stripe_size = static_cast<uint32_t>(ss);
    }
    VS_RETURN_IF_ERROR(ImportAreas(n, "stripes", pv_names, &seg));
    if (seg.areas.size() != stripes) {
      return Status::Corruption("'" + n.key + "': stripe_count does not match stripes");
    }
  } else if (seg.is_mirror()) {
    VS_ASSIGN_OR_RETURN(uint64_t mirrors, n.GetUint("mirror_count", 1 << 16));
    VS_RETURN_IF_ERROR(OptionalUint(n, "extents_moved", UINT32_MAX, &seg.extents_moved));
    VS_RETURN_IF_ERROR(OptionalUint(n, "region_size", UINT32_MAX, &seg.region_size));
    if (auto l = n.GetString("mirror_log"); l.ok()) seg.mirror_log = *l;
    VS_RETURN_IF_ERROR(ImportAreas(n, "mirrors", pv_names, &seg));
    if (seg.areas.size() != mirrors) {
      return Status::Corruption("'" + n.key + "': mirror_count does not match mirrors");
    }
  }
  return seg;
}

Result<LogicalVolume> ImportLv(const ConfigNode& n, const std::map<std::string, int>& pv_names) {
  LogicalVolume lv;
  lv.name = n.key;
  VS_ASSIGN_OR_RETURN(std::string id, n.GetString("id"));
  VS_ASSIGN_OR_RETURN(lv.id, ParseId(id));
  VS_ASSIGN_OR_RETURN(lv.status, RequiredList(n, "status"));
  lv.flags = OptionalList(n, "flags");
  lv.tags = OptionalList(n, "tags");
  if (n.Find("creation_time")) {
    VS_ASSIGN_OR_RETURN(uint64_t t, n.GetUint("creation_time", INT64_MAX));
    lv.creation_time = t;
  }
  if (auto h = n.GetString("creation_host"); h.ok()) lv.creation_host = *h;
  if (auto p = n.GetString("allocation_policy"); p.ok()) lv.allocation_policy = *p;
  if (n.Find("read_ahead")) {
    VS_ASSIGN_OR_RETURN(int64_t ra, n.GetInt("read_ahead"));
    lv.read_ahead = ra;
  }
  if (auto l = n.GetString("lock_args"); l.ok()) lv.lock_args = *l;
  if (auto p = n.GetString("profile"); p.ok()) lv.profile = *p;
  for (auto [key, out] : {std::pair{"major", &lv.major}, std::pair{"minor", &lv.minor}}) {
    if (!n.Find(key)) continue;
    VS_ASSIGN_OR_RETURN(int64_t v, n.GetInt(key));
    *out = v;
  }
  VS_ASSIGN_OR_RETURN(uint64_t count, n.GetUint("segment_count", 1 << 20));
  for (uint64_t i = 1; i <= count; i++) {
    const ConfigNode* s = n.FindSection("segment" + std::to_string(i));
    if (!s) {
      return Status::Corruption("LV " + lv.name + ": missing segment" + std::to_string(i));
    }
    VS_ASSIGN_OR_RETURN(auto seg, ImportSegment(*s, pv_names, lv.HasStatus("PVMOVE")));
    lv.segments.push_back(std::move(seg));
  }
  return lv;
}

// Byte sizes an imported VG implies must fit in int64 (device offsets are u64 and LVs are
// BlockDevices): lvm2's limits (u32 extents of up to u32 sectors) allow 2^73 bytes.
Status CheckSizes(const VolumeGroup& vg) {
  constexpr uint64_t kMaxSectors = uint64_t{INT64_MAX} / kSector;
  for (const auto& pv : vg.pvs) {
    if (pv.pe_start > kMaxSectors ||
        uint64_t{pv.pe_count} * vg.extent_size > kMaxSectors - pv.pe_start) {
      return Status::Corruption("VG " + vg.name + ": PV " + FormatId(pv.id) +
                                " extents end beyond 2^63 bytes");
    }
  }
  for (const auto& lv : vg.lvs) {
    if (uint64_t{lv.le_count()} * vg.extent_size > kMaxSectors) {
      return Status::Corruption("VG " + vg.name + ": LV " + lv.name + " is larger than 2^63 bytes");
    }
    // lvm2 maps an LV onto another only through pvmove0, whose legs are PVs. Deeper chains
    // would make activation build a tree of devices exponential in the text's size.
    for (const auto& seg : lv.segments) {
      for (const auto& a : seg.areas) {
        if (a.is_pv()) continue;
        for (const auto& sub_seg : vg.FindLv(a.lv)->segments) {
          for (const auto& sub_area : sub_seg.areas) {
            if (!sub_area.is_pv()) {
              return Status::Corruption("VG " + vg.name + ": LV " + lv.name + " maps onto LV " +
                                        a.lv + ", which itself maps onto LV " + sub_area.lv);
            }
          }
        }
      }
    }
  }
  return Status::Ok();
}

Result<VolumeGroup> ImportVgText(std::string_view text);

}  // namespace

// A field the text lacks is Corruption as much as one of the wrong type: the text is bad.
Result<VolumeGroup> ImportVg(std::string_view text) {
  auto vg = ImportVgText(text);
  if (!vg.ok() && vg.status().IsNotFound()) return Status::Corruption(vg.status().message());
  return vg;
}

namespace {

Result<VolumeGroup> ImportVgText(std::string_view text) {
  VS_ASSIGN_OR_RETURN(ConfigNode root, ParseConfig(text));
  const ConfigNode* v = nullptr;
  for (const auto& c : root.children) {
    if (c.is_section) {
      v = &c;
      break;
    }
  }
  if (!v) return Status::Corruption("metadata text holds no volume group section");
  if (auto contents = root.GetString("contents");
      contents.ok() && *contents != "Text Format Volume Group") {
    return Status::Corruption("metadata text: unknown contents '" + *contents + "'");
  }
  if (auto version = root.GetInt("version"); version.ok() && *version != 1) {
    return Status::Corruption("metadata text: unsupported version");
  }
  VolumeGroup vg;
  vg.name = v->key;
  auto ctx = [&](Status s) { return s.WithContext("VG " + vg.name); };
  auto id = v->GetString("id");
  if (!id.ok()) return ctx(id.status());
  auto raw = ParseId(*id);
  if (!raw.ok()) return ctx(raw.status());
  vg.id = *raw;
  auto seqno = v->GetUint("seqno", UINT32_MAX);
  if (!seqno.ok()) return ctx(seqno.status());
  vg.seqno = static_cast<uint32_t>(*seqno);
  if (auto f = v->GetString("format"); f.ok()) vg.format = *f;
  auto status = v->GetStringList("status");
  if (!status.ok()) return ctx(status.status());
  vg.status = *status;
  vg.flags = OptionalList(*v, "flags");
  vg.tags = OptionalList(*v, "tags");
  if (auto s = v->GetString("system_id"); s.ok()) vg.system_id = *s;
  if (auto s = v->GetString("allocation_policy"); s.ok()) vg.allocation_policy = *s;
  auto es = v->GetUint("extent_size", UINT32_MAX);
  if (!es.ok()) return ctx(es.status());
  vg.extent_size = static_cast<uint32_t>(*es);
  auto max_lv = v->GetUint("max_lv", UINT32_MAX);
  if (!max_lv.ok()) return ctx(max_lv.status());
  vg.max_lv = static_cast<uint32_t>(*max_lv);
  auto max_pv = v->GetUint("max_pv", UINT32_MAX);
  if (!max_pv.ok()) return ctx(max_pv.status());
  vg.max_pv = static_cast<uint32_t>(*max_pv);
  if (auto s = OptionalUint(*v, "metadata_copies", UINT32_MAX, &vg.metadata_copies); !s.ok()) {
    return ctx(s);
  }
  const ConfigNode* pvs = v->FindSection("physical_volumes");
  if (!pvs) return ctx(Status::Corruption("missing physical_volumes"));
  std::map<std::string, int> pv_names;
  for (const auto& c : pvs->children) {
    if (!c.is_section) continue;
    auto pv = ImportPv(c);
    if (!pv.ok()) return ctx(pv.status().WithContext("PV " + c.key));
    pv_names[c.key] = static_cast<int>(vg.pvs.size());
    vg.pvs.push_back(std::move(*pv));
  }
  if (const ConfigNode* lvs = v->FindSection("logical_volumes")) {
    for (const auto& c : lvs->children) {
      if (!c.is_section) continue;
      auto lv = ImportLv(c, pv_names);
      if (!lv.ok()) return ctx(lv.status());
      vg.lvs.push_back(std::move(*lv));
    }
  }
  if (const ConfigNode* h = v->FindSection("historical_logical_volumes")) {
    vg.historical_lvs = *h;
    vg.historical_lvs->blank_before = false;  // the writer puts lvm2's blank line there
  }
  if (Status s = ValidateVg(vg); !s.ok()) return Status::Corruption(s.message());
  VS_RETURN_IF_ERROR(CheckSizes(vg));
  return vg;
}

}  // namespace
}  // namespace volstack::lvm

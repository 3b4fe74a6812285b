#include "cli/lvm_report.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/lvm_common.h"
#include "cli/lvm_report_select.h"
#include "lvm/allocator.h"
#include "lvm/kept_lvs.h"
#include "lvm/mirrored_lv.h"
#include "lvm/pvmove.h"
#include "lvm/thin_lv.h"
#include "lvm/uuid.h"
#include "util/request_io.h"

namespace volstack::cli::lvmcli {

namespace {

enum class Align { kLeft, kRight };
enum class Level { kPv, kVg, kLv, kSeg };

struct Env {
  const Context& ctx;
  char units;
  bool suffix;
};

struct Field {
  const char* name;
  const char* heading;
  Level level;
  Align align;
  std::function<std::string(const Env&, const ReportRow&)> get;
};

std::string Size(const Env& e, uint64_t bytes) { return FormatSize(bytes, e.units, e.suffix); }

uint64_t Ext(const ReportRow& r) { return r.vg ? r.vg->vg.extent_bytes() : 0; }

uint32_t FreeExtentsOf(const lvm::VgHandle& h, int pv) {
  const auto& p = h.vg.pvs[pv];
  return p.pe_count - h.vg.pv_allocated_extents(pv);
}

std::string PvAttr(const ReportRow& r) {
  std::string a = "---";
  if (r.vg && r.pv_index >= 0) {
    const auto& p = r.vg->vg.pvs[r.pv_index];
    a[0] = p.allocatable() ? 'a' : 'u';  // 'u': used by a VG, not allocatable
    if (p.HasStatus("EXPORTED")) a[1] = 'x';
    if (!r.vg->pvs[r.pv_index]) a[2] = 'm';
  }
  return a;
}

std::string VgAttr(const lvm::VgHandle& h) {
  std::string a = "------";
  a[0] = h.vg.HasStatus("WRITE") ? 'w' : 'r';
  if (h.vg.HasStatus("RESIZEABLE")) a[1] = 'z';
  if (h.vg.HasStatus("EXPORTED")) a[2] = 'x';
  if (h.partial()) a[3] = 'p';
  a[4] = h.vg.allocation_policy == "contiguous" ? 'c' : 'n';
  return a;
}

// lvm2 reports string lists sorted (dm_report_field_string_list).
std::string Tags(std::vector<std::string> tags) {
  std::sort(tags.begin(), tags.end());
  std::string out;
  for (const auto& t : tags) out += (out.empty() ? "" : ",") + t;
  return out;
}

std::string SegType(const lvm::Segment& s) {
  if (s.is_striped()) return s.stripe_count() == 1 ? "linear" : "striped";
  return lvm::ReportedSegType(s.type);
}

lvm::LvReportRole RoleOf(const ReportRow& r) {
  auto roles = lvm::LvReportRoles(r.vg->vg);
  auto it = roles.find(r.lv->name);
  return it == roles.end() ? lvm::LvReportRole{} : it->second;
}

// An LV named in another LV's pool, origin or log column: [bracketed] when hidden.
std::string NamedLv(const ReportRow& r, const std::string& name) {
  if (name.empty()) return "";
  auto roles = lvm::LvReportRoles(r.vg->vg);
  auto it = roles.find(name);
  return it != roles.end() && !it->second.visible ? "[" + name + "]" : name;
}

std::string AreaName(const lvm::VgHandle& h, const lvm::SegmentArea& a) {
  return a.is_pv() ? PvDisplayName(h, a.pv) : a.lv;
}

std::string SegPeRanges(const ReportRow& r) {
  std::string out;
  const uint32_t len = r.seg->area_len();
  for (const auto& a : r.seg->areas) {
    if (!out.empty()) out += ' ';
    out += AreaName(*r.vg, a) + ":" + std::to_string(a.start) + "-" +
           std::to_string(a.start + len - 1);
  }
  return out;
}

std::string Devices(const ReportRow& r) {
  std::string out;
  for (const auto& a : r.seg->areas) {
    if (!out.empty()) out += ',';
    out += AreaName(*r.vg, a) + "(" + std::to_string(a.start) + ")";
  }
  return out;
}

std::string MovePv(const ReportRow& r) {
  if (!r.lv->HasStatus("PVMOVE") || r.lv->segments.empty()) return "";
  const auto& s = r.lv->segments[0];
  return s.areas.empty() ? "" : AreaName(*r.vg, s.areas[0]);
}

// lvm2 shows Data% of an active thin LV (as of the pool's last commit here).
std::string ThinDataPercent(const Env& e, const ReportRow& r) {
  if (!lvm::IsServedThinLv(*r.lv) || !IsActive(e.ctx, r.vg->vg.name, r.lv->name)) return "";
  std::vector<bdev::BlockDevicePtr> devs;
  for (const auto* pv : r.vg->pvs) devs.push_back(pv ? pv->dev() : nullptr);
  const auto pct = lvm::ThinDataPercent(r.vg->vg, *r.lv, devs);
  if (!pct) return "";
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%.2f", *pct);
  return buf;
}

std::string LvDisplayName(const ReportRow& r) {
  return RoleOf(r).visible ? r.lv->name : "[" + r.lv->name + "]";
}

const std::vector<Field>& Fields() {
  using R = const ReportRow&;
  using E = const Env&;
  static const std::vector<Field> fields = {
      // PV
      {"pv_name", "PV", Level::kPv, Align::kLeft, [](E, R r) { return r.pv_name; }},
      {"pv_fmt", "Fmt", Level::kPv, Align::kLeft, [](E, R) { return std::string("lvm2"); }},
      {"pv_attr", "Attr", Level::kPv, Align::kLeft, [](E, R r) { return PvAttr(r); }},
      {"pv_size", "PSize", Level::kPv, Align::kRight,
       [](E e, R r) {
         if (r.vg && r.pv_index >= 0) return Size(e, r.vg->vg.pvs[r.pv_index].pe_count * Ext(r));
         return Size(e, r.pv ? r.pv->dev()->size() : 0);
       }},
      {"pv_free", "PFree", Level::kPv, Align::kRight,
       [](E e, R r) {
         if (r.vg && r.pv_index >= 0) return Size(e, FreeExtentsOf(*r.vg, r.pv_index) * Ext(r));
         return Size(e, r.pv ? r.pv->dev()->size() : 0);
       }},
      {"pv_used", "Used", Level::kPv, Align::kRight,
       [](E e, R r) {
         if (r.vg && r.pv_index >= 0) return Size(e, r.vg->vg.pv_allocated_extents(r.pv_index) * Ext(r));
         return Size(e, 0);
       }},
      {"pv_uuid", "PV UUID", Level::kPv, Align::kLeft,
       [](E, R r) {
         if (r.pv) return lvm::FormatId(r.pv->uuid());
         return r.vg && r.pv_index >= 0 ? lvm::FormatId(r.vg->vg.pvs[r.pv_index].id) : std::string();
       }},
      {"dev_size", "DevSize", Level::kPv, Align::kRight,
       [](E e, R r) {
         if (r.pv) return Size(e, r.pv->dev()->size());
         return Size(e, r.vg && r.pv_index >= 0 ? r.vg->vg.pvs[r.pv_index].dev_size * 512 : 0);
       }},
      {"pe_start", "1st PE", Level::kPv, Align::kRight,
       [](E e, R r) { return Size(e, r.pv ? r.pv->pe_start_bytes() : 0); }},
      {"pv_mda_size", "PMdaSize", Level::kPv, Align::kRight,
       [](E e, R r) {
         uint64_t m = 0;
         if (r.pv) {
           for (const auto& a : r.pv->label().metadata_areas) m = m ? std::min(m, a.size) : a.size;
         }
         return Size(e, m);
       }},
      {"pv_mda_count", "#PMda", Level::kPv, Align::kRight,
       [](E, R r) { return std::to_string(r.pv ? r.pv->label().metadata_areas.size() : 0); }},
      {"pv_pe_count", "PE", Level::kPv, Align::kRight,
       [](E, R r) {
         return std::to_string(r.vg && r.pv_index >= 0 ? r.vg->vg.pvs[r.pv_index].pe_count : 0);
       }},
      {"pv_pe_alloc_count", "Alloc", Level::kPv, Align::kRight,
       [](E, R r) {
         return std::to_string(r.vg && r.pv_index >= 0 ? r.vg->vg.pv_allocated_extents(r.pv_index) : 0);
       }},
      {"pv_missing", "Missing", Level::kPv, Align::kLeft,
       [](E, R r) { return std::string(r.vg && r.pv_index >= 0 && !r.vg->pvs[r.pv_index] ? "missing" : ""); }},
      {"pv_allocatable", "Allocatable", Level::kPv, Align::kLeft,
       [](E, R r) {
         return std::string(r.vg && r.pv_index >= 0 && r.vg->vg.pvs[r.pv_index].allocatable() ? "allocatable" : "");
       }},
      {"pv_tags", "PV Tags", Level::kPv, Align::kLeft,
       [](E, R r) { return r.vg && r.pv_index >= 0 ? Tags(r.vg->vg.pvs[r.pv_index].tags) : ""; }},
      // VG
      {"vg_tags", "VG Tags", Level::kVg, Align::kLeft,
       [](E, R r) { return r.vg ? Tags(r.vg->vg.tags) : ""; }},
      {"vg_name", "VG", Level::kVg, Align::kLeft, [](E, R r) { return r.vg ? r.vg->vg.name : ""; }},
      {"vg_fmt", "Fmt", Level::kVg, Align::kLeft, [](E, R r) { return std::string(r.vg ? "lvm2" : ""); }},
      {"vg_uuid", "VG UUID", Level::kVg, Align::kLeft,
       [](E, R r) { return r.vg ? lvm::FormatId(r.vg->vg.id) : ""; }},
      {"vg_attr", "Attr", Level::kVg, Align::kLeft, [](E, R r) { return r.vg ? VgAttr(*r.vg) : ""; }},
      {"pv_count", "#PV", Level::kVg, Align::kRight,
       [](E, R r) { return r.vg ? std::to_string(r.vg->vg.pvs.size()) : ""; }},
      {"lv_count", "#LV", Level::kVg, Align::kRight,
       [](E, R r) {
         if (!r.vg) return std::string();
         const auto roles = lvm::LvReportRoles(r.vg->vg);
         return std::to_string(std::count_if(roles.begin(), roles.end(),
                                             [](const auto& kv) { return kv.second.visible; }));
       }},
      {"snap_count", "#SN", Level::kVg, Align::kRight,
       [](E, R r) {
         if (!r.vg) return std::string();
         const auto roles = lvm::LvReportRoles(r.vg->vg);
         return std::to_string(std::count_if(roles.begin(), roles.end(),
                                             [](const auto& kv) { return kv.second.volume_type == 's'; }));
       }},
      {"vg_size", "VSize", Level::kVg, Align::kRight,
       [](E e, R r) { return r.vg ? Size(e, r.vg->vg.total_extents() * Ext(r)) : ""; }},
      {"vg_free", "VFree", Level::kVg, Align::kRight,
       [](E e, R r) {
         if (!r.vg) return std::string();
         return Size(e, (r.vg->vg.total_extents() - r.vg->vg.allocated_extents()) * Ext(r));
       }},
      {"vg_extent_size", "Ext", Level::kVg, Align::kRight,
       [](E e, R r) { return r.vg ? Size(e, Ext(r)) : ""; }},
      {"vg_extent_count", "#Ext", Level::kVg, Align::kRight,
       [](E, R r) { return r.vg ? std::to_string(r.vg->vg.total_extents()) : ""; }},
      {"vg_free_count", "Free", Level::kVg, Align::kRight,
       [](E, R r) {
         return r.vg ? std::to_string(r.vg->vg.total_extents() - r.vg->vg.allocated_extents()) : "";
       }},
      {"vg_seqno", "Seq", Level::kVg, Align::kRight,
       [](E, R r) { return r.vg ? std::to_string(r.vg->vg.seqno) : ""; }},
      {"vg_mda_count", "#VMda", Level::kVg, Align::kRight,
       [](E, R r) { return r.vg ? std::to_string(r.vg->mda_count()) : ""; }},
      {"max_lv", "MaxLV", Level::kVg, Align::kRight,
       [](E, R r) { return r.vg ? std::to_string(r.vg->vg.max_lv) : ""; }},
      {"max_pv", "MaxPV", Level::kVg, Align::kRight,
       [](E, R r) { return r.vg ? std::to_string(r.vg->vg.max_pv) : ""; }},
      {"vg_missing_pv_count", "#PV Missing", Level::kVg, Align::kRight,
       [](E, R r) {
         return r.vg ? std::to_string(std::count(r.vg->pvs.begin(), r.vg->pvs.end(), nullptr)) : "";
       }},
      // LV
      {"lv_name", "LV", Level::kLv, Align::kLeft, [](E, R r) { return LvDisplayName(r); }},
      {"lv_full_name", "LV", Level::kLv, Align::kLeft,
       [](E, R r) { return r.vg->vg.name + "/" + r.lv->name; }},
      {"lv_path", "Path", Level::kLv, Align::kLeft,
       [](E, R r) { return RoleOf(r).visible ? "/dev/" + r.vg->vg.name + "/" + r.lv->name : ""; }},
      {"lv_uuid", "LV UUID", Level::kLv, Align::kLeft, [](E, R r) { return lvm::FormatId(r.lv->id); }},
      {"lv_attr", "Attr", Level::kLv, Align::kLeft, [](E e, R r) { return LvAttr(e.ctx, *r.vg, *r.lv); }},
      {"lv_active", "Active", Level::kLv, Align::kLeft,
       [](E e, R r) { return std::string(IsActive(e.ctx, r.vg->vg.name, r.lv->name) ? "active" : ""); }},
      {"lv_size", "LSize", Level::kLv, Align::kRight,
       [](E e, R r) { return Size(e, r.lv->le_count() * Ext(r)); }},
      {"seg_count", "#Seg", Level::kLv, Align::kRight,
       [](E, R r) { return std::to_string(r.lv->segments.size()); }},
      {"pool_lv", "Pool", Level::kLv, Align::kLeft, [](E, R r) { return NamedLv(r, RoleOf(r).pool); }},
      {"origin", "Origin", Level::kLv, Align::kLeft, [](E, R r) { return NamedLv(r, RoleOf(r).origin); }},
      {"data_percent", "Data%", Level::kLv, Align::kRight, [](E e, R r) { return ThinDataPercent(e, r); }},
      {"metadata_percent", "Meta%", Level::kLv, Align::kRight, [](E, R) { return std::string(); }},
      {"move_pv", "Move", Level::kLv, Align::kLeft, [](E, R r) { return MovePv(r); }},
      {"mirror_log", "Log", Level::kLv, Align::kLeft, [](E, R r) { return NamedLv(r, RoleOf(r).log); }},
      {"copy_percent", "Cpy%Sync", Level::kLv, Align::kRight,
       [](E e, R r) {
         // A served raid1/mirror LV is resynced whole at activation.
         if (lvm::IsServedMirroredLv(*r.lv) && IsActive(e.ctx, r.vg->vg.name, r.lv->name)) {
           return std::string("100.00");
         }
         if (!r.lv->HasStatus("PVMOVE")) return std::string();
         uint64_t moved = 0, total = r.lv->le_count();
         for (const auto& s : r.lv->segments) moved += std::min(s.extents_moved, s.extent_count);
         double pct = total ? 100.0 * moved / total : 0.0;
         // A move running in this process (the daemon) knows better than its checkpoints.
         if (auto live = lvm::LiveMoveProgress(r.vg->vg.name); live && live->total_bytes) {
           pct = 100.0 * static_cast<double>(live->done_bytes) / live->total_bytes;
         }
         char buf[16];
         std::snprintf(buf, sizeof(buf), "%.2f", pct);
         return std::string(buf);
       }},
      {"convert_lv", "Convert", Level::kLv, Align::kLeft, [](E, R) { return std::string(); }},
      {"lv_tags", "LV Tags", Level::kLv, Align::kLeft, [](E, R r) { return Tags(r.lv->tags); }},
      {"lv_allocation_policy", "AllocPol", Level::kLv, Align::kLeft,
       [](E, R r) { return r.lv->allocation_policy.empty() ? std::string("inherit") : r.lv->allocation_policy; }},
      // Segments
      {"segtype", "Type", Level::kSeg, Align::kLeft, [](E, R r) { return SegType(*r.seg); }},
      {"stripes", "#Str", Level::kSeg, Align::kRight,
       [](E, R r) { return std::to_string(r.seg->is_striped() ? r.seg->stripe_count() : r.seg->areas.size()); }},
      {"stripe_size", "Stripe", Level::kSeg, Align::kRight,
       [](E e, R r) { return Size(e, uint64_t{r.seg->stripe_size} * 512); }},
      {"seg_start", "Start", Level::kSeg, Align::kRight,
       [](E e, R r) { return Size(e, r.seg->start_extent * Ext(r)); }},
      {"seg_start_pe", "Start", Level::kSeg, Align::kRight,
       [](E, R r) { return std::to_string(r.seg->start_extent); }},
      {"seg_size", "SSize", Level::kSeg, Align::kRight,
       [](E e, R r) { return Size(e, r.seg->extent_count * Ext(r)); }},
      {"seg_size_pe", "SSize", Level::kSeg, Align::kRight,
       [](E, R r) { return std::to_string(r.seg->extent_count); }},
      {"seg_pe_ranges", "PE Ranges", Level::kSeg, Align::kLeft, [](E, R r) { return SegPeRanges(r); }},
      {"devices", "Devices", Level::kSeg, Align::kLeft, [](E, R r) { return Devices(r); }},
  };
  return fields;
}

const Field* FindField(const std::string& name, ReportKind kind) {
  static const std::map<std::string, std::string> kAliases = {{"stripesize", "stripe_size"},
                                                              {"seg_pe_range", "seg_pe_ranges"},
                                                              {"device", "devices"},
                                                              {"vg_seq_no", "vg_seqno"},
                                                              {"pe_ranges", "seg_pe_ranges"}};
  std::string n = name;
  if (auto it = kAliases.find(n); it != kAliases.end()) n = it->second;
  auto find = [&](const std::string& want) -> const Field* {
    for (const auto& f : Fields()) {
      if (want == f.name) return &f;
    }
    return nullptr;
  };
  if (const Field* f = find(n)) return f;
  const char* prefix = kind == ReportKind::kPv ? "pv_" : kind == ReportKind::kVg ? "vg_" : "lv_";
  if (const Field* f = find(prefix + n)) return f;
  if (const Field* f = find("seg_" + n)) return f;
  return nullptr;
}

std::vector<std::string> Defaults(ReportKind kind) {
  switch (kind) {
    case ReportKind::kPv:
      return {"pv_name", "vg_name", "pv_fmt", "pv_attr", "pv_size", "pv_free"};
    case ReportKind::kVg:
      return {"vg_name", "pv_count", "lv_count", "snap_count", "vg_attr", "vg_size", "vg_free"};
    case ReportKind::kLv:
      return {"lv_name", "vg_name",    "lv_attr",      "lv_size",
              "pool_lv", "origin",     "data_percent", "metadata_percent",
              "move_pv", "mirror_log", "copy_percent", "convert_lv"};
  }
  return {};
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    std::string item = s.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::string PvDisplayName(const lvm::VgHandle& vg, int index) {
  if (index < 0 || index >= static_cast<int>(vg.pvs.size()) || !vg.pvs[index]) return "[unknown]";
  return vg.pvs[index]->name();
}

std::string LvAttr(const Context& ctx, const lvm::VgHandle& vg, const lvm::LogicalVolume& lv) {
  std::string a = "----------";
  const auto roles = lvm::LvReportRoles(vg.vg);
  const auto role = roles.find(lv.name);
  if (lv.HasStatus("PVMOVE")) {
    a[0] = 'p';
  } else if (role != roles.end()) {
    a[0] = role->second.volume_type;
    a[6] = role->second.target_type;
    a[7] = role->second.zero;
  }
  a[1] = lv.HasStatus("PVMOVE") ? '-' : lv.HasStatus("WRITE") ? 'w' : 'r';  // lvm2: "p-C"
  char pol = 'i';
  if (lv.allocation_policy == "contiguous") pol = 'c';
  if (lv.allocation_policy == "normal") pol = 'n';
  a[2] = lv.HasStatus("LOCKED") ? static_cast<char>(std::toupper(pol)) : pol;
  const bool active = IsActive(ctx, vg.vg.name, lv.name);
  if (active) a[4] = 'a';
  bool mirror = false;
  bool missing = false;
  for (const auto& s : lv.segments) {
    mirror |= s.is_mirror();
    for (const auto& ar : s.areas) missing |= ar.is_pv() && !vg.pvs[ar.pv];
  }
  if (mirror) a[6] = 'm';
  if (missing) a[8] = 'p';
  if (lvm::IsServedMirroredLv(lv)) {
    // As lvm2: a leg on a missing PV makes the LV partial; a leg its raid superblocks record
    // as failed (or stale) asks for a refresh.
    std::vector<bdev::BlockDevicePtr> devs;
    for (const auto* pv : vg.pvs) devs.push_back(pv ? pv->dev() : nullptr);
    const auto layout = lvm::MirroredLayoutOf(vg.vg, lv);
    bool leg_missing = false;
    if (layout.ok()) {
      for (const auto& name : layout->images) {
        const auto* sub = vg.vg.FindLv(name);
        for (const auto& s : sub ? sub->segments : std::vector<lvm::Segment>{}) {
          for (const auto& ar : s.areas) leg_missing |= ar.is_pv() && !vg.pvs[ar.pv];
        }
      }
    }
    if (leg_missing) {
      a[8] = 'p';
    } else if (lv.segments[0].type == "raid1" &&
               lvm::ReadMirroredHealth(vg.vg, lv, devs).degraded()) {
      a[8] = 'r';
    }
  }
  return a;
}

namespace {

// Whether a report of `kind` may show `f` (lvs: LV, segment and VG fields; pvs: PV and VG
// fields; vgs: VG fields).
bool FieldAllowed(const Field& f, ReportKind kind) {
  if (kind != ReportKind::kLv && (f.level == Level::kLv || f.level == Level::kSeg)) return false;
  return !(kind == ReportKind::kVg && f.level == Level::kPv);
}

FieldType TypeOf(const Field& f) {
  static const std::set<std::string> kSizes = {
      "pv_size", "pv_free",        "pv_used", "dev_size",    "pe_start",  "pv_mda_size", "vg_size",
      "vg_free", "vg_extent_size", "lv_size", "stripe_size", "seg_start", "seg_size"};
  const std::string n = f.name;
  if (n.ends_with("percent")) return FieldType::kPercent;
  if (kSizes.count(n)) return FieldType::kSize;
  return f.align == Align::kRight ? FieldType::kNumber : FieldType::kString;
}

// Prints each line of a multi-line message as lvm2 does; exit code 5, as lvm2's for -S.
int FailLines(const std::string& message) {
  size_t start = 0;
  while (start <= message.size()) {
    size_t nl = message.find('\n', start);
    if (nl == std::string::npos) nl = message.size();
    Fail(message.substr(start, nl - start));
    start = nl + 1;
  }
  return kLvmFailed;
}

}  // namespace

void AddReportOptions(CLI::App* app, ReportOptions* o) {
  app->add_option("-o,--options", o->options, "Fields to report (+ to append)")
      ->allow_extra_args(false);
  app->add_flag("--noheadings", o->noheadings, "Suppress the headings line");
  app->add_option("--separator", o->separator, "Separate columns with this string")
      ->each([o](const std::string&) { o->separator_set = true; });
  app->add_flag("--nosuffix", o->nosuffix, "Sizes without unit suffix");
  app->add_option("--units", o->units, "Units: hHbBsSkKmMgGtTpPeE");
  app->add_option("--reportformat", o->reportformat, "basic or json");
  app->add_option("-O,--sort", o->sort, "Sort keys: field or -field (descending), comma list")
      ->allow_extra_args(false);
  app->add_option("-S,--select", o->select, "Report only rows matching the selection");
  app->add_flag("--aligned", o->aligned, "Align columns also with --separator");
  app->add_flag("--readonly")->description("Read without locking (always the case)");
}

namespace {

// lvm2's column widths (lib/report/columns.h, the output_width of each field; 0 for most):
// a column is as wide as the largest of that width, its heading and its values, with or
// without --noheadings, as lvm2 2.03.16 prints them (checked field by field in
// tests/integration/lvm_verbs_test.sh).
size_t MinimumWidth(const std::string& field) {
  static const std::map<std::string, size_t> kWidths = {
      {"lv_uuid", 38},     {"lv_name", 4},
      {"lv_full_name", 4}, {"lv_allocation_policy", 10},
      {"data_percent", 6}, {"metadata_percent", 6},
      {"pv_uuid", 38},     {"pv_name", 10},
      {"pv_mda_size", 9},  {"pe_start", 7},
      {"pv_missing", 10},  {"pv_pe_count", 3},
      {"vg_uuid", 38},     {"vg_attr", 5}};
  const auto it = kWidths.find(field);
  return it == kWidths.end() ? 0 : it->second;
}

}  // namespace

int PrintReport(const Context& ctx, ReportKind kind, const ReportOptions& options,
                std::vector<ReportRow> rows) {
  if (!IsValidUnits(options.units)) return Fail("Invalid units specification.", kLvmInvalid);
  if (options.reportformat != "basic" && options.reportformat != "json") {
    return Fail("Unknown report format " + options.reportformat, kLvmInvalid);
  }
  std::vector<std::string> names = Defaults(kind);
  for (const auto& o : options.options) {
    if (!o.empty() && o[0] == '+') {
      for (auto& f : SplitComma(o.substr(1))) names.push_back(f);
    } else {
      names = SplitComma(o);
    }
  }
  std::vector<const Field*> fields;
  bool seg_level = false;
  for (const auto& n : names) {
    const Field* f = FindField(n, kind);
    if (!f || !FieldAllowed(*f, kind)) return Fail("Unrecognised field: " + n, kLvmInvalid);
    seg_level |= f->level == Level::kSeg;
    fields.push_back(f);
  }
  // -S and -O read fields by index in Fields(), whether shown or not.
  const FieldResolver resolve = [kind](const std::string& n) -> std::optional<FieldRef> {
    const Field* f = FindField(n, kind);
    if (!f || !FieldAllowed(*f, kind)) return std::nullopt;
    return FieldRef{static_cast<int>(f - Fields().data()), TypeOf(*f)};
  };
  std::optional<Selection> selection;
  if (!options.select.empty()) {
    auto sel = Selection::Parse(options.select, resolve);
    if (!sel.ok()) return FailLines(sel.status().message());
    selection = std::move(*sel);
    for (int i : selection->fields()) seg_level |= Fields()[i].level == Level::kSeg;
  }
  auto keys = ParseSortKeys(options.sort, resolve);
  if (!keys.ok()) return Fail(keys.status());
  for (const auto& k : *keys) seg_level |= Fields()[k.field.index].level == Level::kSeg;
  if (kind == ReportKind::kLv) {
    std::vector<ReportRow> expanded;
    for (auto& r : rows) {
      if (!seg_level) {
        expanded.push_back(r);
        continue;
      }
      for (const auto& s : r.lv->segments) {
        ReportRow sr = r;
        sr.seg = &s;
        expanded.push_back(sr);
      }
    }
    rows = std::move(expanded);
  }
  // Selection and sorting see sizes in bytes, without suffix.
  const Env raw{ctx, 'b', false};
  auto value_of = [&raw](const ReportRow& r) {
    return [&raw, &r](int i) { return Fields()[i].get(raw, r); };
  };
  if (selection) {
    std::erase_if(rows, [&](const ReportRow& r) { return !selection->Matches(value_of(r)); });
  }
  if (!keys->empty()) {
    std::stable_sort(rows.begin(), rows.end(), [&](const ReportRow& a, const ReportRow& b) {
      return CompareRows(*keys, value_of(a), value_of(b)) < 0;
    });
  }
  char units = options.units[0];
  Env env{ctx, units, !options.nosuffix};
  std::vector<std::vector<std::string>> cells;
  for (const auto& r : rows) {
    std::vector<std::string> line;
    for (const Field* f : fields) line.push_back(f->get(env, r));
    cells.push_back(std::move(line));
  }
  if (options.reportformat == "json") {
    const char* key = kind == ReportKind::kPv ? "pv" : kind == ReportKind::kVg ? "vg" : "lv";
    if (seg_level) key = "seg";
    std::fprintf(Out(), "  {\n      \"report\": [\n          {\n              \"%s\": [\n", key);
    for (size_t i = 0; i < cells.size(); i++) {
      std::string line = "                  {";
      for (size_t j = 0; j < fields.size(); j++) {
        if (j) line += ", ";
        line += nlohmann::json(fields[j]->name).dump() + ":" + nlohmann::json(cells[i][j]).dump();
      }
      line += i + 1 < cells.size() ? "}," : "}";
      std::fprintf(Out(), "%s\n", line.c_str());
    }
    std::fprintf(Out(), "              ]\n          }\n      ]\n  }\n");
    return kLvmOk;
  }
  if (rows.empty()) return kLvmOk;  // lvm2 prints the headings with the first row
  std::vector<size_t> width(fields.size());
  for (size_t j = 0; j < fields.size(); j++) {
    width[j] = std::max(std::string(fields[j]->heading).size(), MinimumWidth(fields[j]->name));
    for (const auto& c : cells) width[j] = std::max(width[j], c[j].size());
  }
  auto pad = [&](const std::string& s, size_t w, Align a) {
    std::string fill(w > s.size() ? w - s.size() : 0, ' ');
    return a == Align::kRight ? fill + s : s + fill;
  };
  // Aligned: columns padded and joined by a space (or by the separator with --aligned);
  // with a separator alone, values as they are. Headings are always left-aligned.
  const bool aligned = !options.separator_set || options.aligned;
  const std::string sep = options.separator_set ? options.separator : " ";
  auto line = [&](const std::vector<std::string>& v, bool heading) {
    std::string s = "  ";
    for (size_t j = 0; j < v.size(); j++) {
      if (j) s += sep;
      s += aligned ? pad(v[j], width[j], heading ? Align::kLeft : fields[j]->align) : v[j];
    }
    std::fprintf(Out(), "%s\n", s.c_str());
  };
  if (!options.noheadings) {
    std::vector<std::string> h;
    for (const Field* f : fields) h.push_back(f->heading);
    line(h, true);
  }
  for (const auto& c : cells) line(c, false);
  return kLvmOk;
}

}  // namespace volstack::cli::lvmcli

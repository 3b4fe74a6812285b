// Reporting verbs: pvs, vgs, lvs (field reports) and pvdisplay, vgdisplay, lvdisplay, pvscan
// (lvm2's fixed layouts). All read-only: devices are opened without locks and nothing is
// written.
#include <algorithm>
#include <cstdio>
#include <ctime>

#include "cli/lvm_common.h"
#include "cli/lvm_report.h"
#include "lvm/kept_lvs.h"
#include "lvm/uuid.h"
#include "util/request_io.h"

namespace volstack::cli::lvmcli {

namespace {

struct ReportArgs {
  ReportOptions report;
  std::vector<std::string> names;
};

std::vector<ReportRow> PvRows(lvm::Lvm& lvm) {
  std::vector<ReportRow> rows;
  for (const auto& pv : lvm.pvs()) {
    ReportRow r;
    r.pv = pv.get();
    r.pv_name = pv->name();
    r.vg = lvm.VgOfPv(pv.get());
    if (r.vg) {
      for (size_t i = 0; i < r.vg->pvs.size(); i++) {
        if (r.vg->pvs[i] == pv.get()) r.pv_index = static_cast<int>(i);
      }
    }
    rows.push_back(r);
  }
  for (auto& h : lvm.vgs()) {
    for (size_t i = 0; i < h.pvs.size(); i++) {
      if (h.pvs[i]) continue;
      ReportRow r;
      r.vg = &h;
      r.pv_index = static_cast<int>(i);
      r.pv_name = "[unknown]";
      rows.push_back(r);
    }
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const ReportRow& a, const ReportRow& b) { return a.pv_name < b.pv_name; });
  return rows;
}

int Pvs(const Context& ctx, const ReportArgs& a) {
  auto lvm = OpenSession(ctx, true, a.names);
  WarnScan(*lvm);
  auto rows = PvRows(*lvm);
  int rc = kLvmOk;
  if (!a.names.empty()) {
    std::vector<ReportRow> keep;
    for (const auto& n : a.names) {
      const std::string want = NormalizeDeviceName(n);
      bool found = false;
      for (const auto& r : rows) {
        if (r.pv_name == want || (r.pv && lvm::FormatId(r.pv->uuid()) == n)) {
          keep.push_back(r);
          found = true;
        }
      }
      if (!found) rc = Fail("Failed to find physical volume \"" + n + "\".");
    }
    rows = keep;
  }
  int prc = PrintReport(ctx, ReportKind::kPv, a.report, rows);
  return prc ? prc : rc;
}

int Vgs(const Context& ctx, const ReportArgs& a) {
  auto lvm = OpenSession(ctx, true);
  WarnScan(*lvm);
  std::vector<ReportRow> rows;
  int rc = kLvmOk;
  for (auto& h : lvm->vgs()) {
    if (!a.names.empty() && std::find(a.names.begin(), a.names.end(), h.vg.name) == a.names.end())
      continue;
    ReportRow r;
    r.vg = &h;
    rows.push_back(r);
  }
  for (const auto& n : a.names) {
    if (!lvm->FindVg(n)) {
      Fail(VgNotFound(*lvm, n));
      rc = Fail("Cannot process volume group " + n);
    }
  }
  int prc = PrintReport(ctx, ReportKind::kVg, a.report, rows);
  return prc ? prc : rc;
}

// LVs selected by names "vg" or "vg/lv" (all when empty). Reports unknown names.
std::vector<ReportRow> LvRows(lvm::Lvm& lvm, const std::vector<std::string>& names, bool all,
                              int* rc) {
  std::vector<ReportRow> rows;
  for (auto& h : lvm.vgs()) {
    const auto roles = lvm::LvReportRoles(h.vg);
    for (const auto& lv : h.vg.lvs) {
      const lvm::LvReportRole& role = roles.at(lv.name);
      if (!role.listed || (!all && !role.visible)) continue;
      bool want = names.empty();
      for (const auto& n : names) {
        auto [vg, lvn] = SplitLvName(n);
        want |= vg == h.vg.name && (lvn.empty() || lvn == lv.name);
      }
      if (!want) continue;
      ReportRow r;
      r.vg = &h;
      r.lv = &lv;
      rows.push_back(r);
    }
  }
  for (const auto& n : names) {
    auto [vg, lvn] = SplitLvName(n);
    lvm::VgHandle* h = lvm.FindVg(vg);
    if (!h) {
      Fail("Volume group \"" + vg + "\" not found");
      *rc = Fail("Cannot process volume group " + vg);
    } else if (!lvn.empty() && !h->vg.FindLv(lvn)) {
      *rc = Fail("Failed to find logical volume \"" + vg + "/" + lvn + "\"");
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const ReportRow& a, const ReportRow& b) {
    return std::tie(a.vg->vg.name, a.lv->name) < std::tie(b.vg->vg.name, b.lv->name);
  });
  return rows;
}

int Lvs(const Context& ctx, const ReportArgs& a) {
  auto lvm = OpenSession(ctx, true);
  WarnScan(*lvm);
  int rc = kLvmOk;
  auto rows = LvRows(*lvm, a.names, a.report.all, &rc);
  int prc = PrintReport(ctx, ReportKind::kLv, a.report, rows);
  return prc ? prc : rc;
}

void Line(const char* key, const std::string& value) {
  std::fprintf(Out(), "  %-21s %s\n", key, value.c_str());
}

int Pvdisplay(const Context& ctx, const std::vector<std::string>& names) {
  auto lvm = OpenSession(ctx, true, names);
  WarnScan(*lvm);
  auto rows = PvRows(*lvm);
  int rc = kLvmOk;
  for (const auto& n : names) {
    const std::string want = NormalizeDeviceName(n);
    if (std::none_of(rows.begin(), rows.end(),
                     [&](const ReportRow& r) { return r.pv_name == want; })) {
      rc = Fail("Failed to find physical volume \"" + n + "\".");
    }
  }
  for (const auto& r : rows) {
    if (!names.empty() && std::none_of(names.begin(), names.end(), [&](const std::string& n) {
          return NormalizeDeviceName(n) == r.pv_name;
        })) {
      continue;
    }
    const bool in_vg = r.vg && r.pv_index >= 0;
    const uint64_t dev_size = r.pv ? r.pv->dev()->size() : 0;
    if (in_vg) {
      std::fprintf(Out(), "  --- Physical volume ---\n");
    } else {
      std::fprintf(Out(), "  \"%s\" is a new physical volume of \"%s\"\n", r.pv_name.c_str(),
                   FormatSizeLong(dev_size).c_str());
      std::fprintf(Out(), "  --- NEW Physical volume ---\n");
    }
    Line("PV Name", r.pv_name);
    Line("VG Name", in_vg ? r.vg->vg.name : "");
    if (in_vg) {
      const auto& p = r.vg->vg.pvs[r.pv_index];
      const uint64_t ext = r.vg->vg.extent_bytes();
      const uint64_t used = uint64_t{p.pe_count} * ext;
      Line("PV Size", FormatSizeLong(p.dev_size * 512) + " / not usable " +
                          FormatSizeLong(p.dev_size * 512 - used));
      Line("Allocatable", p.allocatable() ? "yes " : "NO");
      Line("PE Size", FormatSizeLong(ext));
      Line("Total PE", std::to_string(p.pe_count));
      const uint32_t alloc = r.vg->vg.pv_allocated_extents(r.pv_index);
      Line("Free PE", std::to_string(p.pe_count - alloc));
      Line("Allocated PE", std::to_string(alloc));
      Line("PV UUID", lvm::FormatId(p.id));
    } else {
      Line("PV Size", FormatSizeLong(dev_size));
      Line("Allocatable", "NO");
      Line("PE Size", "0   ");
      Line("Total PE", "0");
      Line("Free PE", "0");
      Line("Allocated PE", "0");
      Line("PV UUID", r.pv ? lvm::FormatId(r.pv->uuid()) : "");
    }
    std::fprintf(Out(), "   \n");
  }
  return rc;
}

int Vgdisplay(const Context& ctx, const std::vector<std::string>& names) {
  auto lvm = OpenSession(ctx, true);
  WarnScan(*lvm);
  int rc = kLvmOk;
  for (const auto& n : names) {
    if (!lvm->FindVg(n)) {
      Fail(VgNotFound(*lvm, n));
      rc = Fail("Cannot process volume group " + n);
    }
  }
  for (auto& h : lvm->vgs()) {
    if (!names.empty() && std::find(names.begin(), names.end(), h.vg.name) == names.end()) continue;
    const auto& vg = h.vg;
    const uint64_t ext = vg.extent_bytes();
    const uint64_t total = vg.total_extents(), alloc = vg.allocated_extents();
    int visible = 0, open = 0;
    for (const auto& lv : vg.lvs) {
      if (!lv.visible()) continue;
      visible++;
      open += IsActive(ctx, vg.name, lv.name);
    }
    const int present =
        static_cast<int>(std::count_if(h.pvs.begin(), h.pvs.end(), [](auto* p) { return p; }));
    std::fprintf(Out(), "  --- Volume group ---\n");
    Line("VG Name", vg.name);
    Line("System ID", vg.system_id);
    Line("Format", "lvm2");
    Line("Metadata Areas", std::to_string(h.mda_count()));
    Line("Metadata Sequence No", std::to_string(vg.seqno));
    Line("VG Access", vg.HasStatus("WRITE") ? "read/write" : "read");
    Line("VG Status", vg.HasStatus("RESIZEABLE") ? "resizable" : "");
    Line("MAX LV", std::to_string(vg.max_lv));
    Line("Cur LV", std::to_string(visible));
    Line("Open LV", "0");
    Line("Max PV", std::to_string(vg.max_pv));
    Line("Cur PV", std::to_string(vg.pvs.size()));
    Line("Act PV", std::to_string(present));
    Line("VG Size", FormatSizeLong(total * ext));
    Line("PE Size", FormatSizeLong(ext));
    Line("Total PE", std::to_string(total));
    Line("Alloc PE / Size", std::to_string(alloc) + " / " + FormatSizeLong(alloc * ext));
    Line("Free  PE / Size",
         std::to_string(total - alloc) + " / " + FormatSizeLong((total - alloc) * ext));
    Line("VG UUID", lvm::FormatId(vg.id));
    std::fprintf(Out(), "   \n");
    (void)open;
  }
  return rc;
}

int Lvdisplay(const Context& ctx, const std::vector<std::string>& names, bool maps, bool all) {
  auto lvm = OpenSession(ctx, true);
  WarnScan(*lvm);
  int rc = kLvmOk;
  auto rows = LvRows(*lvm, names, all, &rc);
  for (const auto& r : rows) {
    const auto& vg = r.vg->vg;
    const auto& lv = *r.lv;
    std::fprintf(Out(), "  --- Logical volume ---\n");
    std::fprintf(Out(), "  %-22s %s\n", "LV Path", ("/dev/" + vg.name + "/" + lv.name).c_str());
    std::fprintf(Out(), "  %-22s %s\n", "LV Name", lv.name.c_str());
    std::fprintf(Out(), "  %-22s %s\n", "VG Name", vg.name.c_str());
    std::fprintf(Out(), "  %-22s %s\n", "LV UUID", lvm::FormatId(lv.id).c_str());
    std::fprintf(Out(), "  %-22s %s\n", "LV Write Access",
                 lv.HasStatus("WRITE") ? "read/write" : "read only");
    if (lv.creation_time) {
      time_t t = static_cast<time_t>(*lv.creation_time);
      struct tm tm;
      localtime_r(&t, &tm);
      char buf[64];
      strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S %z", &tm);
      std::fprintf(Out(), "  %-22s %s, %s\n", "LV Creation host, time", lv.creation_host.c_str(),
                   buf);
    }
    const bool active = IsActive(ctx, vg.name, lv.name);
    std::fprintf(Out(), "  %-22s %s\n", "LV Status", active ? "available" : "NOT available");
    std::fprintf(Out(), "  %-22s %s\n", "LV Size",
                 FormatSizeLong(lv.le_count() * vg.extent_bytes()).c_str());
    std::fprintf(Out(), "  %-22s %u\n", "Current LE", lv.le_count());
    std::fprintf(Out(), "  %-22s %zu\n", "Segments", lv.segments.size());
    std::fprintf(Out(), "  %-22s %s\n", "Allocation",
                 lv.allocation_policy.empty() ? "inherit" : lv.allocation_policy.c_str());
    std::fprintf(Out(), "  %-22s %s\n", "Read ahead sectors", "auto");
    std::fprintf(Out(), "   \n");
    if (!maps) continue;
    std::fprintf(Out(), "  --- Segments ---\n");
    for (const auto& s : lv.segments) {
      std::fprintf(Out(), "  Logical extents %u to %u:\n", s.start_extent,
                   s.start_extent + s.extent_count - 1);
      const bool linear = s.is_striped() && s.stripe_count() == 1;
      std::fprintf(Out(), "    Type\t\t%s\n",
                   linear           ? "linear"
                   : s.is_striped() ? "striped"
                                    : s.type.c_str());
      if (linear) {
        std::fprintf(Out(), "    Physical volume\t%s\n",
                     PvDisplayName(*r.vg, s.areas[0].pv).c_str());
        std::fprintf(Out(), "    Physical extents\t%u to %u\n", s.areas[0].start,
                     s.areas[0].start + s.area_len() - 1);
      } else {
        if (s.is_striped()) {
          std::fprintf(Out(), "    Stripes\t\t%u\n", s.stripe_count());
          std::fprintf(Out(), "    Stripe size\t\t%s\n",
                       FormatSizeLong(uint64_t{s.stripe_size} * 512).c_str());
        }
        for (size_t i = 0; i < s.areas.size(); i++) {
          const auto& a = s.areas[i];
          std::fprintf(Out(), "    %s %zu:\n", s.is_striped() ? "Stripe" : "Mirror", i);
          std::fprintf(Out(), "      %s\t%s\n", a.is_pv() ? "Physical volume" : "Logical volume",
                       a.is_pv() ? PvDisplayName(*r.vg, a.pv).c_str() : a.lv.c_str());
          std::fprintf(Out(), "      %s\t%u to %u\n",
                       a.is_pv() ? "Physical extents" : "Logical extents", a.start,
                       a.start + s.area_len() - 1);
        }
      }
      std::fprintf(Out(), "   \n");
    }
    std::fprintf(Out(), "   \n");
  }
  return rc;
}

int Pvscan(const Context& ctx, const std::vector<std::string>& names) {
  auto lvm = OpenSession(ctx, true, names);
  WarnScan(*lvm);
  std::vector<std::string> found;
  uint64_t total = 0, in_use = 0, no_vg = 0;
  int n_total = 0, n_use = 0, n_novg = 0;
  size_t w = 0;
  for (const auto& pv : lvm->pvs()) w = std::max(w, pv->name().size());
  for (const auto& pv : lvm->pvs()) {
    found.push_back(pv->name());
    lvm::VgHandle* h = lvm->VgOfPv(pv.get());
    n_total++;
    if (h) {
      int idx = 0;
      for (size_t i = 0; i < h->pvs.size(); i++) {
        if (h->pvs[i] == pv.get()) idx = static_cast<int>(i);
      }
      const auto& p = h->vg.pvs[idx];
      const uint64_t ext = h->vg.extent_bytes();
      const uint64_t size = uint64_t{p.pe_count} * ext;
      const uint64_t free = (p.pe_count - h->vg.pv_allocated_extents(idx)) * ext;
      std::fprintf(Out(), "  PV %-*s   VG %-*s lvm2 [%s / %s free]\n", static_cast<int>(w),
                   pv->name().c_str(), 14, h->vg.name.c_str(), FormatSizeLong(size).c_str(),
                   FormatSizeLong(free).c_str());
      total += size;
      in_use += size;
      n_use++;
    } else {
      const uint64_t size = pv->dev()->size();
      std::fprintf(Out(), "  PV %-*s   %-17s lvm2 [%s]\n", static_cast<int>(w), pv->name().c_str(),
                   "", FormatSizeLong(size).c_str());
      total += size;
      no_vg += size;
      n_novg++;
    }
  }
  if (n_total == 0) {
    std::fprintf(Out(), "  No matching physical volumes found\n");
  } else {
    std::fprintf(Out(), "  Total: %d [%s] / in use: %d [%s] / in no VG: %d [%s]\n", n_total,
                 FormatSizeLong(total).c_str(), n_use, FormatSizeLong(in_use).c_str(), n_novg,
                 FormatSizeLong(no_vg).c_str());
  }
  // Remember every PV found, so later commands scan it without being told.
  Status s = AddToList(ctx, DevicesFile(ctx), found);
  if (!s.ok()) return Fail(s);
  return kLvmOk;
}

}  // namespace

void RegisterReportVerbs(CLI::App& app, Context& ctx) {
  auto pvs_args = std::make_shared<ReportArgs>();
  CLI::App* pvs = AddVerb(app, ctx, "pvs", "Display information about physical volumes (lvm2 pvs)",
                          [&ctx, pvs_args] { return Pvs(ctx, *pvs_args); });
  AddReportOptions(pvs, &pvs_args->report);
  pvs->add_flag("-a,--all", pvs_args->report.all, "Accepted for compatibility");
  pvs->add_option("pv", pvs_args->names, "PVs");

  auto vgs_args = std::make_shared<ReportArgs>();
  CLI::App* vgs = AddVerb(app, ctx, "vgs", "Display information about volume groups (lvm2 vgs)",
                          [&ctx, vgs_args] { return Vgs(ctx, *vgs_args); });
  AddReportOptions(vgs, &vgs_args->report);
  vgs->add_option("vg", vgs_args->names, "VGs");

  auto lvs_args = std::make_shared<ReportArgs>();
  CLI::App* lvs = AddVerb(app, ctx, "lvs", "Display information about logical volumes (lvm2 lvs)",
                          [&ctx, lvs_args] { return Lvs(ctx, *lvs_args); });
  AddReportOptions(lvs, &lvs_args->report);
  lvs->add_flag("-a,--all", lvs_args->report.all, "Show hidden LVs (pvmove0) too");
  lvs->add_option("vg_or_lv", lvs_args->names, "VG or VG/LV");

  auto pvd = std::make_shared<std::vector<std::string>>();
  AddVerb(app, ctx, "pvdisplay", "Display PV attributes (lvm2 pvdisplay)", [&ctx, pvd] {
    return Pvdisplay(ctx, *pvd);
  })->add_option("pv", *pvd, "PVs");
  auto vgd = std::make_shared<std::vector<std::string>>();
  CLI::App* vgdisplay = AddVerb(app, ctx, "vgdisplay", "Display VG attributes (lvm2 vgdisplay)",
                                [&ctx, vgd] { return Vgdisplay(ctx, *vgd); });
  vgdisplay->add_option("vg", *vgd, "VGs");
  struct LvdArgs {
    std::vector<std::string> names;
    bool maps = false;
    bool all = false;
  };
  auto lvd = std::make_shared<LvdArgs>();
  CLI::App* lvdisplay =
      AddVerb(app, ctx, "lvdisplay", "Display LV attributes (lvm2 lvdisplay)",
              [&ctx, lvd] { return Lvdisplay(ctx, lvd->names, lvd->maps, lvd->all); });
  lvdisplay->add_flag("-m,--maps", lvd->maps, "Show the segments' extent maps");
  lvdisplay->add_flag("-a,--all", lvd->all, "Show hidden LVs too");
  lvdisplay->add_option("vg_or_lv", lvd->names, "VG or VG/LV");

  auto pvsc = std::make_shared<std::vector<std::string>>();
  CLI::App* pvscan = AddVerb(app, ctx, "pvscan", "List PVs and remember them (lvm2 pvscan)",
                             [&ctx, pvsc] { return Pvscan(ctx, *pvsc); });
  pvscan->add_flag("--cache")->description("Accepted for compatibility");
  pvscan->add_option("device", *pvsc, "Devices to look at besides the known ones");
}

}  // namespace volstack::cli::lvmcli

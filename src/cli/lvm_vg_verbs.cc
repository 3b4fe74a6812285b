// vgcreate, vgextend, vgreduce, vgremove, vgrename, vgchange, vgck, vgcfgbackup,
// vgcfgrestore.
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "cli/device_usage.h"
#include "cli/lvm_common.h"
#include "cli/name_namespace.h"
#include "lvm/kept_lvs.h"
#include "lvm/uuid.h"
#include "lvm/vg_ops.h"
#include "util/file_util.h"

namespace volstack::cli::lvmcli {

namespace {

// The PVs named on a command line, pvcreate'd first when they are not PVs yet (as lvm2's
// vgcreate/vgextend do). Orphans only.
Result<std::vector<lvm::Pv*>> OrphanPvs(const Context& ctx, lvm::Lvm& session,
                                        const std::vector<std::string>& names) {
  std::vector<lvm::Pv*> out;
  std::vector<std::string> created;
  for (const auto& n : names) {
    const std::string name = NormalizeDeviceName(n);
    lvm::Pv* pv = session.FindPv(name);
    if (!pv) {
      VS_ASSIGN_OR_RETURN(pv, session.CreatePv(name, {}));
      Say("Physical volume \"" + name + "\" successfully created.");
      created.push_back(name);
    }
    if (lvm::VgHandle* h = session.VgOfPv(pv)) {
      return Status::Exists("Physical volume '" + name + "' is already in volume group '" +
                            h->vg.name + "'");
    }
    if (std::find(out.begin(), out.end(), pv) == out.end()) out.push_back(pv);
  }
  VS_RETURN_IF_ERROR(AddToList(ctx, DevicesFile(ctx), created));
  return out;
}

struct VgcreateArgs {
  std::string vg;
  std::vector<std::string> pvs;
  std::string extent_size = "4m";
  std::string alloc;
};

int Vgcreate(const Context& ctx, const VgcreateArgs& a, const std::vector<std::string>& argv) {
  if (a.pvs.empty()) return Fail("Please enter physical volume name(s)", kLvmInvalid);
  auto es = ParseLvmSize(a.extent_size);
  if (!es.ok() || *es % 512 != 0 || !lvm::IsValidExtentSize(*es / 512)) {
    return Fail("Invalid physical extent size " + a.extent_size, kLvmInvalid);
  }
  if (!lvm::IsValidLvmName(a.vg))
    return Fail("New volume group name \"" + a.vg + "\" is invalid.", kLvmInvalid);
  if (Status st = CheckNoPoolNamed(ctx, a.vg); !st.ok()) return Fail(st.message());
  if (!a.alloc.empty() && a.alloc != "normal" && a.alloc != "contiguous" && a.alloc != "inherit") {
    return Fail("Unsupported allocation policy " + a.alloc, kLvmInvalid);
  }
  auto session = OpenSession(ctx, false, a.pvs);
  if (session->FindVg(a.vg)) return Fail("A volume group called " + a.vg + " already exists.");
  auto pvs = OrphanPvs(ctx, *session, a.pvs);
  if (!pvs.ok()) return Fail(pvs.status());
  std::vector<const lvm::Pv*> list(pvs->begin(), pvs->end());
  auto vg = lvm::NewVg(a.vg, static_cast<uint32_t>(*es / 512), list);
  if (!vg.ok()) return Fail(vg.status());
  if (a.alloc == "contiguous") vg->allocation_policy = "contiguous";
  Status s = session->Commit(*vg, Description("vgcreate", argv));
  if (!s.ok()) return Fail(s);
  Say("Volume group \"" + a.vg + "\" successfully created");
  return kLvmOk;
}

int Vgextend(const Context& ctx, const std::string& vgname, const std::vector<std::string>& pvnames,
             const std::vector<std::string>& argv) {
  if (pvnames.empty()) return Fail("Please enter physical volume(s)", kLvmInvalid);
  auto session = OpenSession(ctx, false, pvnames);
  lvm::VgHandle* h = session->FindVg(vgname);
  if (!h) return Fail(VgNotFound(*session, vgname));
  if (h->partial()) return Fail("Cannot change VG " + vgname + " while PVs are missing.");
  lvm::VolumeGroup vg = h->vg;
  auto pvs = OrphanPvs(ctx, *session, pvnames);
  if (!pvs.ok()) return Fail(pvs.status());
  for (lvm::Pv* pv : *pvs) {
    Status s = lvm::AddPvToVg(vg, *pv);
    if (!s.ok()) return Fail(s);
  }
  Status s = session->Commit(vg, Description("vgextend", argv));
  if (!s.ok()) return Fail(s);
  Say("Volume group \"" + vgname + "\" successfully extended");
  return kLvmOk;
}

struct VgreduceArgs {
  std::string vg;
  std::vector<std::string> pvs;
  bool all = false;
  bool removemissing = false;
  bool force = false;
};

// vgreduce --removemissing, as lvm2 2.03 does it: missing PVs no LV uses are dropped; LVs on a
// missing PV ("partial") block the command unless --force, which removes them (and LVs that
// map onto them). Returns lvm2's exit code; the partial LVs removed go to `removed_lvs`.
// One difference: without --force lvm2 still drops the empty missing PVs and writes a VG that
// keeps the used ones (flagged MISSING); volstack never writes a VG with a PV missing, so it
// changes nothing then.
int RemoveMissing(const VgreduceArgs& a, const lvm::VgHandle& h, lvm::VolumeGroup& vg,
                  std::vector<std::string>* removed_lvs) {
  std::set<int> missing;
  for (size_t i = 0; i < h.pvs.size(); i++) {
    if (!h.pvs[i]) missing.insert(static_cast<int>(i));
  }
  std::set<std::string> partial;
  for (bool grew = true; grew;) {  // LVs on missing PVs, then LVs mapping onto those
    grew = false;
    for (const auto& lv : vg.lvs) {
      if (partial.count(lv.name)) continue;
      for (const auto& seg : lv.segments) {
        for (const auto& ar : seg.areas) {
          if ((ar.is_pv() && missing.count(ar.pv)) || (!ar.is_pv() && partial.count(ar.lv))) {
            grew |= partial.insert(lv.name).second;
          }
        }
      }
    }
  }
  if (!partial.empty() && !a.force) {
    for (const auto& lv : vg.lvs) {
      if (partial.count(lv.name))
        Fail("WARNING: Partial LV " + lv.name + " needs to be repaired or removed. ");
    }
    Fail("There are still partial LVs in VG " + a.vg + ".");
    return Fail("To remove them unconditionally use: vgreduce --removemissing --force.");
  }
  for (const auto& name : partial) {
    Fail("WARNING: Removing partial LV " + a.vg + "/" + name + ".");
    removed_lvs->push_back(name);
  }
  std::erase_if(vg.lvs, [&](const lvm::LogicalVolume& lv) { return partial.count(lv.name) > 0; });
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    Status s = lvm::RemovePvFromVg(vg, vg.pvs[*it].id);
    if (!s.ok()) return Fail(s);
  }
  return kLvmOk;
}

int Vgreduce(const Context& ctx, const VgreduceArgs& a, const std::vector<std::string>& argv) {
  if (a.pvs.empty() && !a.all && !a.removemissing) {
    return Fail("Please give volume group name and physical volume paths", kLvmInvalid);
  }
  auto session = OpenSession(ctx, false, a.pvs);
  lvm::VgHandle* h = session->FindVg(a.vg);
  if (!h) return Fail(VgNotFound(*session, a.vg));
  lvm::VolumeGroup vg = h->vg;
  std::vector<lvm::Pv*> released;
  std::vector<std::string> removed_names, removed_lvs;
  if (a.removemissing) {
    if (!h->partial()) {
      Say("Volume group \"" + a.vg + "\" is already consistent.");
      return kLvmOk;
    }
    if (int rc = RemoveMissing(a, *h, vg, &removed_lvs); rc != kLvmOk) return rc;
  } else {
    std::vector<std::string> names = a.pvs;
    if (a.all) {
      for (size_t i = 0; i < h->pvs.size(); i++) {
        if (h->pvs[i] && vg.pv_allocated_extents(static_cast<int>(i)) == 0)
          names.push_back(h->pvs[i]->name());
      }
    }
    if (h->partial()) return Fail("Cannot change VG " + a.vg + " while PVs are missing.");
    for (const auto& n : names) {
      const std::string name = NormalizeDeviceName(n);
      lvm::Pv* pv = session->FindPv(name);
      if (!pv || vg.FindPvById(pv->uuid()) < 0) {
        return Fail("Physical Volume \"" + n + "\" not found in Volume Group \"" + a.vg + "\".");
      }
      if (a.all && vg.pvs.size() == 1) break;  // vgreduce -a keeps the last PV
      Status s = lvm::RemovePvFromVg(vg, pv->uuid());
      if (!s.ok()) return Fail(s);
      released.push_back(pv);
      removed_names.push_back(name);
    }
  }
  Status s = session->Commit(vg, Description("vgreduce", argv), released);
  if (!s.ok()) return Fail(s);
  std::vector<std::string> active;
  for (const auto& lv : removed_lvs) {
    Say("Logical volume \"" + lv + "\" successfully removed.");
    active.push_back(a.vg + "/" + lv);
  }
  if (Status r = RemoveFromList(ctx, ActiveFile(ctx), active); !r.ok()) return Fail(r);
  for (const auto& n : removed_names)
    Say("Removed \"" + n + "\" from volume group \"" + a.vg + "\"");
  if (a.removemissing) Say("Wrote out consistent volume group " + a.vg + ".");
  return kLvmOk;
}

int Vgremove(const Context& ctx, const std::vector<std::string>& names, bool force) {
  if (names.empty()) return Fail("Please enter one or more volume group paths", kLvmInvalid);
  auto session = OpenSession(ctx, false);
  int rc = kLvmOk;
  for (const auto& n : names) {
    lvm::VgHandle* h = session->FindVg(n);
    if (!h) {
      Fail(VgNotFound(*session, n));
      rc = Fail("Cannot process volume group " + n);
      continue;
    }
    std::vector<std::string> lvs;
    for (const auto& lv : h->vg.lvs) lvs.push_back(n + "/" + lv.name);
    if (!lvs.empty() && !force) {
      rc = Fail("Volume group \"" + n + "\" still contains " + std::to_string(lvs.size()) +
                " logical volume(s); use -f to remove them");
      continue;
    }
    if (Status busy = CheckNotInUse(ctx, lvs); !busy.ok()) {
      rc = Fail("Volume group \"" + n + "\" is in use (" + busy.message() + ").");
      continue;
    }
    // Removing the VG changes its unserved LVs too, which volstack never does.
    if (const auto unserved = lvm::FindUnservedLvs(h->vg); !unserved.empty()) {
      const std::string& lv = unserved.begin()->second.owner;
      rc = Fail(lvm::CheckServed(h->vg, lv, "removed").message());
      continue;
    }
    Status s = session->RemoveVg(h);
    if (!s.ok()) {
      rc = Fail(s);
      continue;
    }
    Status a = RemoveFromList(ctx, ActiveFile(ctx), lvs);
    if (!a.ok()) rc = Fail(a);
    for (const auto& lv : lvs)
      Say("Logical volume \"" + lv.substr(lv.find('/') + 1) + "\" successfully removed.");
    Say("Volume group \"" + n + "\" successfully removed");
  }
  return rc;
}

int Vgrename(const Context& ctx, const std::string& from, const std::string& to,
             const std::vector<std::string>& argv) {
  if (!lvm::IsValidLvmName(to))
    return Fail("New volume group name \"" + to + "\" is invalid", kLvmInvalid);
  if (Status st = CheckNoPoolNamed(ctx, to); !st.ok()) return Fail(st.message());
  auto session = OpenSession(ctx, false);
  lvm::VgHandle* h = session->FindVg(from);
  if (!h) {
    for (auto& v : session->vgs()) {
      if (lvm::FormatId(v.vg.id) == from) h = &v;
    }
  }
  if (!h) return Fail(VgNotFound(*session, from));
  if (session->FindVg(to)) return Fail("New volume group \"" + to + "\" already exists");
  if (h->partial()) return Fail("Cannot change VG " + from + " while PVs are missing.");
  lvm::VolumeGroup vg = h->vg;
  const std::string old = vg.name;
  vg.name = to;
  Status s = session->Commit(vg, Description("vgrename", argv));
  if (!s.ok()) return Fail(s);
  Status w = UpdateListFile(ctx, ActiveFile(ctx), [&](std::vector<std::string>& active) {
    bool changed = false;
    for (auto& l : active) {
      if (l.starts_with(old + "/")) {
        l = to + l.substr(old.size());
        changed = true;
      }
    }
    return changed;
  });
  if (!w.ok()) return Fail(w);
  Say("Volume group \"" + old + "\" successfully renamed to \"" + to + "\"");
  return kLvmOk;
}

struct VgchangeArgs {
  std::string activate;
  std::string activation_mode = "degraded";
  std::vector<std::string> vgs;
};

int Vgchange(const Context& ctx, const VgchangeArgs& a) {
  std::string act = a.activate;
  if (act == "ay") act = "y";
  if (act.empty()) return Fail("Need one or more command options (-a y|n).", kLvmInvalid);
  if (act != "y" && act != "n") return Fail("Invalid activation " + a.activate, kLvmInvalid);
  if (a.activation_mode != "degraded" && a.activation_mode != "partial" &&
      a.activation_mode != "complete") {
    return Fail("Invalid activation mode " + a.activation_mode, kLvmInvalid);
  }
  auto session = OpenSession(ctx, true);
  WarnScan(*session);
  int rc = kLvmOk;
  std::vector<lvm::VgHandle*> targets;
  if (a.vgs.empty()) {
    for (auto& h : session->vgs()) targets.push_back(&h);
  }
  for (const auto& n : a.vgs) {
    lvm::VgHandle* h = session->FindVg(n);
    if (!h) {
      Fail(VgNotFound(*session, n));
      rc = Fail("Cannot process volume group " + n);
      continue;
    }
    targets.push_back(h);
  }
  for (lvm::VgHandle* h : targets) {
    std::vector<std::string> names;
    int count = 0;
    for (const auto& lv : h->vg.lvs) {
      if (!lv.visible()) continue;
      if (act == "y") {
        // Activation proves the map is usable now (PVs present and large enough).
        auto dev = session->Activate(*h, lv.name, a.activation_mode == "partial");
        if (!dev.ok()) {
          rc = Fail(dev.status());
          continue;
        }
      }
      names.push_back(h->vg.name + "/" + lv.name);
      count++;
    }
    Status s = act == "y" ? AddToList(ctx, ActiveFile(ctx), names)
                          : RemoveFromList(ctx, ActiveFile(ctx), names);
    if (!s.ok()) return Fail(s);
    Say(std::to_string(act == "y" ? count : 0) + " logical volume(s) in volume group \"" +
        h->vg.name + "\" now active");
  }
  return rc;
}

int Vgck(const Context& ctx, const std::vector<std::string>& names, bool update) {
  auto session = OpenSession(ctx, !update);
  int rc = kLvmOk;
  for (const auto& e : session->scan_errors()) {
    if (e.status.code() == ENOENT) continue;
    rc = Fail(e.device + ": " + e.status.message());
  }
  for (const auto& n : names) {
    if (!session->FindVg(n)) {
      Fail(VgNotFound(*session, n));
      rc = Fail("Cannot process volume group " + n);
    }
  }
  for (auto& h : session->vgs()) {
    if (!names.empty() && std::find(names.begin(), names.end(), h.vg.name) == names.end()) continue;
    for (const auto& w : h.warnings) rc = Fail("WARNING: " + w);
    if (Status s = lvm::ValidateVg(h.vg); !s.ok()) rc = Fail(s);
    if (update && h.inconsistent && !h.partial()) {
      lvm::VolumeGroup vg = h.vg;
      Status s = session->Commit(vg, "Write from vgck --updatemetadata.");
      if (!s.ok()) return Fail(s);
      rc = kLvmOk;
      break;  // the handles were rebuilt
    }
  }
  return rc;
}

std::string BackupPath(const Context& ctx, const std::string& vg) {
  return ctx.global.state_dir + "/lvm/backup/" + vg;
}

int Vgcfgbackup(const Context& ctx, const std::vector<std::string>& names,
                const std::string& file) {
  auto session = OpenSession(ctx, true);
  int rc = kLvmOk;
  for (auto& h : session->vgs()) {
    if (!names.empty() && std::find(names.begin(), names.end(), h.vg.name) == names.end()) continue;
    lvm::ExportInfo info = lvm::MakeExportInfo("Created *after* executing 'vgcfgbackup'");
    info.backup_form = true;
    const std::string text = lvm::ExportVg(h.vg, info);
    std::string path = file.empty() ? BackupPath(ctx, h.vg.name) : file;
    if (size_t p = path.find("%s"); p != std::string::npos) path.replace(p, 2, h.vg.name);
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    Status s = file.empty() ? WriteListFile(ctx, path, lines)
                            : WriteFileAtomically(path, text);  // where the user asked
    if (!s.ok()) {
      rc = Fail(s);
      continue;
    }
    Say("Volume group \"" + h.vg.name + "\" successfully backed up.");
  }
  for (const auto& n : names) {
    if (!session->FindVg(n)) {
      Fail(VgNotFound(*session, n));
      rc = Fail("Cannot process volume group " + n);
    }
  }
  return rc;
}

int Vgcfgrestore(const Context& ctx, const std::string& vgname, const std::string& file) {
  const std::string path = file.empty() ? BackupPath(ctx, vgname) : file;
  std::ifstream in(path);
  if (!in) return Fail("Couldn't find backup file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto vg = lvm::ImportVg(ss.str());
  if (!vg.ok()) return Fail(vg.status().WithContext(path));
  if (vg->name != vgname)
    return Fail("Backup file " + path + " holds VG " + vg->name + ", not " + vgname);
  if (Status st = CheckNoPoolNamed(ctx, vgname); !st.ok()) return Fail(st.message());
  auto session = OpenSession(ctx, false);
  // Every PV of the backup must be present; they may be orphans or members of this VG.
  uint32_t seqno = vg->seqno;
  for (const auto& p : vg->pvs) {
    lvm::Pv* pv = session->FindPv(lvm::FormatId(p.id));
    if (!pv) return Fail("Couldn't find device with uuid " + lvm::FormatId(p.id) + ".");
    lvm::VgHandle* h = session->VgOfPv(pv);
    if (h && h->vg.id != vg->id) {
      return Fail("PV " + pv->name() + " belongs to another VG (" + h->vg.name + ")");
    }
    if (h) seqno = std::max(seqno, h->vg.seqno);
    for (const auto& c : pv->copies()) {
      if (c.vg && c.vg->id == vg->id) seqno = std::max(seqno, c.vg->seqno);
    }
  }
  if (lvm::VgHandle* other = session->FindVg(vgname); other && other->vg.id != vg->id) {
    return Fail("A volume group called " + vgname + " already exists.");
  }
  // PVs the VG gained after the backup leave it, as orphans (their metadata would otherwise
  // still name the VG, with an older seqno).
  std::vector<lvm::Pv*> released;
  for (auto& h : session->vgs()) {
    if (h.vg.id != vg->id) continue;
    for (lvm::Pv* pv : h.pvs) {
      if (pv && vg->FindPvById(pv->uuid()) < 0) released.push_back(pv);
    }
  }
  vg->seqno = seqno;
  Status s = session->Commit(*vg, "Restored from " + path, released);
  if (!s.ok()) return Fail(s);
  Say("Restored volume group " + vgname + ".");
  return kLvmOk;
}

std::vector<std::string> Argv(const std::vector<std::string>& a) { return a; }

}  // namespace

void RegisterVgVerbs(CLI::App& app, Context& ctx) {
  auto vc = std::make_shared<VgcreateArgs>();
  CLI::App* vgcreate = AddVerb(app, ctx, "vgcreate", "Create a volume group", [&ctx, vc] {
    std::vector<std::string> argv = {"-s", vc->extent_size, vc->vg};
    argv.insert(argv.end(), vc->pvs.begin(), vc->pvs.end());
    return Vgcreate(ctx, *vc, argv);
  });
  vgcreate->add_option("-s,--physicalextentsize", vc->extent_size, "Extent size (default 4m)");
  vgcreate->add_option("--alloc", vc->alloc, "normal|contiguous");
  vgcreate->add_flag("-f,--force")->description("Accepted for compatibility");
  vgcreate->add_flag("-y,--yes")->description("Accepted for compatibility");
  vgcreate->add_option("vg", vc->vg, "VG name")->required();
  vgcreate->add_option("pv", vc->pvs, "PVs");

  struct NamePvs {
    std::string vg;
    std::vector<std::string> pvs;
  };
  auto ve = std::make_shared<NamePvs>();
  CLI::App* vgextend = AddVerb(app, ctx, "vgextend", "Add PVs to a volume group", [&ctx, ve] {
    std::vector<std::string> argv = {ve->vg};
    argv.insert(argv.end(), ve->pvs.begin(), ve->pvs.end());
    return Vgextend(ctx, ve->vg, ve->pvs, argv);
  });
  vgextend->add_flag("-f,--force")->description("Accepted for compatibility");
  vgextend->add_flag("-y,--yes")->description("Accepted for compatibility");
  vgextend->add_option("vg", ve->vg, "VG")->required();
  vgextend->add_option("pv", ve->pvs, "PVs");

  auto vr = std::make_shared<VgreduceArgs>();
  CLI::App* vgreduce = AddVerb(app, ctx, "vgreduce", "Remove PVs from a volume group", [&ctx, vr] {
    std::vector<std::string> argv;
    if (vr->removemissing) argv.push_back("--removemissing");
    if (vr->force) argv.push_back("--force");
    if (vr->all) argv.push_back("--all");
    argv.push_back(vr->vg);
    argv.insert(argv.end(), vr->pvs.begin(), vr->pvs.end());
    return Vgreduce(ctx, *vr, argv);
  });
  vgreduce->add_flag("-a,--all", vr->all, "Remove every empty PV");
  vgreduce->add_flag("--removemissing", vr->removemissing,
                     "Drop missing PVs (with --force, and the LVs on them)");
  vgreduce->add_flag("-f,--force", vr->force, "With --removemissing: remove partial LVs");
  vgreduce->add_option("vg", vr->vg, "VG")->required();
  vgreduce->add_option("pv", vr->pvs, "PVs");

  struct Vgrm {
    std::vector<std::string> vgs;
    bool force = false;
  };
  auto vrm = std::make_shared<Vgrm>();
  CLI::App* vgremove = AddVerb(app, ctx, "vgremove", "Remove volume groups",
                               [&ctx, vrm] { return Vgremove(ctx, vrm->vgs, vrm->force); });
  vgremove->add_flag("-f,--force", vrm->force, "Remove the VG's LVs too");
  vgremove->add_flag("-y,--yes")->description("Accepted for compatibility");
  vgremove->add_option("vg", vrm->vgs, "VGs");

  auto vrn = std::make_shared<std::vector<std::string>>();
  CLI::App* vgrename = AddVerb(app, ctx, "vgrename", "Rename a volume group", [&ctx, vrn] {
    if (vrn->size() != 2)
      return Fail("Old and new volume group names need specifying", kLvmInvalid);
    return Vgrename(ctx, (*vrn)[0], (*vrn)[1], Argv(*vrn));
  });
  vgrename->add_option("names", *vrn, "OLD NEW");

  auto vch = std::make_shared<VgchangeArgs>();
  CLI::App* vgchange = AddVerb(app, ctx, "vgchange", "Activate or deactivate LVs (-a y|n)",
                               [&ctx, vch] { return Vgchange(ctx, *vch); });
  vgchange->add_option("-a,--activate", vch->activate, "y|n");
  vgchange->add_option("--activationmode", vch->activation_mode, "degraded|partial|complete");
  vgchange->add_option("vg", vch->vgs, "VGs");

  struct VgckArgs {
    std::vector<std::string> vgs;
    bool update = false;
  };
  auto vck = std::make_shared<VgckArgs>();
  CLI::App* vgck = AddVerb(app, ctx, "vgck", "Check volume group metadata",
                           [&ctx, vck] { return Vgck(ctx, vck->vgs, vck->update); });
  vgck->add_flag("--updatemetadata", vck->update, "Rewrite inconsistent metadata");
  vgck->add_option("vg", vck->vgs, "VGs");

  struct Cfg {
    std::vector<std::string> vgs;
    std::string file;
  };
  auto cb = std::make_shared<Cfg>();
  CLI::App* vgcfgbackup = AddVerb(app, ctx, "vgcfgbackup", "Back up VG metadata to a file",
                                  [&ctx, cb] { return Vgcfgbackup(ctx, cb->vgs, cb->file); });
  vgcfgbackup->add_option("-f,--file", cb->file, "Output file (%s: VG name)");
  vgcfgbackup->add_option("vg", cb->vgs, "VGs");

  auto cr = std::make_shared<Cfg>();
  CLI::App* vgcfgrestore =
      AddVerb(app, ctx, "vgcfgrestore", "Restore VG metadata from a backup file", [&ctx, cr] {
        if (cr->vgs.size() != 1)
          return Fail("Please specify a *single* volume group to restore.", kLvmInvalid);
        return Vgcfgrestore(ctx, cr->vgs[0], cr->file);
      });
  vgcfgrestore->add_option("-f,--file", cr->file, "Backup file");
  vgcfgrestore->add_flag("-y,--yes")->description("Accepted for compatibility");
  vgcfgrestore->add_option("vg", cr->vgs, "VG");
}

}  // namespace volstack::cli::lvmcli

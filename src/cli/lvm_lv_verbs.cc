// lvcreate, lvextend, lvreduce, lvrename, lvremove.
#include <algorithm>

#include "cli/device_usage.h"
#include "cli/lvm_common.h"
#include "lvm/allocator.h"
#include "lvm/kept_lvs.h"
#include "lvm/vg_ops.h"
#include "util/request_io.h"
#include "util/size.h"

namespace volstack::cli::lvmcli {

namespace {

// A -l argument: [+|-]N[%FREE|%VG|%PVS|%LV].
struct ExtentsArg {
  char sign = 0;  // '+', '-' or 0
  uint64_t number = 0;
  std::string percent_of;  // "", "FREE", "VG", "PVS", "LV"
};

Result<ExtentsArg> ParseExtents(const std::string& text) {
  ExtentsArg a;
  std::string t = text;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    a.sign = t[0];
    t = t.substr(1);
  }
  size_t pct = t.find('%');
  std::string num = t.substr(0, pct);
  if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos || num.size() > 10) {
    return Status::InvalidArgument("Invalid argument for --extents: " + text);
  }
  a.number = std::stoull(num);
  if (pct != std::string::npos) {
    a.percent_of = t.substr(pct + 1);
    if (a.percent_of != "FREE" && a.percent_of != "VG" && a.percent_of != "PVS" &&
        a.percent_of != "LV") {
      return Status::InvalidArgument("Invalid argument for --extents: " + text);
    }
    if (a.number > 100 && a.percent_of != "LV" && a.sign == 0) {
      return Status::InvalidArgument("Percentage must be at most 100: " + text);
    }
  }
  return a;
}

struct SizeArgs {
  std::string size;     // -L
  std::string extents;  // -l
  uint32_t stripes = 0;
  std::string stripe_size;
  std::string alloc;
  std::string contiguous;
};

void AddSizeOptions(CLI::App* app, SizeArgs* s) {
  app->add_option("-L,--size", s->size, "Size ([+|-]N[kmgtpe], default unit MiB)");
  app->add_option("-l,--extents", s->extents, "Extents ([+|-]N[%FREE|%VG|%PVS|%LV])");
  app->add_option("-i,--stripes", s->stripes, "Number of stripes");
  app->add_option("-I,--stripesize", s->stripe_size, "Stripe size (default unit KiB)");
  app->add_option("--alloc", s->alloc, "normal|contiguous|inherit");
  app->add_option("-C,--contiguous", s->contiguous, "y|n");
}

// The PV indexes of `vg` named on the command line (allocation restricted to them).
Result<std::vector<int>> PvIndexes(lvm::Lvm& session, const lvm::VolumeGroup& vg,
                                   const std::vector<std::string>& names) {
  std::vector<int> out;
  for (const auto& n : names) {
    std::string name = NormalizeDeviceName(n.substr(0, n.find(':')));
    lvm::Pv* pv = session.FindPv(name);
    int idx = pv ? vg.FindPvById(pv->uuid()) : -1;
    if (idx < 0)
      return Status::NotFound("Physical Volume \"" + n + "\" not found in Volume Group \"" +
                              vg.name + "\".");
    out.push_back(idx);
  }
  return out;
}

uint64_t FreeOn(const lvm::VolumeGroup& vg, const std::vector<int>& pvs) {
  uint64_t n = 0;
  auto free = lvm::FreeExtents(vg);
  for (size_t i = 0; i < free.size(); i++) {
    if (!pvs.empty() && std::find(pvs.begin(), pvs.end(), static_cast<int>(i)) == pvs.end())
      continue;
    if (!vg.pvs[i].allocatable()) continue;
    for (const auto& r : free[i]) n += r.count;
  }
  return n;
}

// Resolves -L/-l into a target LE count for an LV of `current` LEs (0 for lvcreate).
// `sign_default` is what a number without sign means ('=' absolute).
Result<uint64_t> TargetExtents(const SizeArgs& s, const lvm::VolumeGroup& vg, uint64_t current,
                               const std::vector<int>& pvs) {
  if (s.size.empty() == s.extents.empty()) {
    return Status::InvalidArgument("Please specify either size or extents (not both).");
  }
  const uint64_t ext = vg.extent_bytes();
  char sign = 0;
  uint64_t count = 0;
  if (!s.size.empty()) {
    std::string t = s.size;
    if (t[0] == '+' || t[0] == '-') {
      sign = t[0];
      t = t.substr(1);
    }
    VS_ASSIGN_OR_RETURN(uint64_t bytes, ParseLvmSize(t));
    count = (bytes + ext - 1) / ext;
    if (bytes % ext != 0) {
      std::fprintf(Err(), "  Rounding up size to full physical extent %s.\n",
                   FormatSizeLong(count * ext).c_str());
    }
  } else {
    VS_ASSIGN_OR_RETURN(ExtentsArg e, ParseExtents(s.extents));
    sign = e.sign;
    count = e.number;
    if (e.percent_of == "FREE") count = FreeOn(vg, {}) * e.number / 100;
    if (e.percent_of == "PVS") count = FreeOn(vg, pvs) * e.number / 100;
    if (e.percent_of == "VG") count = vg.total_extents() * e.number / 100;
    if (e.percent_of == "LV") count = current * e.number / 100;
  }
  if (sign == '+') return current + count;
  if (sign == '-') {
    if (count >= current) return Status::InvalidArgument("Unable to reduce below 1 extent.");
    return current - count;
  }
  return count;
}

Result<lvm::AllocPolicy> Policy(const SizeArgs& s, const lvm::VolumeGroup& vg,
                                const lvm::LogicalVolume* lv) {
  if (s.contiguous == "y") return lvm::AllocPolicy::kContiguous;
  if (!s.contiguous.empty() && s.contiguous != "n")
    return Status::InvalidArgument("Invalid -C value " + s.contiguous);
  if (!s.alloc.empty() && s.alloc != "inherit") return lvm::ParseAllocPolicy(s.alloc);
  if (lv && !lv->allocation_policy.empty()) return lvm::ParseAllocPolicy(lv->allocation_policy);
  return lvm::ParseAllocPolicy(vg.allocation_policy);
}

Result<uint32_t> StripeSizeSectors(const SizeArgs& s, const lvm::VolumeGroup& vg) {
  if (s.stripe_size.empty()) return 128u;  // 64 KiB
  VS_ASSIGN_OR_RETURN(uint64_t bytes, ParseSize(s.stripe_size, 1024));
  if (bytes < 4096 || (bytes & (bytes - 1)) != 0 || bytes > vg.extent_bytes()) {
    return Status::InvalidArgument("Invalid stripe size " + s.stripe_size +
                                   " (a power of two from 4 KiB to the extent size)");
  }
  return static_cast<uint32_t>(bytes / 512);
}

struct LvcreateArgs {
  SizeArgs size;
  std::string name;
  std::string activate = "y";
  std::string zero;
  std::vector<std::string> positional;  // VG [PV...]
};

int Lvcreate(const Context& ctx, const LvcreateArgs& a, const std::vector<std::string>& argv) {
  if (a.positional.empty()) return Fail("Please specify a volume group.", kLvmInvalid);
  auto [vgname, lvname] = SplitLvName(a.positional[0]);
  std::string name = a.name.empty() ? lvname : a.name;
  if (name.empty())
    return Fail("Please specify a logical volume name with -n (lvol naming is not supported).",
                kLvmInvalid);
  if (a.activate != "y" && a.activate != "n" && a.activate != "ay")
    return Fail("Invalid -a " + a.activate, kLvmInvalid);
  const bool activate = a.activate != "n";
  if (!a.zero.empty() && a.zero != "y" && a.zero != "n")
    return Fail("Invalid -Z " + a.zero, kLvmInvalid);
  if (!activate && a.zero == "y")
    return Fail("Cannot zero an inactive logical volume (use -Zn).", kLvmInvalid);
  std::vector<std::string> pv_names(a.positional.begin() + 1, a.positional.end());
  auto session = OpenSession(ctx, false, pv_names);
  lvm::VgHandle* h = session->FindVg(vgname);
  if (!h) return Fail(VgNotFound(*session, vgname));
  if (h->partial()) return Fail("Cannot change VG " + vgname + " while PVs are missing.");
  lvm::VolumeGroup vg = h->vg;
  auto pvs = PvIndexes(*session, vg, pv_names);
  if (!pvs.ok()) return Fail(pvs.status());
  auto target = TargetExtents(a.size, vg, 0, *pvs);
  if (!target.ok()) return Fail(target.status(), kLvmInvalid);
  auto policy = Policy(a.size, vg, nullptr);
  if (!policy.ok()) return Fail(policy.status(), kLvmInvalid);
  const uint32_t stripes = a.size.stripes ? a.size.stripes : 1;
  auto ss = StripeSizeSectors(a.size, vg);
  if (!ss.ok()) return Fail(ss.status(), kLvmInvalid);
  uint64_t extents = *target;
  if (extents % stripes) {
    uint64_t up = (extents + stripes - 1) / stripes * stripes;
    std::fprintf(
        Err(), "  Rounding size %s (%lu extents) up to stripe boundary size %s (%lu extents).\n",
        FormatSizeLong(extents * vg.extent_bytes()).c_str(), static_cast<unsigned long>(extents),
        FormatSizeLong(up * vg.extent_bytes()).c_str(), static_cast<unsigned long>(up));
    extents = up;
  }
  if (extents == 0) return Fail("Unable to create new logical volume with no extents.");
  if (extents > UINT32_MAX) return Fail("Size too large.");
  lvm::NewLvOptions o;
  o.name = name;
  o.alloc.extents = static_cast<uint32_t>(extents);
  o.alloc.stripes = stripes;
  o.alloc.stripe_size = stripes > 1 ? *ss : 0;
  o.alloc.policy = *policy;
  o.alloc.pvs = *pvs;
  if (stripes > vg.pvs.size()) {
    return Fail("Number of stripes (" + std::to_string(stripes) +
                ") must not exceed number of physical volumes (" + std::to_string(vg.pvs.size()) +
                ")");
  }
  Status s = lvm::CreateLv(vg, o);
  if (!s.ok()) return Fail(s);
  s = session->Commit(vg, Description("lvcreate", argv));
  if (!s.ok()) return Fail(s);
  if (activate) {
    h = session->FindVg(vgname);
    auto dev = session->Activate(*h, name);
    if (!dev.ok()) return Fail(dev.status());
    if (a.zero != "n") {
      Status z = (*dev)->WriteZeroes(0, std::min<uint64_t>((*dev)->size(), 4096));
      if (z.ok()) z = (*dev)->Flush();
      if (!z.ok()) return Fail(z);
    } else {
      std::fprintf(Err(), "  WARNING: Logical volume %s/%s not zeroed.\n", vgname.c_str(),
                   name.c_str());
    }
    Status act = AddToList(ctx, ActiveFile(ctx), {vgname + "/" + name});
    if (!act.ok()) return Fail(act);
  }
  Say("Logical volume \"" + name + "\" created.");
  return kLvmOk;
}

struct LvresizeArgs {
  SizeArgs size;
  std::vector<std::string> positional;  // LV [PV...]
  bool resizefs = false;
};

int Lvresize(const Context& ctx, const LvresizeArgs& a, bool extend,
             const std::vector<std::string>& argv) {
  if (a.positional.empty()) return Fail("Please specify a logical volume path.", kLvmInvalid);
  if (a.resizefs) return Fail("--resizefs is not supported.", kLvmInvalid);
  auto [vgname, lvname] = SplitLvName(a.positional[0]);
  if (lvname.empty()) return Fail("Please specify a logical volume path.", kLvmInvalid);
  std::vector<std::string> pv_names(a.positional.begin() + 1, a.positional.end());
  auto session = OpenSession(ctx, false, pv_names);
  lvm::VgHandle* h = session->FindVg(vgname);
  if (!h) return Fail(VgNotFound(*session, vgname));
  if (h->partial()) return Fail("Cannot change VG " + vgname + " while PVs are missing.");
  lvm::VolumeGroup vg = h->vg;
  const lvm::LogicalVolume* lv = vg.FindLv(lvname);
  if (!lv) return Fail("Logical volume " + lvname + " not found in volume group " + vgname + ".");
  if (lv->HasStatus("LOCKED")) return Fail("Can't resize locked LV " + lvname);
  const uint64_t current = lv->le_count();
  auto pvs = PvIndexes(*session, vg, pv_names);
  if (!pvs.ok()) return Fail(pvs.status());
  auto target = TargetExtents(a.size, vg, current, *pvs);
  if (!target.ok()) return Fail(target.status(), kLvmInvalid);
  const lvm::Segment& last = lv->segments.back();
  const uint32_t stripes =
      a.size.stripes ? a.size.stripes : (last.is_striped() ? last.stripe_count() : 1);
  uint64_t want = *target;
  const uint64_t ext = vg.extent_bytes();
  const std::string full = vgname + "/" + lvname;
  if (extend && want < current) {
    return Fail("New size given (" + std::to_string(want) +
                    " extents) not larger than existing size (" + std::to_string(current) +
                    " extents)",
                kLvmInvalid);
  }
  if (!extend && want > current) {
    return Fail("New size given (" + std::to_string(want) +
                    " extents) not less than existing size (" + std::to_string(current) +
                    " extents)",
                kLvmInvalid);
  }
  if (want == current) {
    return Fail("New size (" + std::to_string(want) + " extents) matches existing size (" +
                std::to_string(current) + " extents).");
  }
  if (want > UINT32_MAX) return Fail("Size too large.");
  Status s;
  if (extend) {
    uint64_t add = want - current;
    if (add % stripes) {
      add = (add + stripes - 1) / stripes * stripes;
      want = current + add;
    }
    auto policy = Policy(a.size, vg, lv);
    if (!policy.ok()) return Fail(policy.status(), kLvmInvalid);
    lvm::AllocRequest r;
    r.extents = static_cast<uint32_t>(add);
    r.stripes = stripes;
    uint32_t ss = last.stripe_size;
    if (!a.size.stripe_size.empty() || (stripes > 1 && ss == 0)) {
      auto v = StripeSizeSectors(a.size, vg);
      if (!v.ok()) return Fail(v.status(), kLvmInvalid);
      ss = *v;
    }
    r.stripe_size = stripes > 1 ? ss : 0;
    r.policy = *policy;
    r.pvs = *pvs;
    s = lvm::AllocateExtents(vg, lvname, r);
  } else {
    s = lvm::ReduceExtents(vg, lvname, static_cast<uint32_t>(want));
  }
  if (!s.ok()) return Fail(s);
  s = session->Commit(vg, Description(extend ? "lvextend" : "lvreduce", argv));
  if (!s.ok()) return Fail(s);
  Say("Size of logical volume " + full + " changed from " + FormatSizeLong(current * ext) + " (" +
      std::to_string(current) + " extents) to " + FormatSizeLong(want * ext) + " (" +
      std::to_string(want) + " extents).");
  Say("Logical volume " + full + " successfully resized.");
  return kLvmOk;
}

int Lvrename(const Context& ctx, const std::vector<std::string>& args) {
  std::string vgname, from, to;
  if (args.size() == 3) {
    vgname = args[0];
    from = SplitLvName(args[1]).second.empty() ? args[1] : SplitLvName(args[1]).second;
    to = SplitLvName(args[2]).second.empty() ? args[2] : SplitLvName(args[2]).second;
  } else if (args.size() == 2) {
    auto a = SplitLvName(args[0]);
    auto b = SplitLvName(args[1]);
    vgname = a.first;
    from = a.second;
    to = b.second.empty() ? b.first : b.second;
    if (!b.second.empty() && b.first != vgname)
      return Fail("Logical volume names must have the same volume group (\"" + vgname + "\" or \"" +
                      b.first + "\").",
                  kLvmInvalid);
  } else {
    return Fail("Old and new logical volume names required", kLvmInvalid);
  }
  if (from.empty()) return Fail("Old and new logical volume names required", kLvmInvalid);
  auto session = OpenSession(ctx, false);
  lvm::VgHandle* h = session->FindVg(vgname);
  if (!h) return Fail(VgNotFound(*session, vgname));
  lvm::VolumeGroup vg = h->vg;
  Status s = lvm::RenameLv(vg, from, to);
  if (!s.ok()) return Fail(s, s.code() == EINVAL ? kLvmInvalid : kLvmFailed);
  s = session->Commit(vg, Description("lvrename", args));
  if (!s.ok()) return Fail(s);
  if (IsActive(ctx, vgname, from)) {
    Status r = UpdateListFile(ctx, ActiveFile(ctx), [&](std::vector<std::string>& active) {
      std::replace(active.begin(), active.end(), vgname + "/" + from, vgname + "/" + to);
      return true;
    });
    if (!r.ok()) return Fail(r);
  }
  Say("Renamed \"" + from + "\" to \"" + to + "\" in volume group \"" + vgname + "\"");
  return kLvmOk;
}

int Lvremove(const Context& ctx, const std::vector<std::string>& names) {
  if (names.empty()) return Fail("Please enter one or more logical volume paths", kLvmInvalid);
  auto session = OpenSession(ctx, false);
  int rc = kLvmOk;
  for (const auto& n : names) {
    auto [vgname, lvname] = SplitLvName(n);
    lvm::VgHandle* h = session->FindVg(vgname);
    if (!h) {
      Fail(VgNotFound(*session, vgname));
      rc = Fail("Cannot process volume group " + vgname);
      continue;
    }
    std::vector<std::string> targets;
    if (lvname.empty()) {
      for (const auto& lv : h->vg.lvs) {
        if (lv.visible()) targets.push_back(lv.name);
      }
    } else {
      targets.push_back(lvname);
    }
    // Each LV that cannot go (in use, one volstack does not change) is reported and skipped;
    // the others are removed in one commit, as lvm2 does, and the exit status says not all.
    lvm::VolumeGroup vg = h->vg;
    std::vector<std::string> removed;
    for (const auto& t : targets) {
      if (Status busy = CheckNotInUse(ctx, {vgname + "/" + t}); !busy.ok()) {
        rc = Fail("Logical volume " + vgname + "/" + t + " in use (" + busy.message() + ").");
        continue;
      }
      lvm::VolumeGroup trial = vg;
      Status s = lvm::RemoveLv(trial, t);
      if (s.ok()) s = lvm::CheckKeptUnchanged(h->vg, trial);
      if (!s.ok()) {
        rc = Fail(s);
        continue;
      }
      vg = std::move(trial);
      removed.push_back(t);
    }
    if (removed.empty()) continue;
    Status s = session->Commit(vg, Description("lvremove", {n}));
    if (!s.ok()) {
      rc = Fail(s);
      continue;
    }
    std::vector<std::string> full;
    for (const auto& t : removed) full.push_back(vgname + "/" + t);
    Status r = RemoveFromList(ctx, ActiveFile(ctx), full);
    if (!r.ok()) rc = Fail(r);
    for (const auto& t : removed) Say("Logical volume \"" + t + "\" successfully removed.");
  }
  return rc;
}

}  // namespace

void RegisterLvVerbs(CLI::App& app, Context& ctx) {
  auto lc = std::make_shared<LvcreateArgs>();
  CLI::App* lvcreate = AddVerb(app, ctx, "lvcreate", "Create a logical volume", [&ctx, lc] {
    std::vector<std::string> argv;
    if (!lc->size.size.empty()) argv.insert(argv.end(), {"-L", lc->size.size});
    if (!lc->size.extents.empty()) argv.insert(argv.end(), {"-l", lc->size.extents});
    if (lc->size.stripes) argv.insert(argv.end(), {"-i", std::to_string(lc->size.stripes)});
    if (!lc->name.empty()) argv.insert(argv.end(), {"-n", lc->name});
    argv.insert(argv.end(), lc->positional.begin(), lc->positional.end());
    return Lvcreate(ctx, *lc, argv);
  });
  AddSizeOptions(lvcreate, &lc->size);
  lvcreate->add_option("-n,--name", lc->name, "LV name");
  lvcreate->add_option("-a,--activate", lc->activate, "y|n (default y)");
  lvcreate->add_option("-Z,--zero", lc->zero, "y|n: zero the first 4 KiB");
  lvcreate->add_option("-W,--wipesignatures")->description("Accepted for compatibility");
  lvcreate->add_flag("-y,--yes")->description("Accepted for compatibility");
  lvcreate->add_option("--driverloaded")->description("Accepted for compatibility");
  lvcreate->add_option("vg", lc->positional, "VG [PV...]");

  for (bool extend : {true, false}) {
    auto lr = std::make_shared<LvresizeArgs>();
    const char* name = extend ? "lvextend" : "lvreduce";
    CLI::App* verb = AddVerb(
        app, ctx, name, extend ? "Add space to a logical volume" : "Reduce a logical volume",
        [&ctx, lr, extend] {
          std::vector<std::string> argv;
          if (!lr->size.size.empty()) argv.insert(argv.end(), {"-L", lr->size.size});
          if (!lr->size.extents.empty()) argv.insert(argv.end(), {"-l", lr->size.extents});
          argv.insert(argv.end(), lr->positional.begin(), lr->positional.end());
          return Lvresize(ctx, *lr, extend, argv);
        });
    AddSizeOptions(verb, &lr->size);
    verb->add_flag("-r,--resizefs", lr->resizefs, "Not supported");
    verb->add_flag("-f,--force")->description("Accepted for compatibility");
    verb->add_flag("-y,--yes")->description("Accepted for compatibility");
    verb->add_option("lv", lr->positional, "VG/LV [PV...]");
  }

  auto rn = std::make_shared<std::vector<std::string>>();
  AddVerb(app, ctx, "lvrename", "Rename a logical volume", [&ctx, rn] {
    return Lvrename(ctx, *rn);
  })->add_option("names", *rn, "VG OLD NEW | VG/OLD VG/NEW");

  auto rm = std::make_shared<std::vector<std::string>>();
  CLI::App* lvremove = AddVerb(app, ctx, "lvremove", "Remove logical volumes",
                               [&ctx, rm] { return Lvremove(ctx, *rm); });
  lvremove->add_flag("-f,--force")->description("Accepted for compatibility");
  lvremove->add_flag("-y,--yes")->description("Accepted for compatibility");
  lvremove->add_option("lv", *rm, "VG/LV or VG");
}

}  // namespace volstack::cli::lvmcli

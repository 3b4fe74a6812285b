// pvcreate, pvremove, pvchange (-x, --addtag/--deltag, -u: a new PV UUID in the label and the
// VG metadata, see Lvm::ChangePvUuid).
#include <algorithm>
#include <cctype>
#include <string_view>

#include "cli/lvm_common.h"
#include "lvm/uuid.h"
#include "util/size.h"

namespace volstack::cli::lvmcli {

namespace {

struct PvcreateArgs {
  std::vector<std::string> devices;
  std::string uuid;
  int metadata_copies = 1;
  std::string data_alignment;
  int force = 0;
  bool yes = false;
};

int Pvcreate(const Context& ctx, const PvcreateArgs& a) {
  if (a.devices.empty()) return Fail("Please enter a physical volume path.", kLvmInvalid);
  lvm::PvCreateOptions opts;
  if (!a.uuid.empty()) {
    if (a.devices.size() != 1) return Fail("Can only set uuid on one volume at once.", kLvmInvalid);
    auto raw = lvm::ParseId(a.uuid);
    if (!raw.ok()) return Fail("Invalid UUID " + a.uuid, kLvmInvalid);
    opts.uuid = *raw;
  }
  if (a.metadata_copies < 0 || a.metadata_copies > 2) {
    return Fail("Metadatacopies may only be 0, 1 or 2", kLvmInvalid);
  }
  opts.metadata_copies = a.metadata_copies;
  if (!a.data_alignment.empty()) {
    auto v = ParseSize(a.data_alignment, 1024);
    if (!v.ok() || *v == 0 || *v % 512 != 0)
      return Fail("Invalid data alignment " + a.data_alignment, kLvmInvalid);
    // pe_start is the first multiple of the alignment past the 1 MiB default metadata area.
    opts.data_alignment = std::max<uint64_t>(*v, (lvm::kDefaultPeStart + *v - 1) / *v * *v);
  }
  auto session = OpenSession(ctx, false, a.devices);
  int rc = kLvmOk;
  std::vector<std::string> created;
  for (const auto& d : a.devices) {
    const std::string name = NormalizeDeviceName(d);
    auto pv = session->CreatePv(name, opts);
    if (!pv.ok()) {
      rc = Fail(pv.status());
      continue;
    }
    created.push_back(name);
    Say("Physical volume \"" + name + "\" successfully created.");
  }
  if (!created.empty()) {
    Status s = AddToList(ctx, DevicesFile(ctx), created);
    if (!s.ok()) return Fail(s);
  }
  return rc;
}

int Pvremove(const Context& ctx, const std::vector<std::string>& devices) {
  if (devices.empty()) return Fail("Please enter a physical volume path.", kLvmInvalid);
  auto session = OpenSession(ctx, false, devices);
  int rc = kLvmOk;
  std::vector<std::string> removed;
  for (const auto& d : devices) {
    const std::string name = NormalizeDeviceName(d);
    lvm::Pv* pv = session->FindPv(name);
    if (!pv) {
      rc = Fail("No PV found on device " + d + ".");
      continue;
    }
    Status s = session->RemovePv(pv);
    if (!s.ok()) {
      rc = Fail(s);
      continue;
    }
    removed.push_back(name);
    Say("Labels on physical volume \"" + name + "\" successfully wiped.");
  }
  Status s = RemoveFromList(ctx, DevicesFile(ctx), removed);
  if (!s.ok()) return Fail(s);
  return rc;
}

struct PvchangeArgs {
  std::vector<std::string> devices;
  std::string allocatable;
  std::vector<std::string> addtags;
  std::vector<std::string> deltags;
  bool uuid = false;
  bool all = false;
};

// lvm2's tag characters (lib/misc/lvm-string.c validate_tag): [A-Za-z0-9_+.\-/=!:&#], at
// most 1024 of them.
bool IsValidTag(const std::string& tag) {
  if (tag.empty() || tag.size() > 1024) return false;
  for (char c : tag) {
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("_+.-/=!:&#").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

// Applies -x / --addtag / --deltag to one PV record. Returns whether anything changed;
// prints lvm2's "already" line on stderr when -x asks for the current state.
bool ApplyPvChange(const PvchangeArgs& a, const std::string& name, lvm::PhysicalVolume& rec) {
  bool changed = false;
  if (!a.allocatable.empty()) {
    const bool want = a.allocatable == "y";
    if (rec.allocatable() == want) {
      Fail("Physical volume \"" + name + "\" is already " +
           (want ? "allocatable." : "unallocatable."));
    } else if (want) {
      rec.status.insert(rec.status.begin(), "ALLOCATABLE");
      changed = true;
    } else {
      std::erase(rec.status, std::string("ALLOCATABLE"));
      changed = true;
    }
  }
  for (const auto& t : a.addtags) {
    if (std::find(rec.tags.begin(), rec.tags.end(), t) == rec.tags.end()) {
      rec.tags.push_back(t);
      changed = true;
    }
  }
  for (const auto& t : a.deltags) changed |= std::erase(rec.tags, t) > 0;
  return changed;
}

// A PV pvchange could not change: lvm2's reason, then its "not changed" line, both on stderr.
int NotChanged(const std::string& why, const std::string& name) {
  Fail(why);
  return Fail("Physical volume " + name + " not changed");
}

bool AnyLvActive(const Context& ctx, const lvm::VgHandle& h) {
  return std::any_of(h.vg.lvs.begin(), h.vg.lvs.end(), [&](const lvm::LogicalVolume& lv) {
    return IsActive(ctx, h.vg.name, lv.name);
  });
}

// One PV of pvchange, as lvm2's _pvchange_single: 1 changed, 0 not changed, -1 skipped (not
// counted: a device that is no PV, a PV of an exported VG). Sets *rc on failure.
int PvchangeOne(const Context& ctx, const PvchangeArgs& a, const std::vector<std::string>& argv,
                lvm::Lvm& session, const std::string& d, int* rc) {
  const std::string name = NormalizeDeviceName(d);
  lvm::Pv* pv = session.FindPv(name);
  if (!pv) {
    *rc = Fail("Failed to find physical volume \"" + d + "\".");
    return 0;
  }
  lvm::VgHandle* h = session.VgOfPv(pv);
  const bool tags = !a.addtags.empty() || !a.deltags.empty();
  if (!h) {
    // An orphan has no metadata to hold -x or tags; only its label can change (-u).
    if (tags) {
      *rc =
          NotChanged("Can't change tag on Physical Volume " + name + " not in volume group", name);
      return 0;
    }
    if (!a.allocatable.empty()) {
      *rc = NotChanged("Allocatability not supported by orphan lvm2 format PV " + name, name);
      return 0;
    }
    Status s = session.ChangePvUuid(pv, lvm::GenerateId(), nullptr, Description("pvchange", argv));
    if (!s.ok()) {
      *rc = NotChanged(s.message(), name);
      return 0;
    }
    Say("Physical volume \"" + name + "\" changed");
    return 1;
  }
  if (h->vg.HasStatus("EXPORTED")) {
    *rc = Fail("Cannot use PV " + name + " in exported VG " + h->vg.name + ".");
    return -1;
  }
  if (h->partial()) {
    *rc = NotChanged("Cannot change VG " + h->vg.name + " while PVs are missing.", name);
    return 0;
  }
  if (a.uuid && AnyLvActive(ctx, *h)) {
    // The LVs' mappings (and a running pvmove's gate) know the PV by its UUID.
    *rc = NotChanged("Volume group containing " + name + " has active logical volumes", name);
    return 0;
  }
  lvm::VolumeGroup vg = h->vg;
  const int index = vg.FindPvById(pv->uuid());
  bool changed = ApplyPvChange(a, name, vg.pvs[index]);
  std::string uuid;
  if (a.uuid) {
    uuid = lvm::GenerateId();
    vg.pvs[index].id = uuid;
    changed = true;
  }
  if (!changed) {
    Say("Physical volume " + name + " not changed");
    return 0;
  }
  const std::string description = Description("pvchange", argv);
  Status s =
      a.uuid ? session.ChangePvUuid(pv, uuid, &vg, description) : session.Commit(vg, description);
  if (!s.ok()) {
    *rc = NotChanged(s.message(), name);
    return 0;
  }
  Say("Physical volume \"" + name + "\" changed");
  return 1;
}

int Pvchange(const Context& ctx, const PvchangeArgs& a, const std::vector<std::string>& argv) {
  if (!a.allocatable.empty() && a.allocatable != "y" && a.allocatable != "n") {
    return Fail("Invalid argument for --allocatable: " + a.allocatable, kLvmInvalid);
  }
  for (const auto* list : {&a.addtags, &a.deltags}) {
    for (const auto& t : *list) {
      if (!IsValidTag(t)) {
        return Fail("Invalid argument for --" + std::string(list == &a.addtags ? "add" : "del") +
                        "tag: " + t,
                    kLvmInvalid);
      }
    }
  }
  // lvm2's command-line matcher: some change, and PVs or -a (never both).
  if ((a.allocatable.empty() && a.addtags.empty() && a.deltags.empty() && !a.uuid) ||
      (a.devices.empty() && !a.all)) {
    return Fail(
        "No command with matching syntax recognised.  Run 'pvchange --help' for more "
        "information.",
        kLvmInvalid);
  }
  if (a.all && !a.devices.empty()) {
    return Fail("Command does not accept argument: " + a.devices.front() + ".", kLvmInvalid);
  }
  auto session = OpenSession(ctx, false, a.devices);
  std::vector<std::string> targets = a.devices;
  if (a.all) {
    for (const auto& pv : session->pvs()) targets.push_back(pv->name());
  }
  int changed = 0, unchanged = 0, rc = kLvmOk;
  for (const auto& d : targets) {
    const int r = PvchangeOne(ctx, a, argv, *session, d, &rc);
    if (r > 0) changed++;
    if (r == 0) unchanged++;
  }
  Say(std::to_string(changed) + " physical volume" + (changed == 1 ? "" : "s") + " changed / " +
      std::to_string(unchanged) + " physical volume" + (unchanged == 1 ? "" : "s") +
      " not changed");
  return rc;
}

}  // namespace

void RegisterPvVerbs(CLI::App& app, Context& ctx) {
  auto pc = std::make_shared<PvcreateArgs>();
  CLI::App* pvcreate = AddVerb(app, ctx, "pvcreate", "Initialize devices as LVM physical volumes",
                               [&ctx, pc] { return Pvcreate(ctx, *pc); });
  pvcreate->add_option("device", pc->devices, "Devices (paths or volstack device names)");
  pvcreate->add_option("-u,--uuid", pc->uuid, "PV UUID");
  pvcreate->add_option("--pvmetadatacopies,--metadatacopies", pc->metadata_copies, "0, 1 or 2");
  pvcreate->add_option("--dataalignment", pc->data_alignment, "Align the first PE to this size");
  pvcreate->add_flag("-f,--force", pc->force, "Accepted for compatibility");
  pvcreate->add_flag("-y,--yes", pc->yes, "Accepted for compatibility");
  pvcreate->add_option("-Z,--zero")->description("Accepted for compatibility");

  auto pr = std::make_shared<std::vector<std::string>>();
  CLI::App* pvremove = AddVerb(app, ctx, "pvremove", "Remove LVM labels from physical volumes",
                               [&ctx, pr] { return Pvremove(ctx, *pr); });
  pvremove->add_option("device", *pr, "PVs");
  pvremove->add_flag("-f,--force")->description("Accepted for compatibility");
  pvremove->add_flag("-y,--yes")->description("Accepted for compatibility");

  auto pch = std::make_shared<PvchangeArgs>();
  CLI::App* pvchange = AddVerb(
      app, ctx, "pvchange", "Change PV attributes (-x y|n, -u, --addtag, --deltag)", [&ctx, pch] {
        std::vector<std::string> argv;
        if (!pch->allocatable.empty()) argv = {"-x", pch->allocatable};
        if (pch->uuid) argv.push_back("-u");
        for (const auto& t : pch->addtags) argv.insert(argv.end(), {"--addtag", t});
        for (const auto& t : pch->deltags) argv.insert(argv.end(), {"--deltag", t});
        if (pch->all) argv.push_back("-a");
        argv.insert(argv.end(), pch->devices.begin(), pch->devices.end());
        return Pvchange(ctx, *pch, argv);
      });
  pvchange->add_option("-x,--allocatable", pch->allocatable, "y|n");
  pvchange->add_option("--addtag", pch->addtags, "Add a tag (repeatable)")->allow_extra_args(false);
  pvchange->add_option("--deltag", pch->deltags, "Remove a tag (repeatable)")
      ->allow_extra_args(false);
  pvchange->add_flag("-u,--uuid", pch->uuid, "Give each PV a new random UUID");
  pvchange->add_flag("-a,--all", pch->all, "All PVs");
  pvchange->add_option("device", pch->devices, "PVs");
}

}  // namespace volstack::cli::lvmcli

// pvcreate, pvremove, pvchange.
#include <algorithm>

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
    Status s = AddToList(DevicesFile(ctx), created);
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
  Status s = RemoveFromList(DevicesFile(ctx), removed);
  if (!s.ok()) return Fail(s);
  return rc;
}

struct PvchangeArgs {
  std::vector<std::string> devices;
  std::string allocatable;
  bool all = false;
};

int Pvchange(const Context& ctx, const PvchangeArgs& a) {
  if (a.allocatable != "y" && a.allocatable != "n") {
    return Fail("Please give -x y|n (the only change supported).", kLvmInvalid);
  }
  if (a.devices.empty() && !a.all)
    return Fail("Please give a physical volume path or -a.", kLvmInvalid);
  auto session = OpenSession(ctx, false, a.devices);
  std::vector<std::string> targets = a.devices;
  if (a.all) {
    for (const auto& pv : session->pvs()) targets.push_back(pv->name());
  }
  int changed = 0, unchanged = 0, rc = kLvmOk;
  for (const auto& d : targets) {
    const std::string name = NormalizeDeviceName(d);
    lvm::Pv* pv = session->FindPv(name);
    lvm::VgHandle* h = pv ? session->VgOfPv(pv) : nullptr;
    if (!pv || !h) {
      rc = Fail(pv ? "Unable to change allocatability of orphan PV " + name
                   : "Failed to find physical volume \"" + d + "\".");
      unchanged++;
      continue;
    }
    lvm::VolumeGroup vg = h->vg;
    auto& rec = vg.pvs[vg.FindPvById(pv->uuid())];
    const bool want = a.allocatable == "y";
    if (rec.allocatable() == want) {
      Say("Physical volume \"" + name + "\" is already " +
          (want ? "allocatable." : "unallocatable."));
      unchanged++;
      continue;
    }
    if (want) {
      rec.status.insert(rec.status.begin(), "ALLOCATABLE");
    } else {
      rec.status.erase(std::remove(rec.status.begin(), rec.status.end(), "ALLOCATABLE"),
                       rec.status.end());
    }
    Status s = session->Commit(vg, Description("pvchange", {"-x", a.allocatable, name}));
    if (!s.ok()) {
      rc = Fail(s);
      unchanged++;
      continue;
    }
    Say("Physical volume \"" + name + "\" changed");
    changed++;
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
  CLI::App* pvchange = AddVerb(app, ctx, "pvchange", "Change PV attributes (-x y|n)",
                               [&ctx, pch] { return Pvchange(ctx, *pch); });
  pvchange->add_option("-x,--allocatable", pch->allocatable, "y|n")->required();
  pvchange->add_flag("-a,--all", pch->all, "All PVs");
  pvchange->add_option("device", pch->devices, "PVs");
}

}  // namespace volstack::cli::lvmcli

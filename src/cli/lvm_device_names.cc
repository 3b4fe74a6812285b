// LVs as volstack device names: "vg/lv" is any LV of a VG found on the scanned devices (the
// devices file and the pool volumes), activated for the caller. The returned LvDevice owns
// its PV devices, so it stays usable after the scan session is gone.
#include <algorithm>

#include "cli/device_names.h"
#include "cli/lvm_common.h"

namespace volstack::cli {

namespace {
thread_local int lv_lookup_depth = 0;  // an LV used as a PV must not recurse forever
}  // namespace

Result<bdev::BlockDevicePtr> OpenLogicalVolumeByName(const Context& ctx, const std::string& name,
                                                     bool read_only) {
  auto [vg, lv] = lvmcli::SplitLvName(name);
  if (lv.empty() || lv.find('/') != std::string::npos || lv_lookup_depth > 0) {
    return Status::NotFound("no LV '" + name + "'");
  }
  lv_lookup_depth++;
  auto session = lvmcli::OpenSession(ctx, read_only);
  lv_lookup_depth--;
  lvm::VgHandle* h = session->FindVg(vg);
  if (!h || !h->vg.FindLv(lv)) return Status::NotFound("no LV '" + name + "'");
  // The PVs were opened read-only for a read-only caller, so the LV is read-only too.
  return session->Activate(*h, lv, false);
}

std::vector<std::string> ListLogicalVolumeNames(const Context& ctx) {
  if (lv_lookup_depth > 0) return {};
  lv_lookup_depth++;
  auto session = lvmcli::OpenSession(ctx, true);
  lv_lookup_depth--;
  std::vector<std::string> names;
  for (const auto& h : session->vgs()) {
    for (const auto& lv : h.vg.lvs) {
      if (lv.visible()) names.push_back(h.vg.name + "/" + lv.name);
    }
  }
  return names;
}

}  // namespace volstack::cli

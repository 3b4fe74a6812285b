// `volstack status`: the stack as a tree, top to bottom as data flows up:
//
//   pool → its vdevs and volumes → the VG a volume is a PV of → its LVs → each device's
//   exports (devfs file, loop devices and what mounts them, NBD listeners)
//
// with health, sizes and what uses what; `--json` gives the same data. The data is the stack
// graph (stack/graph.h) as a typed reply (stack/requests.h): the daemon's when one runs, else
// this command's own stack's (the pools and PV labels read-only). This file only prints it,
// so only the first line and what is live (active devices, the devfs mount, serving
// listeners) differ between a daemon and none.
#include "cli/status.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/pool_common.h"
#include "cli/status_snapshots.h"
#include "util/request_io.h"

namespace volstack::cli {

namespace {

using nlohmann::json;

void PrintExports(const json& e, const std::string& indent) {
  if (!e["devfs"].is_null()) {
    std::fprintf(Out(), "%sdevfs %s\n", indent.c_str(), e["devfs"].get<std::string>().c_str());
  }
  for (const auto& l : e["loops"]) {
    std::fprintf(Out(), "%sloop %s  %u-byte sectors%s%s\n", indent.c_str(),
                 l["device"].get<std::string>().c_str(), l["sector_size"].get<uint32_t>(),
                 l["read_only"].get<bool>() ? "  read-only" : "",
                 l["bound"].get<bool>() ? "" : "  (not bound; restored at up)");
    for (const auto& m : l["mounts"]) {
      std::fprintf(Out(), "%s  mounted on %s (%s)\n", indent.c_str(),
                   m["mount_point"].get<std::string>().c_str(),
                   m["fstype"].get<std::string>().c_str());
    }
  }
  for (const auto& n : e["nbd"]) {
    std::fprintf(Out(), "%snbd %s export %s  %s\n", indent.c_str(),
                 n["address"].get<std::string>().c_str(), n["export"].get<std::string>().c_str(),
                 n["serving"].get<bool>() ? "serving" : "stopped (restored at up)");
  }
}

}  // namespace

int PrintStatus(const Context& ctx) {
  auto reply = ctx.Call({"status", json::object()});
  if (!reply.ok()) return ReportFailure(reply.status());
  for (const auto& e : reply->errors) std::fprintf(Err(), "volstack: %s\n", e.c_str());
  json tree = reply->data["tree"];
  // The state dir as this command was given it (the daemon's may be spelled otherwise).
  tree["state_dir"] = ctx.global.state_dir;
  const bool daemon = tree["daemon"].get<bool>();
  const std::string devfs_dir = tree["devfs"].is_string() ? tree["devfs"].get<std::string>() : "";
  const std::string transport =
      tree["fuse_transport"].is_string() ? tree["fuse_transport"].get<std::string>() : "";
  const json& pools = tree["pools"];
  const json& vgs = tree["vgs"];
  if (ctx.global.json) {
    std::fprintf(Out(), "%s\n", tree.dump(2).c_str());
    return reply->code;
  }
  std::string reason = daemon ? reply->data["fuse_transport_reason"].get<std::string>() : "";
  if (!reason.empty()) reason = ": " + reason;
  std::fprintf(
      Out(), "stack %s (%s)\n", ctx.global.state_dir.c_str(),
      daemon ? ("daemon running, devfs " + devfs_dir + ", FUSE transport " + transport + reason)
                   .c_str()
             : "no daemon");
  auto size = [](const json& j) { return poolcli::Bytes(j.get<uint64_t>(), false); };
  for (const auto& p : pools) {
    std::fprintf(Out(), "  pool %s  %s", p["name"].get<std::string>().c_str(),
                 p["health"].get<std::string>().c_str());
    if (p.contains("size")) {
      std::fprintf(Out(), "  size %s  alloc %s", size(p["size"]).c_str(),
                   size(p["allocated"]).c_str());
    }
    if (p.contains("reason")) std::fprintf(Out(), "  (%s)", p["reason"].get<std::string>().c_str());
    std::fprintf(Out(), "\n");
    for (const auto& v : p["vdevs"])
      std::fprintf(Out(), "    vdev %s\n", v.get<std::string>().c_str());
    for (const auto& v : p["volumes"]) {
      std::fprintf(Out(), "    volume %s  %s  volblocksize %s%s%s\n",
                   v["name"].get<std::string>().c_str(), size(v["size"]).c_str(),
                   size(v["volblocksize"]).c_str(), v["active"].get<bool>() ? "  active" : "",
                   SnapshotCount(v["snapshots"]).c_str());
      if (!v["pv_of"].get<std::string>().empty()) {
        std::fprintf(Out(), "      PV of VG %s\n", v["pv_of"].get<std::string>().c_str());
      }
      PrintExports(v["exports"], "      ");
      PrintSnapshots(v["snapshots"], "      ", PrintExports);
    }
  }
  for (const auto& v : vgs) {
    std::fprintf(Out(), "  vg %s  size %s  free %s%s\n", v["name"].get<std::string>().c_str(),
                 size(v["size"]).c_str(), size(v["free"]).c_str(),
                 v["partial"].get<bool>() ? "  PARTIAL" : "");
    for (const auto& pv : v["pvs"]) {
      std::fprintf(Out(), "    pv %s  %s%s\n", pv["name"].get<std::string>().c_str(),
                   size(pv["size"]).c_str(), pv["missing"].get<bool>() ? "  MISSING" : "");
    }
    for (const auto& lv : v["lvs"]) {
      const char* state = lv["active"].get<bool>()         ? "active"
                          : lv["active_at_up"].get<bool>() ? "inactive (active at up)"
                                                           : "inactive";
      std::fprintf(Out(), "    lv %s  %s  %s\n", lv["name"].get<std::string>().c_str(),
                   size(lv["size"]).c_str(), state);
      PrintExports(lv["exports"], "      ");
    }
  }
  return reply->code;
}

}  // namespace volstack::cli

// The pool branch of the device-name resolver: "trunk/funk" is a volume of a pool in the
// state dir's zpool.cache. The pool is imported for the call; the returned device keeps it
// open and the pool syncs and closes when the last reference drops.
#include <cstdio>

#include "cli/device_names.h"
#include "cli/pool_common.h"

namespace volstack::cli {

Result<bdev::BlockDevicePtr> OpenPoolVolumeByName(const Context& ctx, const std::string& name,
                                                  bool read_only) {
  const size_t slash = name.find('/');
  if (slash == std::string::npos) return Status::NotFound("no pool volume '" + name + "'");
  auto cached = poolcli::FindCached(ctx, name.substr(0, slash));
  if (!cached.ok() || !cached->has_value()) {
    return Status::NotFound("no pool volume '" + name + "'");
  }
  VS_ASSIGN_OR_RETURN(auto p, poolcli::OpenPool(ctx, name.substr(0, slash), read_only));
  pool::OpenVolumeOptions o;
  o.read_only = read_only;
  return p->OpenVolume(name, o);
}

// A pool that cannot be read is named on stderr, as lvm2 names a device it cannot read: its
// volumes' PVs are missing from the scan, and a VG on them would otherwise just be "not
// found", with no hint why.
std::vector<std::string> ListPoolVolumeNames(const Context& ctx) {
  std::vector<std::string> out;
  auto pools = poolcli::ReadCache(ctx);
  if (!pools.ok()) {
    std::fprintf(stderr, "  WARNING: pool volumes not scanned: %s\n",
                 pools.status().message().c_str());
    return out;
  }
  for (const auto& c : *pools) {
    auto p = poolcli::OpenPool(ctx, c.name, /*read_only=*/true);
    if (!p.ok()) {
      std::fprintf(stderr, "  WARNING: volumes of pool %s not scanned: %s\n", c.name.c_str(),
                   p.status().message().c_str());
      continue;
    }
    for (const auto& d : (*p)->ListDatasets()) {
      if (d.type == "volume") out.push_back(d.name);
    }
  }
  return out;
}

}  // namespace volstack::cli

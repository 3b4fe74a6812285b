// zpool add POOL [mirror|raidz|raidz1|raidz2] DEVICE...: new top-level vdevs for a pool,
// imported or open in the daemon (the command runs where the pool is open). Every device
// is opened and checked before anything is written (pool::Pool::Add: size, sector size,
// labels); on success the cache records the new devices so the next import finds them.
#include "cli/device_names.h"
#include "cli/pool_common.h"
#include "cli/pool_redundancy.h"
#include "pool/vdev.h"

namespace volstack::cli::poolcli {

namespace {

int ZpoolAdd(Context& ctx, const std::string& name, const std::vector<std::string>& words,
             bool force) {
  if (words.empty()) return ReportUsage("zpool add: missing vdev specification");
  auto p = OpenPool(ctx, name, /*read_only=*/false);
  if (!p.ok()) return ReportFailure(p.status());
  auto imported = ReadCache(ctx);
  if (!imported.ok()) return ReportFailure(imported.status());
  std::vector<bdev::BlockDevicePtr> devs;
  std::vector<std::string> names;
  for (const auto& w : words) {
    if (IsVdevKeyword(w)) continue;
    auto d = OpenDeviceByName(ctx, w, false);
    if (!d.ok()) return ReportFailure(d.status().WithContext("cannot add to " + name));
    // -f overrides a label left by an exported, destroyed or lost pool, never one of a pool
    // imported here.
    if (auto label = pool::Vdev::ReadLabelConfig(**d); label.ok()) {
      for (const auto& c : *imported) {
        if (c.guid == label->pool_guid) {
          return ReportFailure(Status::Busy("cannot add to " + name + ": " + w +
                                            " is part of imported pool '" + c.name + "'"));
        }
      }
    }
    devs.push_back(*d);
    names.push_back(NormalizeVdevName(w));
  }
  auto specs = GroupVdevs(words, devs, names);
  if (!specs.ok()) return ReportUsage("zpool add: " + specs.status().message());
  Status st = (*p)->Add(*specs, force);
  if (!st.ok()) return ReportFailure(st.WithContext("cannot add to " + name));
  st = UpdateCache(ctx, [&](std::vector<CachedPool>& pools) {
    for (auto& c : pools) {
      if (c.name == name) c.vdevs.insert(c.vdevs.end(), names.begin(), names.end());
    }
    return Status::Ok();
  });
  return st.ok() ? kExitOk : ReportFailure(st);
}

}  // namespace

void RegisterZpoolAddVerb(CLI::App& zpool, Context& ctx) {
  struct Args {
    std::string name;
    std::vector<std::string> vdevs;
    bool force = false;
  };
  auto a = std::make_shared<Args>();
  auto* c = AddVerb(zpool, ctx, "add", "Add vdevs (devices, mirrors, raidz) to a pool",
                    [&ctx, a] { return ZpoolAdd(ctx, a->name, a->vdevs, a->force); });
  c->add_flag("-f", a->force, "Use devices even if they carry another pool's label");
  c->add_option("pool", a->name, "Pool")->required();
  c->add_option("vdevs", a->vdevs, "Devices, with mirror/raidz/raidz1/raidz2 keywords")->required();
}

}  // namespace volstack::cli::poolcli

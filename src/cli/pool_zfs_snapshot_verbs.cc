// zfs verbs for volume snapshots: snapshot [-r], rollback [-r], clone, promote, hold, release,
// holds.
// Listing and destroy of snapshots are in pool_zfs_verbs.cc; the engine (and its theory) is
// src/pool/snapshot.cc. Exit codes as zfs: 2 for a usage error (a bad name), 1 for a
// failure; either way nothing is changed.
#include <algorithm>
#include <cstdio>
#include <ctime>

#include "cli/device_usage.h"
#include "cli/pool_common.h"
#include "cli/snapshot_devices.h"
#include "cli/verbs.h"
#include "stack/stack.h"
#include "util/request_io.h"

namespace volstack::cli {

Status ReleaseSnapshots(Context& ctx, const std::vector<std::string>& snapshots) {
  if (snapshots.empty()) return Status::Ok();
  if (Status busy = CheckNotInUse(ctx, snapshots); !busy.ok()) {
    return Status::Busy("snapshot " + busy.message());
  }
  ctx.stack().Release(snapshots);
  return Status::Ok();
}

namespace {

std::string PoolPart(const std::string& name) {
  return name.substr(0, std::min(name.find('/'), name.find('@')));
}

int ZfsSnapshot(Context& ctx, bool recursive, const std::vector<std::string>& names) {
  if (names.empty()) return ReportUsage("zfs snapshot: missing snapshot argument");
  const std::string pool_name = PoolPart(names[0]);
  for (const auto& n : names) {
    if (n.find('@') == std::string::npos) {
      return ReportUsage("zfs snapshot: invalid snapshot name '" + n + "': missing '@'");
    }
    if (PoolPart(n) != pool_name) {
      return ReportUsage("zfs snapshot: cannot create snapshots in more than one pool at once");
    }
    // pool@snap names the root dataset: only -r, which takes every volume, applies.
    if (!(recursive && n.find('/') == std::string::npos)) {
      if (Status st = pool::ValidateSnapshotName(n); !st.ok()) {
        return ReportUsage("zfs snapshot: " + st.message());
      }
    }
  }
  auto p = poolcli::OpenPool(ctx, pool_name, false);
  if (!p.ok()) return ReportFailure(p.status());
  std::vector<std::string> all;
  for (const auto& n : names) {
    const std::string ds = n.substr(0, n.find('@')), snap = n.substr(n.find('@'));
    if (recursive && ds == pool_name) {
      // -r of the root: a snapshot of every volume, all in one txg.
      for (const auto& d : (*p)->ListDatasets()) {
        if (d.type == "volume") all.push_back(d.name + snap);
      }
    } else {
      all.push_back(n);
    }
  }
  for (const auto& n : all) {
    if (Status st = pool::ValidateSnapshotName(n); !st.ok()) {
      return ReportUsage("zfs snapshot: " + st.message());
    }
  }
  if (all.empty()) return ReportFailure(Status::NotFound("no volumes to snapshot"));
  if (Status st = (*p)->Snapshot(all); !st.ok()) {
    if (st.code() == EINVAL) return ReportUsage("zfs snapshot: " + st.message());
    return ReportFailure(st);
  }
  return kExitOk;
}

int ZfsRollback(Context& ctx, bool recursive, const std::string& name) {
  if (Status st = pool::ValidateSnapshotName(name); !st.ok()) {
    return ReportUsage("zfs rollback: " + st.message());
  }
  const std::string volume = name.substr(0, name.find('@'));
  auto p = poolcli::OpenPool(ctx, PoolPart(name), false);
  if (!p.ok()) return ReportFailure(p.status());
  if (!(*p)->GetDataset(name).ok()) {
    return ReportFailure(Status::NotFound("cannot open '" + name + "': dataset does not exist"));
  }
  // The same rules as zfs destroy: bound to a loop, open, served, an active PV: refused.
  if (Status busy = CheckNotInUse(ctx, {volume}); !busy.ok()) {
    std::fprintf(Err(), "volstack: cannot rollback '%s': dataset is busy (%s)\n", volume.c_str(),
                 busy.message().c_str());
    return kExitFailure;
  }
  if (recursive) {
    // -r destroys the later snapshots: those that are devices must be free.
    auto snaps = (*p)->SnapshotNames(volume);
    auto it = std::find(snaps.begin(), snaps.end(), name);
    std::vector<std::string> later(it == snaps.end() ? snaps.end() : it + 1, snaps.end());
    if (Status st = ReleaseSnapshots(ctx, later); !st.ok()) {
      return ReportFailure(st.WithContext("cannot rollback '" + volume + "'"));
    }
  }
  ctx.stack().Release({volume});
  if (Status st = (*p)->Rollback(name, recursive); !st.ok()) return ReportFailure(st);
  return kExitOk;
}

int ZfsClone(Context& ctx, const std::vector<std::string>& opts, const std::string& snapshot,
             const std::string& target) {
  if (Status st = pool::ValidateSnapshotName(snapshot); !st.ok()) {
    return ReportUsage("zfs clone: " + st.message());
  }
  if (Status st = pool::ValidateDatasetName(target); !st.ok()) {
    if (st.code() == EINVAL) return ReportUsage("zfs clone: " + st.message());
    return ReportFailure(st);
  }
  pool::VolumeOptions vo;
  for (const auto& o : opts) {
    auto kv = poolcli::SplitProp(o);
    if (!kv.ok()) return ReportUsage("zfs clone: " + kv.status().message());
    if (vo.props.count(kv->first)) {
      return ReportUsage("zfs clone: property '" + kv->first + "' specified multiple times");
    }
    vo.props[kv->first] = kv->second;
  }
  auto p = poolcli::OpenPool(ctx, PoolPart(snapshot), false);
  if (!p.ok()) return ReportFailure(p.status());
  auto d = (*p)->Clone(snapshot, target, vo);
  if (!d.ok()) {
    if (d.status().code() == EINVAL) return ReportUsage("zfs clone: " + d.status().message());
    return ReportFailure(d.status());
  }
  return kExitOk;
}

// zfs promote: the snapshots that move to the clone are renamed, so none may be in use (a
// loop bound to a visible snapshot's devfs file, an NBD export of it); the daemon's own
// registration of them is dropped first and the next reconcile registers the new names.
int ZfsPromote(Context& ctx, const std::string& clone) {
  if (clone.find('@') != std::string::npos) {
    return ReportUsage("zfs promote: cannot promote '" + clone +
                       "': snapshots can not be promoted");
  }
  if (Status st = pool::ValidateDatasetName(clone); !st.ok()) {
    return ReportUsage("zfs promote: " + st.message());
  }
  auto p = poolcli::OpenPool(ctx, PoolPart(clone), false);
  if (!p.ok()) return ReportFailure(p.status());
  auto d = (*p)->GetDataset(clone);
  if (!d.ok()) return ReportFailure(d.status());
  std::vector<std::string> moving;
  if (!d->origin.empty()) {
    auto origin = (*p)->GetDataset(d->origin);
    if (!origin.ok()) return ReportFailure(origin.status());
    for (const auto& s : (*p)->ListSnapshots(d->origin.substr(0, d->origin.find('@')))) {
      if (s.create_txg <= origin->create_txg) moving.push_back(s.name);
    }
  }
  if (Status st = ReleaseSnapshots(ctx, moving); !st.ok()) {
    return ReportFailure(st.WithContext("cannot promote '" + clone + "'"));
  }
  // zfs exits 1 for a volume that is not a clone, as for any other refusal.
  if (Status st = (*p)->Promote(clone); !st.ok()) return ReportFailure(st);
  return kExitOk;
}

// zfs hold / release: every snapshot named, one after the other; the first failure stops.
int ZfsHoldOrRelease(Context& ctx, bool hold, const std::string& tag,
                     const std::vector<std::string>& names) {
  const std::string verb = hold ? "zfs hold: " : "zfs release: ";
  for (const auto& n : names) {
    if (Status st = pool::ValidateSnapshotName(n); !st.ok())
      return ReportUsage(verb + st.message());
  }
  for (const auto& n : names) {
    auto p = poolcli::OpenPool(ctx, PoolPart(n), false);
    if (!p.ok()) return ReportFailure(p.status());
    Status st = hold ? (*p)->Hold(n, tag) : (*p)->Release(n, tag);
    if (st.code() == EINVAL) return ReportUsage(verb + st.message());
    if (!st.ok()) return ReportFailure(st);
  }
  return kExitOk;
}

int ZfsHolds(Context& ctx, bool scripted, const std::vector<std::string>& names) {
  poolcli::Table t({"NAME", "TAG", "TIMESTAMP"}, {false, false, false});
  for (const auto& n : names) {
    if (Status st = pool::ValidateSnapshotName(n); !st.ok()) {
      return ReportUsage("zfs holds: " + st.message());
    }
    auto p = poolcli::OpenPool(ctx, PoolPart(n), true);
    if (!p.ok()) return ReportFailure(p.status());
    auto holds = (*p)->Holds(n);
    if (!holds.ok()) return ReportFailure(holds.status());
    for (const auto& [tag, when] : *holds) {
      const time_t tt = static_cast<time_t>(when);
      char buf[64];
      struct tm tm;
      localtime_r(&tt, &tm);
      std::strftime(buf, sizeof buf, "%a %b %e %H:%M %Y", &tm);
      t.AddRow({n, tag, buf});
    }
  }
  t.Print(scripted);
  return kExitOk;
}

}  // namespace

void RegisterZfsSnapshotVerbs(CLI::App& zfs, Context& ctx) {
  {
    auto recursive = std::make_shared<bool>(false);
    auto names = std::make_shared<std::vector<std::string>>();
    auto* c = AddVerb(zfs, ctx, "snapshot", "Snapshot volumes, all in one txg: pool/vol@snap...",
                      [&ctx, recursive, names] { return ZfsSnapshot(ctx, *recursive, *names); });
    c->alias("snap");
    c->add_flag("-r", *recursive, "Every volume under the name (pool@snap: all of them)");
    c->add_option("snapshots", *names, "pool/vol@snap")->required();
  }
  {
    auto recursive = std::make_shared<bool>(false), force = std::make_shared<bool>(false);
    auto name = std::make_shared<std::string>();
    auto* c = AddVerb(zfs, ctx, "rollback", "Roll a volume back to a snapshot",
                      [&ctx, recursive, name] { return ZfsRollback(ctx, *recursive, *name); });
    c->add_flag("-r", *recursive, "Destroy the later snapshots");
    c->add_flag("-f", *force, "Force (accepted for compatibility)");
    c->add_option("snapshot", *name, "pool/vol@snap")->required();
  }
  {
    auto clone = std::make_shared<std::string>();
    auto* c =
        AddVerb(zfs, ctx, "promote", "Make a clone the origin of the volume it was cloned from",
                [&ctx, clone] { return ZfsPromote(ctx, *clone); });
    c->add_option("clone", *clone, "pool/clone")->required();
  }
  for (bool hold : {true, false}) {
    auto tag = std::make_shared<std::string>();
    auto names = std::make_shared<std::vector<std::string>>();
    auto* c =
        AddVerb(zfs, ctx, hold ? "hold" : "release",
                hold ? "Pin snapshots against destroy" : "Remove a hold",
                [&ctx, hold, tag, names] { return ZfsHoldOrRelease(ctx, hold, *tag, *names); });
    c->add_option("tag", *tag, "Hold tag")->required();
    c->add_option("snapshots", *names, "pool/vol@snap")->required();
  }
  {
    auto scripted = std::make_shared<bool>(false);
    auto names = std::make_shared<std::vector<std::string>>();
    auto* c = AddVerb(zfs, ctx, "holds", "List the holds of snapshots",
                      [&ctx, scripted, names] { return ZfsHolds(ctx, *scripted, *names); });
    c->add_flag("-H", *scripted, "Scripted mode");
    c->add_option("snapshots", *names, "pool/vol@snap")->required();
  }
  {
    auto opts = std::make_shared<std::vector<std::string>>();
    auto snapshot = std::make_shared<std::string>(), target = std::make_shared<std::string>();
    auto* c = AddVerb(
        zfs, ctx, "clone", "A writable volume from a snapshot",
        [&ctx, opts, snapshot, target] { return ZfsClone(ctx, *opts, *snapshot, *target); });
    c->add_option("-o", *opts, "property=value")->allow_extra_args(false);
    c->add_option("snapshot", *snapshot, "pool/vol@snap")->required();
    c->add_option("target", *target, "pool/clone")->required();
  }
}

}  // namespace volstack::cli

// zfs destroy of snapshots: pool/vol@spec where spec is a comma-separated list of snapshot
// names and ranges. A range a%b is every snapshot of the volume from a to b inclusive in
// creation order; either end may be empty (the oldest, the newest). As zfs: names and ranges
// that match nothing are skipped, and only when nothing at all matches is it an error; with
// -r, pool@spec applies to every volume. Everything matched goes in one txg, or nothing:
// a snapshot that is open, held, a device in use, or (without -R) has clones refuses the
// whole command. -n -v prints what would go and the space destroying them together frees;
// -p prints zfs's parsable lines ("destroy\tNAME", "reclaim\tBYTES").
#include <algorithm>
#include <cstdio>
#include <set>

#include "cli/device_usage.h"
#include "cli/pool_common.h"
#include "cli/snapshot_devices.h"
#include "cli/verbs.h"
#include "stack/stack.h"
#include "util/request_io.h"

namespace volstack::cli {

// The snapshots of `volumes`, then the volumes' own: what zfs destroy -r takes first.
Status DestroySnapshotsOf(Context& ctx, pool::Pool& pool, const std::vector<std::string>& volumes) {
  for (const auto& v : volumes) VS_RETURN_IF_ERROR(ReleaseSnapshots(ctx, pool.SnapshotNames(v)));
  for (const auto& v : volumes) {
    auto snaps = pool.SnapshotNames(v);
    if (!snaps.empty()) VS_RETURN_IF_ERROR(pool.DestroySnapshots(snaps));
  }
  return Status::Ok();
}

// The snapshots of `snaps` (one volume's names, oldest first) that `spec` names, in that
// order. Parts naming nothing add nothing (zfs skips them).
std::vector<std::string> MatchSnapSpec(const std::vector<std::string>& snaps,
                                       const std::string& volume, const std::string& spec) {
  std::set<size_t> picked;
  auto index = [&](const std::string& s) {
    return static_cast<size_t>(std::find(snaps.begin(), snaps.end(), volume + "@" + s) -
                               snaps.begin());
  };
  for (const auto& part : poolcli::SplitComma(spec)) {
    const auto pct = part.find('%');
    if (pct == std::string::npos) {
      if (const size_t i = index(part); i < snaps.size()) picked.insert(i);
      continue;
    }
    const std::string first = part.substr(0, pct), last = part.substr(pct + 1);
    const size_t a = first.empty() ? 0 : index(first);
    const size_t b = last.empty() ? snaps.size() - 1 : index(last);
    if (snaps.empty() || a >= snaps.size() || b >= snaps.size()) continue;
    for (size_t i = a; i <= b; i++) picked.insert(i);
  }
  std::vector<std::string> out;
  for (size_t i : picked) out.push_back(snaps[i]);
  return out;
}

namespace {

// A usage error in `spec` (exit 2), or OK: every name in it (range ends too) must be a
// valid snapshot name.
Status CheckSnapSpec(const std::string& volume, const std::string& spec) {
  if (spec.empty()) {
    return Status::InvalidArgument("invalid snapshot name '" + volume + "@': empty snapshot name");
  }
  for (const auto& part : poolcli::SplitComma(spec)) {
    const auto pct = part.find('%');
    if (pct != std::string::npos && part.find('%', pct + 1) != std::string::npos) {
      return Status::InvalidArgument("invalid snapshot range '" + part + "': more than one '%'");
    }
    for (const std::string& s :
         pct == std::string::npos
             ? std::vector<std::string>{part}
             : std::vector<std::string>{part.substr(0, pct), part.substr(pct + 1)}) {
      if (s.empty() && pct != std::string::npos) continue;  // an open end of a range
      // A volume name stands in for the check: the root's snapshots are refused elsewhere.
      const std::string v = volume.find('/') == std::string::npos ? volume + "/v" : volume;
      VS_RETURN_IF_ERROR(pool::ValidateSnapshotName(v + "@" + s));
    }
  }
  return Status::Ok();
}

}  // namespace

int ZfsDestroySnapshots(Context& ctx, const std::string& name, bool recursive, bool dependents,
                        bool dry_run, bool verbose, bool parsable) {
  const std::string volume = name.substr(0, name.find('@')), spec = name.substr(name.find('@') + 1);
  if (Status st = CheckSnapSpec(volume, spec); !st.ok()) {
    return ReportUsage("zfs destroy: " + st.message());
  }
  const bool root = volume.find('/') == std::string::npos;
  if (root && !recursive) {
    return ReportUsage("zfs destroy: invalid snapshot name '" + name +
                       "': snapshots of the pool's root dataset are not supported (with -r: "
                       "every volume's)");
  }
  if (!root) {
    if (Status st = pool::ValidateDatasetName(volume); !st.ok()) {
      return ReportUsage("zfs destroy: " + st.message());
    }
  }
  auto p = poolcli::OpenPool(ctx, volume.substr(0, volume.find('/')), dry_run);
  if (!p.ok()) return ReportFailure(p.status());
  std::vector<std::string> volumes;
  if (root) {
    for (const auto& d : (*p)->ListDatasets()) {
      if (d.type == "volume") volumes.push_back(d.name);
    }
  } else {
    if (!(*p)->GetDataset(volume).ok()) {
      return ReportFailure(
          Status::NotFound("cannot open '" + volume + "': dataset does not exist"));
    }
    volumes.push_back(volume);
  }
  std::vector<std::string> doomed, clones;
  for (const auto& v : volumes) {
    const auto matched = MatchSnapSpec((*p)->SnapshotNames(v), v, spec);
    if (matched.empty()) continue;
    doomed.insert(doomed.end(), matched.begin(), matched.end());
    for (const auto& s : (*p)->ListSnapshots(v)) {
      if (std::find(matched.begin(), matched.end(), s.name) == matched.end()) continue;
      if (!s.clones.empty() && !dependents) {
        std::string msg = "cannot destroy '" + s.name +
                          "': snapshot has dependent clones\nuse '-R' to destroy the following "
                          "datasets:";
        for (const auto& c : s.clones) msg += "\n" + c;
        return ReportFailure(Status::Exists(msg));
      }
      clones.insert(clones.end(), s.clones.begin(), s.clones.end());
    }
  }
  if (doomed.empty()) {
    return ReportFailure(
        Status::NotFound("could not find any snapshots to destroy; check snapshot names."));
  }
  if (dry_run || verbose) {
    // What destroying them together frees: checked as the destroy will be, but a dry run
    // reports even what a hold or an open device would refuse (zfs -n does the same).
    uint64_t freed = 0;
    if (Status st = (*p)->DestroySnapshots(doomed, /*dry_run=*/true, &freed); !st.ok()) {
      return ReportFailure(st);
    }
    const char* verb = dry_run ? "would" : "will";
    for (const auto& d : clones) {
      if (parsable) {
        std::fprintf(Out(), "destroy\t%s\n", d.c_str());
      } else {
        std::fprintf(Out(), "%s destroy %s\n", verb, d.c_str());
      }
    }
    for (const auto& d : doomed) {
      if (parsable) {
        std::fprintf(Out(), "destroy\t%s\n", d.c_str());
      } else {
        std::fprintf(Out(), "%s destroy %s\n", verb, d.c_str());
      }
    }
    if (parsable) {
      std::fprintf(Out(), "reclaim\t%llu\n", static_cast<unsigned long long>(freed));
    } else {
      std::fprintf(Out(), "%s reclaim %s\n", verb, poolcli::Bytes(freed, false).c_str());
    }
    if (dry_run) return kExitOk;
  }
  // A hold refuses the destroy; checked before -R's clones go, which are separate txgs
  // ahead of the snapshots' own.
  for (const auto& d : doomed) {
    auto holds = (*p)->Holds(d);
    if (!holds.ok()) return ReportFailure(holds.status());
    if (!holds->empty()) {
      return ReportFailure(Status::Busy("cannot destroy snapshot " + d +
                                        ": dataset is busy (held: zfs holds); nothing destroyed"));
    }
  }
  // Visible snapshots are devices: one in use refuses them all; else the daemon lets go.
  if (Status st = ReleaseSnapshots(ctx, doomed); !st.ok()) {
    return ReportFailure(st.WithContext("cannot destroy '" + name + "'"));
  }
  if (!clones.empty()) {
    if (Status busy = CheckNotInUse(ctx, clones); !busy.ok()) {
      std::fprintf(Err(), "volstack: cannot destroy '%s': dataset is busy (%s)\n", name.c_str(),
                   busy.message().c_str());
      return kExitFailure;
    }
    ctx.stack().Release(clones);
    if (Status st = DestroySnapshotsOf(ctx, **p, clones); !st.ok()) return ReportFailure(st);
    for (const auto& c : clones) {
      if (Status st = (*p)->DestroyVolume(c); !st.ok()) return ReportFailure(st);
    }
  }
  if (Status st = (*p)->DestroySnapshots(doomed); !st.ok()) return ReportFailure(st);
  return kExitOk;
}

}  // namespace volstack::cli

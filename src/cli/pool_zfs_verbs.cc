// zfs verbs for volumes: create -V, list, destroy (of snapshots too), get, set, inherit. Output
// mimics zfs(8) for the supported subset (the pool's root dataset shows as a filesystem; volstack
// does not mount filesystems, so its mountpoint is "none").
#include <algorithm>
#include <cstdio>

#include "cli/device_usage.h"
#include "cli/pool_common.h"
#include "cli/snapshot_devices.h"
#include "cli/verbs.h"
#include "pool/send.h"
#include "stack/stack.h"
#include "util/request_io.h"
#include "util/size.h"

namespace volstack::cli {

// pool_zfs_destroy_snapshots.cc: zfs destroy of pool/vol@spec (lists, a%b ranges), and
// what destroy -r takes before a volume.
int ZfsDestroySnapshots(Context& ctx, const std::string& name, bool recursive, bool dependents,
                        bool dry_run, bool verbose, bool parsable);
Status DestroySnapshotsOf(Context& ctx, pool::Pool& pool, const std::vector<std::string>& volumes);

namespace {
using poolcli::Bytes;

std::string Canonical(const std::string& p) {
  if (p == "avail") return "available";
  if (p == "refer") return "referenced";
  if (p == "refreserv") return "refreservation";
  if (p == "volblock") return "volblocksize";
  if (p == "rdonly") return "readonly";
  if (p == "ratio" || p == "refratio") return p == "ratio" ? "compressratio" : "refcompressratio";
  if (p == "lrefer" || p == "compress") return p == "lrefer" ? "logicalreferenced" : "compression";
  return p;
}

// zfs's property names (canonical, as Canonical returns them) that volstack reports.
bool KnownZfsProp(const std::string& p) {
  static const char* kKnown[] = {"name",          "type",           "creation",
                                 "used",          "available",      "referenced",
                                 "compression",   "readonly",       "volsize",
                                 "volblocksize",  "checksum",       "sync",
                                 "logbias",       "refreservation", "usedbyrefreservation",
                                 "guid",          "createtxg",      "mountpoint",
                                 "logicalused",   "written",        "usedbysnapshots",
                                 "usedbydataset", "origin",         "clones",
                                 "snapdev"};
  if (p == "compressratio" || p == "refcompressratio" || p == "logicalreferenced") return true;
  if (p.rfind("written@", 0) == 0) return p.size() > 8;  // written@snap (pool/written.cc)
  return p == "receive_resume_token" ||                  // zfs receive -s (pool_zfs_send_verbs.cc)
         std::find(std::begin(kKnown), std::end(kKnown), p) != std::end(kKnown);
}

bool IsBytesProp(const std::string& p) {
  return p == "used" || p == "available" || p == "referenced" || p == "volsize" ||
         p == "volblocksize" || p == "refreservation" || p == "usedbyrefreservation" ||
         p == "logicalused" || p == "written" || p == "usedbysnapshots" || p == "usedbydataset" ||
         p == "logicalreferenced" || p.rfind("written@", 0) == 0;
}

// Fills d.props["written@snap"] for each such column (zfs's written@; "-" when the
// snapshot is not an earlier one of d's lineage, as zfs list shows it).
void PutWrittenAt(pool::Pool& pool, pool::DatasetInfo& d, const std::vector<std::string>& cols) {
  for (const auto& c : cols) {
    if (c.rfind("written@", 0) != 0) continue;
    auto w = pool.WrittenSince(d.name, c.substr(8));
    d.props[c] = w.ok() ? std::to_string(*w) : "-";
  }
}

// zfs list -s/-S: by the properties' raw values, numbers as numbers; a stable sort, so
// equal rows keep the listing's order (names, each volume's snapshots oldest first).
bool SortsBefore(const pool::DatasetInfo& a, const pool::DatasetInfo& b,
                 const std::vector<std::pair<std::string, bool>>& keys) {
  for (const auto& [key, descending] : keys) {
    auto raw = [&](const pool::DatasetInfo& d) -> std::string {
      if (key == "name") return d.name;
      auto it = d.props.find(key);
      return it == d.props.end() || it->second == "-" ? "" : it->second;
    };
    const std::string x = raw(a), y = raw(b);
    if (x == y) continue;
    auto number = [](const std::string& v, uint64_t* out) {
      if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos) return false;
      *out = std::strtoull(v.c_str(), nullptr, 10);
      return true;
    };
    uint64_t nx = 0, ny = 0;
    const bool less = number(x, &nx) && number(y, &ny) ? nx < ny : x < y;
    return descending ? !less : less;
  }
  return false;
}

std::string Value(const pool::DatasetInfo& d, const std::string& prop, bool parsable) {
  const std::string p = Canonical(prop);
  if (p == "name") return d.name;
  auto it = d.props.find(p);
  if (it == d.props.end() || it->second == "-") return "-";
  if (parsable && (p == "compressratio" || p == "refcompressratio")) {
    return it->second.substr(0, it->second.size() - 1);  // zfs -p: "1.50", no "x"
  }
  if (IsBytesProp(p)) {
    const uint64_t v = std::strtoull(it->second.c_str(), nullptr, 10);
    if (p == "refreservation" && v == 0 && !parsable) return "none";
    return Bytes(v, parsable);
  }
  if (p == "creation" && !parsable) {
    const time_t t = static_cast<time_t>(std::strtoull(it->second.c_str(), nullptr, 10));
    char buf[64];
    struct tm tm;
    localtime_r(&t, &tm);
    std::strftime(buf, sizeof buf, "%a %b %e %H:%M %Y", &tm);
    return buf;
  }
  return it->second;
}

std::string Source(const pool::DatasetInfo& d, const std::string& prop) {
  const std::string p = Canonical(prop);
  if (std::find(d.local.begin(), d.local.end(), p) != d.local.end()) return "local";
  if (p == "volsize") return d.type == "volume" ? "local" : "-";
  if (p == "readonly" || p == "sync" || p == "logbias" || p == "checksum" || p == "compression" ||
      p == "refreservation" || p == "snapdev") {
    return "default";
  }
  // Fixed at creation: zfs reports a size other than the default with no source.
  if (p == "volblocksize")
    return d.volblocksize == pool::VolumeOptions{}.volblocksize ? "default" : "-";
  return "-";
}

const std::vector<std::string> kVolumeGetAll = {"type",           "creation",
                                                "used",           "available",
                                                "referenced",     "compression",
                                                "readonly",       "volsize",
                                                "volblocksize",   "checksum",
                                                "sync",           "logbias",
                                                "refreservation", "usedbyrefreservation",
                                                "guid",           "createtxg",
                                                "snapdev"};

// Opens the pool that holds dataset `name`.
Result<std::shared_ptr<pool::Pool>> PoolOf(Context& ctx, const std::string& name, bool read_only) {
  return poolcli::OpenPool(ctx, name.substr(0, name.find('/')), read_only);
}

int ZfsCreate(Context& ctx, const std::string& volsize, bool sparse, const std::string& vbs,
              const std::vector<std::string>& opts, const std::string& name) {
  if (volsize.empty()) {
    return ReportUsage("zfs create: only volumes are supported: give -V SIZE");
  }
  pool::VolumeOptions vo;
  vo.sparse = sparse;
  auto size = ParseSize(volsize);
  if (!size.ok()) return ReportUsage("zfs create: bad volume size '" + volsize + "'");
  vo.volsize = *size;
  if (!vbs.empty()) {
    auto b = ParseSize(vbs);
    if (!b.ok()) return ReportUsage("zfs create: bad volume block size '" + vbs + "'");
    vo.volblocksize = static_cast<uint32_t>(std::min<uint64_t>(*b, UINT32_MAX));
  }
  std::vector<std::string> given = {"volsize"};
  if (!vbs.empty()) given.push_back("volblocksize");
  for (const auto& s : opts) {
    auto kv = poolcli::SplitProp(s);
    if (!kv.ok()) return ReportUsage("zfs create: " + kv.status().message());
    kv->first = Canonical(kv->first);
    if (std::find(given.begin(), given.end(), kv->first) != given.end()) {
      return ReportUsage("zfs create: property '" + kv->first + "' specified multiple times");
    }
    given.push_back(kv->first);
    if (kv->first == "volblocksize") {
      auto b = ParseSize(kv->second);
      if (!b.ok()) return ReportUsage("zfs create: bad volume block size '" + kv->second + "'");
      vo.volblocksize = static_cast<uint32_t>(std::min<uint64_t>(*b, UINT32_MAX));
    } else {
      vo.props[kv->first] = kv->second;
    }
  }
  if (vo.volblocksize < 4096 || vo.volblocksize > 131072 ||
      (vo.volblocksize & (vo.volblocksize - 1)) != 0) {
    return ReportUsage("zfs create: 'volblocksize' must be power of 2 from 4K to 128K");
  }
  if (vo.volsize == 0 || vo.volsize % vo.volblocksize != 0) {
    return ReportUsage("zfs create: 'volsize' must be a non-zero multiple of volblocksize (" +
                       std::to_string(vo.volblocksize) + ")");
  }
  if (Status st = pool::ValidateDatasetName(name); !st.ok()) {
    if (st.code() == EINVAL) return ReportUsage("zfs create: " + st.message());
    return ReportFailure(st);
  }
  auto p = PoolOf(ctx, name, false);
  if (!p.ok()) return ReportFailure(p.status());
  auto d = (*p)->CreateVolume(name, vo);
  if (!d.ok()) {
    if (d.status().code() == EINVAL) return ReportUsage("zfs create: " + d.status().message());
    return ReportFailure(d.status());
  }
  return kExitOk;
}

struct ListArgs {
  bool scripted = false, parsable = false, recursive = false;
  std::string cols, types;
  std::vector<std::string> names;
  // -s (ascending) and -S (descending) keys in the order the command line gives them.
  std::vector<std::pair<std::string, bool>> sort;
};

int ZfsList(Context& ctx, const ListArgs& a) {
  std::vector<std::string> cols = {"name", "used", "avail", "refer", "mountpoint"};
  if (!a.cols.empty()) {
    auto list =
        poolcli::PropList(a.cols, [](const std::string& p) { return KnownZfsProp(Canonical(p)); });
    if (!list.ok()) return ReportUsage("zfs list: " + list.status().message());
    cols = *list;
  }
  std::vector<std::pair<std::string, bool>> sort_keys;  // (property, descending)
  for (const auto& [k, desc] : a.sort) {
    auto list =
        poolcli::PropList(k, [](const std::string& p) { return KnownZfsProp(Canonical(p)); });
    if (!list.ok() || list->size() != 1) {
      return ReportUsage("zfs list: invalid sort property '" + k + "'");
    }
    sort_keys.emplace_back(Canonical(list->front()), desc);
  }
  std::vector<std::string> written_at = cols;  // the written@ columns and sort keys
  for (const auto& [k, desc] : sort_keys) written_at.push_back(k);
  std::vector<pool::DatasetInfo> listed;
  std::vector<std::string> types =
      a.types.empty()    ? std::vector<std::string>{"filesystem", "volume"}
      : a.types == "all" ? std::vector<std::string>{"filesystem", "volume", "snapshot"}
                         : poolcli::SplitComma(a.types);
  // Snapshots are listed when asked for by type or by name (zfs's listsnapshots=off).
  bool snapshots = std::any_of(a.names.begin(), a.names.end(), [](const std::string& n) {
    return n.find('@') != std::string::npos;
  });
  for (auto& t : types) {
    if (t == "vol") t = "volume";
    if (t == "fs") t = "filesystem";
    if (t == "snap") t = "snapshot";
    snapshots |= t == "snapshot";
    if (t != "volume" && t != "filesystem" && t != "snapshot" && t != "snap" && t != "bookmark") {
      return ReportUsage("zfs list: invalid type '" + t + "'");
    }
  }
  auto pools = poolcli::ReadCache(ctx);
  if (!pools.ok()) return ReportFailure(pools.status());
  std::vector<std::string> headers;
  std::vector<bool> right;
  for (auto& c : cols) {
    std::string h = c == "available" ? "avail" : c == "referenced" ? "refer" : c;
    std::transform(h.begin(), h.end(), h.begin(), ::toupper);
    headers.push_back(h);
    right.push_back(IsBytesProp(Canonical(c)));
  }
  poolcli::Table t(headers, right);
  int rc = kExitOk;
  size_t rows = 0;
  for (const auto& n : a.names) {
    if (std::none_of(pools->begin(), pools->end(), [&](const poolcli::CachedPool& c) {
          return c.name == n.substr(0, n.find('/'));
        })) {
      rc = ReportFailure(Status::NotFound("cannot open '" + n + "': dataset does not exist"));
    }
  }
  for (const auto& c : *pools) {
    bool wanted = a.names.empty();
    for (const auto& n : a.names) wanted |= n.substr(0, n.find('/')) == c.name;
    if (!wanted) continue;
    auto p = poolcli::OpenPool(ctx, c.name, true);
    if (!p.ok()) {
      rc = ReportFailure(p.status());
      continue;
    }
    std::vector<pool::DatasetInfo> all;
    for (auto& d : (*p)->ListDatasets()) {
      const bool volume = d.type == "volume";
      const std::string name = d.name;
      all.push_back(std::move(d));
      if (volume && snapshots) {
        for (auto& s : (*p)->ListSnapshots(name)) all.push_back(std::move(s));
      }
    }
    // A broken `zfs receive -s` into a new name shows as that volume, as in zfs.
    for (auto& d : pool::ListPartialReceives(**p)) all.push_back(std::move(d));
    for (const auto& n : a.names) {
      if (n.substr(0, n.find('/')) != c.name) continue;
      if (std::none_of(all.begin(), all.end(),
                       [&](const pool::DatasetInfo& d) { return d.name == n; })) {
        rc = ReportFailure(Status::NotFound("cannot open '" + n + "': dataset does not exist"));
      }
    }
    // zfs list -t snapshot VOL (no -r): VOL's snapshots, not VOL (zfs lists to depth 1).
    const bool snapshots_of_named = !a.recursive && types == std::vector<std::string>{"snapshot"};
    for (auto& d : all) {
      const bool type_ok = std::find(types.begin(), types.end(), d.type) != types.end();
      if (!a.names.empty()) {
        bool hit = false;
        for (const auto& n : a.names) {
          // A dataset named is listed whatever its type; its children by -t.
          hit |= (d.name == n && !(snapshots_of_named && d.type != "snapshot")) ||
                 (type_ok && a.recursive &&
                  (d.name.rfind(n + "/", 0) == 0 || d.name.rfind(n + "@", 0) == 0)) ||
                 (type_ok && snapshots_of_named && d.name.rfind(n + "@", 0) == 0);
        }
        if (!hit) continue;
      } else if (!type_ok) {
        continue;
      }
      PutWrittenAt(**p, d, written_at);
      listed.push_back(std::move(d));
    }
  }
  std::stable_sort(listed.begin(), listed.end(),
                   [&](const auto& x, const auto& y) { return SortsBefore(x, y, sort_keys); });
  for (const auto& d : listed) {
    std::vector<std::string> row;
    for (auto& col : cols) row.push_back(Value(d, col, a.parsable));
    t.AddRow(row);
    rows++;
  }
  if (rows == 0 && a.names.empty()) {
    std::fprintf(Out(), "no datasets available\n");
    return rc;
  }
  if (rows > 0) t.Print(a.scripted);
  return rc;
}

struct DestroyArgs {
  std::string name;
  bool recursive = false, dependents = false, dry_run = false, verbose = false, parsable = false;
};

int ZfsDestroy(Context& ctx, const DestroyArgs& a) {
  const std::string& name = a.name;
  const bool recursive = a.recursive || a.dependents;
  if (name.find('@') != std::string::npos) {
    return ZfsDestroySnapshots(ctx, name, a.recursive, a.dependents, a.dry_run, a.verbose,
                               a.parsable);
  }
  if (a.dry_run) return ReportUsage("zfs destroy: -n is supported for snapshots only");
  if (name.find('/') == std::string::npos) {
    auto p = poolcli::OpenPool(ctx, name);
    if (!p.ok()) return ReportFailure(p.status());
    if (!recursive) {
      std::fprintf(Err(),
                   "volstack: cannot destroy '%s': operation does not apply to pools\n"
                   "use 'zfs destroy -r %s' to destroy all datasets in the pool\n"
                   "use 'zpool destroy %s' to destroy the pool itself\n",
                   name.c_str(), name.c_str(), name.c_str());
      return kExitFailure;
    }
    std::vector<std::string> volumes;
    for (auto& d : (*p)->ListDatasets()) {
      if (d.type == "volume") volumes.push_back(d.name);
    }
    if (Status busy = CheckNotInUse(ctx, volumes); !busy.ok()) {
      std::fprintf(Err(), "volstack: cannot destroy '%s': dataset is busy (%s)\n", name.c_str(),
                   busy.message().c_str());
      return kExitFailure;
    }
    ctx.stack().Release(volumes);
    if (Status st = DestroySnapshotsOf(ctx, **p, volumes); !st.ok()) return ReportFailure(st);
    for (const auto& v : volumes) {
      if (Status st = (*p)->DestroyVolume(v); !st.ok()) return ReportFailure(st);
    }
    return kExitOk;
  }
  auto p = PoolOf(ctx, name, false);
  if (!p.ok()) return ReportFailure(p.status());
  if (Status busy = CheckNotInUse(ctx, {name}); !busy.ok()) {
    std::fprintf(Err(), "volstack: cannot destroy '%s': dataset is busy (%s)\n", name.c_str(),
                 busy.message().c_str());
    return kExitFailure;
  }
  ctx.stack().Release({name});
  if (pool::GetPartialReceive(**p, name).ok()) {
    // A broken receive -s into a new name: destroying it discards it, as receive -A does.
    if (Status st = pool::AbortReceive(**p, name); !st.ok()) return ReportFailure(st);
    return kExitOk;
  }
  if (recursive) {
    if (Status st = DestroySnapshotsOf(ctx, **p, {name}); !st.ok()) return ReportFailure(st);
  }
  if (Status st = (*p)->DestroyVolume(name); !st.ok()) return ReportFailure(st);
  return kExitOk;
}

int ZfsGet(Context& ctx, bool scripted, bool parsable, const std::string& fields,
           const std::string& props, const std::vector<std::string>& names) {
  std::vector<std::string> cols =
      fields.empty() ? std::vector<std::string>{"name", "property", "value", "source"}
                     : poolcli::SplitComma(fields);
  std::vector<std::string> headers;
  for (auto& c : cols) {
    if (c != "name" && c != "property" && c != "value" && c != "source") {
      return ReportUsage("zfs get: invalid field '" + c + "'");
    }
    std::string h = c;
    std::transform(h.begin(), h.end(), h.begin(), ::toupper);
    headers.push_back(h);
  }
  std::vector<std::string> asked;
  if (props != "all") {
    auto list =
        poolcli::PropList(props, [](const std::string& p) { return KnownZfsProp(Canonical(p)); });
    if (!list.ok()) return ReportUsage("zfs get: " + list.status().message());
    asked = *list;
  }
  std::vector<std::string> targets = names;
  int rc = kExitOk;
  if (targets.empty()) {
    auto pools = poolcli::ReadCache(ctx);
    if (!pools.ok()) return ReportFailure(pools.status());
    for (auto& c : *pools) {
      // A pool that cannot be opened is reported (as zfs list does); the others printed.
      auto p = poolcli::OpenPool(ctx, c.name, true);
      if (!p.ok()) {
        rc = ReportFailure(p.status());
        continue;
      }
      for (auto& d : (*p)->ListDatasets()) targets.push_back(d.name);
      for (auto& d : pool::ListPartialReceives(**p)) targets.push_back(d.name);
    }
  }
  poolcli::Table t(headers, std::vector<bool>(cols.size(), false));
  for (const auto& n : targets) {
    auto p = PoolOf(ctx, n, true);
    if (!p.ok()) return ReportFailure(p.status());
    auto d = (*p)->GetDataset(n);
    if (!d.ok()) d = pool::GetPartialReceive(**p, n);  // receive -s into a new name
    if (!d.ok()) return ReportFailure(d.status());
    PutWrittenAt(**p, *d, asked);
    std::vector<std::string> want;
    if (props == "all") {
      want = kVolumeGetAll;
      want.insert(want.end(),
                  {"compressratio", "refcompressratio", "logicalused", "logicalreferenced"});
      if (d->type == "snapshot") {
        want = {
            "type",         "creation", "used",      "referenced", "written",          "volsize",
            "volblocksize", "guid",     "createtxg", "clones",     "logicalreferenced"};
      } else if (d->type != "volume") {
        want = {"type",       "creation",    "used",     "available", "referenced",
                "mountpoint", "compression", "readonly", "checksum",  "guid"};
      }
      for (auto& [k, v] : d->props) {
        if (k.find(':') != std::string::npos) want.push_back(k);
      }
    } else {
      want = asked;
    }
    for (const auto& prop : want) {
      std::vector<std::string> row;
      for (auto& c : cols) {
        if (c == "name")
          row.push_back(n);
        else if (c == "property")
          row.push_back(prop);
        else if (c == "value")
          row.push_back(Value(*d, prop, parsable));
        else
          row.push_back(Value(*d, prop, true) == "-" ? "-" : Source(*d, prop));
      }
      t.AddRow(row);
    }
  }
  t.Print(scripted);
  return rc;
}

int ZfsSet(Context& ctx, const std::vector<std::string>& args) {
  if (args.size() < 2) return ReportUsage("zfs set: expected property=value ... dataset");
  const std::string name = args.back();
  std::vector<std::pair<std::string, std::string>> kvs;
  for (size_t i = 0; i + 1 < args.size(); i++) {
    auto kv = poolcli::SplitProp(args[i]);
    if (!kv.ok()) return ReportUsage("zfs set: " + kv.status().message());
    kvs.push_back(*kv);
  }
  auto p = PoolOf(ctx, name, false);
  if (!p.ok()) return ReportFailure(p.status());
  for (auto& kv : kvs) kv.first = Canonical(kv.first);
  Status st = (*p)->SetProperties(name, kvs);
  if (st.code() == EINVAL)
    return ReportUsage("zfs set: cannot set property for '" + name + "': " + st.message());
  if (!st.ok()) return ReportFailure(st.WithContext("cannot set property for '" + name + "'"));
  return kExitOk;
}

int ZfsInherit(Context& ctx, const std::string& prop, const std::string& name) {
  auto p = PoolOf(ctx, name, false);
  if (!p.ok()) return ReportFailure(p.status());
  Status st = (*p)->InheritProperty(name, Canonical(prop));
  if (st.code() == EINVAL) return ReportUsage("zfs inherit: " + st.message());
  if (!st.ok()) return ReportFailure(st);
  return kExitOk;
}

}  // namespace

// snapshot, rollback, clone (pool_zfs_snapshot_verbs.cc).
void RegisterZfsSnapshotVerbs(CLI::App& zfs, Context& ctx);
// send, receive|recv (pool_zfs_send_verbs.cc).
void RegisterZfsSendVerbs(CLI::App& zfs, Context& ctx);

void RegisterZfsVerbs(CLI::App& app, Context& ctx) {
  CLI::App* zfs = app.add_subcommand("zfs", "Manage datasets and volumes of a pool");
  zfs->require_subcommand(1);
  {
    auto volsize = std::make_shared<std::string>(), vbs = std::make_shared<std::string>();
    auto sparse = std::make_shared<bool>(false);
    auto opts = std::make_shared<std::vector<std::string>>();
    auto name = std::make_shared<std::string>();
    auto* c = AddVerb(*zfs, ctx, "create", "Create a volume: zfs create -V SIZE pool/vol",
                      [&ctx, volsize, sparse, vbs, opts, name] {
                        return ZfsCreate(ctx, *volsize, *sparse, *vbs, *opts, *name);
                      });
    c->add_option("-V", *volsize, "Volume size (K, M, G, T suffixes)");
    c->add_flag("-s", *sparse, "Sparse: no reservation");
    c->add_option("-b", *vbs, "volblocksize (4K..128K, default 16K)");
    c->add_option("-o", *opts, "property=value")->allow_extra_args(false);
    c->add_option("dataset", *name, "pool/volume")->required();
  }
  {
    auto a = std::make_shared<ListArgs>();
    auto* c = AddVerb(*zfs, ctx, "list", "List datasets", [&ctx, a] { return ZfsList(ctx, *a); });
    c->add_flag("-H", a->scripted, "Scripted mode");
    c->add_flag("-p", a->parsable, "Exact numbers");
    c->add_flag("-r", a->recursive, "Include children");
    c->add_option("-o", a->cols, "Columns");
    c->add_option("-t", a->types, "Types (filesystem,volume,snapshot,all)");
    // Each key is taken as it is parsed, so -s and -S keys keep their command-line order.
    for (bool desc : {false, true}) {
      c->add_option_function<std::string>(
           desc ? "-S" : "-s", [a, desc](const std::string& k) { a->sort.emplace_back(k, desc); },
           desc ? "Sort by a property, descending (repeatable)"
                : "Sort by a property, ascending (repeatable)")
          ->trigger_on_parse()
          ->allow_extra_args(false);
    }
    c->add_option("datasets", a->names, "Datasets");
  }
  {
    auto a = std::make_shared<DestroyArgs>();
    auto force = std::make_shared<bool>(false);
    auto* c = AddVerb(*zfs, ctx, "destroy", "Destroy a volume or a snapshot",
                      [&ctx, a] { return ZfsDestroy(ctx, *a); });
    c->add_flag("-r", a->recursive, "Destroy children (a volume's snapshots)");
    c->add_flag("-R", a->dependents, "Destroy dependents too (a snapshot's clones)");
    c->add_flag("-n", a->dry_run, "Dry run: change nothing (with -v: what would be freed)");
    c->add_flag("-v", a->verbose, "Print what is destroyed and the space reclaimed");
    c->add_flag("-p", a->parsable, "Exact numbers");
    c->add_flag("-f", *force, "Force (accepted for compatibility)");
    c->add_option("dataset", a->name, "pool/vol or pool/vol@snap")->required();
  }
  {
    auto scripted = std::make_shared<bool>(false), parsable = std::make_shared<bool>(false);
    auto fields = std::make_shared<std::string>(), props = std::make_shared<std::string>();
    auto names = std::make_shared<std::vector<std::string>>();
    auto* c = AddVerb(*zfs, ctx, "get", "Get dataset properties",
                      [&ctx, scripted, parsable, fields, props, names] {
                        return ZfsGet(ctx, *scripted, *parsable, *fields, *props, *names);
                      });
    c->add_flag("-H", *scripted, "Scripted mode");
    c->add_flag("-p", *parsable, "Exact numbers");
    c->add_option("-o", *fields, "Fields (name,property,value,source)");
    c->add_option("property", *props, "all or prop[,prop...]")->required();
    c->add_option("datasets", *names, "Datasets");
  }
  {
    auto args = std::make_shared<std::vector<std::string>>();
    auto* c = AddVerb(*zfs, ctx, "set", "Set dataset properties",
                      [&ctx, args] { return ZfsSet(ctx, *args); });
    c->add_option("args", *args, "property=value ... dataset")->required();
  }
  {
    auto prop = std::make_shared<std::string>(), name = std::make_shared<std::string>();
    auto* c = AddVerb(*zfs, ctx, "inherit", "Clear a property (back to its default)",
                      [&ctx, prop, name] { return ZfsInherit(ctx, *prop, *name); });
    c->add_option("property", *prop, "Property")->required();
    c->add_option("dataset", *name, "Dataset")->required();
  }
  RegisterZfsSnapshotVerbs(*zfs, ctx);
  RegisterZfsSendVerbs(*zfs, ctx);
}

}  // namespace volstack::cli

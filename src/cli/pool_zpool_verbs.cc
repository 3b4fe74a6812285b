// zpool verbs: create, list, status, export, import, destroy, get, set. Output mimics
// zpool(8) for the supported subset; errors are one line and exit 1, bad arguments exit 2
// before anything on disk changes.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "bdev/file_device.h"
#include "cli/device_names.h"
#include "cli/device_usage.h"
#include "cli/name_namespace.h"
#include "cli/pool_common.h"
#include "cli/pool_redundancy.h"
#include "cli/verbs.h"
#include "pool/memory_bounds.h"
#include "pool/vdev.h"
#include "remote/remote_device.h"
#include "util/request_io.h"
#include "util/state_file.h"

namespace volstack::cli {

namespace {

using poolcli::Bytes;

struct ListArgs {
  bool scripted = false, parsable = false;
  std::string cols;
  std::vector<std::string> pools;
};

// zpool's property names and column abbreviations.
bool KnownPoolProp(const std::string& prop) {
  static const char* kKnown[] = {
      "name",       "size",     "allocated",  "alloc",    "free",          "capacity",
      "cap",        "health",   "guid",       "ashift",   "dedupratio",    "dedup",
      "checkpoint", "ckpoint",  "expandsize", "expandsz", "fragmentation", "frag",
      "altroot",    "readonly", "txg",        "comment",  "cachemax",      "dirtymax"};
  return std::find(std::begin(kKnown), std::end(kKnown), prop) != std::end(kKnown);
}

std::string PoolProp(const pool::PoolInfo& i, const std::string& prop, bool p) {
  const uint64_t cap = i.size ? (i.allocated * 100 + i.size / 2) / i.size : 0;
  if (prop == "name") return i.name;
  if (prop == "size") return Bytes(i.size, p);
  if (prop == "allocated" || prop == "alloc") return Bytes(i.allocated, p);
  if (prop == "free") return Bytes(i.free, p);
  if (prop == "capacity" || prop == "cap")
    return p ? std::to_string(cap) : std::to_string(cap) + "%";
  if (prop == "health") return i.health;
  if (prop == "guid") return std::to_string(i.guid);
  if (prop == "ashift") return std::to_string(i.ashift);
  if (prop == "dedupratio" || prop == "dedup") return p ? "1.00" : "1.00x";
  if (prop == "checkpoint" || prop == "ckpoint" || prop == "expandsize" || prop == "expandsz" ||
      prop == "fragmentation" || prop == "frag" || prop == "altroot") {
    return "-";
  }
  if (prop == "readonly") return "off";
  if (prop == "txg") return std::to_string(i.txg);
  if (pool::IsMemoryBound(prop)) {
    const auto stored = pool::StoredBytes(i.props, prop);
    return Bytes(stored ? *stored : pool::MemoryBound({}, prop), p);
  }
  if (auto it = i.props.find(prop); it != i.props.end()) return it->second;
  return "-";
}

const std::vector<std::string> kPoolGetAll = {
    "size",       "capacity",      "altroot",  "health",  "guid",    "dedupratio",
    "free",       "allocated",     "readonly", "ashift",  "comment", "expandsize",
    "checkpoint", "fragmentation", "cachemax", "dirtymax"};

int ZpoolCreate(Context& ctx, bool force, const std::vector<std::string>& opts,
                const std::string& name, const std::vector<std::string>& vdevs) {
  pool::PoolCreateOptions o;
  o.force = force;
  for (const auto& s : opts) {
    auto kv = poolcli::SplitProp(s);
    if (!kv.ok()) return ReportUsage("zpool create: " + kv.status().message());
    if (kv->first == "ashift") {
      char* end = nullptr;
      const long a = std::strtol(kv->second.c_str(), &end, 10);
      if (kv->second.empty() || *end != '\0' || a < 9 || a > 16) {
        return ReportUsage("zpool create: invalid ashift '" + kv->second + "': expected 9..16");
      }
      o.ashift = static_cast<uint32_t>(a);
    } else if (kv->first == "comment" || pool::IsMemoryBound(kv->first) ||
               kv->first.find(':') != std::string::npos) {
      if (auto v = pool::StoredPoolProperty(kv->first, kv->second); !v.ok()) {
        return ReportUsage("zpool create: " + v.status().message());
      }
      o.props[kv->first] = kv->second;
    } else {
      return ReportUsage("zpool create: property '" + kv->first + "' is not supported");
    }
  }
  if (Status st = pool::ValidatePoolName(name); !st.ok()) {
    return ReportUsage("zpool create: " + st.message());
  }
  if (Status st = CheckNoVgNamed(ctx, name); !st.ok()) {
    return ReportFailure(st.WithContext("cannot create '" + name + "'"));
  }
  // Held until the pool is in the cache: no label is written unless the state dir can take
  // the pool, and a parallel create of the same name waits and then finds it.
  auto lock = StateDirLock::Take(ctx.global.state_dir);
  if (!lock.ok()) return ReportFailure(lock.status().WithContext("cannot create '" + name + "'"));
  auto cached = poolcli::FindCached(ctx, name);
  if (!cached.ok()) return ReportFailure(cached.status());
  if (cached->has_value()) {
    return ReportFailure(Status::Exists("cannot create '" + name + "': pool already exists"));
  }
  auto imported = poolcli::ReadCache(ctx);
  if (!imported.ok()) return ReportFailure(imported.status());
  std::vector<bdev::BlockDevicePtr> devs;
  std::vector<std::string> names;
  for (const auto& v : vdevs) {
    if (poolcli::IsVdevKeyword(v)) continue;
    auto d = OpenDeviceByName(ctx, v, false);
    if (!d.ok()) return ReportFailure(d.status().WithContext("cannot create '" + name + "'"));
    // -f overrides a label left by an exported, destroyed or lost pool, never one of a pool
    // imported here (zpool refuses an active pool's vdev even with -f).
    if (auto label = pool::Vdev::ReadLabelConfig(**d); label.ok()) {
      for (const auto& c : *imported) {
        if (c.guid == label->pool_guid) {
          return ReportFailure(Status::Busy("cannot create '" + name + "': " + v +
                                            " is part of imported pool '" + c.name + "'"));
        }
      }
    }
    devs.push_back(*d);
    names.push_back(poolcli::NormalizeVdevName(v));
  }
  auto specs = poolcli::GroupVdevs(vdevs, devs, names);
  if (!specs.ok()) return ReportUsage("zpool create: " + specs.status().message());
  auto p = pool::Pool::Create(name, *specs, o);
  if (!p.ok()) return ReportFailure(p.status().WithContext("cannot create '" + name + "'"));
  if (Status st = (*p)->Close(); !st.ok()) return ReportFailure(st);
  if (Status st = poolcli::AddToCache(ctx, {name, (*p)->guid(), names}); !st.ok()) {
    return ReportFailure(st);
  }
  return kExitOk;
}

int ZpoolList(Context& ctx, const ListArgs& a) {
  std::vector<std::string> cols = {"name", "size", "alloc", "free",   "ckpoint", "expandsz",
                                   "frag", "cap",  "dedup", "health", "altroot"};
  if (!a.cols.empty()) {
    auto list = poolcli::PropList(a.cols, KnownPoolProp);
    if (!list.ok()) return ReportUsage("zpool list: " + list.status().message());
    cols = *list;
  }
  auto pools = poolcli::ReadCache(ctx);
  if (!pools.ok()) return ReportFailure(pools.status());
  std::vector<std::string> headers;
  std::vector<bool> right;
  for (auto& c : cols) {
    std::string h = c;
    std::transform(h.begin(), h.end(), h.begin(), ::toupper);
    headers.push_back(h);
    right.push_back(c != "name" && c != "altroot" && c != "comment");
  }
  poolcli::Table t(headers, right);
  int rc = kExitOk;
  size_t rows = 0;
  std::vector<std::string> wanted = a.pools;
  for (const auto& w : wanted) {
    if (std::none_of(pools->begin(), pools->end(),
                     [&](const poolcli::CachedPool& c) { return c.name == w; })) {
      rc = ReportFailure(Status::NotFound("cannot open '" + w + "': no such pool"));
    }
  }
  for (const auto& c : *pools) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), c.name) == wanted.end()) {
      continue;
    }
    auto p = poolcli::OpenPool(ctx, c.name, true);
    std::vector<std::string> row;
    if (!p.ok()) {
      pool::PoolInfo i;
      i.name = c.name;
      i.health = "UNAVAIL";
      for (auto& col : cols)
        row.push_back(col == "name" || col == "health" ? PoolProp(i, col, a.parsable) : "-");
      std::fprintf(Err(), "volstack: %s\n", p.status().ToString().c_str());
    } else {
      auto info = (*p)->Info();
      for (auto& col : cols) row.push_back(PoolProp(info, col, a.parsable));
    }
    t.AddRow(row);
    rows++;
  }
  if (pools->empty() && wanted.empty()) {
    std::fprintf(Out(), "no pools available\n");
    return kExitOk;
  }
  if (rows > 0) t.Print(a.scripted);
  return rc;
}

int ZpoolStatus(Context& ctx, const std::vector<std::string>& names, bool verbose) {
  auto pools = poolcli::ReadCache(ctx);
  if (!pools.ok()) return ReportFailure(pools.status());
  if (pools->empty() && names.empty()) {
    std::fprintf(Out(), "no pools available\n");
    return kExitOk;
  }
  int rc = kExitOk;
  bool first = true;
  for (const auto& c : *pools) {
    if (!names.empty() && std::find(names.begin(), names.end(), c.name) == names.end()) continue;
    if (!first) std::fprintf(Out(), "\n");
    first = false;
    auto p = poolcli::OpenPool(ctx, c.name, true);
    std::fprintf(Out(), "  pool: %s\n", c.name.c_str());
    if (!p.ok()) {
      std::fprintf(Out(), " state: UNAVAIL\nstatus: %s\nconfig:\n\n",
                   p.status().ToString().c_str());
      size_t w = c.name.size();
      for (auto& v : c.vdevs) w = std::max(w, v.size() + 2);
      std::fprintf(Out(), "\t%-*s  UNAVAIL\n", static_cast<int>(w), c.name.c_str());
      for (auto& v : c.vdevs)
        std::fprintf(Out(), "\t  %-*s  -\n", static_cast<int>(w - 2), v.c_str());
      rc = kExitFailure;
      continue;
    }
    poolcli::PrintPoolStatus((*p)->Info(), verbose);
  }
  for (const auto& n : names) {
    if (std::none_of(pools->begin(), pools->end(),
                     [&](const poolcli::CachedPool& c) { return c.name == n; })) {
      rc = ReportFailure(Status::NotFound("cannot open '" + n + "': no such pool"));
    }
  }
  return rc;
}

// `zpool export -f` skips the busy check (zpool's -f: export even what is in use); destroy
// always checks.
int ZpoolExportOrDestroy(Context& ctx, const std::string& name, bool destroy, bool force) {
  auto cached = poolcli::FindCached(ctx, name);
  if (!cached.ok()) return ReportFailure(cached.status());
  if (!cached->has_value()) {
    return ReportFailure(Status::NotFound("cannot open '" + name + "': no such pool"));
  }
  auto p = poolcli::OpenPool(ctx, name);
  // Its vdevs are gone or damaged (not merely busy: another process may be serving it):
  // nothing can be written to them, but the pool can still be forgotten here (zpool
  // exports a faulted pool too). Destroy asks for -f, as it cannot mark the labels
  // destroyed.
  const int code = p.ok() ? 0 : p.status().code();
  if (code == ENOENT || code == EIO || code == EUCLEAN || code == EINVAL) {
    if (destroy && !force) {
      std::fprintf(Err(),
                   "volstack: cannot destroy '%s': %s\n"
                   "use 'zpool export %s' or 'zpool destroy -f %s' to forget it; its vdevs "
                   "are left as they are\n",
                   name.c_str(), p.status().message().c_str(), name.c_str(), name.c_str());
      return kExitFailure;
    }
    std::fprintf(Err(), "volstack: %s: %s; forgotten, its vdevs left as they are\n", name.c_str(),
                 p.status().message().c_str());
    if (Status c = poolcli::RemoveFromCache(ctx, name); !c.ok()) return ReportFailure(c);
    return kExitOk;
  }
  if (!p.ok()) return ReportFailure(p.status());
  std::vector<std::string> volumes;
  for (const auto& d : (*p)->ListDatasets()) {
    if (d.type == "volume") volumes.push_back(d.name);
  }
  if (Status busy = destroy || !force ? CheckNotInUse(ctx, volumes) : Status::Ok(); !busy.ok()) {
    std::fprintf(Err(), "volstack: cannot %s '%s': pool is busy (%s)\n",
                 destroy ? "destroy" : "export", name.c_str(), busy.message().c_str());
    return kExitFailure;
  }
  Status st = destroy ? (*p)->Destroy() : (*p)->Export();
  if (!st.ok()) return ReportFailure(st);
  p->reset();
  if (Status c = poolcli::RemoveFromCache(ctx, name); !c.ok()) return ReportFailure(c);
  return kExitOk;
}

// Opens every regular file and block device directly in `dirs` read-only, for label reads.
std::vector<std::pair<std::string, bdev::BlockDevicePtr>> ScanDirs(
    const std::vector<std::string>& dirs) {
  std::vector<std::pair<std::string, bdev::BlockDevicePtr>> out;
  for (const auto& dir : dirs) {
    std::error_code ec;
    std::vector<std::string> paths;
    struct stat st;
    if (remote::IsRemoteDeviceName(dir)) {  // an NBD export or RBD image is one device
      auto d = remote::OpenRemoteDevice(dir, true);
      if (d.ok()) {
        out.emplace_back(dir, *d);
      } else {
        std::fprintf(Err(), "volstack: %s\n", d.status().ToString().c_str());
      }
      continue;
    }
    if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
      paths.push_back(dir);
    } else {
      for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
        paths.push_back(e.path().string());
      }
    }
    std::sort(paths.begin(), paths.end());
    for (const auto& path : paths) {
      if (::stat(path.c_str(), &st) != 0 || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))) {
        continue;
      }
      bdev::FileDeviceOptions o;
      o.read_only = true;
      auto d = bdev::FileDevice::Open(path, o);
      if (d.ok()) out.emplace_back(poolcli::NormalizeVdevName(path), *d);
    }
  }
  return out;
}

struct ImportArgs {
  std::vector<std::string> dirs;
  bool force = false;
  bool rewind = false;   // -F
  bool dry_run = false;  // -n (with -F)
  std::vector<std::string> args;
};

std::string LocalTime(uint64_t seconds) {
  const time_t t = static_cast<time_t>(seconds);
  struct tm tm;
  char buf[64];
  if (localtime_r(&t, &tm) == nullptr || std::strftime(buf, sizeof buf, "%c", &tm) == 0) {
    return std::to_string(seconds);
  }
  return buf;
}

int ZpoolImport(Context& ctx, ImportArgs a) {
  auto& dirs = a.dirs;
  const bool force = a.force;
  const auto& args = a.args;
  if (dirs.empty()) dirs.push_back("/dev");
  if (args.size() > 1) return ReportUsage("zpool import: renaming on import is not supported");
  for (const auto& d : dirs) {
    if (!remote::IsRemoteDeviceName(d) && !std::filesystem::exists(d)) {
      return ReportUsage("zpool import: cannot open '" + d + "'");
    }
  }
  // Held until the pool is in the cache, as for create.
  auto lock = StateDirLock::Take(ctx.global.state_dir);
  if (!lock.ok()) return ReportFailure(lock.status().WithContext("cannot import"));
  auto cached = poolcli::ReadCache(ctx);
  if (!cached.ok()) return ReportFailure(cached.status());
  std::vector<pool::DiscoveredPool> found;
  {
    auto devs = ScanDirs(dirs);
    found = pool::DiscoverPools(devs);
  }  // read-only handles closed before the import locks the vdevs
  auto in_cache = [&](const pool::DiscoveredPool& p) {
    return std::any_of(cached->begin(), cached->end(),
                       [&](const poolcli::CachedPool& c) { return c.guid == p.guid; });
  };
  found.erase(std::remove_if(found.begin(), found.end(),
                             [&](const pool::DiscoveredPool& p) {
                               return p.state == "DESTROYED" || in_cache(p);
                             }),
              found.end());
  if (args.empty()) {
    if (found.empty()) {
      std::fprintf(Err(), "no pools available to import\n");
      return kExitFailure;
    }
    bool first = true;
    for (const auto& p : found) {
      if (!first) std::fprintf(Out(), "\n");
      first = false;
      std::fprintf(Out(), "   pool: %s\n     id: %llu\n  state: %s\n", p.name.c_str(),
                   static_cast<unsigned long long>(p.guid), p.complete() ? "ONLINE" : "UNAVAIL");
      if (!p.complete()) {
        std::fprintf(Out(),
                     " status: One or more devices are missing from the system.\n"
                     " action: The pool cannot be imported. Attach the missing devices and try "
                     "again.\n");
      } else if (p.state == "ACTIVE") {
        std::fprintf(Out(),
                     " action: The pool can be imported using its name or numeric identifier "
                     "and\n\tthe '-f' flag.\n");
      } else {
        std::fprintf(Out(),
                     " action: The pool can be imported using its name or numeric "
                     "identifier.\n");
      }
      std::fprintf(Out(), " config:\n\n");
      size_t w = p.name.size();
      for (auto& [id, path] : p.vdevs) w = std::max(w, path.size() + 2);
      std::fprintf(Out(), "\t%-*s  %s\n", static_cast<int>(w), p.name.c_str(),
                   p.complete() ? "ONLINE" : "UNAVAIL");
      for (auto& [id, path] : p.vdevs) {
        std::fprintf(Out(), "\t  %-*s  ONLINE\n", static_cast<int>(w - 2), path.c_str());
      }
    }
    return kExitOk;
  }
  const std::string& want = args[0];
  std::vector<pool::DiscoveredPool> match;
  for (auto& p : found) {
    if (p.name == want || std::to_string(p.guid) == want) match.push_back(p);
  }
  if (match.empty()) {
    for (const auto& c : *cached) {
      if (c.name == want || std::to_string(c.guid) == want) {
        return ReportFailure(Status::Exists("cannot import '" + want +
                                            "': a pool with that name is already imported"));
      }
    }
    return ReportFailure(Status::NotFound("cannot import '" + want + "': no such pool available"));
  }
  if (match.size() > 1) {
    return ReportFailure(Status::InvalidArgument(
        "cannot import '" + want + "': more than one matching pool; import by numeric ID"));
  }
  const auto& p = match[0];
  if (Status st = CheckNoVgNamed(ctx, p.name); !st.ok()) {
    return ReportFailure(st.WithContext("cannot import '" + want + "'"));
  }
  for (const auto& c : *cached) {
    if (c.name == p.name) {
      return ReportFailure(
          Status::Exists("cannot import '" + want + "': a pool with that name already exists"));
    }
  }
  if (!p.complete()) {
    return ReportFailure(
        Status::NotFound("cannot import '" + want + "': one or more devices are missing"));
  }
  if (p.state == "ACTIVE" && !force) {
    return ReportFailure(Status::Busy("cannot import '" + want +
                                      "': pool may be in use from another system; use '-f' to "
                                      "import anyway"));
  }
  std::vector<bdev::BlockDevicePtr> devs;
  std::vector<std::string> names;
  for (auto& [id, path] : p.vdevs) {
    auto d = OpenDeviceByName(ctx, path, false);
    if (!d.ok()) return ReportFailure(d.status().WithContext("cannot import '" + want + "'"));
    devs.push_back(*d);
    names.push_back(path);
  }
  pool::PoolImportOptions io;
  io.expected_guid = p.guid;
  io.rewind = a.rewind;
  io.read_only = a.rewind && a.dry_run;  // zpool: -n only means something with -F
  auto imported = pool::Pool::Import(devs, io);
  if (!imported.ok())
    return ReportFailure(imported.status().WithContext("cannot import '" + want + "'"));
  const pool::ImportReport report = (*imported)->import_report();
  if (Status st = (*imported)->Close(); !st.ok()) return ReportFailure(st);
  if (io.read_only) {
    if (report.rewound()) {
      std::fprintf(Out(),
                   "Would be able to return %s to its state as of %s.\n"
                   "Would discard approximately %llu seconds of transactions (%s).\n",
                   p.name.c_str(), LocalTime(report.imported_time).c_str(),
                   static_cast<unsigned long long>(report.lost_seconds), report.LostTxgs().c_str());
    }
    for (const auto& l : report.log_losses) std::fprintf(Out(), "Would discard %s.\n", l.c_str());
    if (!report.rewound() && report.log_losses.empty()) {
      std::fprintf(Out(), "%s can be imported without discarding anything.\n", p.name.c_str());
    }
    return kExitOk;
  }
  for (const auto& l : report.log_losses) std::fprintf(Out(), "Discarded %s.\n", l.c_str());
  if (report.rewound()) {
    std::fprintf(Out(),
                 "Pool %s returned to its state as of %s.\n"
                 "Discarded approximately %llu seconds of transactions (%s).\n",
                 p.name.c_str(), LocalTime(report.imported_time).c_str(),
                 static_cast<unsigned long long>(report.lost_seconds), report.LostTxgs().c_str());
  }
  if (Status st = poolcli::AddToCache(ctx, {p.name, p.guid, names}); !st.ok()) {
    return ReportFailure(st);
  }
  return kExitOk;
}

int ZpoolGet(Context& ctx, bool scripted, bool parsable, const std::string& fields,
             const std::string& props, std::vector<std::string> names) {
  std::vector<std::string> want = kPoolGetAll;
  if (props != "all") {
    auto list = poolcli::PropList(props, KnownPoolProp);
    if (!list.ok()) return ReportUsage("zpool get: " + list.status().message());
    want = *list;
  }
  std::vector<std::string> cols =
      fields.empty() ? std::vector<std::string>{"name", "property", "value", "source"}
                     : poolcli::SplitComma(fields);
  if (names.empty()) {
    auto pools = poolcli::ReadCache(ctx);
    if (!pools.ok()) return ReportFailure(pools.status());
    for (auto& c : *pools) names.push_back(c.name);
  }
  std::vector<std::string> headers;
  for (auto& c : cols) {
    std::string h = c;
    std::transform(h.begin(), h.end(), h.begin(), ::toupper);
    headers.push_back(h);
  }
  for (auto& c : cols) {
    if (c != "name" && c != "property" && c != "value" && c != "source") {
      return ReportUsage("zpool get: invalid field '" + c + "'");
    }
  }
  poolcli::Table t(headers, std::vector<bool>(cols.size(), false));
  int rc = kExitOk;
  for (const auto& n : names) {
    // A pool that cannot be opened is reported, and the others are still printed.
    auto p = poolcli::OpenPool(ctx, n, true);
    if (!p.ok()) {
      rc = ReportFailure(p.status());
      continue;
    }
    auto info = (*p)->Info();
    for (const auto& prop : want) {
      std::string source = "-";
      if (pool::IsMemoryBound(prop)) {
        source = pool::StoredBytes(info.props, prop) ? "local" : "default";
      } else if (prop == "comment" || prop.find(':') != std::string::npos) {
        source = info.props.count(prop) ? "local" : "default";
      } else if (prop == "ashift") {
        source = "local";
      }
      std::vector<std::string> row;
      for (auto& c : cols) {
        if (c == "name")
          row.push_back(n);
        else if (c == "property")
          row.push_back(prop);
        else if (c == "value")
          row.push_back(PoolProp(info, prop, parsable));
        else
          row.push_back(source);
      }
      t.AddRow(row);
    }
  }
  t.Print(scripted);
  return rc;
}

int ZpoolSet(Context& ctx, const std::string& assignment, const std::string& name) {
  auto kv = poolcli::SplitProp(assignment);
  if (!kv.ok()) return ReportUsage("zpool set: " + kv.status().message());
  auto p = poolcli::OpenPool(ctx, name);
  if (!p.ok()) return ReportFailure(p.status());
  Status st = (*p)->SetPoolProperty(kv->first, kv->second);
  if (st.code() == EINVAL) return ReportUsage("zpool set: " + st.message());
  if (!st.ok()) return ReportFailure(st);
  return kExitOk;
}

}  // namespace

void RegisterZpoolVerbs(CLI::App& app, Context& ctx) {
  CLI::App* zpool = app.add_subcommand("zpool", "Manage storage pools");
  zpool->require_subcommand(1);

  {
    auto force = std::make_shared<bool>(false);
    auto opts = std::make_shared<std::vector<std::string>>();
    auto name = std::make_shared<std::string>();
    auto vdevs = std::make_shared<std::vector<std::string>>();
    auto* c = AddVerb(*zpool, ctx, "create",
                      "Create a pool on the given vdevs (striped; mirror A B ... makes a mirror)",
                      [&ctx, force, opts, name, vdevs] {
                        return ZpoolCreate(ctx, *force, *opts, *name, *vdevs);
                      });
    c->add_flag("-f", *force, "Use vdevs even if they carry a pool label");
    c->add_option("-o", *opts, "Pool property (ashift=N, comment=..., user:prop=...)")
        ->allow_extra_args(false);
    c->add_option("pool", *name, "Pool name")->required();
    c->add_option("vdevs", *vdevs, "Files, block devices or volstack devices")->required();
  }
  {
    auto a = std::make_shared<ListArgs>();
    auto* c = AddVerb(*zpool, ctx, "list", "List pools", [&ctx, a] { return ZpoolList(ctx, *a); });
    c->add_flag("-H", a->scripted, "Scripted mode: no header, tab-separated");
    c->add_flag("-p", a->parsable, "Exact numbers");
    c->add_option("-o", a->cols, "Columns (name,size,alloc,free,cap,health,...)");
    c->add_option("pools", a->pools, "Pools to list");
  }
  {
    auto names = std::make_shared<std::vector<std::string>>();
    auto verbose = std::make_shared<bool>(false);
    auto* c = AddVerb(*zpool, ctx, "status", "Show pool health and vdevs",
                      [&ctx, names, verbose] { return ZpoolStatus(ctx, *names, *verbose); });
    c->add_flag("-v", *verbose, "List the data errors");
    c->add_option("pools", *names, "Pools");
  }
  for (bool destroy : {false, true}) {
    auto name = std::make_shared<std::string>();
    auto force = std::make_shared<bool>(false);
    auto* c = AddVerb(
        *zpool, ctx, destroy ? "destroy" : "export",
        destroy ? "Destroy a pool" : "Export a pool (sync, mark exported)",
        [&ctx, name, destroy, force] { return ZpoolExportOrDestroy(ctx, *name, destroy, *force); });
    c->add_flag("-f", *force,
                destroy ? "Force (accepted for compatibility; a busy pool is still refused)"
                        : "Export even while its volumes are in use");
    c->add_option("pool", *name, "Pool name")->required();
  }
  {
    auto a = std::make_shared<ImportArgs>();
    auto* c = AddVerb(*zpool, ctx, "import", "List importable pools, or import one by name or id",
                      [&ctx, a] { return ZpoolImport(ctx, *a); });
    c->add_option("-d", a->dirs, "Directory (or device) to search for vdevs")
        ->allow_extra_args(false);
    c->add_flag("-f", a->force, "Import a pool that was not exported");
    c->add_flag("-F", a->rewind,
                "Recovery: rewind to an older txg when the newest cannot be read, discarding "
                "the txgs after it");
    c->add_flag("-n", a->dry_run, "With -F: say whether rewinding would work, import nothing");
    c->add_option("pool", a->args, "Pool name or numeric id");
  }
  {
    auto scripted = std::make_shared<bool>(false), parsable = std::make_shared<bool>(false);
    auto fields = std::make_shared<std::string>(), props = std::make_shared<std::string>();
    auto names = std::make_shared<std::vector<std::string>>();
    auto* c = AddVerb(*zpool, ctx, "get", "Get pool properties",
                      [&ctx, scripted, parsable, fields, props, names] {
                        return ZpoolGet(ctx, *scripted, *parsable, *fields, *props, *names);
                      });
    c->add_flag("-H", *scripted, "Scripted mode");
    c->add_flag("-p", *parsable, "Exact numbers");
    c->add_option("-o", *fields, "Fields (name,property,value,source)");
    c->add_option("property", *props, "all or prop[,prop...]")->required();
    c->add_option("pools", *names, "Pools");
  }
  {
    auto assignment = std::make_shared<std::string>(), name = std::make_shared<std::string>();
    auto* c = AddVerb(*zpool, ctx, "set", "Set a pool property",
                      [&ctx, assignment, name] { return ZpoolSet(ctx, *assignment, *name); });
    c->add_option("property=value", *assignment, "Assignment")->required();
    c->add_option("pool", *name, "Pool")->required();
  }
  poolcli::RegisterZpoolRedundancyVerbs(*zpool, ctx);
}

}  // namespace volstack::cli

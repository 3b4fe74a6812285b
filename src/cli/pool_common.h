// Shared pieces of the zpool/zfs verbs (pool_zpool_verbs.cc, pool_zfs_verbs.cc) and of the
// pool device-name branch (pool_device_names.cc).
//
// Persistence without a daemon, like ZFS's zpool.cache: <state_dir>/zpool.cache is JSON
//   {"version": 1, "pools": [{"name": "trunk", "guid": "123", "vdevs": ["/tmp/a", ...]}]}
// listing the imported pools and their vdev device names (absolute paths, or volstack device
// names). It is changed under the state dir's lock and replaced atomically (state_file.h). Every
// command opens the pools it needs from it (vdevs via OpenDeviceByName, so files and block devices
// are locked exclusively), does its work, syncs and closes. `zpool create`/`import` add an entry,
// `export`/`destroy` remove it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "pool/spa.h"

namespace volstack::cli::poolcli {

struct CachedPool {
  std::string name;
  uint64_t guid = 0;
  std::vector<std::string> vdevs;
};

std::string CachePath(const Context& ctx);
// Missing file -> empty list; a damaged file -> Corruption.
Result<std::vector<CachedPool>> ReadCache(const Context& ctx);
// Read-modify-write of the cache under the state dir's lock (util/state_file.h): `modify`
// changes the list; its error leaves the file as it was.
Status UpdateCache(const Context& ctx,
                   const std::function<Status(std::vector<CachedPool>& pools)>& modify);
Status AddToCache(const Context& ctx, const CachedPool& entry);
Status RemoveFromCache(const Context& ctx, const std::string& name);
Result<std::optional<CachedPool>> FindCached(const Context& ctx, const std::string& name);

// Imports the cached pool `name` (ENOENT "no such pool" if it is not in the cache).
Result<std::shared_ptr<pool::Pool>> OpenPool(const Context& ctx, const std::string& name,
                                             bool read_only = false);

// A device name as recorded in the cache: relative paths made absolute.
std::string NormalizeVdevName(const std::string& name);

// A table printed as zfs/zpool print them: columns padded with two spaces, numeric
// columns right-aligned; with `scripted` (-H) tab-separated and no header.
class Table {
 public:
  explicit Table(std::vector<std::string> headers, std::vector<bool> right_aligned);
  void AddRow(std::vector<std::string> row);
  void Print(bool scripted) const;

 private:
  std::vector<std::string> headers_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

// "1.03G" (zfs style) or the exact number with -p.
std::string Bytes(uint64_t v, bool parsable);

// Splits "a,b,c".
std::vector<std::string> SplitComma(const std::string& s);
// A -o or property list as zfs/zpool take it: names lower-cased (the column headers are
// accepted too) except user properties (a:b, which are always known); any other name that
// `known` refuses is a usage error naming it.
Result<std::vector<std::string>> PropList(const std::string& list,
                                          const std::function<bool(const std::string&)>& known);

// "prop=value" -> (prop, value); EINVAL when there is no '='.
Result<std::pair<std::string, std::string>> SplitProp(const std::string& s);

}  // namespace volstack::cli::poolcli

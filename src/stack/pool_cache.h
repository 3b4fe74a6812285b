// zpool.cache: the pools a stack imports and where their vdevs are, like ZFS's zpool.cache.
//
//   <state_dir>/zpool.cache
//   {"version": 1, "pools": [{"name": "trunk", "guid": "123", "vdevs": ["/tmp/a", ...]}]}
//
// The vdevs are device names as the resolver takes them (absolute paths, volstack device
// names, remote URIs). The file is changed under the state dir's lock and replaced atomically
// (util/state_file.h): `zpool create`/`import` add an entry, `export`/`destroy` remove it.
// The pools it lists are opened by the Stack (stack.h), which keeps them in one table per
// process (OpenPools below).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pool/spa.h"

namespace volstack::stack {

struct CachedPool {
  std::string name;
  uint64_t guid = 0;
  std::vector<std::string> vdevs;
};

std::string PoolCachePath(const std::string& state_dir);
// Missing file -> empty list; a damaged file -> Corruption.
Result<std::vector<CachedPool>> ReadPoolCache(const std::string& state_dir);
// Read-modify-write of the cache under the state dir's lock (util/state_file.h): `modify`
// changes the list; its error leaves the file as it was.
Status UpdatePoolCache(const std::string& state_dir,
                       const std::function<Status(std::vector<CachedPool>& pools)>& modify);
Status AddToPoolCache(const std::string& state_dir, const CachedPool& entry);
Status RemoveFromPoolCache(const std::string& state_dir, const std::string& name);
Result<std::optional<CachedPool>> FindCachedPool(const std::string& state_dir,
                                                 const std::string& name);

// A device name as recorded in the cache: relative paths made absolute.
std::string NormalizeVdevName(const std::string& name);

// The pools a Stack has open. Importing a pool twice in one process would make two writers
// of one set of vdevs, so a second open returns the first Pool (a read-only instance never
// writes, so a writer may be imported beside it).
class OpenPools {
 public:
  using Importer = std::function<Result<std::shared_ptr<pool::Pool>>(bool read_only)>;
  // The open pool `name` fit for `read_only`, or the one `import` returns.
  Result<std::shared_ptr<pool::Pool>> Open(const std::string& name, bool read_only,
                                           const Importer& import);

 private:
  struct Entry {
    std::weak_ptr<pool::Pool> pool;
    bool read_only = false;
  };
  std::recursive_mutex mu_;               // a pool whose vdev is another pool's volume opens both
  std::map<std::string, Entry> by_name_;  // GUARDED_BY(mu_)
};

}  // namespace volstack::stack

// Shared pieces of the zpool/zfs verbs (pool_zpool_verbs.cc, pool_zfs_verbs.cc): the command's
// view of zpool.cache and of the pools its stack opens (stack/pool_cache.h, stack/stack.h), and
// the output helpers (pool_output.cc).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "pool/spa.h"
#include "stack/pool_cache.h"
#include "stack/stack.h"

namespace volstack::cli::poolcli {

using stack::CachedPool;

inline std::string CachePath(const Context& ctx) {
  return stack::PoolCachePath(ctx.global.state_dir);
}
// Missing file -> empty list; a damaged file -> Corruption.
inline Result<std::vector<CachedPool>> ReadCache(const Context& ctx) {
  return stack::ReadPoolCache(ctx.global.state_dir);
}
inline Status UpdateCache(const Context& ctx,
                          const std::function<Status(std::vector<CachedPool>& pools)>& modify) {
  return stack::UpdatePoolCache(ctx.global.state_dir, modify);
}
inline Status AddToCache(const Context& ctx, const CachedPool& entry) {
  return stack::AddToPoolCache(ctx.global.state_dir, entry);
}
inline Status RemoveFromCache(const Context& ctx, const std::string& name) {
  return stack::RemoveFromPoolCache(ctx.global.state_dir, name);
}
inline Result<std::optional<CachedPool>> FindCached(const Context& ctx, const std::string& name) {
  return stack::FindCachedPool(ctx.global.state_dir, name);
}

// Imports the cached pool `name` in the command's stack (ENOENT "no such pool" if it is not
// in the cache); the daemon's own Pool when the command runs in the daemon.
inline Result<std::shared_ptr<pool::Pool>> OpenPool(const Context& ctx, const std::string& name,
                                                    bool read_only = false) {
  return ctx.stack().OpenPool(name, read_only);
}

using stack::NormalizeVdevName;

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

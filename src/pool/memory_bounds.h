// The pool's memory bounds as pool properties, so that a pool carries the memory it may use
// wherever it is imported:
//   cachemax  the `cache` bound: cached indirect blocks and verified data blocks
//             (PoolTuning::cache_max_bytes, block_cache.h), default 256M;
//   dirtymax  dirty data before writers are throttled (PoolTuning::dirty_max_bytes, spa.h),
//             default 64M.
// Peak memory is about cachemax + dirtymax + the process's own (pool_bench ThinFill).
//
// A bound is stored among the MOS's pool properties as a count of bytes; unset, the
// importer's PoolTuning stands (the defaults, or what a test or benchmark chose). Bounds are
// read when a pool is created or imported, because the block cache's tables are sized for
// its bound: a new value takes effect at the next import. Each CLI command imports the
// pools it uses, so only a long-lived holder (the daemon: `volstack down`, `volstack up`)
// sees the old bound until then.
//
// The machine's memory limits both: cachemax at most half of it, dirtymax a quarter (and
// 16G), so the two together leave a quarter to everything else. "The machine's memory" is
// the least of its physical memory and this process's cgroup limit: a pool set up on a large
// host and imported in a small container is held to the container's memory at import, so
// the cache's tables (1.8-3.5 % of cachemax, mapped at import) cannot exhaust it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "pool/spa.h"
#include "util/result.h"

namespace volstack::pool {

bool IsMemoryBound(const std::string& prop);

// The most `prop` may be on this machine.
uint64_t MaxMemoryBound(const std::string& prop);

// `value` (a size as zfs takes one: "1G", "512M") as it is stored: bytes, in decimal.
// EINVAL naming the property for anything else or outside 16M..MaxMemoryBound(prop).
Result<std::string> StoredMemoryBound(const std::string& prop, const std::string& value);

// The bound `props` hold for `prop`, if it is one StoredMemoryBound could have written on
// some machine (at least 16M); what zpool get shows.
std::optional<uint64_t> StoredBytes(const std::map<std::string, std::string>& props,
                                    const std::string& prop);

// The bound in effect: the stored one held to MaxMemoryBound, or else `tuning`'s
// (PoolTuning{} for the defaults).
uint64_t MemoryBound(const std::map<std::string, std::string>& props, const std::string& prop,
                     const PoolTuning& tuning = {});

// Sets `tuning`'s bounds to those in effect (MemoryBound).
void ApplyMemoryBounds(const std::map<std::string, std::string>& props, PoolTuning& tuning);

}  // namespace volstack::pool

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
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "pool/spa.h"
#include "util/result.h"

namespace volstack::pool {

bool IsMemoryBound(const std::string& prop);

// `value` (a size as zfs takes one: "1G", "512M") as it is stored: bytes, in decimal.
// EINVAL naming the property for anything else or outside its range (16M up to the
// machine's memory for cachemax, 16M-16G for dirtymax).
Result<std::string> StoredMemoryBound(const std::string& prop, const std::string& value);

// The bound in effect: the stored one, or else `tuning`'s (PoolTuning{} for the defaults).
uint64_t MemoryBound(const std::map<std::string, std::string>& props, const std::string& prop,
                     const PoolTuning& tuning = {});

// Sets `tuning`'s bounds from the stored ones. A cachemax set on a machine with more memory
// than this one's is held to this machine's memory.
void ApplyMemoryBounds(const std::map<std::string, std::string>& props, PoolTuning& tuning);

}  // namespace volstack::pool

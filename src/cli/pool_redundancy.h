// zpool's redundancy verbs and output (pool_redundancy_verbs.cc): mirror vdev lists for
// create, the config/scan/errors part of zpool status, and scrub, offline, online, clear,
// attach, detach, replace.
#pragma once

#include <string>
#include <vector>

#include "cli/cli.h"
#include "pool/spa.h"

namespace volstack::cli::poolcli {

// Groups `args` (zpool create's vdev words: devices and the keyword "mirror") into vdev
// specs over `devs`/`names`, which hold the opened devices and their names for the
// non-keyword words in order. EINVAL for a mirror of fewer than two devices.
Result<std::vector<pool::VdevSpec>> GroupVdevs(const std::vector<std::string>& args,
                                               const std::vector<bdev::BlockDevicePtr>& devs,
                                               const std::vector<std::string>& names);
bool IsVdevKeyword(const std::string& word);

// zpool status's lines from " state:" on: state, scan, config tree, errors (-v: the list).
void PrintPoolStatus(const pool::PoolInfo& info, bool verbose);

void RegisterZpoolRedundancyVerbs(CLI::App& zpool, Context& ctx);
// zpool add (pool_add_verb.cc).
void RegisterZpoolAddVerb(CLI::App& zpool, Context& ctx);

}  // namespace volstack::cli::poolcli

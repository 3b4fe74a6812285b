// The busy checks of the verbs that destroy devices: they refuse while something holds one —
// as zfs answers "dataset is busy" and lvm2 "in use". What counts as a use is the stack
// graph's (stack/graph.h, StackGraph::UsesOf): a loop device bound to its devfs file, a
// process holding that file, an NBD listener, a loop binding or NBD export recorded for `up`,
// a pool built on it, a VG with active LVs built on it.
#pragma once

#include <string>
#include <vector>

#include "cli/cli.h"

namespace volstack::cli {

// EBUSY "<name>: <its uses>" for the first of `names` in use; Ok when none is.
Status CheckNotInUse(const Context& ctx, const std::vector<std::string>& names);

}  // namespace volstack::cli

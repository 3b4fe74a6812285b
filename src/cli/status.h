// `volstack status` (status.cc).
#pragma once

#include "cli/cli.h"

namespace volstack::cli {

// The tree, with the live stack's view when the daemon runs the command, else from the state
// dir, the pools and PV labels read-only, and the kernel.
int PrintStatus(const Context& ctx);

}  // namespace volstack::cli

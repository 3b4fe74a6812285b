// Snapshots as devices (snapdev=visible: stack/snapshot_devices.h) in the verbs that destroy
// or rename snapshots: a snapshot device in use stops them, and the daemon's own hold on
// the others is let go first.
#pragma once

#include <string>
#include <vector>

#include "cli/cli.h"

namespace volstack::cli {

// EBUSY "snapshot <name> is busy (<its uses>)" for the first of `snapshots` in use (bound
// to a loop device, exported over NBD, open); else drops the daemon's registration of each
// (the next reconcile registers what still exists) and returns Ok. Changes nothing on disk.
Status ReleaseSnapshots(Context& ctx, const std::vector<std::string>& snapshots);

}  // namespace volstack::cli

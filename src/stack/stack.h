// Bringing a stack up and down from its state dir, inside the daemon (stack/daemon.h):
//   up:   import the pools in zpool.cache; register their volumes; scan the LVM devices list
//         and every pool volume for PVs; activate the VGs/LVs recorded as active; mount devfs;
//         restore loop bindings and NBD exports.
//   down: refuse if a loop device or mount still uses a device (unless forced); release
//         loops; stop NBD; unmount devfs; flush and close LVs; export pools.
// Each step reports what it could not do and the rest still comes up: a missing vdev leaves
// its pool unavailable, not the whole stack.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "pool/spa.h"
#include "stack/daemon.h"

namespace volstack::cli {

Status AssembleUp(stack::Daemon& daemon);
// Makes the live stack match the state dir after a command changed it (see assembly.cc).
void Reconcile(stack::Daemon& daemon);
// The pool the daemon of this process holds open, or nullptr (no daemon, or not imported).
std::shared_ptr<pool::Pool> FindLivePool(const std::string& name);
Status AssembleDown(stack::Daemon& daemon, bool force);
// `volstack status` (status.cc): the tree, with the daemon's live view when one runs, else
// from the state dir, the pools and PV labels read-only, and the kernel.
int PrintStatus(const Context& ctx, stack::Daemon* daemon);
// The daemon's live view (empty in a CLI process): pools it could not import and why; the
// devfs mount point ("" when not mounted).
std::map<std::string, std::string> UnavailablePools();
std::string LiveDevfsDir();
// In the daemon: drops `names` from the registry (flushed) so a verb can destroy them once
// CheckNotInUse found them free; the next Reconcile registers what still exists. No-op
// without a daemon.
void ReleaseFromDaemon(const std::vector<std::string>& names);

}  // namespace volstack::cli

// Bringing a stack up and down from its state dir, inside the daemon (stack/daemon.h):
//   up:   import the pools in zpool.cache; register their volumes; scan the LVM devices list
//         and every pool volume for PVs; activate the VGs/LVs recorded as active; mount devfs;
//         restore loop bindings and NBD exports.
//   down: refuse if a loop device or mount still uses a device (unless forced); release
//         loops; stop NBD; unmount devfs; flush and close LVs; export pools.
// Each step reports what it could not do and the rest still comes up: a missing vdev leaves
// its pool unavailable, not the whole stack.
#pragma once

#include <memory>

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
// `volstack status`: the tree, from the daemon when one runs, else from the state dir.
int PrintStatus(const Context& ctx, stack::Daemon* daemon);

}  // namespace volstack::cli

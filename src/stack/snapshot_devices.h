// Snapshot devices (zfs's snapdev property): a volume with snapdev=visible has each of its
// snapshots as a read-only device named "pool/vol@snap" beside it, which the daemon
// registers (so devfs shows a file per snapshot, losetup binds it read-only and NBD serves
// it read-only); with snapdev=hidden, the default, a snapshot is no device at all, as zfs
// makes no /dev/zvol node for it.
//
// The stack calls these from Reconcile (which snapshots to register) and from the resolver
// (whether a snapshot name is a device). Stateless: every call reads the pool's directory.
#pragma once

#include <string>
#include <vector>

#include "pool/spa.h"
#include "util/status.h"

namespace volstack::stack {

// The snapshots of `pool`'s volumes whose snapdev is visible, oldest first per volume.
std::vector<std::string> VisibleSnapshotNames(pool::Pool& pool);

// Ok for a name without '@'. For a snapshot name: Ok when its volume has snapdev=visible;
// ENODEV saying so when hidden (the resolver then looks no further); ENOENT when the volume
// does not exist.
Status CheckSnapshotDevice(pool::Pool& pool, const std::string& name);

}  // namespace volstack::stack

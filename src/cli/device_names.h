// The device names users type, resolved to open BlockDevices.
//
//   /path/to/file, ./rel, /dev/loop0   a file or block device (opened with an exclusive lock,
//                                      so two volstack processes never write one backing file)
//   trunk/funk                         a pool volume (the pool is imported for the call)
//   vg0/lv0                            an LV (its VG is read from its PVs and the LV activated)
//   nbd://HOST[:PORT]/EXPORT           an export of an NBD server (remote/nbd_client_device.h;
//   nbd+unix:///EXPORT?socket=PATH     libnbd's URIs, nbds:// with TLS)
//   rbd:POOL/IMAGE[:conf=PATH][:id=U]  a Ceph RBD image (remote/rbd_device.h)
//
// A name that starts with '/' or '.' is always a path. Otherwise a name whose first component
// is a known pool or VG is a volstack device; anything else is tried as a path. One resolver
// opens them all: stack::Stack::OpenDevice (stack/device_names.cc), in the command's stack.
//
// Offline use (no daemon): a returned device keeps what it needs open (its pool, its PVs) and
// releases it when the last reference drops. Callers Flush() before dropping a device they
// wrote; the pool commits its transaction group on flush.
#pragma once

#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "cli/cli.h"
#include "stack/stack.h"

namespace volstack::cli {

inline Result<bdev::BlockDevicePtr> OpenDeviceByName(const Context& ctx, const std::string& name,
                                                     bool read_only) {
  return ctx.stack().OpenDevice(name,
                                read_only ? stack::Access::kReadOnly : stack::Access::kReadWrite);
}

// Every volstack device name (pool volumes, then LVs) known to this state dir: what pvscan
// looks at beyond the paths it is given.
inline std::vector<std::string> ListVolstackDeviceNames(const Context& ctx) {
  return ctx.stack().ListDeviceNames();
}

}  // namespace volstack::cli

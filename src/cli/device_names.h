// The device names users type, resolved to open BlockDevices.
//
//   /path/to/file, ./rel, /dev/loop0   a file or block device (opened with an exclusive lock,
//                                      so two volstack processes never write one backing file)
//   trunk/funk                         a pool volume (the pool is imported for the call)
//   vg0/lv0                            an LV (its VG is read from its PVs and the LV activated)
//   nbd://HOST[:PORT]/EXPORT           an export of an NBD server (remote/nbd_client_device.h;
//   nbd+unix:///EXPORT?socket=PATH     libnbd's URIs, nbds:// with TLS)
//
// A name that starts with '/' or '.' is always a path. Otherwise a name whose first component
// is a known pool or VG is a volstack device; anything else is tried as a path.
//
// Offline use (no daemon): a returned device keeps what it needs open (its pool, its PVs) and
// releases it when the last reference drops. Callers Flush() before dropping a device they
// wrote; the pool commits its transaction group on flush.
#pragma once

#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "cli/cli.h"

namespace volstack::cli {

Result<bdev::BlockDevicePtr> OpenDeviceByName(const Context& ctx, const std::string& name,
                                              bool read_only);

// Every volstack device name (pool volumes, then LVs) known to this state dir: what pvscan
// looks at beyond the paths it is given.
std::vector<std::string> ListVolstackDeviceNames(const Context& ctx);

// Branches, one per volume manager, in their own files. Each returns ENOENT when `name` is
// not one of its devices, so the resolver can try the next.
Result<bdev::BlockDevicePtr> OpenPoolVolumeByName(const Context& ctx, const std::string& name,
                                                  bool read_only);  // pool_device_names.cc
std::vector<std::string> ListPoolVolumeNames(const Context& ctx);   // pool_device_names.cc
Result<bdev::BlockDevicePtr> OpenLogicalVolumeByName(const Context& ctx, const std::string& name,
                                                     bool read_only);  // lvm_device_names.cc
std::vector<std::string> ListLogicalVolumeNames(const Context& ctx);   // lvm_device_names.cc

}  // namespace volstack::cli

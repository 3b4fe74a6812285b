// The device names users type, and the one resolver that opens them (Stack::OpenDevice,
// stack/device_names.cc):
//
//   /path/to/file, ./rel, /dev/loop0   a file or block device (opened with an exclusive lock,
//                                      so two volstack processes never write one backing file)
//   nbd://HOST[:PORT]/EXPORT           an export of an NBD server (remote/nbd_client_device.h;
//   nbd+unix:///EXPORT?socket=PATH     libnbd's URIs, nbds:// with TLS)
//   trunk/funk                         a pool volume (the pool is imported for the call)
//   vg0/lv0                            an LV (its VG is read from its PVs and the LV activated)
//
// A name that starts with '/' or '.' is always a path; a name with a scheme is a remote
// device (OpenRemoteDevice, the one place a scheme is added). Otherwise, in the daemon, a
// registered device is used as it is; a name whose first component is a known pool or VG
// is a volstack device; anything else is tried as a path.
#pragma once

#include <optional>
#include <string>

#include "bdev/block_device.h"

namespace volstack::stack {

// The device behind a scheme-prefixed name (nbd://, nbds://, nbd+unix://, ...), or nullopt
// when `name` has no scheme this build knows.
std::optional<Result<bdev::BlockDevicePtr>> OpenRemoteDevice(const std::string& name,
                                                             bool read_only);

}  // namespace volstack::stack

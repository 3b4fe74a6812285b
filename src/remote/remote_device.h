// Remote device names, one entry point for the resolvers that turn user-typed names into
// devices: NBD URIs (nbd_client_device.h) and Ceph RBD names (rbd_device.h).
#pragma once

#include <string>

#include "bdev/block_device.h"

namespace volstack::remote {

// True for nbd://, nbds://, nbd+unix://, nbds+unix:// and rbd: names.
bool IsRemoteDeviceName(const std::string& name);

// Where a remote name followed by pvmove's ":PE-RANGES" ends: the ':' before the trailing
// items that are all ranges (N, N-M, N+M), or npos when there are none. Remote names contain
// ':' themselves (nbd://HOST:PORT/..., rbd:POOL/IMAGE:conf=...), never as an all-digit item.
size_t RemoteNameEnd(const std::string& text);

// Opens the remote device `name`. An RBD image already open in this process under the same
// name is shared (a second librbd handle on one image in one process would make its writers
// trade librbd's exclusive lock back and forth); a read-write request for an image open
// read-only is EBUSY.
Result<bdev::BlockDevicePtr> OpenRemoteDevice(const std::string& name, bool read_only);

}  // namespace volstack::remote

// The device names a command takes, opened by its stack's one resolver (the names:
// stack/device_names.h; the resolver: stack::Stack::OpenDevice).
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

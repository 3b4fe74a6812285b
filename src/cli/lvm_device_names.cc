#include "cli/device_names.h"

namespace volstack::cli {

Result<bdev::BlockDevicePtr> OpenLogicalVolumeByName(const Context&, const std::string& name,
                                                     bool) {
  return Status::NotFound("no LV '" + name + "'");
}

std::vector<std::string> ListLogicalVolumeNames(const Context&) { return {}; }

}  // namespace volstack::cli

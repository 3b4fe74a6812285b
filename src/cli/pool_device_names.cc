#include "cli/device_names.h"

namespace volstack::cli {

Result<bdev::BlockDevicePtr> OpenPoolVolumeByName(const Context&, const std::string& name,
                                                  bool) {
  return Status::NotFound("no pool volume '" + name + "'");
}

std::vector<std::string> ListPoolVolumeNames(const Context&) { return {}; }

}  // namespace volstack::cli

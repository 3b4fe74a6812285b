#include "cli/device_names.h"

#include <sys/stat.h>

#include "bdev/file_device.h"

namespace volstack::cli {

namespace {
Result<bdev::BlockDevicePtr> OpenPath(const std::string& path, bool read_only) {
  bdev::FileDeviceOptions options;
  options.read_only = read_only;
  options.exclusive_lock = !read_only;
  VS_ASSIGN_OR_RETURN(auto device, bdev::FileDevice::Open(path, options));
  return bdev::BlockDevicePtr(std::move(device));
}
}  // namespace

Result<bdev::BlockDevicePtr> OpenDeviceByName(const Context& ctx, const std::string& name,
                                              bool read_only) {
  if (name.empty()) return Status::InvalidArgument("empty device name");
  if (name.front() == '/' || name.front() == '.') return OpenPath(name, read_only);
  for (auto* open : {&OpenPoolVolumeByName, &OpenLogicalVolumeByName}) {
    auto device = open(ctx, name, read_only);
    if (device.ok() || !device.status().IsNotFound()) return device;
  }
  struct stat st;
  if (::stat(name.c_str(), &st) == 0) return OpenPath(name, read_only);
  return Status::NotFound("no device, pool volume or LV named '" + name + "'");
}

std::vector<std::string> ListVolstackDeviceNames(const Context& ctx) {
  std::vector<std::string> names = ListPoolVolumeNames(ctx);
  for (auto& lv : ListLogicalVolumeNames(ctx)) names.push_back(std::move(lv));
  return names;
}

}  // namespace volstack::cli

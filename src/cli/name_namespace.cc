#include "cli/name_namespace.h"

#include "cli/lvm_common.h"
#include "cli/pool_common.h"

namespace volstack::cli {

Status CheckNoVgNamed(const Context& ctx, const std::string& name) {
  auto session = lvmcli::OpenSession(ctx, /*read_only=*/true);
  if (session->FindVg(name) != nullptr) {
    return Status::Exists("a volume group called '" + name +
                          "' exists: pools and volume groups share device names (dev/" + name +
                          "/...)");
  }
  return Status::Ok();
}

Status CheckNoPoolNamed(const Context& ctx, const std::string& name) {
  auto cached = poolcli::FindCached(ctx, name);
  if (!cached.ok()) return cached.status();
  if (cached->has_value()) {
    return Status::Exists("a pool called '" + name +
                          "' exists: pools and volume groups share device names (dev/" + name +
                          "/...)");
  }
  return Status::Ok();
}

}  // namespace volstack::cli

#include "cli/device_usage.h"

#include "stack/stack.h"

namespace volstack::cli {

Status CheckNotInUse(const Context& ctx, const std::vector<std::string>& names) {
  return ctx.stack().CheckNotInUse(names);
}

}  // namespace volstack::cli

#include "cli/verbs.h"

namespace volstack::cli {

void RegisterExportVerbs(CLI::App& app, Context& ctx) {
  AddReservedVerb(app, ctx, "devfs", "Serve the FUSE device tree");
  AddReservedVerb(app, ctx, "losetup", "Bind kernel loop devices to volstack devices");
  AddReservedVerb(app, ctx, "nbd", "Serve devices over NBD");
}

}  // namespace volstack::cli

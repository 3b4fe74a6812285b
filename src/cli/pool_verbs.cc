#include "cli/verbs.h"

namespace volstack::cli {

void RegisterPoolVerbs(CLI::App& app, Context& ctx) {
  AddReservedVerb(app, ctx, "zpool", "Manage storage pools (create, import, export, list, status)");
  AddReservedVerb(app, ctx, "zfs", "Manage datasets and volumes of a pool");
}

}  // namespace volstack::cli

#include "cli/verbs.h"

namespace volstack::cli {

void RegisterStackVerbs(CLI::App& app, Context& ctx) {
  AddReservedVerb(app, ctx, "up", "Restore the whole stack from the state directory");
  AddReservedVerb(app, ctx, "down", "Flush and take the stack down");
  AddReservedVerb(app, ctx, "status", "Show the stack as a tree");
  AddReservedVerb(app, ctx, "daemon", "Run the daemon that owns open devices");
}

}  // namespace volstack::cli

#include "cli/verbs.h"

namespace volstack::cli {

void RegisterBenchVerbs(CLI::App& app, Context& ctx) {
  AddReservedVerb(app, ctx, "bench", "Run the seed's dbench experiment on volstack's stacks");
}

}  // namespace volstack::cli

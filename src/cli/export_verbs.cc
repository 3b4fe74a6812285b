#include "cli/export_common.h"
#include "cli/verbs.h"

namespace volstack::cli {

void RegisterExportVerbs(CLI::App& app, Context& ctx) {
  RegisterDevfsVerb(app, ctx);
  RegisterLosetupVerb(app, ctx);
  RegisterNbdVerb(app, ctx);
}

}  // namespace volstack::cli

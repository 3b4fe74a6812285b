// The pool verb group: `volstack zpool ...` (pool_zpool_verbs.cc) and `volstack zfs ...`
// (pool_zfs_verbs.cc). Shared state and helpers: pool_common.h.
#include "cli/verbs.h"

namespace volstack::cli {

void RegisterZpoolVerbs(CLI::App& app, Context& ctx);
void RegisterZfsVerbs(CLI::App& app, Context& ctx);

void RegisterPoolVerbs(CLI::App& app, Context& ctx) {
  RegisterZpoolVerbs(app, ctx);
  RegisterZfsVerbs(app, ctx);
}

}  // namespace volstack::cli

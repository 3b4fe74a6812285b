// The lvm2-compatible verbs: pv*, vg*, lv* (one file per verb group, see lvm_common.h).
#include "cli/lvm_common.h"
#include "cli/lvm_pvmove.h"
#include "cli/verbs.h"

namespace volstack::cli {

void RegisterLvmVerbs(CLI::App& app, Context& ctx) {
  lvmcli::RegisterPvVerbs(app, ctx);
  lvmcli::RegisterVgVerbs(app, ctx);
  lvmcli::RegisterLvVerbs(app, ctx);
  lvmcli::RegisterReportVerbs(app, ctx);
  lvmcli::RegisterCatVerb(app, ctx);
  RegisterPvmoveVerb(app, ctx);
}

}  // namespace volstack::cli

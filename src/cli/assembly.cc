#include "cli/assembly.h"

#include <cstdio>

namespace volstack::cli {

Status AssembleUp(stack::Daemon& daemon) { return Status::Ok(); }

Status AssembleDown(stack::Daemon& daemon, bool force) { return Status::Ok(); }

int PrintStatus(const Context& ctx, stack::Daemon* daemon) {
  std::printf("state dir %s: %s\n", ctx.global.state_dir.c_str(),
              daemon ? "daemon running" : "no daemon");
  return kExitOk;
}

}  // namespace volstack::cli

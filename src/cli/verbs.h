// The verb table: one registrar per verb group, one file per group.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/cli.h"

namespace volstack::cli {

void RegisterPoolVerbs(CLI::App& app, Context& ctx);    // zpool ..., zfs ...
void RegisterLvmVerbs(CLI::App& app, Context& ctx);     // pvcreate, vgs, lvcreate, ...
void RegisterExportVerbs(CLI::App& app, Context& ctx);  // devfs, losetup, nbd
void RegisterStackVerbs(CLI::App& app, Context& ctx);   // up, down, status, daemon
void RegisterBenchVerbs(CLI::App& app, Context& ctx);   // bench
void RegisterJobsVerb(CLI::App& app, Context& ctx);     // jobs (stack_jobs_verb.cc)

}  // namespace volstack::cli

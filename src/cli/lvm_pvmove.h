// `volstack pvmove` (lvm_pvmove_verb.cc) and the daemon's side of it.
//
// Without a daemon the move runs in the command's process, to its end (or, with -b, in a
// detached background process it starts after every check); killed, it resumes with
// `volstack pvmove` (no argument) from the last checkpoint. One mover per VG across
// processes (lvm/pvmove_lock.h); `--abort` stops a mover in another process first. With a daemon,
// the command runs inside it: the move becomes a daemon job (so the LV stays exported and in use,
// and other commands keep running: the request lock is released while the client follows the job's
// progress), and `volstack up` resumes interrupted moves as jobs (stack/pvmove_jobs.h).
#pragma once

#include "cli/cli.h"
#include "stack/stack.h"

namespace volstack::cli {

void RegisterPvmoveVerb(CLI::App& app, Context& ctx);

}  // namespace volstack::cli

// The verbs with typed replies: the daemon (or a command's own one-shot stack) answers them
// with data, and the CLI formats the data (cli/status.cc, cli/stack_jobs_verb.cc), so the
// output is the same bytes with a daemon and without one by construction, and a waiting
// request can stream a job's progress as data its client prints (docs/stack.md, "Typed
// replies").
//
//   status  args {}                                     data: the status tree (`status --json`,
//                                                       its "state_dir" left to the client)
//   jobs    args {"wait":bool,"stop":bool,"ids":[N]}    data: {"jobs":[...]} listed, or
//                                                       {"results":[...]} waited for/stopped
//
// Threads: Handle runs on the thread that holds the stack's serialization (a daemon request
// or the command itself); `progress` is called on that thread.
#pragma once

#include <functional>
#include <string>

#include "stack/protocol.h"
#include "util/result.h"

namespace volstack::stack {

class JobRecord;
class Stack;

// Whether `verb` is answered by Handle.
bool HasTypedReply(const std::string& verb);

// A line of progress of what the request waits for (a job's progress as it changes).
using ProgressFn = std::function<void(const std::string& text)>;

// Waits for the job of `record` to end and returns how it ended, passing its progress to
// `progress` as it changes ("job 3 (scrub trunk): 12.50% examined, 0B repaired", at most once
// a second). In a daemon request it lets other requests and the jobs run meanwhile.
Status FollowJob(const JobRecord& record, const ProgressFn& progress);

// Answers `request` against `stack`. Failures of the request's own work are in the Reply (its
// code and errors); a Status is a request this volstack does not understand.
Result<Reply> Handle(Stack& stack, const Request& request, const ProgressFn& progress = {});

}  // namespace volstack::stack

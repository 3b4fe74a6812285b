// The volstack command line: a verb table in the manner of zfs_main.c. Each verb group lives
// in its own file and adds its subcommands to the app through a Register*Verbs function
// listed in verbs.h; main() only builds the app and runs it (see Main()).
//
// Exit codes: 0 success; 1 failure; 2 usage (a bad argument, caught before anything changes).
// Verb groups that mimic a tool use that tool's codes where they differ (lvm2: 3 for an
// invalid command line, 5 for a failed command).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

#include "stack/protocol.h"
#include "util/status.h"

namespace volstack::stack {
class Stack;
}  // namespace volstack::stack

namespace volstack::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Options every command takes.
struct GlobalOptions {
  std::string state_dir = "/var/lib/volstack";  // --state-dir or VOLSTACK_STATE_DIR
  bool json = false;                            // --json: machine-readable report
  int verbose = 0;                              // -v, repeatable: detail on stderr
};

struct Context {
  GlobalOptions global;
  int exit_code = kExitOk;

  // The stack the command runs against: the daemon's when the daemon runs it (Main's
  // `live`), else a one-shot stack over global.state_dir, opened on first use (after the
  // command line is parsed). Copies of a Context share it.
  stack::Stack& stack() const;

  // Answers a verb with a typed reply (stack/requests.h) for the verb to format: in the daemon
  // when one runs for the state dir, else against this command's stack. `progress` gets the
  // lines a waiting request passes on.
  Result<stack::Reply> Call(const stack::Request& request,
                            const std::function<void(const std::string&)>& progress = {}) const;

  stack::Stack* live = nullptr;  // the daemon's
  mutable std::shared_ptr<stack::Stack> one_shot;
};

// Prints "volstack: <status>" on stderr and returns kExitFailure (or `code`), for verbs.
int ReportFailure(const Status& status, int code = kExitFailure);
// Prints "volstack: <message>" on stderr and returns kExitUsage.
int ReportUsage(const std::string& message);

// Adds a subcommand whose callback runs `body` and stores its exit code in ctx.
CLI::App* AddVerb(CLI::App& parent, Context& ctx, const std::string& name,
                  const std::string& description, std::function<int()> body);

// Builds the app, parses argv, runs the verb. Never throws. `live` is the daemon's stack when
// the daemon runs the command for a client; nullptr in a command's own process.
int Main(int argc, char** argv, stack::Stack* live = nullptr);

}  // namespace volstack::cli

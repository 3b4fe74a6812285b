// Running the programs a bench drives: the volstack CLI itself, losetup, mkfs.xfs, mount,
// dbench. Every child runs in its own process group, so a Ctrl-C at the terminal reaches only
// the bench, which then stops the child group on purpose (SIGINT, then SIGTERM, then SIGKILL)
// and tears the stack down in order; a FUSE server must outlive the mount above it.
//
// Threads: the functions are safe to call from one thread at a time per child; they fork, so
// call them before starting worker threads that hold locks the child might need (the child
// only calls async-signal-safe functions before exec).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace volstack::bench {

struct CommandOptions {
  std::string cwd;               // empty: inherit
  std::vector<std::string> env;  // extra "NAME=value" entries
  double timeout_seconds = 0;    // 0: none
  bool stop_on_cancel = true;    // on Ctrl-C, stop the child's process group
  // Called with each complete output line (stdout and stderr interleaved), as it arrives.
  std::function<void(std::string_view line)> on_line;
  // Called about every 100 ms while the child runs (for progress displays).
  std::function<void()> on_tick;
};

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal
  int term_signal = 0;
  bool cancelled = false;
  bool timed_out = false;
  std::string output;  // stdout + stderr, the last 4 MiB at most

  bool success() const { return exit_code == 0 && !cancelled && !timed_out; }
  // The last `n` non-empty lines of output, joined by " | ", for one-line error messages.
  std::string Tail(int n = 3) const;
};

// Runs argv[0] (looked up in PATH) and waits. Fails only when it could not be started
// (ENOENT when the program does not exist); a non-zero exit is a result, not an error.
Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                 const CommandOptions& options = {});

// RunCommand, then an error unless the program exited 0: "<cmd>: exit N: <tail of output>"
// (ECANCELED when interrupted). Returns the output.
Result<std::string> RunChecked(const std::vector<std::string>& argv,
                               const CommandOptions& options = {});

// Starts a long-running child (a FUSE server) in its own process group with stdin from
// /dev/null and stdout+stderr appended to `log_path`. Returns its PID; the caller stops it
// with StopProcess.
Result<pid_t> StartBackground(const std::vector<std::string>& argv, const std::string& log_path);

// True while `pid` (our child) has not exited. Reaps it once it has.
bool ChildRunning(pid_t pid);

// SIGTERM to `pid`, up to `grace_seconds` for it to exit, then SIGKILL; always reaps. OK when
// it exited by itself or on SIGTERM; an error naming the signal when it had to be killed.
Status StopProcess(pid_t pid, double grace_seconds);

// What a process has used so far, from /proc/PID/status and /proc/PID/stat.
struct ProcessUsage {
  uint64_t peak_rss_kib = 0;  // VmHWM
  uint64_t rss_kib = 0;       // VmRSS
  double cpu_seconds = 0;     // utime + stime
};
Result<ProcessUsage> ReadProcessUsage(pid_t pid);
// Parsers of those files' text, separate for tests.
Result<ProcessUsage> ParseProcessUsage(std::string_view status_text, std::string_view stat_text,
                                       long clock_ticks_per_second);

// "a b 'c d'": argv as a shell would need it, for messages.
std::string JoinCommand(const std::vector<std::string>& argv);

// Whether `program` is an executable in PATH (or an executable path).
bool ProgramExists(const std::string& program);

}  // namespace volstack::bench

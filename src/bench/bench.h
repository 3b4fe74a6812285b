// volstack bench: the seed's experiment as one command.
//
// Theory. The seed measured dbench on XFS on a ZFS volume (931 MB/s) against the same on
// ZFS → loop → LVM (525 MB/s). The bench builds that experiment's stacks out of volstack
// (see stack_builder.h), side by side on one machine in one run, and says what stacking
// costs: per stack the seed's dbench table, then one comparison table with each stack's
// median throughput and Flush latency and their ratios to `zvol` and to `file`.
//
// Data flow. Probe the environment (root, loop, dbench, which volstack verbs exist) → decide
// each requested stack's availability → for repeat 1..R, for each available stack (so drift
// on a shared machine hits every stack alike): make a fresh scratch directory and state dir,
// build the stack (each step registering its undo), mkfs.xfs, mount, run dbench while
// sampling the serving volstack processes' CPU and peak RSS, tear down in reverse → print
// the tables → write report.json, report.md, report.svg.
//
// With --fio, each stack's loop device gets fio's phases instead of XFS and dbench
// (fio_workload.h): the small random I/O a program sees through the kernel.
//
// Without root, loop devices or dbench, it says so in one line and runs the in-process block
// workload instead (`--block`, block_driver.cc): the same stacks built as BlockDevices in this
// process, with fio-like 4 KiB random and 1 MiB sequential phases.
//
// Invariants: nothing outside the scratch directory and the results directory is created;
// every loop device, mount and process a run creates is gone when the run returns, also on
// failure and on Ctrl-C (SIGINT sets a flag; the running dbench is stopped; the teardown
// runs; the report of what finished is still written).
//
// Threads: the driver is single-threaded; only the block workload starts threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/result.h"

namespace volstack::bench {

struct BenchOptions {
  int seconds = 20;  // dbench -t, or per block workload phase
  int clients = 10;  // dbench NPROCS, or block workload threads
  uint64_t size_bytes = 2ull << 30;
  std::string dir = "/var/tmp";     // where the scratch directory is made
  std::vector<std::string> stacks;  // empty: all
  int repeat = 3;
  std::string output;  // empty: <dir>/volstack-bench-results/<timestamp>
  bool quick = false;
  bool block = false;
  bool fio = false;  // fio's 4 KiB and 1 MiB phases on each stack's loop device, not dbench
  int verbose = 0;
  std::string volstack = "/proc/self/exe";  // the binary stacks are built with
  std::string version;                      // volstack's, for the report
};

// The defaults --quick stands for, applied to fields the user did not set (the CLI passes
// which ones it saw).
struct QuickOverrides {
  bool seconds = false, clients = false, size = false, repeat = false;
};
void ApplyQuickDefaults(BenchOptions& options, const QuickOverrides& explicitly_set);
// The seed's own dbench parameters (50 clients, 120 s, a store large enough for them), applied
// to fields the user did not set.
void ApplySeedParams(BenchOptions& options, const QuickOverrides& explicitly_set);

// Checks options: EINVAL with one line naming the bad one (unknown stack, size too small for
// XFS, ...). Nothing is created.
Status ValidateOptions(const BenchOptions& options);

// Parses "file,zvol" (also "all"); EINVAL naming an unknown stack.
Result<std::vector<std::string>> ParseStackList(const std::string& text);

// Runs the whole bench. Returns the exit code: 0 when every available requested stack ran,
// 1 when one failed, 130 when interrupted.
int RunBench(BenchOptions options);

}  // namespace volstack::bench

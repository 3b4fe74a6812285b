// What the bench's two drivers (dbench on kernel stacks, the in-process block workload)
// share: the options, the probed environment, the scratch and results directories, the
// progress line. Internal to src/bench.
#pragma once

#include <string>

#include "bench/bench.h"
#include "bench/environment.h"
#include "bench/progress.h"
#include "bench/report.h"

namespace volstack::bench {

struct BenchContext {
  BenchOptions options;
  Environment env;
  std::string scratch;  // the run's scratch directory (removed at the end)
  std::string output;   // the results directory
  Progress* progress = nullptr;
};

// Runs every requested stack R times, interleaved; fills report.stacks.
void RunDbenchStacks(BenchContext& ctx, BenchReport& report);
void RunBlockStacks(BenchContext& ctx, BenchReport& report);

// Removes `path` and everything below it without crossing into other filesystems (a mount
// left behind is skipped, never emptied). Missing path: OK.
Status RemoveTree(const std::string& path);

// "2026-11-30T12:00:00Z" for now; "20261130-120000" for directory names.
std::string UtcTimestamp(bool for_file_name = false);

}  // namespace volstack::bench

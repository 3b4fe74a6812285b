// The --block driver: each stack built in-process (block_stacks.h), the block workload
// (block_workload.h) run on it, repeats interleaved as in the dbench driver.
#include <fmt/format.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>

#include "bench/bench_internal.h"
#include "bench/block_stacks.h"
#include "bench/block_workload.h"
#include "bench/cancel.h"

namespace volstack::bench {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr int kPhases = 4;

BlockRun RunOnce(BenchContext& ctx, const BlockStack& stack, int repeat, const std::string& prefix,
                 double seconds_after) {
  BlockRun run;
  run.repeat = repeat;
  const auto t0 = Clock::now();
  std::string dir = fmt::format("{}/{}-{}", ctx.scratch, stack.name, repeat);
  Teardown teardown;
  ctx.progress->Update(fmt::format("volstack bench: {}: building the stack", prefix), true);
  Status status = [&]() -> Status {
    if (mkdir(dir.c_str(), 0700) != 0) return ErrnoStatus("mkdir " + dir);
    BlockStackParams params{dir, ctx.options.size_bytes, &teardown};
    VS_ASSIGN_OR_RETURN(bdev::BlockDevicePtr device, stack.build(params));
    run.setup_seconds = SecondsSince(t0);
    BlockWorkloadOptions w;
    w.threads = ctx.options.clients;
    w.seconds = ctx.options.seconds;
    w.seed = static_cast<uint64_t>(repeat);
    int phase_index = -1;
    std::string last_phase;
    w.on_progress = [&](const std::string& phase, double left) {
      if (phase != last_phase) {
        last_phase = phase;
        ++phase_index;
      }
      int after = std::max(0, kPhases - std::max(phase_index, 1));
      ctx.progress->Update(fmt::format(
          "volstack bench: {}: {}, {} left (about {} in all)", prefix, phase, FormatDuration(left),
          FormatDuration(std::max(0.0, left) + after * ctx.options.seconds + seconds_after)));
    };
    VS_ASSIGN_OR_RETURN(run.workloads, RunBlockWorkload(*device, w));
    return Status::Ok();
  }();
  Status torn = teardown.Run();
  Status removed = RemoveTree(dir);
  run.ok = status.ok();
  if (!status.ok()) run.error = status.ToString();
  for (const Status* s : {&torn, &removed}) {
    if (!s->ok()) run.error += (run.error.empty() ? "" : "; ") + s->ToString();
  }
  return run;
}

}  // namespace

void RunBlockStacks(BenchContext& ctx, BenchReport& report) {
  const BenchOptions& o = ctx.options;
  std::vector<BlockStack> all = AllBlockStacks();
  std::vector<const BlockStack*> chosen;
  for (const auto& name : o.stacks) {
    for (const auto& s : all) {
      if (s.name == name) chosen.push_back(&s);
    }
  }
  std::vector<bool> active;
  for (const BlockStack* b : chosen) {
    StackReport s;
    s.name = b->name;
    s.description = b->description;
    if (!b->available.ok()) {
      s.status = StackStatus::kUnavailable;
      s.reason = b->available.message();
    }
    active.push_back(b->available.ok());
    report.stacks.push_back(std::move(s));
  }
  int planned = 0;
  for (bool a : active) planned += a ? o.repeat : 0;
  int done = 0;
  double spent = 0;
  for (int repeat = 1; repeat <= o.repeat && !CancelRequested(); ++repeat) {
    for (size_t i = 0; i < chosen.size() && !CancelRequested(); ++i) {
      if (!active[i]) continue;
      StackReport& s = report.stacks[i];
      double per_run = done > 0 ? spent / done : kPhases * o.seconds + 5.0;
      std::string prefix =
          fmt::format("[{}/{}] {}, repeat {}/{}", done + 1, planned, s.name, repeat, o.repeat);
      const auto t = Clock::now();
      BlockRun run = RunOnce(ctx, *chosen[i], repeat, prefix, per_run * (planned - done - 1));
      spent += SecondsSince(t);
      ++done;
      if (!run.ok && !CancelRequested()) {
        ctx.progress->Clear();
        std::fprintf(stderr, "volstack bench: %s, repeat %d: %s\n", s.name.c_str(), repeat,
                     run.error.c_str());
      }
      s.block_runs.push_back(std::move(run));
    }
  }
  ctx.progress->Clear();
  for (auto& s : report.stacks) {
    if (s.status != StackStatus::kOk) continue;
    bool any_ok = false;
    for (const auto& run : s.block_runs) any_ok = any_ok || run.ok;
    if (!any_ok) {
      s.status = StackStatus::kFailed;
      s.reason = s.block_runs.empty() ? "not run: interrupted" : s.block_runs.front().error;
    }
  }
}

}  // namespace volstack::bench

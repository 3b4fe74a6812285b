// The dbench driver: builds each stack, runs dbench on XFS on it, tears it down; repeats
// interleaved (A B C A B C ...). See bench.h for the theory.
#include <fmt/format.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "bench/bench_internal.h"
#include "bench/cancel.h"
#include "bench/fio_workload.h"
#include "bench/stack_builder.h"
#include "bench/stack_steps.h"
#include "bench/subprocess.h"

namespace volstack::bench {

namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct UsageSample {
  uint64_t peak_rss_kib = 0;
  double cpu_seconds = 0;
  int processes = 0;
};

UsageSample SampleUsage(const std::vector<pid_t>& pids) {
  UsageSample s;
  for (pid_t pid : pids) {
    auto u = ReadProcessUsage(pid);
    if (!u.ok()) continue;
    ++s.processes;
    s.peak_rss_kib += u->peak_rss_kib;
    s.cpu_seconds += u->cpu_seconds;
  }
  return s;
}

// What the progress line says while a run is going on.
struct RunProgress {
  Progress* progress;
  std::string prefix;    // "[3/18] zvol, repeat 1/3"
  double seconds_after;  // estimate of everything after this run
};

Result<DbenchResult> RunDbench(const BenchContext& ctx, const std::string& dir,
                               const std::string& cwd, const RunProgress& rp, std::string* raw) {
  const BenchOptions& o = ctx.options;
  std::vector<std::string> argv = {
      "dbench", "-c", ctx.env.loadfile,         "-t", std::to_string(o.seconds),
      "-D",     dir,  std::to_string(o.clients)};
  CommandOptions options;
  options.cwd = cwd;
  // dbench stops itself after -t; the cleanup (deltree) after it is bounded by the data it
  // wrote. A stack that hangs is stopped rather than waited on forever.
  options.timeout_seconds = 4.0 * o.seconds + 600;
  const auto start = Clock::now();
  std::string phase = "starting";
  options.on_line = [&](std::string_view line) {
    if (auto p = ParseDbenchProgressLine(line)) phase = p->warmup ? "warmup" : "execute";
    if (line.find("cleanup") != std::string_view::npos) phase = "cleanup";
  };
  options.on_tick = [&] {
    double left = o.seconds - SecondsSince(start);
    std::string what = phase == "cleanup" || left <= 0
                           ? "dbench cleanup"
                           : fmt::format("dbench {}, {} left", phase, FormatDuration(left));
    rp.progress->Update(fmt::format("volstack bench: {}: {} (about {} in all)", rp.prefix, what,
                                    FormatDuration(std::max(0.0, left) + rp.seconds_after)));
  };
  auto result = RunCommand(argv, options);
  if (!result.ok()) return result.status();
  *raw = result->output;
  if (result->cancelled) return Status::FromErrno(ECANCELED, "dbench interrupted");
  if (!result->success()) {
    std::string how = result->timed_out ? "timed out" : fmt::format("exit {}", result->exit_code);
    return Status::IoError(fmt::format("dbench {}: {}", how, result->Tail(3)));
  }
  return ParseDbenchOutput(result->output);
}

DbenchRun RunOnce(BenchContext& ctx, const StackBuilder& builder, int repeat, const RunProgress& rp,
                  std::string* raw) {
  DbenchRun run;
  run.repeat = repeat;
  const auto t0 = Clock::now();
  std::string dir = fmt::format("{}/{}-{}", ctx.scratch, builder.name(), repeat);
  Teardown teardown;
  StackRun sr;
  sr.env = &ctx.env;
  sr.dir = dir;
  sr.state_dir = dir + "/state";
  sr.size_bytes = ctx.options.size_bytes;
  sr.teardown = &teardown;
  sr.verbose = ctx.options.verbose;
  rp.progress->Update(fmt::format("volstack bench: {}: building the stack", rp.prefix), true);
  Status status = [&]() -> Status {
    if (mkdir(dir.c_str(), 0700) != 0) return ErrnoStatus("mkdir " + dir);
    if (mkdir(sr.state_dir.c_str(), 0700) != 0) return ErrnoStatus("mkdir " + sr.state_dir);
    VS_ASSIGN_OR_RETURN(std::string device, builder.Setup(sr));
    run.device = device;
    run.sector_size = LogicalSectorSize(device);
    VS_RETURN_IF_ERROR(CheckCancelled());
    if (ctx.options.fio) {
      run.setup_seconds = SecondsSince(t0);
      FioOptions fio;
      fio.device = device;
      fio.seconds = ctx.options.seconds;
      fio.serving_pids = sr.serving_pids;
      fio.on_phase = [&](const std::string& phase, int phases_after) {
        rp.progress->Update(
            fmt::format(
                "volstack bench: {}: fio {} (about {} in all)", rp.prefix, phase,
                FormatDuration((phases_after + 1) * ctx.options.seconds + rp.seconds_after)),
            true);
      };
      const auto t1 = Clock::now();
      VS_ASSIGN_OR_RETURN(run.fio_workloads, RunFioPhases(fio));
      run.run_seconds = SecondsSince(t1);
      return Status::Ok();
    }
    rp.progress->Update(fmt::format("volstack bench: {}: mkfs.xfs {}", rp.prefix, device), true);
    VS_RETURN_IF_ERROR(MakeXfs(sr, device));
    VS_ASSIGN_OR_RETURN(std::string mnt, MountXfs(sr, device, "mnt"));
    VS_RETURN_IF_ERROR(CheckCancelled());
    run.setup_seconds = SecondsSince(t0);
    UsageSample before = SampleUsage(sr.serving_pids);
    const auto t1 = Clock::now();
    VS_ASSIGN_OR_RETURN(run.result, RunDbench(ctx, mnt, dir, rp, raw));
    run.run_seconds = SecondsSince(t1);
    UsageSample after = SampleUsage(sr.serving_pids);
    run.usage.processes = after.processes;
    run.usage.peak_rss_kib = after.peak_rss_kib;
    run.usage.cpu_seconds = std::max(0.0, after.cpu_seconds - before.cpu_seconds);
    return Status::Ok();
  }();
  if (run.setup_seconds == 0) run.setup_seconds = SecondsSince(t0);
  rp.progress->Update(fmt::format("volstack bench: {}: tearing down", rp.prefix), true);
  const auto t2 = Clock::now();
  Status torn = teardown.Run();
  Status removed = RemoveTree(dir);
  run.teardown_seconds = SecondsSince(t2);
  run.ok = status.ok();
  if (!status.ok()) run.error = status.ToString();
  for (const Status* s : {&torn, &removed}) {
    if (s->ok()) continue;
    rp.progress->Clear();
    std::fprintf(stderr, "volstack bench: warning: %s: %s\n", builder.name().c_str(),
                 s->ToString().c_str());
    run.error += (run.error.empty() ? "" : "; ") + s->ToString();
  }
  return run;
}

}  // namespace

void RunDbenchStacks(BenchContext& ctx, BenchReport& report) {
  const BenchOptions& o = ctx.options;
  std::vector<std::unique_ptr<StackBuilder>> all = AllStackBuilders();
  std::vector<const StackBuilder*> chosen;
  for (const auto& name : o.stacks) {
    for (const auto& b : all) {
      if (b->name() == name) chosen.push_back(b.get());
    }
  }
  std::vector<bool> active;
  for (const StackBuilder* b : chosen) {
    StackReport s;
    s.name = b->name();
    s.description = b->description();
    Status available = b->Available(ctx.env);
    if (!available.ok()) {
      s.status = StackStatus::kUnavailable;
      s.reason = available.message();
    }
    active.push_back(available.ok());
    report.stacks.push_back(std::move(s));
  }
  int planned = 0;
  for (bool a : active) planned += a ? o.repeat : 0;
  int done = 0;
  double spent = 0;  // seconds of finished runs, for the estimate
  const std::string raw_dir = ctx.output + "/dbench";
  mkdir(raw_dir.c_str(), 0755);
  for (int repeat = 1; repeat <= o.repeat && !CancelRequested(); ++repeat) {
    for (size_t i = 0; i < chosen.size() && !CancelRequested(); ++i) {
      if (!active[i]) continue;
      StackReport& s = report.stacks[i];
      double per_run = done > 0
                           ? spent / done
                           : static_cast<double>(o.fio ? FioPhases().size() : 1) * o.seconds + 20.0;
      RunProgress rp{
          ctx.progress,
          fmt::format("[{}/{}] {}, repeat {}/{}", done + 1, planned, s.name, repeat, o.repeat),
          per_run * (planned - done - 1) + (per_run - o.seconds)};
      const auto t = Clock::now();
      std::string raw;
      DbenchRun run = RunOnce(ctx, *chosen[i], repeat, rp, &raw);
      spent += SecondsSince(t);
      ++done;
      if (!raw.empty()) {
        std::ofstream(fmt::format("{}/{}-{}.txt", raw_dir, s.name, repeat)) << raw;
      }
      if (!run.ok && !CancelRequested()) {
        ctx.progress->Clear();
        std::fprintf(stderr, "volstack bench: %s, repeat %d: %s\n", s.name.c_str(), repeat,
                     run.error.c_str());
        // A stack that cannot even be built once is not tried again.
        if (repeat == 1 && run.device.empty()) {
          active[i] = false;
          planned -= o.repeat - 1;
        }
      }
      if (o.fio) {
        s.block_runs.push_back(BlockRun{run.repeat, run.ok, run.error, std::move(run.fio_workloads),
                                        run.setup_seconds});
      } else {
        s.runs.push_back(std::move(run));
      }
    }
  }
  ctx.progress->Clear();
  for (auto& s : report.stacks) {
    if (s.status != StackStatus::kOk) continue;
    std::vector<std::pair<bool, const std::string*>> outcomes;  // ok, error
    for (const auto& run : s.runs) outcomes.emplace_back(run.ok, &run.error);
    for (const auto& run : s.block_runs) outcomes.emplace_back(run.ok, &run.error);
    if (outcomes.empty()) {
      s.status = StackStatus::kFailed;
      s.reason = "not run: interrupted";
      continue;
    }
    bool any_ok = false;
    for (const auto& [ok, error] : outcomes) any_ok = any_ok || ok;
    if (!any_ok) {
      s.status = StackStatus::kFailed;
      s.reason = *outcomes.front().second;
    }
  }
}

}  // namespace volstack::bench

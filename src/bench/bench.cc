#include "bench/bench.h"

#include <fmt/format.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sstream>

#include "bench/bench_internal.h"
#include "bench/cancel.h"
#include "bench/fio_workload.h"
#include "bench/stack_builder.h"
#include "util/file_util.h"

namespace volstack::bench {

namespace {

constexpr uint64_t kMiB = 1 << 20;
// XFS refuses filesystems under 300 MB; dbench's clients need room on top.
constexpr uint64_t kMinDbenchSize = 512 * kMiB;
constexpr uint64_t kMinBlockSize = 16 * kMiB;

int RemoveEntry(const char* path, const struct stat*, int type, struct FTW*) {
  int rc = (type == FTW_DP) ? rmdir(path) : unlink(path);
  if (rc != 0 && errno != ENOENT && errno != EBUSY) {
    std::fprintf(stderr, "volstack bench: warning: cannot remove %s: %s\n", path,
                 std::strerror(errno));
  }
  return 0;  // keep going: remove what can be removed
}

void PrintStackTables(const BenchReport& report) {
  for (const auto& s : report.stacks) {
    int median = MedianRunIndex(s);
    if (median < 0) continue;
    const DbenchRun& run = s.runs[median];
    int ok = 0;
    for (const auto& r : s.runs) ok += r.ok ? 1 : 0;
    std::printf("%s: %s\n", s.name.c_str(), s.description.c_str());
    std::printf("(%s, %u-byte sectors; median of %d run%s: repeat %d)\n\n", run.device.c_str(),
                run.sector_size, ok, ok == 1 ? "" : "s", run.repeat);
    std::printf("%s\n", FormatDbenchTable(run.result).c_str());
  }
}

}  // namespace

Status RemoveTree(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? Status::Ok() : ErrnoStatus("stat " + path);
  }
  // FTW_MOUNT: stay on this filesystem, so a mount left behind is never emptied.
  nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  if (lstat(path.c_str(), &st) == 0) return Status::Busy(path + ": could not remove everything");
  return Status::Ok();
}

std::string UtcTimestamp(bool for_file_name) {
  std::time_t now = std::time(nullptr);
  std::tm tm;
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, for_file_name ? "%Y%m%d-%H%M%S" : "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void ApplyQuickDefaults(BenchOptions& o, const QuickOverrides& set) {
  if (!o.quick) return;
  if (!set.seconds) o.seconds = 5;
  if (!set.clients) o.clients = 4;
  if (!set.size) o.size_bytes = 1ull << 30;
  if (!set.repeat) o.repeat = 1;
}

void ApplySeedParams(BenchOptions& o, const QuickOverrides& set) {
  if (!set.seconds) o.seconds = 120;
  if (!set.clients) o.clients = 50;
  // 50 dbench clients hold about 2 GiB of files at their peak; XFS and the pool need room
  // beside it.
  if (!set.size) o.size_bytes = 8ull << 30;
}

Result<std::vector<std::string>> ParseStackList(const std::string& text) {
  std::vector<std::string> known = AllStackNames();
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string name; std::getline(in, name, ',');) {
    if (name.empty()) continue;
    if (name == "all") {
      for (const auto& k : known) {
        if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
      }
      continue;
    }
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return Status::InvalidArgument("unknown stack '" + name + "' (stacks: " + list + ")");
    }
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  if (out.empty()) return Status::InvalidArgument("--stacks: no stack named");
  return out;
}

Status ValidateOptions(const BenchOptions& o) {
  if (o.seconds < 1 || o.seconds > 24 * 3600) {
    return Status::InvalidArgument("--time must be 1 to 86400 seconds");
  }
  if (o.clients < 1 || o.clients > 1024)
    return Status::InvalidArgument("--clients must be 1 to 1024");
  if (o.repeat < 1 || o.repeat > 100) return Status::InvalidArgument("--repeat must be 1 to 100");
  if (o.block && o.fio) return Status::InvalidArgument("--block and --fio cannot be combined");
  uint64_t min = o.block || o.fio ? kMinBlockSize : kMinDbenchSize;
  if (o.size_bytes < min) {
    return Status::InvalidArgument(
        fmt::format("--size must be at least {} MiB{}", min / kMiB,
                    o.block || o.fio ? "" : " (XFS and dbench need room)"));
  }
  // About 21 MB per client at its peak (measured: 214 MB for 10 clients), with room to spare.
  const uint64_t need = 384 * kMiB + static_cast<uint64_t>(o.clients) * 48 * kMiB;
  if (!o.block && !o.fio && o.size_bytes < need) {
    return Status::InvalidArgument(
        fmt::format("--size must be at least {} MiB for {} clients", need / kMiB, o.clients));
  }
  struct stat st;
  if (stat(o.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument("--dir " + o.dir + ": not a directory");
  }
  for (const auto& s : o.stacks) {
    auto known = AllStackNames();
    if (std::find(known.begin(), known.end(), s) == known.end()) {
      return Status::InvalidArgument("unknown stack '" + s + "'");
    }
  }
  return Status::Ok();
}

int RunBench(BenchOptions options) {
  if (options.stacks.empty()) options.stacks = AllStackNames();
  options.size_bytes = options.size_bytes / kMiB * kMiB;
  if (Status s = ValidateOptions(options); !s.ok()) {
    std::fprintf(stderr, "volstack bench: %s\n", s.message().c_str());
    return 2;
  }
  ResetCancel();
  ScopedCancelOnSignal on_signal;
  Progress progress;
  BenchContext ctx;
  ctx.options = options;
  ctx.progress = &progress;
  progress.Update("volstack bench: probing the environment", true);
  ctx.env = Environment::Probe(options.volstack);

  BenchReport report;
  report.volstack_version = options.version;
  report.started_at = UtcTimestamp();
  report.machine = DescribeMachine();
  BenchConfig& c = report.config;
  c.mode = options.block ? "block" : options.fio ? "fio" : "dbench";
  if (options.fio) {
    if (Status usable = ctx.env.FioUsable(); !usable.ok()) {
      progress.Clear();
      std::fprintf(stderr, "volstack bench: --fio: %s\n", usable.message().c_str());
      return 2;
    }
  } else if (!options.block) {
    if (Status usable = ctx.env.DbenchUsable(); !usable.ok()) {
      progress.Clear();
      std::fprintf(stderr,
                   "volstack bench: %s; running the in-process block workload (--block) "
                   "instead\n",
                   usable.message().c_str());
      c.mode = "block";
      c.fallback_reason = usable.message();
    }
  }
  if (c.phased()) {
    // --time is per stack: the block workload and fio split it over their timed phases.
    const int phases = c.mode == "fio" ? static_cast<int>(FioPhases().size()) : 4;
    ctx.options.seconds = std::max(1, options.seconds / phases);
  }
  c.seconds = ctx.options.seconds;
  c.clients = options.clients;
  c.repeat = options.repeat;
  c.size_bytes = options.size_bytes;
  c.quick = options.quick;
  c.stacks = options.stacks;
  c.loadfile = ctx.env.loadfile;
  c.dbench_version = ctx.env.dbench_version;

  std::string templ = options.dir + "/volstack-bench.XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    progress.Clear();
    std::fprintf(stderr, "volstack bench: cannot create a scratch directory in %s: %s\n",
                 options.dir.c_str(), std::strerror(errno));
    return 1;
  }
  ctx.scratch = templ;
  c.scratch_dir = ctx.scratch;
  ctx.output = options.output.empty()
                   ? options.dir + "/volstack-bench-results/" + UtcTimestamp(true)
                   : options.output;
  if (Status s = MakeDirectories(ctx.output, 0755); !s.ok()) {
    progress.Clear();
    std::fprintf(stderr, "volstack bench: --output: %s\n", s.ToString().c_str());
    RemoveTree(ctx.scratch).IgnoreError();
    return 1;
  }

  if (c.mode == "block") {
    RunBlockStacks(ctx, report);
  } else {
    RunDbenchStacks(ctx, report);
  }
  progress.Clear();
  if (Status s = RemoveTree(ctx.scratch); !s.ok()) {
    std::fprintf(stderr, "volstack bench: warning: %s\n", s.ToString().c_str());
  }
  report.finished_at = UtcTimestamp();
  report.interrupted = CancelRequested();

  if (c.mode == "dbench") PrintStackTables(report);
  std::printf("%s\n", FormatComparisonTable(report).c_str());
  Status written = WriteReportFiles(report, ctx.output);
  if (!written.ok()) {
    std::fprintf(stderr, "volstack bench: %s\n", written.ToString().c_str());
    return 1;
  }
  std::printf("Results: %s/report.md, report.json, report.svg\n", ctx.output.c_str());
  std::fflush(stdout);
  if (report.interrupted) {
    std::fprintf(stderr, "volstack bench: interrupted; the stacks were torn down\n");
    return 130;
  }
  for (const auto& s : report.stacks) {
    if (s.status == StackStatus::kFailed) return 1;
  }
  return 0;
}

}  // namespace volstack::bench

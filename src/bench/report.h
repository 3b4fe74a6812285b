// The bench's results: what ran, how each run went, and the comparison the bench exists to
// print. One BenchReport per `volstack bench`; it is written as JSON (the record), Markdown
// (for people and commit messages) and an SVG chart, and its comparison table is printed.
//
// Ratios are of medians: each stack's median over its repeats, divided by `zvol`'s or
// `file`'s median of the same metric. A throughput ratio below 1 and a latency ratio above 1
// both mean "worse than the reference".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/dbench_output.h"
#include "bench/stats.h"

namespace volstack::bench {

enum class StackStatus { kOk, kUnavailable, kFailed };
const char* StackStatusName(StackStatus s);  // "ok", "unavailable", "failed"

// The volstack processes serving a stack during one run (FUSE servers): their summed peak
// RSS (VmHWM) and the CPU time (utime + stime) they used while the workload ran.
struct VolstackUsage {
  int processes = 0;
  uint64_t peak_rss_kib = 0;
  double cpu_seconds = 0;
};

// One timed phase of the in-process block workload, or of fio in fio mode.
struct BlockWorkloadResult {
  std::string name;  // "randread-4k", "randwrite-4k", "seqread-1m", "seqwrite-1m"
  uint64_t ops = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  double iops = 0;
  double mb_s = 0;  // 10^6 bytes per second, as dbench counts
  double p50_us = 0;
  double p99_us = 0;
  double p999_us = 0;
  double max_us = 0;
  // fio mode: CPU seconds the stack's volstack processes spent during the phase.
  std::optional<double> volstack_cpu_seconds;
};

struct DbenchRun {
  int repeat = 0;  // 1-based
  bool ok = false;
  std::string error;  // when !ok
  DbenchResult result;
  VolstackUsage usage;
  std::string device;        // what mkfs.xfs ran on, e.g. "/dev/loop3"
  uint32_t sector_size = 0;  // its logical sector size
  double setup_seconds = 0;
  double run_seconds = 0;
  double teardown_seconds = 0;
  std::vector<BlockWorkloadResult> fio_workloads;  // fio mode, instead of `result`
};

struct BlockRun {
  int repeat = 0;
  bool ok = false;
  std::string error;
  std::vector<BlockWorkloadResult> workloads;
  double setup_seconds = 0;
};

struct StackReport {
  std::string name;
  std::string description;
  StackStatus status = StackStatus::kOk;
  std::string reason;  // why unavailable or failed
  std::vector<DbenchRun> runs;
  std::vector<BlockRun> block_runs;
};

struct BenchConfig {
  std::string mode = "dbench";  // "block" or "fio": the block workload's phases, tables
  bool phased() const { return mode != "dbench"; }
  int seconds = 20;
  int clients = 10;
  int repeat = 3;
  uint64_t size_bytes = 2ull << 30;
  bool quick = false;
  std::vector<std::string> stacks;
  std::string scratch_dir;
  std::string loadfile;
  std::string dbench_version;
  std::string fallback_reason;  // why --block ran instead of dbench
};

struct MachineInfo {
  std::string hostname;
  std::string kernel;
  std::string cpu_model;
  int cpus = 0;
  uint64_t memory_bytes = 0;
};
MachineInfo DescribeMachine();

struct BenchReport {
  std::string volstack_version;
  BenchConfig config;
  MachineInfo machine;
  std::string started_at;  // ISO 8601 UTC
  std::string finished_at;
  bool interrupted = false;
  std::vector<StackReport> stacks;

  const StackReport* Find(const std::string& name) const;
};

// One row of the dbench comparison.
struct DbenchComparison {
  std::string stack;
  StackStatus status = StackStatus::kOk;
  std::string reason;
  int runs_ok = 0;
  std::optional<Summary> throughput;  // MB/s
  std::optional<Summary> flush_avg;   // ms
  std::optional<Summary> flush_max;   // ms
  std::optional<Summary> peak_rss_mib;
  std::optional<Summary> cpu_seconds;
  std::optional<double> throughput_vs_zvol, throughput_vs_file;
  std::optional<double> flush_avg_vs_zvol, flush_avg_vs_file;
  std::optional<double> flush_max_vs_zvol, flush_max_vs_file;
};
std::vector<DbenchComparison> CompareDbench(const BenchReport& report);

// One row of the block comparison: a stack's medians for one workload.
struct BlockComparison {
  std::string stack;
  std::string workload;
  std::optional<Summary> iops;
  std::optional<Summary> mb_s;
  std::optional<Summary> p50_us;
  std::optional<Summary> p99_us;
  std::optional<double> mb_s_vs_zvol, mb_s_vs_file;
  std::optional<Summary> cpu_s_per_gib;  // fio mode: volstack's CPU seconds per GiB moved
};
std::vector<BlockComparison> CompareBlock(const BenchReport& report);

// The index of the run whose throughput is the median one (the run whose table the bench
// prints), or -1 when no run succeeded.
int MedianRunIndex(const StackReport& stack);

// Text for the terminal: the comparison table (dbench or block, per the config's mode).
std::string FormatComparisonTable(const BenchReport& report);

// The three files. Each is a pure function of the report.
std::string ReportToJson(const BenchReport& report);
std::string ReportToMarkdown(const BenchReport& report);
std::string ReportToSvg(const BenchReport& report);

// Writes report.json, report.md and report.svg into `dir` (created if missing).
Status WriteReportFiles(const BenchReport& report, const std::string& dir);

// What a block or fio mode bench ran, in a phrase: "fio (libaio, O_DIRECT, queue depth 32 for
// 4 KiB, 8 for 1 MiB) on each stack's loop device, 5 s per phase".
std::string PhasedWorkloadDescription(const BenchConfig& config);

// "1.00" style ratio text, "-" when absent.
std::string FormatRatio(std::optional<double> ratio);

}  // namespace volstack::bench

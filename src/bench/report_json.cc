// report.json: the full record of a bench (every run, every operation) plus the comparison,
// so later tools can recompute anything. Units are in the key names (_mb_s is 10^6 bytes per
// second as dbench counts; _ms, _us, _kib, _bytes). Absent values are null.
#include <nlohmann/json.hpp>

#include "bench/report.h"

namespace volstack::bench {

namespace {

using nlohmann::json;

json Opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json SummaryJson(const std::optional<Summary>& s) {
  if (!s) return nullptr;
  return json{{"median", s->median}, {"min", s->min}, {"max", s->max}, {"n", s->n}};
}

json UsageJson(const VolstackUsage& u) {
  return json{
      {"processes", u.processes}, {"peak_rss_kib", u.peak_rss_kib}, {"cpu_seconds", u.cpu_seconds}};
}

json DbenchRunJson(const DbenchRun& run) {
  json ops = json::array();
  for (const auto& op : run.result.ops) {
    ops.push_back(
        {{"name", op.name}, {"count", op.count}, {"avg_ms", op.avg_ms}, {"max_ms", op.max_ms}});
  }
  json j{{"repeat", run.repeat},
         {"ok", run.ok},
         {"device", run.device},
         {"sector_size", run.sector_size},
         {"setup_seconds", run.setup_seconds},
         {"run_seconds", run.run_seconds},
         {"teardown_seconds", run.teardown_seconds},
         {"volstack", UsageJson(run.usage)}};
  if (!run.ok) j["error"] = run.error;
  if (run.ok) {
    j["throughput_mb_s"] = run.result.throughput_mb_s;
    j["clients"] = run.result.clients;
    j["procs"] = run.result.procs;
    j["max_latency_ms"] = run.result.max_latency_ms;
    j["operations"] = ops;
  }
  return j;
}

json BlockRunJson(const BlockRun& run) {
  json workloads = json::array();
  for (const auto& w : run.workloads) {
    workloads.push_back({{"name", w.name},
                         {"ops", w.ops},
                         {"bytes", w.bytes},
                         {"seconds", w.seconds},
                         {"iops", w.iops},
                         {"mb_s", w.mb_s},
                         {"p50_us", w.p50_us},
                         {"p99_us", w.p99_us},
                         {"p999_us", w.p999_us},
                         {"max_us", w.max_us}});
  }
  json j{{"repeat", run.repeat},
         {"ok", run.ok},
         {"setup_seconds", run.setup_seconds},
         {"workloads", workloads}};
  if (!run.ok) j["error"] = run.error;
  return j;
}

}  // namespace

std::string ReportToJson(const BenchReport& r) {
  const BenchConfig& c = r.config;
  json j;
  j["tool"] = "volstack bench";
  j["volstack_version"] = r.volstack_version;
  j["started_at"] = r.started_at;
  j["finished_at"] = r.finished_at;
  j["interrupted"] = r.interrupted;
  j["config"] = {{"mode", c.mode},
                 {"seconds", c.seconds},
                 {"clients", c.clients},
                 {"repeat", c.repeat},
                 {"size_bytes", c.size_bytes},
                 {"quick", c.quick},
                 {"stacks", c.stacks},
                 {"scratch_dir", c.scratch_dir},
                 {"loadfile", c.loadfile},
                 {"dbench_version", c.dbench_version},
                 {"fallback_reason", c.fallback_reason}};
  j["machine"] = {{"hostname", r.machine.hostname},
                  {"kernel", r.machine.kernel},
                  {"cpu_model", r.machine.cpu_model},
                  {"cpus", r.machine.cpus},
                  {"memory_bytes", r.machine.memory_bytes}};
  json stacks = json::array();
  for (const auto& s : r.stacks) {
    json js{{"name", s.name},
            {"description", s.description},
            {"status", StackStatusName(s.status)},
            {"reason", s.reason}};
    json runs = json::array();
    for (const auto& run : s.runs) runs.push_back(DbenchRunJson(run));
    for (const auto& run : s.block_runs) runs.push_back(BlockRunJson(run));
    js["runs"] = runs;
    stacks.push_back(js);
  }
  j["stacks"] = stacks;
  json comparison = json::array();
  if (c.phased()) {
    for (const auto& row : CompareBlock(r)) {
      comparison.push_back({{"stack", row.stack},
                            {"workload", row.workload},
                            {"iops", SummaryJson(row.iops)},
                            {"mb_s", SummaryJson(row.mb_s)},
                            {"p50_us", SummaryJson(row.p50_us)},
                            {"p99_us", SummaryJson(row.p99_us)},
                            {"mb_s_vs_zvol", Opt(row.mb_s_vs_zvol)},
                            {"mb_s_vs_file", Opt(row.mb_s_vs_file)},
                            {"volstack_cpu_s_per_gib", SummaryJson(row.cpu_s_per_gib)}});
    }
  } else {
    for (const auto& row : CompareDbench(r)) {
      comparison.push_back({{"stack", row.stack},
                            {"status", StackStatusName(row.status)},
                            {"reason", row.reason},
                            {"runs_ok", row.runs_ok},
                            {"throughput_mb_s", SummaryJson(row.throughput)},
                            {"flush_avg_ms", SummaryJson(row.flush_avg)},
                            {"flush_max_ms", SummaryJson(row.flush_max)},
                            {"volstack_peak_rss_mib", SummaryJson(row.peak_rss_mib)},
                            {"volstack_cpu_seconds", SummaryJson(row.cpu_seconds)},
                            {"throughput_vs_zvol", Opt(row.throughput_vs_zvol)},
                            {"throughput_vs_file", Opt(row.throughput_vs_file)},
                            {"flush_avg_vs_zvol", Opt(row.flush_avg_vs_zvol)},
                            {"flush_avg_vs_file", Opt(row.flush_avg_vs_file)},
                            {"flush_max_vs_zvol", Opt(row.flush_max_vs_zvol)},
                            {"flush_max_vs_file", Opt(row.flush_max_vs_file)}});
    }
  }
  j["comparison"] = comparison;
  return j.dump(2) + "\n";
}

}  // namespace volstack::bench

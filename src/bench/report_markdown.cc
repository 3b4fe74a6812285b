// report.md: the comparison as a Markdown table, then per stack the seed's dbench table of
// its median run and every run's throughput, so the file can go into an issue as it is.
#include <fmt/format.h>

#include "bench/report.h"

namespace volstack::bench {

namespace {

std::string Num(const std::optional<Summary>& s, const char* f) {
  return s ? fmt::format(fmt::runtime(f), s->median) : std::string("-");
}

std::string Range(const std::optional<Summary>& s, const char* f) {
  if (!s) return "-";
  return fmt::format(fmt::runtime(f), s->min) + "–" + fmt::format(fmt::runtime(f), s->max);
}

void Header(const BenchReport& r, std::string& out) {
  const BenchConfig& c = r.config;
  out += "# volstack bench\n\n";
  out += fmt::format("- When: {} to {}{}\n", r.started_at, r.finished_at,
                     r.interrupted ? " (interrupted)" : "");
  out +=
      fmt::format("- Machine: {}, {} CPUs ({}), {:.1f} GiB RAM\n", r.machine.kernel, r.machine.cpus,
                  r.machine.cpu_model, static_cast<double>(r.machine.memory_bytes) / (1ull << 30));
  if (c.phased()) {
    out += fmt::format("- Workload: {}, {} repeat(s), {} MiB devices\n",
                       PhasedWorkloadDescription(c), c.repeat, c.size_bytes >> 20);
    if (!c.fallback_reason.empty()) {
      out += fmt::format("- dbench could not run: {}\n", c.fallback_reason);
    }
  } else {
    out += fmt::format(
        "- Workload: `dbench -t {} {}` ({}, loadfile {}) on XFS, {} repeat(s) interleaved, "
        "{} MiB stores\n",
        c.seconds, c.clients, c.dbench_version, c.loadfile, c.repeat, c.size_bytes >> 20);
  }
  out += fmt::format("- volstack {}{}\n\n", r.volstack_version, c.quick ? " (--quick)" : "");
  out += "Stacks:\n\n";
  for (const auto& s : r.stacks) {
    out += fmt::format("- `{}`: {}{}\n", s.name, s.description,
                       s.status == StackStatus::kOk
                           ? ""
                           : fmt::format(" — **{}**: {}", StackStatusName(s.status), s.reason));
  }
  out += "\n";
}

void DbenchBody(const BenchReport& r, std::string& out) {
  out += "## Comparison\n\n";
  out +=
      "Medians over repeats; ratios of medians. Throughput in MB/s (10^6 bytes), latency in "
      "ms. volstack RSS and CPU are those of the volstack processes serving the stack "
      "(peak RSS, CPU time during dbench).\n\n";
  out +=
      "| Stack | MB/s | min–max | vs zvol | vs file | Flush avg | vs zvol | vs file | "
      "Flush max | vs zvol | vs file | RSS MiB | CPU s |\n";
  out += "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
  for (const auto& c : CompareDbench(r)) {
    if (c.runs_ok == 0) {
      out += fmt::format("| {} | {}: {} |||||||||||\n", c.stack,
                         c.status == StackStatus::kOk ? "failed" : StackStatusName(c.status),
                         c.reason.empty() ? "no run succeeded" : c.reason);
      continue;
    }
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                       c.stack, Num(c.throughput, "{:.2f}"), Range(c.throughput, "{:.1f}"),
                       FormatRatio(c.throughput_vs_zvol), FormatRatio(c.throughput_vs_file),
                       Num(c.flush_avg, "{:.3f}"), FormatRatio(c.flush_avg_vs_zvol),
                       FormatRatio(c.flush_avg_vs_file), Num(c.flush_max, "{:.3f}"),
                       FormatRatio(c.flush_max_vs_zvol), FormatRatio(c.flush_max_vs_file),
                       Num(c.peak_rss_mib, "{:.1f}"), Num(c.cpu_seconds, "{:.2f}"));
  }
  out += "\n";
  for (const auto& s : r.stacks) {
    out += fmt::format("## {}\n\n{}\n\n", s.name, s.description);
    if (s.status != StackStatus::kOk && s.runs.empty()) {
      out += fmt::format("{}: {}\n\n", StackStatusName(s.status), s.reason);
      continue;
    }
    int median = MedianRunIndex(s);
    if (median >= 0) {
      const DbenchRun& run = s.runs[median];
      out += fmt::format("Median run (repeat {}), on {} ({}-byte sectors):\n\n```\n{}```\n\n",
                         run.repeat, run.device, run.sector_size, FormatDbenchTable(run.result));
    }
    out +=
        "| Repeat | MB/s | Flush avg ms | Flush max ms | volstack RSS MiB | volstack CPU s | "
        "Setup s | Note |\n|--:|--:|--:|--:|--:|--:|--:|---|\n";
    for (const auto& run : s.runs) {
      if (!run.ok) {
        out += fmt::format("| {} | - | - | - | - | - | {:.1f} | failed: {} |\n", run.repeat,
                           run.setup_seconds, run.error);
        continue;
      }
      const OpStat* f = run.result.Find("Flush");
      out += fmt::format(
          "| {} | {:.2f} | {} | {} | {} | {} | {:.1f} | |\n", run.repeat,
          run.result.throughput_mb_s, f ? fmt::format("{:.3f}", f->avg_ms) : "-",
          f ? fmt::format("{:.3f}", f->max_ms) : "-",
          run.usage.processes ? fmt::format("{:.1f}", run.usage.peak_rss_kib / 1024.0) : "-",
          run.usage.processes ? fmt::format("{:.2f}", run.usage.cpu_seconds) : "-",
          run.setup_seconds);
    }
    out += "\n";
  }
}

void BlockBody(const BenchReport& r, std::string& out) {
  out +=
      "## Comparison\n\nMedians over repeats; MB/s is 10^6 bytes per second; latencies in "
      "microseconds.\n\n";
  out += "| Stack | Workload | IOPS | MB/s | vs zvol | vs file | p50 us | p99 us | CPU s/GiB |\n";
  out += "|---|---|--:|--:|--:|--:|--:|--:|--:|\n";
  for (const auto& c : CompareBlock(r)) {
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", c.stack, c.workload,
                       Num(c.iops, "{:.0f}"), Num(c.mb_s, "{:.1f}"), FormatRatio(c.mb_s_vs_zvol),
                       FormatRatio(c.mb_s_vs_file), Num(c.p50_us, "{:.1f}"),
                       Num(c.p99_us, "{:.1f}"), Num(c.cpu_s_per_gib, "{:.2f}"));
  }
  out += "\n";
  for (const auto& s : r.stacks) {
    out += fmt::format("## {}\n\n{}\n\n", s.name, s.description);
    if (s.status != StackStatus::kOk && s.block_runs.empty()) {
      out += fmt::format("{}: {}\n\n", StackStatusName(s.status), s.reason);
      continue;
    }
    out +=
        "| Repeat | Workload | IOPS | MB/s | p50 us | p99 us | p99.9 us | max us |\n"
        "|--:|---|--:|--:|--:|--:|--:|--:|\n";
    for (const auto& run : s.block_runs) {
      if (!run.ok) {
        out += fmt::format("| {} | failed: {} |||||||\n", run.repeat, run.error);
        continue;
      }
      for (const auto& w : run.workloads) {
        out += fmt::format("| {} | {} | {:.0f} | {:.1f} | {:.1f} | {:.1f} | {:.1f} | {:.1f} |\n",
                           run.repeat, w.name, w.iops, w.mb_s, w.p50_us, w.p99_us, w.p999_us,
                           w.max_us);
      }
    }
    out += "\n";
  }
}

}  // namespace

std::string ReportToMarkdown(const BenchReport& r) {
  std::string out;
  Header(r, out);
  if (r.config.phased()) {
    BlockBody(r, out);
  } else {
    DbenchBody(r, out);
  }
  return out;
}

}  // namespace volstack::bench

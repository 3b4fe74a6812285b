// report.svg: the comparison as a picture. dbench mode: throughput per stack (median bar,
// min–max whisker over repeats) and Flush latency per stack (average and max, medians with
// whiskers). Block mode: MB/s per stack for each workload.
#include <fmt/format.h>

#include <algorithm>

#include "bench/report.h"
#include "bench/svg_chart.h"

namespace volstack::bench {

namespace {

std::optional<BarValue> Bar(const std::optional<Summary>& s) {
  if (!s) return std::nullopt;
  BarValue v{s->median, std::nullopt, std::nullopt};
  if (s->n > 1) {
    v.low = s->min;
    v.high = s->max;
  }
  return v;
}

std::string Note(const DbenchComparison& c) {
  if (c.status != StackStatus::kOk) return std::string(StackStatusName(c.status)) + ": " + c.reason;
  return "failed: no run succeeded";
}

}  // namespace

std::string ReportToSvg(const BenchReport& r) {
  const BenchConfig& c = r.config;
  std::vector<BarPanel> panels;
  std::string subtitle;
  if (c.phased()) {
    subtitle = fmt::format("{}, median of {}", PhasedWorkloadDescription(c), c.repeat);
    BarPanel p{"Throughput (MB/s, 10^6 bytes)", "MB/s", {}, {}};
    std::vector<BlockComparison> rows = CompareBlock(r);
    for (const auto& row : rows) {
      if (std::find(p.series.begin(), p.series.end(), row.workload) == p.series.end()) {
        p.series.push_back(row.workload);
      }
    }
    for (const auto& s : r.stacks) {
      BarRow br{s.name, std::string(StackStatusName(s.status)) + ": " + s.reason, {}};
      for (const auto& w : p.series) {
        std::optional<BarValue> v;
        for (const auto& row : rows) {
          if (row.stack == s.name && row.workload == w) v = Bar(row.mb_s);
        }
        br.values.push_back(v);
      }
      p.rows.push_back(br);
    }
    panels.push_back(p);
  } else {
    subtitle = fmt::format(
        "dbench {} clients, {} s, XFS on each stack; median of {} repeat(s), whiskers min–max",
        c.clients, c.seconds, c.repeat);
    BarPanel tp{"Throughput (MB/s, higher is better)", "MB/s", {"throughput"}, {}};
    BarPanel fl{"Flush latency (ms, lower is better)", "ms", {"Flush avg", "Flush max"}, {}};
    for (const auto& row : CompareDbench(r)) {
      std::string label = row.stack;
      if (row.throughput_vs_zvol && row.stack != "zvol") {
        label += fmt::format(" ({:.2f}x zvol)", *row.throughput_vs_zvol);
      }
      tp.rows.push_back(BarRow{label, Note(row), {Bar(row.throughput)}});
      fl.rows.push_back(BarRow{row.stack, Note(row), {Bar(row.flush_avg), Bar(row.flush_max)}});
    }
    panels.push_back(tp);
    panels.push_back(fl);
  }
  return RenderBarChart("volstack bench: " + r.started_at, subtitle, panels);
}

}  // namespace volstack::bench

#include "bench/report.h"

#include <fmt/format.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "util/file_util.h"

namespace volstack::bench {

namespace {

std::optional<double> Median(const std::optional<Summary>& s) {
  if (!s) return std::nullopt;
  return s->median;
}

const StackReport* FindOk(const BenchReport& r, const std::string& name) {
  const StackReport* s = r.Find(name);
  return s != nullptr && s->status == StackStatus::kOk ? s : nullptr;
}

std::string ReadFirstMatch(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) == 0) {
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string v = line.substr(colon + 1);
      size_t b = v.find_first_not_of(" \t");
      return b == std::string::npos ? "" : v.substr(b);
    }
  }
  return "";
}

}  // namespace

const char* StackStatusName(StackStatus s) {
  switch (s) {
    case StackStatus::kOk:
      return "ok";
    case StackStatus::kUnavailable:
      return "unavailable";
    case StackStatus::kFailed:
      return "failed";
  }
  return "?";
}

MachineInfo DescribeMachine() {
  MachineInfo m;
  struct utsname u;
  if (uname(&u) == 0) {
    m.hostname = u.nodename;
    m.kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;
  }
  m.cpu_model = ReadFirstMatch("/proc/cpuinfo", "model name");
  m.cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  std::string mem = ReadFirstMatch("/proc/meminfo", "MemTotal");
  m.memory_bytes = std::strtoull(mem.c_str(), nullptr, 10) * 1024;
  return m;
}

const StackReport* BenchReport::Find(const std::string& name) const {
  for (const auto& s : stacks) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

std::string FormatRatio(std::optional<double> ratio) {
  return ratio ? fmt::format("{:.2f}", *ratio) : "-";
}

std::vector<DbenchComparison> CompareDbench(const BenchReport& report) {
  std::vector<DbenchComparison> rows;
  for (const auto& s : report.stacks) {
    DbenchComparison& c = rows.emplace_back();
    c.stack = s.name;
    c.status = s.status;
    c.reason = s.reason;
    std::vector<double> tp, favg, fmax, rss, cpu;
    for (const auto& run : s.runs) {
      if (!run.ok) continue;
      ++c.runs_ok;
      tp.push_back(run.result.throughput_mb_s);
      if (const OpStat* f = run.result.Find("Flush")) {
        favg.push_back(f->avg_ms);
        fmax.push_back(f->max_ms);
      }
      if (run.usage.processes > 0) {
        rss.push_back(static_cast<double>(run.usage.peak_rss_kib) / 1024.0);
        cpu.push_back(run.usage.cpu_seconds);
      }
    }
    c.throughput = Summarize(tp);
    c.flush_avg = Summarize(favg);
    c.flush_max = Summarize(fmax);
    c.peak_rss_mib = Summarize(rss);
    c.cpu_seconds = Summarize(cpu);
  }
  auto find = [&](const std::string& name) -> const DbenchComparison* {
    for (const auto& r : rows) {
      if (r.stack == name && r.runs_ok > 0) return &r;
    }
    return nullptr;
  };
  const DbenchComparison* zvol = find("zvol");
  const DbenchComparison* file = find("file");
  for (auto& r : rows) {
    if (zvol != nullptr) {
      r.throughput_vs_zvol = Ratio(Median(r.throughput), Median(zvol->throughput));
      r.flush_avg_vs_zvol = Ratio(Median(r.flush_avg), Median(zvol->flush_avg));
      r.flush_max_vs_zvol = Ratio(Median(r.flush_max), Median(zvol->flush_max));
    }
    if (file != nullptr) {
      r.throughput_vs_file = Ratio(Median(r.throughput), Median(file->throughput));
      r.flush_avg_vs_file = Ratio(Median(r.flush_avg), Median(file->flush_avg));
      r.flush_max_vs_file = Ratio(Median(r.flush_max), Median(file->flush_max));
    }
  }
  return rows;
}

std::vector<BlockComparison> CompareBlock(const BenchReport& report) {
  std::vector<BlockComparison> rows;
  std::vector<std::string> workloads;
  for (const auto& s : report.stacks) {
    for (const auto& run : s.block_runs) {
      for (const auto& w : run.workloads) {
        if (std::find(workloads.begin(), workloads.end(), w.name) == workloads.end()) {
          workloads.push_back(w.name);
        }
      }
    }
  }
  auto summarize = [](const StackReport& s, const std::string& workload) {
    BlockComparison c;
    c.stack = s.name;
    c.workload = workload;
    std::vector<double> iops, mbs, p50, p99, cpu;
    for (const auto& run : s.block_runs) {
      if (!run.ok) continue;
      for (const auto& w : run.workloads) {
        if (w.name != workload) continue;
        iops.push_back(w.iops);
        mbs.push_back(w.mb_s);
        p50.push_back(w.p50_us);
        p99.push_back(w.p99_us);
        if (w.volstack_cpu_seconds && w.bytes > 0) {
          cpu.push_back(*w.volstack_cpu_seconds / (static_cast<double>(w.bytes) / (1ull << 30)));
        }
      }
    }
    c.iops = Summarize(iops);
    c.mb_s = Summarize(mbs);
    c.p50_us = Summarize(p50);
    c.p99_us = Summarize(p99);
    c.cpu_s_per_gib = Summarize(cpu);
    return c;
  };
  for (const auto& workload : workloads) {
    std::optional<double> zvol, file;
    if (const StackReport* z = FindOk(report, "zvol")) zvol = Median(summarize(*z, workload).mb_s);
    if (const StackReport* f = FindOk(report, "file")) file = Median(summarize(*f, workload).mb_s);
    for (const auto& s : report.stacks) {
      if (s.status != StackStatus::kOk) continue;
      BlockComparison c = summarize(s, workload);
      c.mb_s_vs_zvol = Ratio(Median(c.mb_s), zvol);
      c.mb_s_vs_file = Ratio(Median(c.mb_s), file);
      rows.push_back(std::move(c));
    }
  }
  return rows;
}

int MedianRunIndex(const StackReport& stack) {
  std::vector<std::pair<double, int>> ok;
  for (size_t i = 0; i < stack.runs.size(); ++i) {
    if (stack.runs[i].ok) {
      ok.emplace_back(stack.runs[i].result.throughput_mb_s, static_cast<int>(i));
    }
  }
  if (ok.empty()) return -1;
  std::sort(ok.begin(), ok.end());
  return ok[(ok.size() - 1) / 2].second;  // the lower middle of an even count
}

std::string FormatComparisonTable(const BenchReport& report) {
  std::string out;
  auto num = [](const std::optional<Summary>& s, const char* f) {
    return s ? fmt::format(fmt::runtime(f), s->median) : std::string("-");
  };
  if (report.config.phased()) {
    out += fmt::format("{}, median of {} (MB = 10^6 bytes)\n",
                       PhasedWorkloadDescription(report.config), report.config.repeat);
    out += fmt::format(" {:<22} {:<26} {:>10} {:>10} {:>8} {:>8} {:>10} {:>10} {:>9}\n", "Stack",
                       "Workload", "IOPS", "MB/sec", "vs zvol", "vs file", "p50 us", "p99 us",
                       "CPU s/GiB");
    for (const auto& r : CompareBlock(report)) {
      out += fmt::format(" {:<22} {:<26} {:>10} {:>10} {:>8} {:>8} {:>10} {:>10} {:>9}\n", r.stack,
                         r.workload, num(r.iops, "{:.0f}"), num(r.mb_s, "{:.1f}"),
                         FormatRatio(r.mb_s_vs_zvol), FormatRatio(r.mb_s_vs_file),
                         num(r.p50_us, "{:.1f}"), num(r.p99_us, "{:.1f}"),
                         num(r.cpu_s_per_gib, "{:.2f}"));
    }
  } else {
    out += fmt::format(
        "dbench {} clients, {} s, median of {} repeat(s); ratios of medians (throughput: higher "
        "is better; flush latency: lower is better)\n",
        report.config.clients, report.config.seconds, report.config.repeat);
    out += fmt::format(
        " {:<20} {:>8} {:>15} {:>7} {:>7} {:>9} {:>7} {:>7} {:>9} {:>7} {:>7} {:>7} {:>6}\n",
        "Stack", "MB/sec", "min-max", "vs zvol", "vs file", "Flush avg", "vs zvol", "vs file",
        "Flush max", "vs zvol", "vs file", "RSS MiB", "CPU s");
    for (const auto& r : CompareDbench(report)) {
      if (r.runs_ok == 0) {
        std::string why = r.status == StackStatus::kOk
                              ? "failed: no run succeeded"
                              : std::string(StackStatusName(r.status)) + ": " + r.reason;
        out += fmt::format(" {:<20} {}\n", r.stack, why);
        continue;
      }
      std::string range = fmt::format("{:.1f}-{:.1f}", r.throughput->min, r.throughput->max);
      out += fmt::format(
          " {:<20} {:>8} {:>15} {:>7} {:>7} {:>9} {:>7} {:>7} {:>9} {:>7} {:>7} {:>7} {:>6}\n",
          r.stack, num(r.throughput, "{:.2f}"), range, FormatRatio(r.throughput_vs_zvol),
          FormatRatio(r.throughput_vs_file), num(r.flush_avg, "{:.3f}"),
          FormatRatio(r.flush_avg_vs_zvol), FormatRatio(r.flush_avg_vs_file),
          num(r.flush_max, "{:.3f}"), FormatRatio(r.flush_max_vs_zvol),
          FormatRatio(r.flush_max_vs_file), num(r.peak_rss_mib, "{:.1f}"),
          num(r.cpu_seconds, "{:.2f}"));
    }
  }
  if (report.config.phased()) {  // the dbench rows already name these
    for (const auto& s : report.stacks) {
      if (s.status == StackStatus::kOk) continue;
      out += fmt::format(" {:<22} {}: {}\n", s.name, StackStatusName(s.status), s.reason);
    }
  }
  return out;
}

std::string PhasedWorkloadDescription(const BenchConfig& c) {
  if (c.mode == "fio") {
    return fmt::format(
        "fio (libaio, O_DIRECT, queue depth 32 for 4 KiB, 8 for 1 MiB) on each stack's loop "
        "device, {} s per phase",
        c.seconds);
  }
  return fmt::format("In-process block workload, {} threads, {} s per workload", c.clients,
                     c.seconds);
}

Status WriteReportFiles(const BenchReport& report, const std::string& dir) {
  VS_RETURN_IF_ERROR(MakeDirectories(dir, 0755));
  auto write = [&](const std::string& name, const std::string& text) -> Status {
    std::string path = dir + "/" + name;
    std::ofstream out(path, std::ios::trunc);
    out << text;
    out.close();
    if (!out) return ErrnoStatus("write " + path);
    return Status::Ok();
  };
  VS_RETURN_IF_ERROR(write("report.json", ReportToJson(report)));
  VS_RETURN_IF_ERROR(write("report.md", ReportToMarkdown(report)));
  VS_RETURN_IF_ERROR(write("report.svg", ReportToSvg(report)));
  return Status::Ok();
}

}  // namespace volstack::bench

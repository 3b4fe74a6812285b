#include "bench/dbench_output.h"

#include <fmt/format.h>

#include <cstdlib>
#include <sstream>

namespace volstack::bench {

namespace {

std::vector<std::string> Words(std::string_view line) {
  std::vector<std::string> words;
  std::istringstream in{std::string(line)};
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// strtod on the whole word; nullopt unless it is all number.
std::optional<double> Number(const std::string& word) {
  if (word.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(word.c_str(), &end);
  if (end != word.c_str() + word.size()) return std::nullopt;
  return v;
}

std::optional<uint64_t> Count(const std::string& word) {
  if (word.empty() || word.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::strtoull(word.c_str(), nullptr, 10);
}

// "Throughput 461.145 MB/sec [(sync open)] [(sync dirs)]  2 clients  2 procs  max_latency=6.910 ms"
bool ParseThroughputLine(const std::vector<std::string>& w, DbenchResult& r) {
  if (w.size() < 3 || w[0] != "Throughput" || w[2] != "MB/sec") return false;
  auto tp = Number(w[1]);
  if (!tp) return false;
  r.throughput_mb_s = *tp;
  for (size_t i = 3; i < w.size(); ++i) {
    if (w[i] == "clients" && i > 0) r.clients = std::atoi(w[i - 1].c_str());
    if (w[i] == "procs" && i > 0) r.procs = std::atoi(w[i - 1].c_str());
    if (w[i].rfind("max_latency=", 0) == 0) {
      r.max_latency_ms = std::strtod(w[i].c_str() + 12, nullptr);
    }
  }
  return true;
}

}  // namespace

const OpStat* DbenchResult::Find(std::string_view name) const {
  for (const auto& op : ops) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

Result<DbenchResult> ParseDbenchOutput(std::string_view text) {
  DbenchResult result;
  bool in_table = false;
  bool saw_table = false;
  bool saw_throughput = false;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> w = Words(line);
    if (w.size() == 4 && w[0] == "Operation" && w[1] == "Count" && w[2] == "AvgLat" &&
        w[3] == "MaxLat") {
      in_table = true;
      saw_table = true;
      result.ops.clear();  // only the last table counts
      continue;
    }
    if (ParseThroughputLine(w, result)) {
      saw_throughput = true;
      in_table = false;
      continue;
    }
    if (!in_table) continue;
    if (w.size() == 1 && w[0].find_first_not_of('-') == std::string::npos) continue;
    if (w.size() != 4) {
      if (!w.empty()) in_table = false;
      continue;
    }
    auto count = Count(w[1]);
    auto avg = Number(w[2]);
    auto max = Number(w[3]);
    if (!count || !avg || !max) {
      in_table = false;
      continue;
    }
    result.ops.push_back(OpStat{w[0], *count, *avg, *max});
  }
  if (!saw_throughput) {
    return Status::Corruption("dbench output has no 'Throughput ... MB/sec' line");
  }
  if (!saw_table || result.ops.empty()) {
    return Status::Corruption("dbench output has no Operation/Count/AvgLat/MaxLat table");
  }
  return result;
}

std::optional<DbenchProgress> ParseDbenchProgressLine(std::string_view line) {
  // "   2     40113   465.51 MB/sec  execute   1 sec  latency 5.341 ms"
  std::vector<std::string> w = Words(line);
  if (w.size() != 10 || w[3] != "MB/sec" || w[6] != "sec" || w[7] != "latency") {
    return std::nullopt;
  }
  if (w[4] != "warmup" && w[4] != "execute") return std::nullopt;
  auto mb = Number(w[2]);
  auto secs = Count(w[5]);
  auto lat = Number(w[8]);
  if (!mb || !secs || !lat) return std::nullopt;
  return DbenchProgress{w[4] == "warmup", static_cast<int>(*secs), *mb, *lat};
}

std::string FormatDbenchTable(const DbenchResult& r) {
  // dbench 4.0's own formats: " %-12s %7u %9.3f %9.3f" and the Throughput line.
  std::string out = " Operation      Count    AvgLat    MaxLat\n";
  out += " ----------------------------------------\n";
  for (const auto& op : r.ops) {
    out +=
        fmt::format(" {:<12} {:>7} {:>9.3f} {:>9.3f}\n", op.name, op.count, op.avg_ms, op.max_ms);
  }
  out += fmt::format("Throughput {:.3f} MB/sec  {} clients  {} procs  max_latency={:.3f} ms\n",
                     r.throughput_mb_s, r.clients, r.procs, r.max_latency_ms);
  return out;
}

}  // namespace volstack::bench

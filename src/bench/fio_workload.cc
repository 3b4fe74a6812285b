#include "bench/fio_workload.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "bench/subprocess.h"

namespace volstack::bench {

namespace {

using nlohmann::json;

double CpuSecondsOf(const std::vector<pid_t>& pids) {
  double total = 0;
  for (pid_t pid : pids) {
    if (auto u = ReadProcessUsage(pid); u.ok()) total += u->cpu_seconds;
  }
  return total;
}

std::vector<std::string> FioArgv(const std::string& device, const std::string& name,
                                 const std::string& rw, uint32_t block_bytes, int iodepth) {
  return {"fio",
          "--name=" + name,
          "--filename=" + device,
          "--ioengine=libaio",
          "--direct=1",
          "--rw=" + rw,
          fmt::format("--bs={}", block_bytes),
          fmt::format("--iodepth={}", iodepth),
          "--numjobs=1",
          "--randrepeat=0",
          "--norandommap",
          "--output-format=json"};
}

Result<std::string> RunFio(const std::vector<std::string>& argv, double timeout_seconds) {
  CommandOptions options;
  options.timeout_seconds = timeout_seconds;
  return RunChecked(argv, options);
}

double Percentile(const json& clat, const char* key) {
  if (!clat.contains("percentile") || !clat["percentile"].contains(key)) return 0;
  return clat["percentile"][key].get<double>() / 1000.0;
}

}  // namespace

const std::vector<FioPhase>& FioPhases() {
  static const std::vector<FioPhase> phases = {
      {"randwrite-4k", "randwrite", 4096, 32},
      {"randread-4k", "randread", 4096, 32},
      {"seqwrite-1m", "write", 1 << 20, 8},
      {"seqread-1m", "read", 1 << 20, 8},
      {"randread-4k-under-seqwrite", "randread", 4096, 32, true},
  };
  return phases;
}

Result<BlockWorkloadResult> ParseFioJson(std::string_view output, const FioPhase& phase) {
  size_t start = output.find('{');
  if (start == std::string_view::npos) return Status::Corruption("fio printed no JSON");
  json doc = json::parse(output.substr(start), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.contains("jobs") || !doc["jobs"].is_array() ||
      doc["jobs"].empty()) {
    return Status::Corruption("fio's output is not the JSON report it should be");
  }
  const char* direction = phase.rw.find("read") != std::string::npos ? "read" : "write";
  const json* found = nullptr;
  for (const json& j : doc["jobs"]) {
    if (j.is_object() && j.value("jobname", std::string()) == phase.name) found = &j;
  }
  if (found == nullptr) {
    return Status::Corruption(fmt::format("fio's report has no job named {}", phase.name));
  }
  const json& job = *found;
  if (!job.contains(direction) || !job[direction].is_object()) {
    return Status::Corruption(fmt::format("fio's report has no {} section", direction));
  }
  const json& io = job[direction];
  try {
    BlockWorkloadResult r;
    r.name = phase.name;
    r.bytes = io.value("io_bytes", uint64_t{0});
    r.ops = io.value("total_ios", uint64_t{0});
    r.seconds = io.value("runtime", 0.0) / 1000.0;
    r.iops = io.value("iops", 0.0);
    r.mb_s = io.value("bw_bytes", 0.0) / 1e6;
    if (io.contains("clat_ns")) {
      const json& clat = io["clat_ns"];
      r.p50_us = Percentile(clat, "50.000000");
      r.p99_us = Percentile(clat, "99.000000");
      r.p999_us = Percentile(clat, "99.900000");
      r.max_us = clat.value("max", 0.0) / 1000.0;
    }
    if (r.ops == 0 || r.seconds <= 0) {
      return Status::Corruption(fmt::format("fio did no {} I/O in {}", direction, phase.name));
    }
    return r;
  } catch (const json::exception& e) {
    return Status::Corruption(std::string("fio's report has a field of the wrong type: ") +
                              e.what());
  }
}

Result<std::vector<BlockWorkloadResult>> RunFioPhases(const FioOptions& o) {
  const auto& phases = FioPhases();
  if (o.on_phase) o.on_phase("prefill", static_cast<int>(phases.size()));
  // The prefill streams the whole device once; at 20 MB/s (far below any stack here) a
  // 2 GiB device takes under two minutes, so ten is a hang, not a slow stack.
  VS_ASSIGN_OR_RETURN(std::string prefill_output,
                      RunFio(FioArgv(o.device, "prefill", "write", 1 << 20, 8), 600));
  std::vector<BlockWorkloadResult> results;
  for (size_t i = 0; i < phases.size(); ++i) {
    const FioPhase& p = phases[i];
    if (o.on_phase) o.on_phase(p.name, static_cast<int>(phases.size() - i - 1));
    std::vector<std::string> argv = FioArgv(o.device, p.name, p.rw, p.block_bytes, p.iodepth);
    argv.push_back("--time_based=1");
    argv.push_back(fmt::format("--runtime={}", std::max(1, static_cast<int>(o.seconds))));
    if (p.beside_seqwrite) {
      // A second job: fio applies the options after --name to that job only.
      for (const std::string& a : FioArgv(o.device, "writer", "write", 1 << 20, 8)) {
        if (a != "fio" && a != "--output-format=json") argv.push_back(a);
      }
      argv.push_back("--time_based=1");
      argv.push_back(fmt::format("--runtime={}", std::max(1, static_cast<int>(o.seconds))));
    }
    const double cpu_before = CpuSecondsOf(o.serving_pids);
    VS_ASSIGN_OR_RETURN(std::string output, RunFio(argv, o.seconds + 120));
    const double cpu_after = CpuSecondsOf(o.serving_pids);
    VS_ASSIGN_OR_RETURN(BlockWorkloadResult r, ParseFioJson(output, p));
    // The mixed phase's CPU is the writer's too: per GiB of the reader's bytes it would mislead.
    if (!o.serving_pids.empty() && !p.beside_seqwrite)
      r.volstack_cpu_seconds = std::max(0.0, cpu_after - cpu_before);
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace volstack::bench

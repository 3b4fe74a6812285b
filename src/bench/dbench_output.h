// dbench 4.0's report, parsed and printed again.
//
// What dbench prints at the end of a run (Debian's 4.0; see anchors.md section 7):
//
//    Operation      Count    AvgLat    MaxLat
//    ----------------------------------------
//    NTCreateX      43076     0.029     4.211
//    ...
//    Flush           3036     0.617     6.897
//
//   Throughput 461.145 MB/sec  2 clients  2 procs  max_latency=6.910 ms
//
// Latencies are milliseconds; MB is 10^6 bytes; Throughput is the last execute-phase sample
// (ReadX and WriteX bytes only). While it runs it prints one progress line a second:
//   "   2     40113   465.51 MB/sec  execute   1 sec  latency 5.341 ms"
// Anything else (the banner, "failed to create barrier semaphore", cleanup lines) is ignored.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace volstack::bench {

struct OpStat {
  std::string name;  // the report label: NTCreateX, Flush, ...
  uint64_t count = 0;
  double avg_ms = 0;
  double max_ms = 0;
};

struct DbenchResult {
  std::vector<OpStat> ops;  // in dbench's order
  double throughput_mb_s = 0;
  int clients = 0;
  int procs = 0;
  double max_latency_ms = 0;

  // nullptr when dbench did not report the operation.
  const OpStat* Find(std::string_view name) const;
};

// Parses a whole dbench run's output. Corruption (with what was missing) when there is no
// Throughput line or no operation table: dbench failed or was stopped before its report.
Result<DbenchResult> ParseDbenchOutput(std::string_view text);

// One progress line ("execute 3 sec"); nullopt for any other line.
struct DbenchProgress {
  bool warmup = false;  // "warmup" rather than "execute"
  int seconds = 0;
  double mb_s = 0;
  double latency_ms = 0;
};
std::optional<DbenchProgress> ParseDbenchProgressLine(std::string_view line);

// The seed's table, as dbench prints it (same columns and widths), ending in the
// Throughput line.
std::string FormatDbenchTable(const DbenchResult& result);

}  // namespace volstack::bench

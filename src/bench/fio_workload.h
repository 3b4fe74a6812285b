// The bench's fio mode: the block workload's phases, and a mixed one, run by fio (libaio, O_DIRECT)
// on each stack's kernel block device (the loop device dbench's XFS would go on), so the numbers
// are what a program sees through the kernel, the FUSE hop and the pool, and compare with a
// plain file behind the same loop driver.
//
// Phases, in this order so that reads find data:
//   prefill       (untimed) one sequential 1 MiB pass over the whole device
//   randwrite-4k  4 KiB writes at random aligned offsets, queue depth 32
//   randread-4k   4 KiB reads, queue depth 32
//   seqwrite-1m   1 MiB sequential writes, queue depth 8
//   seqread-1m    1 MiB sequential reads, queue depth 8
//   randread-4k-under-seqwrite
//                 the 4 KiB random reader again, beside a 1 MiB sequential writer on the same
//                 device (a zvol's reader collapsing under a writer is a known ZFS complaint,
//                 openzfs/zfs#10095): only the reader is reported, to compare with randread-4k
// Each timed phase also reports the CPU seconds the stack's volstack processes spent in it,
// so a stack's cost per GiB moved is visible beside its speed.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/report.h"
#include "util/result.h"

namespace volstack::bench {

struct FioPhase {
  std::string name;  // "randwrite-4k": the block workload's name for the same pattern
  std::string rw;    // fio's --rw
  uint32_t block_bytes = 0;
  int iodepth = 0;
  bool beside_seqwrite = false;  // run with a 1 MiB sequential writer beside it
};
// The timed phases, in the order they run.
const std::vector<FioPhase>& FioPhases();

struct FioOptions {
  std::string device;               // a block device, e.g. /dev/loop3
  double seconds = 5;               // per timed phase
  std::vector<pid_t> serving_pids;  // whose CPU time each phase reports
  // Called when a phase starts, with its name and how many timed phases follow it.
  std::function<void(const std::string& phase, int phases_after)> on_phase;
};

// Runs the prefill and the timed phases. fio must exist (ENOENT otherwise); a failed or
// timed-out fio is an error with the tail of its output.
Result<std::vector<BlockWorkloadResult>> RunFioPhases(const FioOptions& options);

// One phase's numbers from fio's `--output-format=json` output: the job named after the phase
// (anything before the first '{' is skipped: fio may print warnings first). Corruption when the
// text is not fio's JSON or has no job with I/O in the phase's direction.
Result<BlockWorkloadResult> ParseFioJson(std::string_view output, const FioPhase& phase);

}  // namespace volstack::bench

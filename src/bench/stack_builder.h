// Stack builders: each of the bench's stacks is a small, independent recipe that builds
// everything below the filesystem, the way a user would with the volstack CLI and the real
// tools, and hands back the block device path mkfs.xfs runs on:
//
//   file                 sparse file → loop (4K) → XFS                 (the machine's limit)
//   zvol                 pool volume → devfs → loop → XFS
//   zvol-512             the same with a 512-byte-sector loop          (the seed's suspicion)
//   zvol-uring           zvol with devfs served through FUSE over io_uring (the transport)
//   zvol-lz4, zvol-zstd  zvol with compression=lz4 / zstd
//   lvm-on-zvol          pool volume as PV in-process → LV → devfs → loop → XFS  (volstack's way)
//   lvm-on-loop-on-zvol  pool volume → devfs → loop → PV → LV → devfs → loop → XFS (the seed's)
//   lvm-on-file          sparse file as PV → LV → devfs → loop → XFS
//
// Every step registers its undo in the run's Teardown as soon as it succeeds, so a failure
// or Ctrl-C at any point leaves nothing behind once Teardown::Run() returns. Each run gets a
// fresh scratch directory and its own volstack --state-dir, so runs never share state with
// each other or with the user's stack.
//
// Threads: builders are stateless; a StackRun belongs to one thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/environment.h"
#include "bench/teardown.h"
#include "util/result.h"

namespace volstack::bench {

// One build of one stack: where it lives and what it started.
struct StackRun {
  const Environment* env = nullptr;
  std::string dir;          // this run's scratch directory (created by the caller)
  std::string state_dir;    // volstack --state-dir for this run
  uint64_t size_bytes = 0;  // the size of the device the filesystem goes on
  Teardown* teardown = nullptr;
  std::vector<pid_t> serving_pids;  // volstack processes serving the stack (RSS/CPU)
  int verbose = 0;

  // Runs `volstack --state-dir <state_dir> args...`; its output, or an error with its tail.
  Result<std::string> Volstack(const std::vector<std::string>& args);
};

class StackBuilder {
 public:
  virtual ~StackBuilder() = default;

  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  // OK when the stack can be built here; otherwise the one-line reason it cannot (no root, no
  // loop devices or FUSE, a missing program).
  virtual Status Available(const Environment& env) const = 0;
  // Builds the stack below the filesystem and returns the block device for mkfs.xfs.
  // Registers every undo step in run.teardown, also when it fails part way.
  virtual Result<std::string> Setup(StackRun& run) const = 0;
};

// Every stack, in the bench's default order.
std::vector<std::unique_ptr<StackBuilder>> AllStackBuilders();
// The names, in the same order.
std::vector<std::string> AllStackNames();

}  // namespace volstack::bench

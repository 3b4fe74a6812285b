// DevfsStats: counters of the FUSE requests devfs serves, for profiling the export path
// (which requests the kernel sends for a workload, how large, how long each takes).
//
// Off unless the environment variable VOLSTACK_DEVFS_STATS is set when devfs mounts; then
// every request is counted by kind, READ/WRITE sizes go into power-of-two buckets, and the
// time spent in each handler (from the request's arrival in devfs to the reply) is summed.
// The table goes to stderr when devfs stops (or to the file the variable names, if it is
// not "1").
//
// Threads: Record() from any number of request threads (relaxed atomics: a counter may be
// read while it moves; the totals at teardown are exact). Dump() from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "export/devfs_flush.h"

namespace volstack::exportfs {

enum class DevfsOp : uint8_t {
  kLookup,
  kGetAttr,
  kSetAttr,
  kOpen,
  kRelease,
  kRead,
  kWrite,
  kFlush,
  kFsync,
  kFallocate,
  kLseek,
  kOther,
  kCount,
};

class DevfsStats {
 public:
  // The stats object if VOLSTACK_DEVFS_STATS is set, else nullptr (nothing is counted).
  static std::unique_ptr<DevfsStats> FromEnvironment();

  // A request starts being served (counts requests in service at once) ...
  void Begin();
  // ... and is answered after `spent`.
  void Record(DevfsOp op, uint64_t bytes, std::chrono::nanoseconds spent);
  // FSYNCs: one starts (counts FSYNCs in service at once) and is answered with the
  // kernel's datasync flag and the way the flusher answered it.
  void BeginSync();
  void EndSync(bool datasync, DevfsFlusher::How how);
  // Writes the table (to the file named by the variable, or stderr).
  void Dump() const;
  void DumpTo(std::FILE* out) const;

  // Measures one request from construction to destruction; a null `stats` costs nothing.
  class Scope {
   public:
    Scope(DevfsStats* stats, DevfsOp op, uint64_t bytes = 0)
        : stats_(stats), op_(op), bytes_(bytes) {
      if (stats_ != nullptr) {
        stats_->Begin();
        start_ = std::chrono::steady_clock::now();
      }
    }
    ~Scope() {
      if (stats_ != nullptr) stats_->Record(op_, bytes_, std::chrono::steady_clock::now() - start_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    DevfsStats* const stats_;
    const DevfsOp op_;
    const uint64_t bytes_;
    std::chrono::steady_clock::time_point start_;
  };

 private:
  static constexpr size_t kOps = static_cast<size_t>(DevfsOp::kCount);
  static constexpr size_t kBuckets = 13;  // <=512 B, 1K, 2K, ... 512K, 1 MiB, more

  struct Counter {
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint64_t> ns_total{0};
    std::atomic<uint64_t> ns_max{0};
    std::array<std::atomic<uint64_t>, kBuckets> sizes{};
  };

  std::string path_;  // "" = stderr
  std::array<Counter, kOps> counters_;
  std::atomic<uint64_t> in_flight_{0};
  std::atomic<uint64_t> in_flight_max_{0};
  std::atomic<uint64_t> syncs_in_flight_{0};
  std::atomic<uint64_t> syncs_in_flight_max_{0};
  std::atomic<uint64_t> syncs_datasync_{0};
  std::array<std::atomic<uint64_t>, 3> syncs_how_{};  // indexed by DevfsFlusher::How
};

}  // namespace volstack::exportfs

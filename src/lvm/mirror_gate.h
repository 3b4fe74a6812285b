// MirrorGate: the range lock that keeps a pvmove copy and the LV's own writes from losing
// each other's data.
//
// While a pvmove segment is being copied, the LV writes each of its requests to both legs
// (source and destination), and the copier reads a region of the source and writes it to the
// destination. Without coordination a write that lands on both legs between the copier's
// read and its write would be overwritten on the destination by the older data the copier
// read. So both sides hold the range they touch here for the duration:
//   - a mirrored write holds its range shared with other writes (writes never wait on one
//     another, only on a copy);
//   - the copier holds its region exclusively: it first blocks new writes to the region,
//     then waits for the writes already in flight there, then copies.
// Ranges are keyed by the destination PV's UUID and the byte offset on that PV, not by
// device object, so every activation of the LV in the process (and a copier that opened the
// PV through another handle) meets on the same key.
//
// Threads: every method is safe from any thread. A stack's LVs share the gate of their
// lvm::Activations (activations.h); Global() is the one of Activations::Default().
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace volstack::lvm {

class MirrorGate {
 public:
  static MirrorGate& Global();

  // Blocks while a copy holds an overlapping range, then holds [offset, offset + length) of
  // `pv` shared until EndWrite.
  void BeginWrite(const std::string& pv, uint64_t offset, uint64_t length);
  void EndWrite(const std::string& pv, uint64_t offset, uint64_t length);
  // Holds the range exclusively: new overlapping writes wait from now on; returns once the
  // overlapping writes already in flight have ended.
  void BeginCopy(const std::string& pv, uint64_t offset, uint64_t length);
  void EndCopy(const std::string& pv, uint64_t offset, uint64_t length);

  // Ranges currently held (for tests).
  size_t held() const;
  // Writes that had to wait for a copy, and their total wait (for benchmarks: how much of a
  // workload's slowdown during a move the gate explains).
  struct Stats {
    uint64_t waited_writes = 0;
    uint64_t wait_ns = 0;
  };
  Stats stats() const;

 private:
  struct Range {
    std::string pv;
    uint64_t offset;
    uint64_t length;
    bool copy;
    bool Overlaps(const std::string& p, uint64_t o, uint64_t l) const {
      return pv == p && o < offset + length && offset < o + l;
    }
  };
  void RemoveLocked(const std::string& pv, uint64_t offset, uint64_t length, bool copy);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Range> ranges_;  // GUARDED_BY(mu_)
  Stats stats_;                // GUARDED_BY(mu_)
};

// RAII holder of a shared write range.
class MirrorWriteGuard {
 public:
  MirrorWriteGuard(MirrorGate& gate, const std::string& pv, uint64_t offset, uint64_t length)
      : gate_(gate), pv_(pv), offset_(offset), length_(length) {
    gate_.BeginWrite(pv_, offset_, length_);
  }
  ~MirrorWriteGuard() { gate_.EndWrite(pv_, offset_, length_); }
  MirrorWriteGuard(const MirrorWriteGuard&) = delete;
  MirrorWriteGuard& operator=(const MirrorWriteGuard&) = delete;

 private:
  MirrorGate& gate_;
  const std::string& pv_;
  uint64_t offset_, length_;
};

}  // namespace volstack::lvm

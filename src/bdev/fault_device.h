// FaultDevice: a test device that models a disk with a volatile write cache, power cuts,
// bit rot and failing operations. Every crash test in volstack runs on it.
//
// Model. The device below (usually a MemoryDevice) holds only the *durable* state. Writes
// (a vectored WriteV is one write of its concatenated pieces), write-zeroes and discards
// that complete are kept in an in-memory "unflushed" log, in
// completion order; reads see the device below with the log overlaid, so until a power cut
// the device behaves like any other. Flush() writes the log's net effect below, flushes the
// device below and empties the log. A FUA write (or FUA write-zeroes) goes straight to the
// device below; if it overlaps unflushed writes it is also logged, marked durable, so that an
// older cached write can never land on top of it later.
//
// CutPower(mode) decides, from the device's seeded std::mt19937_64, which logged writes
// reach the device below, applies them in log order, and from then on fails every request
// with EIO. The modes:
//   kDropAll     every unflushed write is lost;
//   kKeepAll     every completed write survives (a process crash: the page cache lives on);
//   kKeepSubset  each unflushed write independently survives whole or not at all, so a later
//                write may survive while an earlier one is lost (reordering);
//   kTear        each unflushed write survives whole, not at all, or torn: a random prefix or
//                a random subset of its logical blocks survives.
// Writes marked durable (FUA) always survive. Whatever the mode, each logical block ends up
// holding its last flushed contents or the contents some unflushed write gave it: never
// anything else, never a mix within one logical block.
//
// After a power cut: durable() is the surviving image. Reopen() returns a fresh FaultDevice
// over it (the old one stays dead, so late writes from a crashed user cannot reach the
// image); Recover() powers this same object back on instead. A crash test runs:
//   workload on `fault` -> fault->CutPower(kTear) -> fault->Reopen() -> import -> verify.
// CutPowerAfter(n, mode) arms a cut at the (n+1)-th mutating request (write, write-zeroes,
// discard, flush), which is logged as unflushed (even with FUA) and then fails with EIO:
// running a workload with n = 0, 1, 2, ... visits every crash point.
//
// Other faults: FlipBits corrupts the durable image; fail rules (AddFailRule, FailOps,
// FailAfter) make chosen requests fail with an errno without any effect. Counters count
// requests by type.
//
// Determinism: with the same seed and the same sequence of requests, every random decision
// is the same. Requests from several threads are serialized by one mutex; their order, and
// so the random stream, is then the order the threads took the mutex.
//
// Threads: every method is safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "bdev/op_type.h"

namespace volstack::bdev {

enum class CrashMode { kDropAll, kKeepAll, kKeepSubset, kTear };
inline constexpr CrashMode kAllCrashModes[] = {CrashMode::kDropAll, CrashMode::kKeepAll,
                                               CrashMode::kKeepSubset, CrashMode::kTear};
// "drop-all", "keep-all", "keep-subset", "tear": for test names and messages.
const char* CrashModeName(CrashMode mode);

// What a power cut did to the unflushed log.
struct CrashReport {
  uint64_t writes = 0;   // unflushed log entries (write, write-zeroes, discard)
  uint64_t kept = 0;     // survived whole (durable FUA entries included)
  uint64_t dropped = 0;  // lost whole
  uint64_t torn = 0;     // partly survived
};

// Makes matching requests fail with `error` and no effect. A request matches when its type
// is in `ops` and (for ranged requests) it overlaps [offset, offset + length).
struct FaultRule {
  uint32_t ops = kAllOps;
  uint64_t after = 0;                  // let this many matching requests through first
  double probability = 1.0;            // then fail each with this probability
  uint64_t max_failures = UINT64_MAX;  // and stop failing after this many
  int error = EIO;
  uint64_t offset = 0;
  uint64_t length = UINT64_MAX;
};

struct FaultCounters {
  std::array<uint64_t, kNumOpTypes> ops{};     // requests that reached the device, by type
  std::array<uint64_t, kNumOpTypes> failed{};  // of those, failed (injected, power, below)
  uint64_t power_cuts = 0;

  uint64_t operator[](OpType t) const { return ops[static_cast<size_t>(t)]; }
};

struct FaultOptions {
  uint64_t seed = 0;
  std::string name = {};  // "" = "fault:<below>"
};

class FaultDevice final : public BlockDevice {
 public:
  static std::shared_ptr<FaultDevice> Create(BlockDevicePtr below,
                                             const FaultOptions& options = {});
  // A FaultDevice over a fresh MemoryDevice.
  static std::shared_ptr<FaultDevice> CreateInMemory(uint64_t size,
                                                     uint32_t logical_block_size = 512,
                                                     uint64_t seed = 0);

  // The device holding the durable state: after a power cut, the surviving image.
  const BlockDevicePtr& durable() const { return below_; }

  // Cuts power now (see the theory above). Returns what happened to the log, or the error
  // of the device below while applying it (the device is powered off either way).
  Result<CrashReport> CutPower(CrashMode mode);
  // Arms a power cut at the (n+1)-th mutating request from now. Replaces an armed cut.
  void CutPowerAfter(uint64_t n, CrashMode mode);
  void Disarm();
  bool powered() const;
  // The report of the last power cut, if any.
  std::optional<CrashReport> last_crash() const;

  // A fresh device over the surviving image, seeded from this one's generator. EBUSY while
  // this device still has power (cut it first).
  Result<std::shared_ptr<FaultDevice>> Reopen();
  // Powers this device back on over the surviving image; disarms any cut. EBUSY if powered.
  Status Recover();

  // An independent copy of this device in its current state — durable image, unflushed log,
  // power — with its own generator seeded `seed`; fail rules and an armed cut are not
  // copied. Run a workload once, then Fork() and cut power many ways from the same point.
  // EOPNOTSUPP unless the device below is a MemoryDevice.
  Result<std::shared_ptr<FaultDevice>> Fork(uint64_t seed) const;

  // Flips `count` distinct random bits in the durable image within [offset, offset+length)
  // (byte granularity) and flushes the device below. Returns the flipped bit positions as
  // absolute bit offsets (byte * 8 + bit). EINVAL if count > length * 8.
  Result<std::vector<uint64_t>> FlipBits(uint64_t offset, uint64_t length, uint32_t count);

  // Returns an id for RemoveFailRule.
  int AddFailRule(const FaultRule& rule);
  void RemoveFailRule(int id);
  void ClearFailRules();
  // Shorthands: requests of types `ops`, after `after` of them, with `probability`.
  int FailOps(uint32_t ops, uint64_t after = 0, double probability = 1.0, int error = EIO);
  // Every request after the first n fails with EIO.
  int FailAfter(uint64_t n) { return FailOps(kAllOps, n); }

  FaultCounters counters() const;
  void ResetCounters();
  size_t unflushed_writes() const;
  uint64_t unflushed_bytes() const;
  void Reseed(uint64_t seed);

  FaultDevice(BlockDevicePtr below, const FaultOptions& options, const Geometry& geometry);

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override;
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, WriteOptions opts) override;
  // One write of the concatenated pieces: one log entry, one request for fail rules, an
  // armed cut and the counters, torn or kept exactly like the same Write().
  Status DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                  WriteOptions opts) override;
  Status DoFlush() override;
  Status DoDiscard(uint64_t offset, uint64_t length) override;
  Status DoWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts) override;
  Result<std::vector<AllocationExtent>> DoQueryAllocation(uint64_t offset,
                                                          uint64_t length) override;

 private:
  enum class Kind : uint8_t { kData, kZero, kDiscard };
  // One completed, not yet flushed request. Heap-allocated so view_ can point into it.
  struct Entry {
    Kind kind = Kind::kData;
    uint64_t offset = 0;
    uint64_t length = 0;
    bool may_unmap = true;            // kZero
    bool durable = false;             // a FUA request already on the device below
    std::unique_ptr<uint8_t[]> data;  // kData: `length` bytes
  };
  // Block index -> the newest entry covering the block.
  using BlockMap = std::map<uint64_t, const Entry*>;
  struct RuleState {
    int id;
    FaultRule rule;
    uint64_t seen = 0;
    uint64_t failures = 0;
  };

  // Checks power, an armed cut and the fail rules for a request about to run. `entry` is the
  // request as it would be logged (null for reads, flush, queries), used if the armed cut
  // fires now. Returns non-OK to fail the request.
  Status BeginLocked(OpType op, uint64_t offset, uint64_t length, std::unique_ptr<Entry>* entry);
  Status FailedLocked(OpType op, Status status);
  // Logs (or, with FUA, applies) a data entry: the body of DoWrite and DoWriteV.
  Status WriteEntry(std::unique_ptr<Entry> entry, WriteOptions opts);
  bool OverlapsViewLocked(uint64_t offset, uint64_t length) const;
  void AppendLocked(std::unique_ptr<Entry> entry);
  // Writes `blocks` below, coalescing runs of one entry into one request.
  Status ApplyLocked(const BlockMap& blocks);
  // Chooses the surviving blocks, applies them, powers off.
  Result<CrashReport> CutPowerLocked(CrashMode mode);
  void ClearLogLocked();

  const BlockDevicePtr below_;
  const FaultOptions options_;
  const uint64_t lbs_;

  mutable std::mutex mu_;
  std::mt19937_64 rng_;                       // GUARDED_BY(mu_)
  bool powered_ = true;                       // GUARDED_BY(mu_)
  std::vector<std::unique_ptr<Entry>> log_;   // GUARDED_BY(mu_); completion order
  BlockMap view_;                             // GUARDED_BY(mu_)
  uint64_t unflushed_bytes_ = 0;              // GUARDED_BY(mu_)
  std::optional<uint64_t> cut_after_;         // GUARDED_BY(mu_); mutating requests left
  CrashMode cut_mode_ = CrashMode::kDropAll;  // GUARDED_BY(mu_)
  std::optional<CrashReport> last_crash_;     // GUARDED_BY(mu_)
  std::vector<RuleState> rules_;              // GUARDED_BY(mu_)
  int next_rule_id_ = 1;                      // GUARDED_BY(mu_)
  FaultCounters counters_;                    // GUARDED_BY(mu_)
};

}  // namespace volstack::bdev

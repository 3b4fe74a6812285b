#include "bdev/fault_device.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include "bdev/memory_device.h"
#include "util/check.h"

namespace volstack::bdev {

const char* CrashModeName(CrashMode mode) {
  switch (mode) {
    case CrashMode::kDropAll:
      return "drop-all";
    case CrashMode::kKeepAll:
      return "keep-all";
    case CrashMode::kKeepSubset:
      return "keep-subset";
    case CrashMode::kTear:
      return "tear";
  }
  return "?";
}

std::shared_ptr<FaultDevice> FaultDevice::Create(BlockDevicePtr below,
                                                 const FaultOptions& options) {
  VS_CHECK(below != nullptr);
  Geometry g = below->geometry();
  g.caps.fua = true;           // handled here: straight to the device below
  g.caps.write_zeroes = true;  // logged as a zeroing entry
  return std::make_shared<FaultDevice>(std::move(below), options, g);
}

std::shared_ptr<FaultDevice> FaultDevice::CreateInMemory(uint64_t size, uint32_t logical_block_size,
                                                         uint64_t seed) {
  return Create(MemoryDevice::Create(size, logical_block_size), FaultOptions{seed, {}});
}

FaultDevice::FaultDevice(BlockDevicePtr below, const FaultOptions& options,
                         const Geometry& geometry)
    : BlockDevice(options.name.empty() ? "fault:" + below->name() : options.name, geometry),
      below_(std::move(below)),
      options_(options),
      lbs_(geometry.logical_block_size),
      rng_(options.seed) {}

// ---- request admission -------------------------------------------------------------------

Status FaultDevice::FailedLocked(OpType op, Status status) {
  counters_.failed[static_cast<size_t>(op)]++;
  return status;
}

Status FaultDevice::BeginLocked(OpType op, uint64_t offset, uint64_t length,
                                std::unique_ptr<Entry>* entry) {
  counters_.ops[static_cast<size_t>(op)]++;
  const std::string what = name() + ": " + std::string(OpTypeName(op));
  if (!powered_) return FailedLocked(op, Status::IoError(what + ": the device has no power"));
  if (cut_after_.has_value() && (OpBit(op) & kMutatingOps) != 0) {
    if (*cut_after_ == 0) {
      // The request is in flight when the power goes: it lands in the cache at best.
      if (entry != nullptr && *entry != nullptr) {
        (*entry)->durable = false;
        AppendLocked(std::move(*entry));
      }
      CutPowerLocked(cut_mode_).IgnoreError();  // the caller sees EIO either way
      return FailedLocked(op, Status::IoError(what + ": power cut"));
    }
    --*cut_after_;
  }
  const bool ranged = op != OpType::kFlush;
  for (auto& rs : rules_) {
    const FaultRule& r = rs.rule;
    if ((r.ops & OpBit(op)) == 0) continue;
    if (ranged) {
      const uint64_t rule_end = r.offset + std::min(r.length, UINT64_MAX - r.offset);
      if (offset >= rule_end || offset + length <= r.offset) continue;
    }
    if (++rs.seen <= r.after || rs.failures >= r.max_failures) continue;
    if (r.probability < 1.0 && !std::bernoulli_distribution(r.probability)(rng_)) continue;
    rs.failures++;
    return FailedLocked(op, Status::FromErrno(r.error, what + " at " + std::to_string(offset) +
                                                           ": injected failure"));
  }
  return Status::Ok();
}

// ---- the unflushed log -------------------------------------------------------------------

bool FaultDevice::OverlapsViewLocked(uint64_t offset, uint64_t length) const {
  auto it = view_.lower_bound(offset / lbs_);
  return it != view_.end() && it->first < (offset + length) / lbs_;
}

void FaultDevice::AppendLocked(std::unique_ptr<Entry> entry) {
  const uint64_t first = entry->offset / lbs_;
  const uint64_t n = entry->length / lbs_;
  auto hint = view_.lower_bound(first);
  for (uint64_t b = first; b < first + n; b++) {
    hint = view_.insert_or_assign(hint, b, entry.get());
    ++hint;
  }
  unflushed_bytes_ += entry->length;
  log_.push_back(std::move(entry));
}

void FaultDevice::ClearLogLocked() {
  view_.clear();
  log_.clear();
  unflushed_bytes_ = 0;
}

Status FaultDevice::ApplyLocked(const BlockMap& blocks) {
  for (auto it = blocks.begin(); it != blocks.end();) {
    const uint64_t first = it->first;
    const Entry* e = it->second;
    uint64_t n = 1;
    auto next = std::next(it);
    while (next != blocks.end() && next->first == first + n && next->second == e) {
      n++;
      ++next;
    }
    const uint64_t off = first * lbs_;
    const uint64_t len = n * lbs_;
    switch (e->kind) {
      case Kind::kData:
        VS_RETURN_IF_ERROR(
            below_->Write(off, std::span<const uint8_t>(e->data.get() + (off - e->offset), len)));
        break;
      case Kind::kZero:
        VS_RETURN_IF_ERROR(below_->WriteZeroes(off, len, ZeroOptions{e->may_unmap, false}));
        break;
      case Kind::kDiscard:
        VS_RETURN_IF_ERROR(below_->Discard(off, len));
        break;
    }
    it = next;
  }
  return Status::Ok();
}

// ---- requests ----------------------------------------------------------------------------

Status FaultDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  std::lock_guard lock(mu_);
  VS_RETURN_IF_ERROR(BeginLocked(OpType::kRead, offset, buf.size(), nullptr));
  Status s = below_->Read(offset, buf);
  if (!s.ok()) return FailedLocked(OpType::kRead, std::move(s));
  const uint64_t end = offset + buf.size();
  for (auto it = view_.lower_bound(offset / lbs_); it != view_.end() && it->first * lbs_ < end;
       ++it) {
    const uint64_t off = it->first * lbs_;
    uint8_t* dst = buf.data() + (off - offset);
    const Entry* e = it->second;
    if (e->kind == Kind::kData) {
      std::memcpy(dst, e->data.get() + (off - e->offset), lbs_);
    } else {
      std::memset(dst, 0, lbs_);
    }
  }
  return Status::Ok();
}

Status FaultDevice::DoWrite(uint64_t offset, std::span<const uint8_t> buf, WriteOptions opts) {
  auto entry = std::make_unique<Entry>();
  entry->kind = Kind::kData;
  entry->offset = offset;
  entry->length = buf.size();
  entry->data = std::make_unique<uint8_t[]>(buf.size());
  std::memcpy(entry->data.get(), buf.data(), buf.size());
  return WriteEntry(std::move(entry), opts);
}

Status FaultDevice::DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                             WriteOptions opts) {
  auto entry = std::make_unique<Entry>();
  entry->kind = Kind::kData;
  entry->offset = offset;
  entry->length = TotalLength(pieces);
  entry->data = std::make_unique<uint8_t[]>(entry->length);
  uint8_t* dst = entry->data.get();
  for (const auto& p : pieces) {
    if (p.empty()) continue;
    std::memcpy(dst, p.data(), p.size());
    dst += p.size();
  }
  return WriteEntry(std::move(entry), opts);
}

Status FaultDevice::WriteEntry(std::unique_ptr<Entry> entry, WriteOptions opts) {
  const uint64_t offset = entry->offset, length = entry->length;
  std::lock_guard lock(mu_);
  VS_RETURN_IF_ERROR(BeginLocked(OpType::kWrite, offset, length, &entry));
  if (opts.fua) {
    Status s = below_->Write(offset, std::span<const uint8_t>(entry->data.get(), length),
                             WriteOptions{true});
    if (!s.ok()) return FailedLocked(OpType::kWrite, std::move(s));
    if (!OverlapsViewLocked(offset, length)) return Status::Ok();
    entry->durable = true;  // keeps older cached writes from landing on top of it
  }
  AppendLocked(std::move(entry));
  return Status::Ok();
}

Status FaultDevice::DoWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts) {
  auto entry = std::make_unique<Entry>();
  entry->kind = Kind::kZero;
  entry->offset = offset;
  entry->length = length;
  entry->may_unmap = opts.may_unmap;

  std::lock_guard lock(mu_);
  VS_RETURN_IF_ERROR(BeginLocked(OpType::kWriteZeroes, offset, length, &entry));
  if (opts.fua) {
    Status s = below_->WriteZeroes(offset, length, opts);
    if (!s.ok()) return FailedLocked(OpType::kWriteZeroes, std::move(s));
    if (!OverlapsViewLocked(offset, length)) return Status::Ok();
    entry->durable = true;
  }
  AppendLocked(std::move(entry));
  return Status::Ok();
}

Status FaultDevice::DoDiscard(uint64_t offset, uint64_t length) {
  auto entry = std::make_unique<Entry>();
  entry->kind = Kind::kDiscard;
  entry->offset = offset;
  entry->length = length;

  std::lock_guard lock(mu_);
  VS_RETURN_IF_ERROR(BeginLocked(OpType::kDiscard, offset, length, &entry));
  AppendLocked(std::move(entry));
  return Status::Ok();
}

Status FaultDevice::DoFlush() {
  std::lock_guard lock(mu_);
  VS_RETURN_IF_ERROR(BeginLocked(OpType::kFlush, 0, 0, nullptr));
  // Applying the net effect is idempotent, so on failure the log stays and a retry is safe.
  Status s = ApplyLocked(view_);
  if (s.ok()) s = below_->Flush();
  if (!s.ok()) return FailedLocked(OpType::kFlush, std::move(s));
  ClearLogLocked();
  return Status::Ok();
}

Result<std::vector<AllocationExtent>> FaultDevice::DoQueryAllocation(uint64_t offset,
                                                                     uint64_t length) {
  std::lock_guard lock(mu_);
  VS_RETURN_IF_ERROR(BeginLocked(OpType::kQueryAllocation, offset, length, nullptr));
  auto below = below_->QueryAllocation(offset, length);
  if (!below.ok()) return FailedLocked(OpType::kQueryAllocation, below.status());
  // Paint the unflushed blocks over the durable map: data is allocated, zeroes are holes.
  std::vector<AllocationExtent> out;
  auto it = view_.lower_bound(offset / lbs_);
  for (const auto& e : *below) {
    uint64_t pos = e.offset;
    const uint64_t end = e.offset + e.length;
    while (pos < end) {
      if (it == view_.end() || it->first * lbs_ >= end) {
        out.push_back({pos, end - pos, e.allocated});
        break;
      }
      const uint64_t b = it->first * lbs_;
      if (b > pos) out.push_back({pos, b - pos, e.allocated});
      out.push_back({b, lbs_, it->second->kind == Kind::kData});
      pos = b + lbs_;
      ++it;
    }
  }
  return out;
}

// ---- power ---------------------------------------------------------------------------------

Result<CrashReport> FaultDevice::CutPower(CrashMode mode) {
  std::lock_guard lock(mu_);
  return CutPowerLocked(mode);
}

Result<CrashReport> FaultDevice::CutPowerLocked(CrashMode mode) {
  CrashReport report;
  BlockMap survivors;
  std::bernoulli_distribution coin(0.5);
  for (const auto& e : log_) {
    report.writes++;
    const uint64_t first = e->offset / lbs_;
    const uint64_t n = e->length / lbs_;
    // keep[i] for each block; all-or-nothing decisions leave it uniform.
    std::vector<bool> keep(n, false);
    if (e->durable || mode == CrashMode::kKeepAll) {
      keep.assign(n, true);
    } else if (mode == CrashMode::kKeepSubset) {
      keep.assign(n, coin(rng_));
    } else if (mode == CrashMode::kTear) {
      int choice = std::uniform_int_distribution<int>(0, 3)(rng_);
      if (n == 1 && choice >= 2) choice -= 2;  // one block cannot tear
      if (choice == 1) {
        keep.assign(n, true);
      } else if (choice == 2) {  // a prefix persists, as on media written in order
        const uint64_t k = std::uniform_int_distribution<uint64_t>(1, n - 1)(rng_);
        std::fill(keep.begin(), keep.begin() + static_cast<ptrdiff_t>(k), true);
      } else if (choice == 3) {  // any subset persists, as on a device that reorders
        for (uint64_t i = 0; i < n; i++) keep[i] = coin(rng_);
      }
    }
    const auto kept = static_cast<uint64_t>(std::count(keep.begin(), keep.end(), true));
    if (kept == n) {
      report.kept++;
    } else if (kept == 0) {
      report.dropped++;
    } else {
      report.torn++;
    }
    for (uint64_t i = 0; i < n; i++) {
      if (keep[i]) survivors.insert_or_assign(first + i, e.get());
    }
  }
  powered_ = false;
  cut_after_.reset();
  counters_.power_cuts++;
  Status s = ApplyLocked(survivors);
  if (s.ok()) s = below_->Flush();
  ClearLogLocked();
  last_crash_ = report;
  if (!s.ok()) return s.WithContext(name() + ": applying the surviving writes at a power cut");
  return report;
}

void FaultDevice::CutPowerAfter(uint64_t n, CrashMode mode) {
  std::lock_guard lock(mu_);
  cut_after_ = n;
  cut_mode_ = mode;
}

void FaultDevice::Disarm() {
  std::lock_guard lock(mu_);
  cut_after_.reset();
}

bool FaultDevice::powered() const {
  std::lock_guard lock(mu_);
  return powered_;
}

std::optional<CrashReport> FaultDevice::last_crash() const {
  std::lock_guard lock(mu_);
  return last_crash_;
}

Result<std::shared_ptr<FaultDevice>> FaultDevice::Reopen() {
  FaultOptions options = options_;
  {
    std::lock_guard lock(mu_);
    if (powered_) return Status::Busy(name() + ": reopen needs a power cut first");
    options.seed = rng_();
  }
  return Create(below_, options);
}

Status FaultDevice::Recover() {
  std::lock_guard lock(mu_);
  if (powered_) return Status::Busy(name() + ": recover needs a power cut first");
  powered_ = true;
  cut_after_.reset();
  return Status::Ok();
}

Result<std::shared_ptr<FaultDevice>> FaultDevice::Fork(uint64_t seed) const {
  auto* memory = dynamic_cast<const MemoryDevice*>(below_.get());
  if (memory == nullptr) {
    return Status::NotSupported(name() + ": fork needs a MemoryDevice below");
  }
  FaultOptions options = options_;
  options.seed = seed;
  std::lock_guard lock(mu_);
  auto copy = Create(memory->Clone(), options);
  std::lock_guard copy_lock(copy->mu_);
  for (const auto& e : log_) {
    auto entry = std::make_unique<Entry>();
    entry->kind = e->kind;
    entry->offset = e->offset;
    entry->length = e->length;
    entry->may_unmap = e->may_unmap;
    entry->durable = e->durable;
    if (e->data != nullptr) {
      entry->data = std::make_unique<uint8_t[]>(e->length);
      std::memcpy(entry->data.get(), e->data.get(), e->length);
    }
    copy->AppendLocked(std::move(entry));
  }
  copy->powered_ = powered_;
  return copy;
}

// ---- other faults ------------------------------------------------------------------------

Result<std::vector<uint64_t>> FaultDevice::FlipBits(uint64_t offset, uint64_t length,
                                                    uint32_t count) {
  if (length == 0 || length > UINT64_MAX / 8 || count > length * 8) {
    return Status::InvalidArgument(name() + ": cannot flip " + std::to_string(count) + " bits in " +
                                   std::to_string(length) + " bytes");
  }
  const uint64_t dev_size = below_->size();
  if (offset > dev_size || length > dev_size - offset) {
    return Status::NoSpace(name() + ": flip range beyond the end");
  }
  const uint64_t start = offset / lbs_ * lbs_;
  const uint64_t end = (offset + length + lbs_ - 1) / lbs_ * lbs_;
  std::vector<uint8_t> buf(end - start);
  std::lock_guard lock(mu_);
  VS_RETURN_IF_ERROR(below_->Read(start, buf));
  std::set<uint64_t> bits;
  std::uniform_int_distribution<uint64_t> pick(offset * 8, (offset + length) * 8 - 1);
  while (bits.size() < count) bits.insert(pick(rng_));
  for (uint64_t bit : bits) buf[bit / 8 - start] ^= static_cast<uint8_t>(1u << (bit % 8));
  VS_RETURN_IF_ERROR(below_->Write(start, buf));
  VS_RETURN_IF_ERROR(below_->Flush());
  return std::vector<uint64_t>(bits.begin(), bits.end());
}

int FaultDevice::AddFailRule(const FaultRule& rule) {
  std::lock_guard lock(mu_);
  const int id = next_rule_id_++;
  rules_.push_back(RuleState{id, rule});
  return id;
}

void FaultDevice::RemoveFailRule(int id) {
  std::lock_guard lock(mu_);
  std::erase_if(rules_, [id](const RuleState& r) { return r.id == id; });
}

void FaultDevice::ClearFailRules() {
  std::lock_guard lock(mu_);
  rules_.clear();
}

int FaultDevice::FailOps(uint32_t ops, uint64_t after, double probability, int error) {
  FaultRule rule;
  rule.ops = ops;
  rule.after = after;
  rule.probability = probability;
  rule.error = error;
  return AddFailRule(rule);
}

// ---- introspection -----------------------------------------------------------------------

FaultCounters FaultDevice::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

void FaultDevice::ResetCounters() {
  std::lock_guard lock(mu_);
  const uint64_t cuts = counters_.power_cuts;
  counters_ = FaultCounters{};
  counters_.power_cuts = cuts;
}

size_t FaultDevice::unflushed_writes() const {
  std::lock_guard lock(mu_);
  return log_.size();
}

uint64_t FaultDevice::unflushed_bytes() const {
  std::lock_guard lock(mu_);
  return unflushed_bytes_;
}

void FaultDevice::Reseed(uint64_t seed) {
  std::lock_guard lock(mu_);
  rng_.seed(seed);
}

}  // namespace volstack::bdev

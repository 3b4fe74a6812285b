#include "pool/zvol_device.h"

#include <cstdlib>

#include "pool/pool_impl.h"
#include "pool/volume.h"

namespace volstack::pool {

namespace {
bdev::Geometry MakeGeometry(const Volume& v, bool read_only, uint32_t lbs) {
  bdev::Geometry g;
  // The size on disk: a grow not yet committed reaches devices with its commit
  // (Volume::NotifyResize).
  g.size_bytes = v.synced_phys().volsize;
  g.logical_block_size = lbs;
  g.physical_block_size = v.volblocksize();
  g.optimal_io_size = v.volblocksize();
  g.read_only = read_only;
  g.caps.fua = true;
  g.caps.discard = true;
  g.caps.write_zeroes = true;
  g.caps.allocation_query = true;
  return g;
}
}  // namespace

ZvolDevice::ZvolDevice(std::shared_ptr<Pool> pool, std::shared_ptr<Volume> volume, bool read_only,
                       uint32_t logical_block_size)
    : BlockDevice(volume->phys().name, MakeGeometry(*volume, read_only, logical_block_size)),
      pool_(std::move(pool)),
      volume_(std::move(volume)),
      zil_(pool_->impl()->zil->Get(volume_)) {
  volume_->open_count++;
  volume_->AddResizeListener(this, [this](uint64_t size) { SetSize(size); });
}

ZvolDevice::~ZvolDevice() {
  volume_->RemoveResizeListener(this);
  volume_->open_count--;
}

Status ZvolDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  VS_RETURN_IF_ERROR(CheckUsable());
  return volume_->Read(offset, buf);
}

ZvolDevice::Mode ZvolDevice::GetMode() const {
  static const char* env = std::getenv("VOLSTACK_LOGBIAS");
  const std::string sync = volume_->Prop("sync", "standard");
  Mode m;
  m.always = sync == "always";
  m.disabled = sync == "disabled";
  m.log = !m.disabled &&
          volume_->Prop("logbias", env != nullptr && *env ? env : "latency") == "latency";
  return m;
}

uint64_t ZvolDevice::OpenTxg() const {
  PoolImpl& p = *pool_->impl();
  std::lock_guard l(p.mu);
  return p.open_txg;
}

Status ZvolDevice::MakeDurable(const Mode& m) { return m.log ? zil_->Commit() : pool_->Sync(); }

Status ZvolDevice::RetryWhileSpaceIsComing(bool logged, const std::function<Status()>& attempt) {
  for (uint64_t commits = 0;; commits++) {
    Status st = attempt();
    // A failed attempt may have changed part of the range: only a txg makes that durable.
    if (!logged || !st.ok()) zil_->NoteUnlogged(OpenTxg());
    if (st.code() != ENOSPC || commits > kTxgDefer || !pool_->impl()->CommitForSpace()) {
      return st;
    }
  }
}

Status ZvolDevice::CheckUsable() const {
  VS_RETURN_IF_ERROR(pool_->impl()->CheckUsable());
  // A destroyed volume's log is gone from the pool: nothing may record into it.
  if (volume_->destroyed) return Status::FromErrno(ENXIO, name() + ": volume destroyed");
  return Status::Ok();
}

Status ZvolDevice::DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) {
  VS_RETURN_IF_ERROR(CheckUsable());
  const Mode m = GetMode();
  Status st = RetryWhileSpaceIsComing(m.log, [&] {
    if (!m.log) return volume_->Write(offset, buf, /*throttle=*/false);
    Zil::RangeLock range(*zil_, offset, buf.size());
    Status written = volume_->Write(offset, buf, /*throttle=*/false);
    // The open txg read after the write bounds the txg that holds it (zil.cc); read before
    // the throttle, which may start a commit and so make it one txg too new.
    if (written.ok()) zil_->LogWrite(OpenTxg(), offset, buf);
    return written;
  });
  pool_->impl()->Throttle();
  VS_RETURN_IF_ERROR(st);
  if (m.always || (opts.fua && !m.disabled)) return MakeDurable(m);
  return Status::Ok();
}

Status ZvolDevice::DoFlush() {
  VS_RETURN_IF_ERROR(CheckUsable());
  // A snapshot (read-only, snapshot.cc) has nothing to make durable, and no intent log.
  if (name().find('@') != std::string::npos) return Status::Ok();
  const Mode m = GetMode();
  if (m.disabled) return Status::Ok();
  return MakeDurable(m);
}

Status ZvolDevice::Zero(uint64_t offset, uint64_t length, bool fua) {
  VS_RETURN_IF_ERROR(CheckUsable());
  const Mode m = GetMode();
  Status st = RetryWhileSpaceIsComing(m.log, [&] {
    if (!m.log) return volume_->Zero(offset, length, /*throttle=*/false);
    Zil::RangeLock range(*zil_, offset, length);
    Status zeroed = volume_->Zero(offset, length, /*throttle=*/false);
    if (zeroed.ok()) zil_->LogZero(OpenTxg(), offset, length);
    return zeroed;
  });
  pool_->impl()->Throttle();
  VS_RETURN_IF_ERROR(st);
  if (m.always || (fua && !m.disabled)) return MakeDurable(m);
  return Status::Ok();
}

Status ZvolDevice::DoDiscard(uint64_t offset, uint64_t length) {
  return Zero(offset, length, false);
}

Status ZvolDevice::DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) {
  return Zero(offset, length, opts.fua);
}

Result<std::vector<bdev::AllocationExtent>> ZvolDevice::DoQueryAllocation(uint64_t offset,
                                                                          uint64_t length) {
  VS_RETURN_IF_ERROR(CheckUsable());
  return volume_->QueryAllocation(offset, length);
}

}  // namespace volstack::pool

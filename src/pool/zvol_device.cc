#include "pool/zvol_device.h"

#include "pool/pool_impl.h"
#include "pool/volume.h"

namespace volstack::pool {

namespace {
bdev::Geometry MakeGeometry(const Volume& v, bool read_only, uint32_t lbs) {
  bdev::Geometry g;
  g.size_bytes = v.volsize();
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
      volume_(std::move(volume)) {
  volume_->open_count++;
  volume_->AddResizeListener(this, [this](uint64_t size) { SetSize(size); });
}

ZvolDevice::~ZvolDevice() {
  volume_->RemoveResizeListener(this);
  volume_->open_count--;
}

Status ZvolDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  VS_RETURN_IF_ERROR(pool_->impl()->CheckUsable());
  if (volume_->destroyed) return Status::FromErrno(ENXIO, name() + ": volume destroyed");
  return volume_->Read(offset, buf);
}

Status ZvolDevice::AfterWrite(bool fua) {
  const std::string sync = volume_->Prop("sync", "standard");
  if (sync == "always" || (fua && sync != "disabled")) return pool_->Sync();
  return Status::Ok();
}

Status ZvolDevice::DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) {
  VS_RETURN_IF_ERROR(pool_->impl()->CheckUsable());
  VS_RETURN_IF_ERROR(volume_->Write(offset, buf));
  return AfterWrite(opts.fua);
}

Status ZvolDevice::DoFlush() {
  VS_RETURN_IF_ERROR(pool_->impl()->CheckUsable());
  if (volume_->Prop("sync", "standard") == "disabled") return Status::Ok();
  return pool_->Sync();
}

Status ZvolDevice::DoDiscard(uint64_t offset, uint64_t length) {
  VS_RETURN_IF_ERROR(pool_->impl()->CheckUsable());
  VS_RETURN_IF_ERROR(volume_->Zero(offset, length));
  return AfterWrite(false);
}

Status ZvolDevice::DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) {
  VS_RETURN_IF_ERROR(pool_->impl()->CheckUsable());
  VS_RETURN_IF_ERROR(volume_->Zero(offset, length));
  return AfterWrite(opts.fua);
}

Result<std::vector<bdev::AllocationExtent>> ZvolDevice::DoQueryAllocation(uint64_t offset,
                                                                          uint64_t length) {
  VS_RETURN_IF_ERROR(pool_->impl()->CheckUsable());
  return volume_->QueryAllocation(offset, length);
}

}  // namespace volstack::pool

#include "bdev/forwarding_device.h"

#include "util/check.h"

namespace volstack::bdev {

namespace {
const BlockDevicePtr& NonNull(const BlockDevicePtr& p) {
  VS_CHECK(p != nullptr);
  return p;
}
}  // namespace

ForwardingDevice::ForwardingDevice(BlockDevicePtr target, std::string name)
    : BlockDevice(name.empty() ? NonNull(target)->name() : std::move(name),
                  NonNull(target)->geometry()),
      target_(std::move(target)) {}

Status ForwardingDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  return target_->Read(offset, buf);
}

Status ForwardingDevice::DoWrite(uint64_t offset, std::span<const uint8_t> buf, WriteOptions opts) {
  return target_->Write(offset, buf, opts);
}

// Forwarded as one request, so the target (and a FaultDevice below) sees one write.
Status ForwardingDevice::DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                                  WriteOptions opts) {
  return target_->WriteV(offset, pieces, opts);
}

Status ForwardingDevice::DoFlush() { return target_->Flush(); }

void ForwardingDevice::DoStartWriteback(uint64_t offset, uint64_t length) {
  target_->StartWriteback(offset, length);
}

Status ForwardingDevice::DoDiscard(uint64_t offset, uint64_t length) {
  return target_->Discard(offset, length);
}

Status ForwardingDevice::DoWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts) {
  return target_->WriteZeroes(offset, length, opts);
}

Result<std::vector<AllocationExtent>> ForwardingDevice::DoQueryAllocation(uint64_t offset,
                                                                          uint64_t length) {
  return target_->QueryAllocation(offset, length);
}

}  // namespace volstack::bdev

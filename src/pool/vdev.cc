#include "pool/vdev.h"

#include <optional>

#include "bdev/forwarding_device.h"

namespace volstack::pool {

namespace {

// Counts the failures of the operations it forwards.
class ErrorCountingDevice final : public bdev::ForwardingDevice {
 public:
  ErrorCountingDevice(bdev::BlockDevicePtr target, std::shared_ptr<VdevErrors> errors)
      : ForwardingDevice(std::move(target)), errors_(std::move(errors)) {}

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override {
    return Count(errors_->read, ForwardingDevice::DoRead(offset, buf));
  }
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions o) override {
    return Count(errors_->write, ForwardingDevice::DoWrite(offset, buf, o));
  }
  Status DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                  bdev::WriteOptions o) override {
    return Count(errors_->write, ForwardingDevice::DoWriteV(offset, pieces, o));
  }
  Status DoFlush() override { return Count(errors_->write, ForwardingDevice::DoFlush()); }
  Status DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions o) override {
    return Count(errors_->write, ForwardingDevice::DoWriteZeroes(offset, length, o));
  }

 private:
  static Status Count(std::atomic<uint64_t>& counter, Status st) {
    if (!st.ok()) counter++;
    return st;
  }
  std::shared_ptr<VdevErrors> errors_;
};

}  // namespace

Vdev::Vdev(bdev::BlockDevicePtr device, uint32_t id, uint64_t guid)
    : errors_(std::make_shared<VdevErrors>()),
      device_(std::make_shared<ErrorCountingDevice>(std::move(device), errors_)),
      id_(id),
      guid_(guid) {}

Status Vdev::WriteLabelConfigs(const LabelConfig& config, int parity) {
  for (int l = parity; l < kLabelCount; l += 2) {
    const uint64_t off = LabelOffset(size(), l) + kLabelConfigOffset;
    const auto buf = EncodeLabelConfig(config, off);
    VS_RETURN_IF_ERROR(device_->Write(off, buf));
  }
  return Status::Ok();
}

Status Vdev::WriteUberblock(const Uberblock& ub) {
  for (int l = 0; l < kLabelCount; l++) {
    const uint64_t off =
        LabelOffset(size(), l) + kUberRingOffset + (ub.txg % kUberSlots) * kUberSlotSize;
    const auto buf = EncodeUberblock(ub, off);
    VS_RETURN_IF_ERROR(device_->Write(off, buf));
  }
  return Status::Ok();
}

std::vector<Uberblock> Vdev::ReadUberblocks() {
  std::vector<Uberblock> out;
  std::vector<uint8_t> ring(kUberSlots * kUberSlotSize);
  for (int l = 0; l < kLabelCount; l++) {
    const uint64_t base = LabelOffset(size(), l) + kUberRingOffset;
    if (!device_->Read(base, ring).ok()) continue;
    for (uint64_t s = 0; s < kUberSlots; s++) {
      auto ub =
          DecodeUberblock(std::span<const uint8_t>(ring.data() + s * kUberSlotSize, kUberSlotSize),
                          base + s * kUberSlotSize);
      if (ub.ok()) out.push_back(*ub);
    }
  }
  return out;
}

Result<LabelConfig> Vdev::ReadLabelConfig(bdev::BlockDevice& device) {
  if (device.size() < kMinVdevSize) {
    return Status::Corruption(device.name() + ": too small to hold a pool label");
  }
  std::vector<uint8_t> buf(kLabelConfigSize);
  Status first_error;
  std::optional<LabelConfig> best;
  for (int l = 0; l < kLabelCount; l++) {
    const uint64_t off = LabelOffset(device.size(), l) + kLabelConfigOffset;
    Status st = device.Read(off, buf);
    if (st.ok()) {
      auto c = DecodeLabelConfig(buf, off);
      if (c.ok()) {
        if (!best || c->txg > best->txg) best = *c;
        continue;
      }
      st = c.status();
    }
    if (first_error.ok()) first_error = st;
  }
  if (best) return *best;
  return Status::Corruption(device.name() + ": no valid pool label (" + first_error.message() +
                            ")");
}

}  // namespace volstack::pool

#include "pool/vdev.h"

#include <optional>

namespace volstack::pool {

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

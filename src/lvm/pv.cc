#include "lvm/pv.h"

#include <cstring>

#include "lvm/device_io.h"
#include "lvm/uuid.h"

namespace volstack::lvm {

Result<std::unique_ptr<Pv>> Pv::Open(std::string name, bdev::BlockDevicePtr dev) {
  if (dev->size() < kLabelScanSectors * kSectorSize) {
    return Status::NotFound(name + ": too small to be a PV");
  }
  VS_ASSIGN_OR_RETURN(auto head, ReadBytes(*dev, 0, kLabelScanSectors * kSectorSize));
  auto label = FindLabel(head);
  if (!label.ok()) return label.status().WithContext(name);
  std::unique_ptr<Pv> pv(new Pv(std::move(name), std::move(dev)));
  pv->label_ = *label;
  if (pv->label_.data_areas.empty()) {
    return Status::Corruption(pv->name_ + ": PV label has no data area");
  }
  for (const DiskLocn& m : pv->label_.metadata_areas) {
    if (m.offset % kSectorSize != 0 || m.size < 2 * kMdaHeaderSize ||
        m.offset + m.size < m.offset || m.offset + m.size > pv->dev_->size()) {
      return Status::Corruption(pv->name_ + ": metadata area {" + std::to_string(m.offset) + ", " +
                                std::to_string(m.size) + "} lies outside the device");
    }
    pv->mdas_.emplace_back(pv->dev_, m.offset, m.size);
  }
  VS_RETURN_IF_ERROR(pv->LoadMdas());
  return pv;
}

Status Pv::LoadMdas() {
  copies_.assign(mdas_.size(), MdaCopy{});
  for (size_t i = 0; i < mdas_.size(); i++) {
    MdaCopy& c = copies_[i];
    c.error = mdas_[i].Load();
    if (!c.error.ok()) continue;
    if (mdas_[i].header().committed.empty()) continue;  // orphan
    auto text = mdas_[i].ReadCommitted();
    if (!text.ok()) {
      c.error = text.status();
      continue;
    }
    auto vg = ImportVg(*text);
    if (!vg.ok()) {
      c.error = vg.status().WithContext(name_);
      continue;
    }
    c.text = std::move(*text);
    c.vg = std::move(*vg);
  }
  return Status::Ok();
}

const MdaCopy* Pv::best_copy() const {
  const MdaCopy* best = nullptr;
  for (const auto& c : copies_) {
    if (c.vg && (!best || c.vg->seqno > best->vg->seqno)) best = &c;
  }
  return best;
}

uint64_t Pv::pe_start_bytes() const { return label_.data_areas.front().offset; }

uint64_t Pv::usable_end_bytes() const {
  uint64_t end = dev_->size();
  for (const DiskLocn& m : label_.metadata_areas) {
    if (m.offset > pe_start_bytes()) end = std::min(end, m.offset);
  }
  return end;
}

Result<std::unique_ptr<Pv>> Pv::Create(std::string name, bdev::BlockDevicePtr dev,
                                       const PvCreateOptions& options) {
  const uint64_t size = dev->size();
  const uint64_t pe_start = options.data_alignment;
  const uint64_t mda2_size = options.metadata_copies >= 2 ? kDefaultPeStart : 0;
  if (pe_start < 2 * kDefaultMdaStart || pe_start % kSectorSize != 0) {
    return Status::InvalidArgument(name + ": data alignment must be at least 8 KiB");
  }
  if (size < pe_start + mda2_size + (1 << 20)) {
    return Status::InvalidArgument(name + ": device is too small for a PV (" +
                                   std::to_string(size) + " bytes)");
  }
  if (dev->read_only()) return Status::ReadOnly(name + ": device is read-only");
  std::unique_ptr<Pv> pv(new Pv(std::move(name), std::move(dev)));
  PvLabel& l = pv->label_;
  l.pv_uuid = options.uuid.empty() ? GenerateId() : options.uuid;
  l.device_size = size;
  l.data_areas = {{pe_start, 0}};
  if (options.metadata_copies >= 1)
    l.metadata_areas.push_back({kDefaultMdaStart, pe_start - kDefaultMdaStart});
  if (options.metadata_copies >= 2) {
    l.metadata_areas.push_back({(size - mda2_size) / kSectorSize * kSectorSize, mda2_size});
  }
  l.ext_flags = 0;
  // Clear stale labels in the scanned sectors other than ours (lvm2's label_remove); keep
  // sector 0 unless it holds a label.
  VS_ASSIGN_OR_RETURN(auto head, ReadBytes(*pv->dev_, 0, kLabelScanSectors * kSectorSize));
  for (uint64_t s = 0; s < kLabelScanSectors; s++) {
    if (s == l.sector) continue;
    if (std::memcmp(&head[s * kSectorSize], kLabelId, 8) == 0) {
      std::vector<uint8_t> zero(kSectorSize, 0);
      VS_RETURN_IF_ERROR(WriteBytes(*pv->dev_, s * kSectorSize, zero));
    }
  }
  for (const DiskLocn& m : l.metadata_areas) {
    pv->mdas_.emplace_back(pv->dev_, m.offset, m.size);
    VS_RETURN_IF_ERROR(pv->mdas_.back().Initialize());
  }
  pv->copies_.assign(pv->mdas_.size(), MdaCopy{});
  VS_RETURN_IF_ERROR(pv->WriteLabel());
  VS_RETURN_IF_ERROR(pv->dev_->Flush());
  return pv;
}

Status Pv::WriteLabel() {
  std::vector<uint8_t> sector(kSectorSize);
  VS_RETURN_IF_ERROR(EncodeLabelSector(label_, sector));
  return WriteBytes(*dev_, label_.sector * kSectorSize, sector);
}

Status Pv::SetInUse(bool in_use) {
  const uint32_t flags =
      in_use ? (label_.ext_flags | kPvExtUsed) : (label_.ext_flags & ~kPvExtUsed);
  if (flags == label_.ext_flags && label_.has_extension) return Status::Ok();
  label_.ext_flags = flags;
  label_.has_extension = true;
  label_.ext_version = kPvHeaderExtensionVersion;
  return WriteLabel();
}

Status Pv::SetUuid(const std::string& raw_uuid) {
  if (!IsValidRawId(raw_uuid)) return Status::InvalidArgument("invalid PV UUID " + raw_uuid);
  const std::string old = label_.pv_uuid;
  label_.pv_uuid = raw_uuid;
  Status s = WriteLabel();
  if (s.ok()) s = dev_->Flush();
  if (!s.ok()) label_.pv_uuid = old;
  return s;
}

Status Pv::MakeOrphan() {
  for (auto& m : mdas_) VS_RETURN_IF_ERROR(m.Initialize());
  copies_.assign(mdas_.size(), MdaCopy{});
  VS_RETURN_IF_ERROR(SetInUse(false));
  return dev_->Flush();
}

Status Pv::Wipe() {
  std::vector<uint8_t> zero(kSectorSize, 0);
  VS_RETURN_IF_ERROR(WriteBytes(*dev_, label_.sector * kSectorSize, zero));
  for (auto& m : mdas_) {
    std::vector<uint8_t> z(kMdaHeaderSize, 0);
    VS_RETURN_IF_ERROR(WriteBytes(*dev_, m.start(), z));
  }
  return dev_->Flush();
}

}  // namespace volstack::lvm

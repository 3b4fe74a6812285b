#include "lvm/label_format.h"

#include <cstring>

#include "lvm/crc.h"
#include "lvm/uuid.h"
#include "util/coding.h"

namespace volstack::lvm {

namespace {

constexpr uint32_t kPvHeaderOffset = kLabelHeaderSize;
constexpr uint32_t kLocnSize = 16;
constexpr uint32_t kRawLocnSize = 24;

// Appends `list` and its terminator at `*pos`, refusing to pass `end`.
Status PutLocnList(const std::vector<DiskLocn>& list, std::span<uint8_t> out, size_t* pos) {
  if (*pos + (list.size() + 1) * kLocnSize > out.size()) {
    return Status::InvalidArgument("LVM label: too many areas for one sector");
  }
  for (const DiskLocn& l : list) {
    EncodeLE64(&out[*pos], l.offset);
    EncodeLE64(&out[*pos + 8], l.size);
    *pos += kLocnSize;
  }
  *pos += kLocnSize;  // the zero terminator (buffer is zeroed)
  return Status::Ok();
}

Result<std::vector<DiskLocn>> GetLocnList(std::span<const uint8_t> in, size_t* pos,
                                          const char* what) {
  std::vector<DiskLocn> list;
  while (true) {
    if (*pos + kLocnSize > in.size()) {
      return Status::Corruption(std::string("LVM label: ") + what +
                                " list overruns the label sector");
    }
    DiskLocn l{DecodeLE64(&in[*pos]), DecodeLE64(&in[*pos + 8])};
    *pos += kLocnSize;
    if (l.offset == 0) break;
    list.push_back(l);
  }
  return list;
}

}  // namespace

Status EncodeLabelSector(const PvLabel& label, std::span<uint8_t> sector) {
  VS_CHECK_OP(sector.size(), ==, kSectorSize);
  VS_CHECK_OP(label.pv_uuid.size(), ==, kIdLen);
  std::memset(sector.data(), 0, sector.size());
  std::memcpy(&sector[0], kLabelId, 8);
  EncodeLE64(&sector[8], label.sector);
  EncodeLE32(&sector[20], kPvHeaderOffset);
  std::memcpy(&sector[24], kLabelType, 8);
  uint8_t* pvh = &sector[kPvHeaderOffset];
  std::memcpy(pvh, label.pv_uuid.data(), kIdLen);
  EncodeLE64(pvh + 32, label.device_size);
  size_t pos = kPvHeaderOffset + 40;
  VS_RETURN_IF_ERROR(PutLocnList(label.data_areas, sector, &pos));
  VS_RETURN_IF_ERROR(PutLocnList(label.metadata_areas, sector, &pos));
  if (label.has_extension) {
    if (pos + 8 > sector.size()) return Status::InvalidArgument("LVM label: no room");
    EncodeLE32(&sector[pos], label.ext_version);
    EncodeLE32(&sector[pos + 4], label.ext_flags);
    pos += 8;
    VS_RETURN_IF_ERROR(PutLocnList(label.bootloader_areas, sector, &pos));
  }
  EncodeLE32(&sector[16], LvmCrc(sector.subspan(20)));
  return Status::Ok();
}

Result<PvLabel> DecodeLabelSector(std::span<const uint8_t> sector, uint64_t lba) {
  if (sector.size() != kSectorSize) return Status::InvalidArgument("label sector size");
  if (std::memcmp(&sector[0], kLabelId, 8) != 0 || DecodeLE64(&sector[8]) != lba) {
    return Status::NotFound("no LVM label in sector " + std::to_string(lba));
  }
  const std::string where = "LVM label in sector " + std::to_string(lba);
  const uint32_t crc = DecodeLE32(&sector[16]);
  const uint32_t want = LvmCrc(sector.subspan(20));
  if (crc != want) {
    return Status::Corruption(where + ": bad checksum (" + std::to_string(crc) +
                              " != " + std::to_string(want) + ")");
  }
  if (std::memcmp(&sector[24], kLabelType, 8) != 0) {
    return Status::Corruption(where + ": unknown label type (not LVM2 001)");
  }
  const uint32_t offset = DecodeLE32(&sector[20]);
  if (offset < kLabelHeaderSize || offset > kSectorSize - 40) {
    return Status::Corruption(where + ": bad pv_header offset " + std::to_string(offset));
  }
  PvLabel label;
  label.sector = lba;
  const uint8_t* pvh = &sector[offset];
  label.pv_uuid.assign(reinterpret_cast<const char*>(pvh), kIdLen);
  if (!IsValidRawId(label.pv_uuid)) return Status::Corruption(where + ": invalid PV UUID");
  label.device_size = DecodeLE64(pvh + 32);
  size_t pos = offset + 40;
  VS_ASSIGN_OR_RETURN(label.data_areas, GetLocnList(sector, &pos, "data area"));
  VS_ASSIGN_OR_RETURN(label.metadata_areas, GetLocnList(sector, &pos, "metadata area"));
  // The extension exists when 8 bytes remain and its version is not 0 (lvm2 reads neither
  // the flags nor the bootloader list of an old PV: whatever follows is not meaningful).
  label.has_extension = false;
  label.ext_version = 0;
  label.ext_flags = 0;
  if (pos + 8 <= sector.size() && DecodeLE32(&sector[pos]) != 0) {
    label.has_extension = true;
    label.ext_version = DecodeLE32(&sector[pos]);
    label.ext_flags = DecodeLE32(&sector[pos + 4]);
    pos += 8;
    VS_ASSIGN_OR_RETURN(label.bootloader_areas, GetLocnList(sector, &pos, "bootloader area"));
  }
  return label;
}

Result<PvLabel> FindLabel(std::span<const uint8_t> head) {
  if (head.size() < kLabelScanSectors * kSectorSize) {
    return Status::NotFound("device too small for an LVM label");
  }
  Status first_error = Status::NotFound("no LVM label");
  for (uint64_t s = 0; s < kLabelScanSectors; s++) {
    auto label = DecodeLabelSector(head.subspan(s * kSectorSize, kSectorSize), s);
    if (label.ok()) return label;
    if (!label.status().IsNotFound() && first_error.IsNotFound()) {
      first_error = label.status();
    }
  }
  return first_error;
}

void EncodeMdaHeader(const MdaHeader& header, std::span<uint8_t> sector) {
  VS_CHECK_OP(sector.size(), ==, kMdaHeaderSize);
  std::memset(sector.data(), 0, sector.size());
  std::memcpy(&sector[4], kFmttMagic, 16);
  EncodeLE32(&sector[20], kFmttVersion);
  EncodeLE64(&sector[24], header.start);
  EncodeLE64(&sector[32], header.size);
  size_t pos = 40;
  for (const RawLocn* r : {&header.committed, &header.precommitted}) {
    EncodeLE64(&sector[pos], r->offset);
    EncodeLE64(&sector[pos + 8], r->size);
    EncodeLE32(&sector[pos + 16], r->checksum);
    EncodeLE32(&sector[pos + 20], r->flags);
    pos += kRawLocnSize;
  }
  EncodeLE32(&sector[0], LvmCrc(sector.subspan(4)));
}

Result<MdaHeader> DecodeMdaHeader(std::span<const uint8_t> sector, uint64_t expected_start) {
  const std::string where = "metadata area at " + std::to_string(expected_start);
  if (sector.size() != kMdaHeaderSize) return Status::InvalidArgument(where + ": size");
  const uint32_t crc = DecodeLE32(&sector[0]);
  if (crc != LvmCrc(sector.subspan(4))) {
    return Status::Corruption(where + ": bad mda_header checksum");
  }
  if (std::memcmp(&sector[4], kFmttMagic, 16) != 0) {
    return Status::Corruption(where + ": bad mda_header magic");
  }
  if (DecodeLE32(&sector[20]) != kFmttVersion) {
    return Status::Corruption(where + ": unsupported mda_header version");
  }
  MdaHeader h;
  h.start = DecodeLE64(&sector[24]);
  h.size = DecodeLE64(&sector[32]);
  if (h.start != expected_start) {
    return Status::Corruption(where + ": mda_header start is " + std::to_string(h.start));
  }
  if (h.size < 2 * kMdaHeaderSize) return Status::Corruption(where + ": area too small");
  size_t pos = 40;
  for (RawLocn* r : {&h.committed, &h.precommitted}) {
    r->offset = DecodeLE64(&sector[pos]);
    r->size = DecodeLE64(&sector[pos + 8]);
    r->checksum = DecodeLE32(&sector[pos + 16]);
    r->flags = DecodeLE32(&sector[pos + 20]);
    pos += kRawLocnSize;
    if (r->offset == 0) continue;
    if (r->offset < kMdaHeaderSize || r->offset >= h.size || r->size > h.size - kMdaHeaderSize) {
      return Status::Corruption(where + ": metadata location outside the area");
    }
  }
  if (h.committed.empty()) h.precommitted = RawLocn{};  // list ends at slot 0
  return h;
}

}  // namespace volstack::lvm

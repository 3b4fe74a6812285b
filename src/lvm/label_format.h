// The LVM2 binary on-disk structures: the label sector (label_header + pv_header) and the
// metadata area header. Byte layouts are lvm2 2.03's (lib/label/label.h,
// lib/format_text/layout.h); see docs/format/lvm2.md for the prose spec. All integers are
// little-endian and go through util/coding.h.
//
//  Label sector (512 bytes, sector 1 by default; scanned in sectors 0..3):
//  +0   id[8]          "LABELONE"
//  +8   sector_xl u64  LBA of this sector
//  +16  crc_xl    u32  LvmCrc of bytes 20..511
//  +20  offset_xl u32  32: where pv_header starts
//  +24  type[8]        "LVM2 001"
//  +32  pv_header:
//       +0  pv_uuid[32]     raw ID, no dashes
//       +32 device_size u64 bytes
//       +40 disk_locn{u64 offset, u64 size}... data areas, then {0,0}
//           disk_locn...    metadata areas, then {0,0}
//           u32 ext_version (2), u32 ext_flags (bit0 PV_EXT_USED)
//           disk_locn...    bootloader areas, then {0,0}
//
//  mda_header (512 bytes at the start of each metadata area):
//  +0  checksum_xl u32  LvmCrc of bytes 4..511
//  +4  magic[16]        " LVM2 x[5A%r0N*>"
//  +20 version u32      1
//  +24 start u64        absolute offset of this header
//  +32 size u64         size of the area, header included
//  +40 raw_locn[]       {u64 offset (from area start), u64 size, u32 checksum, u32 flags}
//                       slot 0 = committed, slot 1 = precommitted, then a zero terminator
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "util/result.h"

namespace volstack::lvm {

inline constexpr uint32_t kSectorSize = 512;
inline constexpr uint32_t kLabelScanSectors = 4;
inline constexpr uint64_t kDefaultLabelSector = 1;
inline constexpr char kLabelId[] = "LABELONE";
inline constexpr char kLabelType[] = "LVM2 001";
inline constexpr uint32_t kLabelHeaderSize = 32;
inline constexpr uint32_t kPvHeaderExtensionVersion = 2;
inline constexpr uint32_t kPvExtUsed = 0x1;

inline constexpr uint32_t kMdaHeaderSize = 512;
inline constexpr char kFmttMagic[] = " LVM2 x[5A%r0N*>";  // 16 bytes, no NUL on disk
inline constexpr uint32_t kFmttVersion = 1;
inline constexpr uint32_t kRawLocnIgnored = 0x1;

// Defaults of pvcreate on a 4 KiB-page system.
inline constexpr uint64_t kDefaultMdaStart = 4096;
inline constexpr uint64_t kDefaultPeStart = 1 << 20;
inline constexpr uint64_t kDefaultMdaSize = kDefaultPeStart - kDefaultMdaStart;  // 1044480

struct DiskLocn {
  uint64_t offset = 0;  // bytes
  uint64_t size = 0;    // bytes; 0 for a data area means "to the end of the device"
  bool operator==(const DiskLocn&) const = default;
};

// The decoded label sector.
struct PvLabel {
  uint64_t sector = kDefaultLabelSector;
  std::string pv_uuid;  // 32 raw characters
  uint64_t device_size = 0;
  std::vector<DiskLocn> data_areas;
  std::vector<DiskLocn> metadata_areas;
  bool has_extension = true;
  uint32_t ext_version = kPvHeaderExtensionVersion;
  uint32_t ext_flags = 0;
  std::vector<DiskLocn> bootloader_areas;

  bool in_use() const { return (ext_flags & kPvExtUsed) != 0; }
};

// Encodes `label` into the 512-byte `sector` (zeroed first; CRC computed last).
// Requires the lists to fit in the sector.
Status EncodeLabelSector(const PvLabel& label, std::span<uint8_t> sector);

// Decodes a 512-byte sector read at LBA `lba`. NotFound if it holds no LABELONE for this LBA;
// Corruption for a bad CRC, type, offset or overrun.
Result<PvLabel> DecodeLabelSector(std::span<const uint8_t> sector, uint64_t lba);

// Scans the first kLabelScanSectors sectors (`head` holds at least 2048 bytes). NotFound if
// none holds a label; the first valid label wins. A label with a bad checksum is an error
// only when no valid one exists.
Result<PvLabel> FindLabel(std::span<const uint8_t> head);

struct RawLocn {
  uint64_t offset = 0;  // from the start of the metadata area
  uint64_t size = 0;    // text bytes including the trailing NUL
  uint32_t checksum = 0;
  uint32_t flags = 0;
  bool empty() const { return offset == 0; }
  bool operator==(const RawLocn&) const = default;
};

struct MdaHeader {
  uint64_t start = 0;    // absolute byte offset of the area
  uint64_t size = 0;     // bytes, header included
  RawLocn committed;     // slot 0
  RawLocn precommitted;  // slot 1
};

void EncodeMdaHeader(const MdaHeader& header, std::span<uint8_t> sector);
// Checks CRC, magic, version, that `start` equals `expected_start` and that slots lie
// inside the area.
Result<MdaHeader> DecodeMdaHeader(std::span<const uint8_t> sector, uint64_t expected_start);

}  // namespace volstack::lvm

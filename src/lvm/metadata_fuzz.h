// The fuzz entry for every LVM2 decoder of untrusted bytes. It is a header so that the
// libFuzzer target (metadata_fuzz.cc, built with -DVOLSTACK_FUZZ=ON) and the CI smoke test
// (fuzz_smoke_test.cc) run the same code, while the volstack_lvm library carries none of it.
//
// The first input byte picks the decoder; the rest is its input:
//   0  the config text parser (ParseConfig), then the typed accessors on what it returns
//   1  a whole VG import (ImportVg), kept segment types included; what imports must export and
//      re-import to the same text, its unserved LVs unchanged (CheckKeptUnchanged), and
//      lvm2's report roles computed (LvReportRoles)
//   2  the label sector as found on disk (DecodeLabelSector at LBA first-byte / 7 % 4, and
//      FindLabel over the input as the first 4 sectors)
//   3  the pv_header: the input after a valid label_header whose CRC is fixed up, so the
//      fuzzer spends its time on the area lists rather than on the checksum
//   4  the mda_header, checksum fixed up half of the time
//   5  a metadata area on a MemoryDevice (header CRC fixed up): Load, read both slots, write
//      a new copy and read it back, import what it holds
//   6  a whole PV on a MemoryDevice (label CRC fixed up): Pv::Open, a scan, activation
//
// Decoders must return a Status, never crash, read out of bounds, loop or abort. A broken
// round trip is a bug: the entry aborts so that libFuzzer keeps the input.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bdev/memory_device.h"
#include "lvm/config_text.h"
#include "lvm/crc.h"
#include "lvm/kept_lvs.h"
#include "lvm/label_format.h"
#include "lvm/lvm.h"
#include "lvm/metadata.h"
#include "lvm/metadata_area.h"
#include "lvm/pv.h"
#include "lvm/uuid.h"
#include "util/coding.h"

namespace volstack::lvm {

namespace fuzz_detail {

// Aborts (so libFuzzer keeps the input) naming the broken property.
inline void CheckImpl(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "FuzzLvmMetadata: %s\n", what);
  std::abort();
}
#define VS_FUZZ_CHECK(cond) ::volstack::lvm::fuzz_detail::CheckImpl((cond), #cond)

// `in` copied into a zeroed buffer of exactly `n` bytes.
inline std::vector<uint8_t> Padded(std::span<const uint8_t> in, size_t n) {
  std::vector<uint8_t> out(n, 0);
  std::copy_n(in.begin(), std::min(in.size(), n), out.begin());
  return out;
}

inline void FixLabelCrc(std::span<uint8_t> sector) {
  EncodeLE32(&sector[16], LvmCrc(sector.subspan(20)));
}

inline void FixMdaCrc(std::span<uint8_t> sector) {
  EncodeLE32(&sector[0], LvmCrc(sector.subspan(4)));
}

// Maps each byte of a 32-byte PV UUID into lvm2's ID alphabet, so that label decoding goes on
// past the UUID check.
inline void FixUuid(std::span<uint8_t> raw) {
  static constexpr char kAlphabet[] =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!#";
  for (auto& b : raw.first(kIdLen)) b = static_cast<uint8_t>(kAlphabet[b % 64]);
}

// Sets the checksum of each raw_locn of the mda_header at `area[0]` whose text lies unwrapped
// inside `area`, then the header's own checksum: the fuzzer then reaches the text parser.
inline void FixMdaChecksums(std::span<uint8_t> area) {
  for (size_t slot = 40; slot + 24 <= 40 + 2 * 24; slot += 24) {
    const uint64_t off = DecodeLE64(&area[slot]), len = DecodeLE64(&area[slot + 8]);
    if (off >= kMdaHeaderSize && off < area.size() && len <= area.size() - off) {
      EncodeLE32(&area[slot + 16], LvmCrc(area.subspan(off, len)));
    }
  }
  FixMdaCrc(area.first(kMdaHeaderSize));
}

inline void ExerciseConfig(const ConfigNode& n, int depth) {
  if (depth > kMaxConfigDepth + 1) std::abort();  // the parser bounds nesting
  for (const auto& c : n.children) {
    (void)n.GetInt(c.key).ok();
    (void)n.GetUint(c.key, UINT32_MAX).ok();
    (void)n.GetString(c.key).ok();
    (void)n.GetStringList(c.key).ok();
    if (c.is_section) ExerciseConfig(c, depth + 1);
  }
}

inline void FuzzImport(std::string_view text) {
  auto vg = ImportVg(text);
  if (!vg.ok()) {
    VS_FUZZ_CHECK(vg.status().IsCorruption() || vg.status().code() == EOPNOTSUPP);
    return;
  }
  // What was accepted is valid, and survives a round trip through lvm2's text exactly.
  VS_FUZZ_CHECK(ValidateVg(*vg).ok());
  (void)LvReportRoles(*vg);
  ExportInfo info;
  info.description = "fuzz";
  info.creation_host = "host";
  info.creation_time = 1;
  for (bool backup : {false, true}) {
    info.backup_form = backup;
    const std::string text1 = ExportVg(*vg, info);
    auto again = ImportVg(text1);
    VS_FUZZ_CHECK(again.ok());
    VS_FUZZ_CHECK(ExportVg(*again, info) == text1);
    VS_FUZZ_CHECK(CheckKeptUnchanged(*vg, *again).ok());
  }
}

inline void FuzzLabelSector(std::span<const uint8_t> in, uint64_t lba) {
  auto label = DecodeLabelSector(Padded(in, kSectorSize), lba);
  if (!label.ok()) return;
  // A decoded label encodes (pv_header at its usual offset) and decodes to the same values.
  std::vector<uint8_t> sector(kSectorSize);
  VS_FUZZ_CHECK(EncodeLabelSector(*label, sector).ok());
  auto again = DecodeLabelSector(sector, lba);
  VS_FUZZ_CHECK(again.ok());
  VS_FUZZ_CHECK(
      again->pv_uuid == label->pv_uuid && again->device_size == label->device_size &&
      again->data_areas == label->data_areas && again->metadata_areas == label->metadata_areas &&
      again->bootloader_areas == label->bootloader_areas && again->ext_flags == label->ext_flags);
}

inline void FuzzPvHeader(std::span<const uint8_t> in) {
  std::vector<uint8_t> sector(kSectorSize, 0);
  std::memcpy(&sector[0], kLabelId, 8);
  EncodeLE64(&sector[8], kDefaultLabelSector);
  EncodeLE32(&sector[20], kLabelHeaderSize);
  std::memcpy(&sector[24], kLabelType, 8);
  std::copy_n(in.begin(), std::min<size_t>(in.size(), kSectorSize - kLabelHeaderSize),
              sector.begin() + kLabelHeaderSize);
  FixUuid(std::span<uint8_t>(sector).subspan(kLabelHeaderSize));
  FixLabelCrc(sector);
  FuzzLabelSector(sector, kDefaultLabelSector);
}

inline void FuzzMdaHeader(std::span<const uint8_t> in) {
  if (in.empty()) return;
  const bool fix = in[0] & 1;
  auto sector = Padded(in.subspan(1), kMdaHeaderSize);
  const uint64_t start = DecodeLE64(&sector[24]);
  if (fix) {
    std::memcpy(&sector[4], kFmttMagic, 16);
    FixMdaCrc(sector);
  }
  auto h = DecodeMdaHeader(sector, start);
  if (!h.ok()) return;
  VS_FUZZ_CHECK(h->start == start && h->size >= 2 * kMdaHeaderSize);
  // Where the next copy would go never leaves the area.
  auto next = MetadataArea::Place(*h, in[0] * 37u);
  if (next.ok()) VS_FUZZ_CHECK(next->offset >= kMdaHeaderSize && next->offset < h->size);
}

// A small device holding the input at `at`; every byte beyond is zero.
inline std::shared_ptr<bdev::MemoryDevice> DeviceWith(std::span<const uint8_t> in, uint64_t at,
                                                      uint64_t size) {
  auto dev = bdev::MemoryDevice::Create(size, 512, 4096, "fuzz");
  const uint64_t n = std::min<uint64_t>(in.size(), size - at) / 512 * 512;
  if (n > 0) (void)dev->Write(at, in.first(n)).ok();
  const uint64_t tail = std::min<uint64_t>(in.size(), size - at) - n;
  if (tail > 0) {
    std::vector<uint8_t> block(512, 0);
    std::copy_n(in.begin() + n, tail, block.begin());
    (void)dev->Write(at + n, block).ok();
  }
  return dev;
}

inline void FuzzMetadataArea(std::span<const uint8_t> in) {
  constexpr uint64_t kDev = 64 * 1024;
  constexpr uint64_t kStart = 4096;
  if (in.size() < 2) return;
  // The area size: from the input, bounded by the device most of the time.
  const uint64_t size = in[0] < 250 ? (uint64_t{in[0]} + 3) * 128 : kDev - kStart;
  std::vector<uint8_t> body(in.begin() + 1, in.end());
  body.resize(std::max<size_t>(body.size(), kMdaHeaderSize), 0);
  std::memcpy(&body[4], kFmttMagic, 16);
  EncodeLE32(&body[20], kFmttVersion);
  EncodeLE64(&body[24], kStart);
  EncodeLE64(&body[32], size);
  FixMdaChecksums(std::span<uint8_t>(body).first(std::min<size_t>(body.size(), size)));
  auto dev = DeviceWith(body, kStart, kDev);
  MetadataArea mda(dev, kStart, std::min<uint64_t>(size, kDev - kStart));
  if (!mda.Load().ok()) return;
  for (const RawLocn& slot : {mda.header().committed, mda.header().precommitted}) {
    auto text = mda.ReadText(slot);
    if (text.ok()) FuzzImport(*text);
  }
  // A new copy goes after the committed one, never over it, and reads back.
  std::string text = "vg { }\n";
  text.append(in[1] % 64 * 50, 'x');
  text.push_back('\0');
  auto locn = mda.WriteText(text);
  if (!locn.ok()) return;
  VS_FUZZ_CHECK(locn->offset >= kMdaHeaderSize && locn->offset < mda.size());
  auto back = mda.ReadText(*locn);
  VS_FUZZ_CHECK(back.ok() && *back == text.substr(0, text.size() - 1));
}

inline void FuzzPv(std::span<const uint8_t> in) {
  constexpr uint64_t kDev = 6 << 20;  // room for a 1 MiB metadata area and a few extents
  auto all = Padded(in, std::max<size_t>(in.size(), 4096 + kMdaHeaderSize));
  std::memcpy(&all[512], kLabelId, 8);
  EncodeLE64(&all[512 + 8], 1);
  EncodeLE32(&all[512 + 20], kLabelHeaderSize);
  std::memcpy(&all[512 + 24], kLabelType, 8);
  FixUuid(std::span<uint8_t>(all).subspan(512 + kLabelHeaderSize));
  FixLabelCrc(std::span<uint8_t>(all).subspan(512, kSectorSize));
  FixMdaChecksums(std::span<uint8_t>(all).subspan(4096));
  auto dev = DeviceWith(all, 0, kDev);
  Lvm lvm([&](const std::string&,
              bool) -> Result<bdev::BlockDevicePtr> { return bdev::BlockDevicePtr(dev); },
          true);
  lvm.Scan({"fuzz"});
  for (auto& h : lvm.vgs()) {
    for (const auto& lv : h.vg.lvs) {
      auto act = lvm.Activate(h, lv.name, true);
      if (!act.ok()) continue;
      std::vector<uint8_t> buf(std::min<uint64_t>((*act)->size(), 4096));
      buf.resize(buf.size() / (*act)->logical_block_size() * (*act)->logical_block_size());
      if (!buf.empty()) (void)(*act)->Read(0, buf).ok();
    }
  }
}

}  // namespace fuzz_detail

// Runs one fuzz input; always returns 0 (libFuzzer's convention).
inline int FuzzLvmMetadata(const uint8_t* data, size_t size) {
  using namespace fuzz_detail;
  if (size < 1) return 0;
  const std::span<const uint8_t> in(data + 1, size - 1);
  const std::string_view text(reinterpret_cast<const char*>(in.data()), in.size());
  switch (data[0] % 7) {
    case 0: {
      auto root = ParseConfig(text);
      if (root.ok()) {
        ExerciseConfig(*root, 0);
      } else {
        VS_FUZZ_CHECK(root.status().IsCorruption());
      }
      break;
    }
    case 1:
      FuzzImport(text);
      break;
    case 2:
      FuzzLabelSector(in, data[0] / 7 % kLabelScanSectors);
      (void)FindLabel(Padded(in, kLabelScanSectors * kSectorSize)).ok();
      break;
    case 3:
      FuzzPvHeader(in);
      break;
    case 4:
      FuzzMdaHeader(in);
      break;
    case 5:
      FuzzMetadataArea(in);
      break;
    default:
      FuzzPv(in);
      break;
  }
  return 0;
}

}  // namespace volstack::lvm

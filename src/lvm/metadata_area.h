// One metadata area (mda) of a PV: its 512-byte header and the circular buffer of text
// behind it, placed and wrapped exactly as lvm2 does (format-text.c: _next_rlocn_offset,
// _vg_write_raw, _vg_commit_raw_rlocn).
//
// The buffer is the area's bytes [512, size). A new copy starts after the committed one,
// rounded up to 512; when that leaves no room it restarts at 512; a copy that runs past the
// end continues at 512. Commit is two header writes: slot 1 (precommit) then slot 0
// (commit, slot 1 cleared). A crash before the slot-0 write leaves the old copy in force.
//
// Not thread-safe: one writer holds the VG.
#pragma once

#include <optional>
#include <string>

#include "bdev/block_device.h"
#include "lvm/label_format.h"

namespace volstack::lvm {

class MetadataArea {
 public:
  MetadataArea(bdev::BlockDevicePtr dev, uint64_t start, uint64_t size)
      : dev_(std::move(dev)), start_(start), size_(size) {}

  uint64_t start() const { return start_; }
  uint64_t size() const { return size_; }
  const MdaHeader& header() const { return header_; }

  // Reads and checks the header.
  Status Load();
  // Writes a fresh header with both slots empty (pvcreate, or a PV leaving its VG), after
  // zeroing the first `wipe` bytes of the area.
  Status Initialize(uint64_t wipe = 8 * kSectorSize);
  // Reads the text a slot points at, checking size and CRC (chained across the wrap).
  // The trailing NUL is stripped. NotFound if the slot is empty.
  Result<std::string> ReadText(const RawLocn& locn) const;
  Result<std::string> ReadCommitted() const { return ReadText(header_.committed); }

  // Where a text of `text_size` bytes goes next (after the committed copy).
  static Result<RawLocn> Place(const MdaHeader& header, uint64_t text_size);
  // Writes `text` (which ends with its NUL) after the committed copy, padded to 512 bytes.
  // Returns the slot that describes it; the header is not touched.
  Result<RawLocn> WriteText(std::string_view text);
  // Header writes of the commit protocol.
  Status Precommit(const RawLocn& locn);
  Status Commit(const RawLocn& locn);

 private:
  Status WriteHeader(const MdaHeader& header);

  bdev::BlockDevicePtr dev_;
  uint64_t start_;
  uint64_t size_;
  MdaHeader header_;
};

}  // namespace volstack::lvm

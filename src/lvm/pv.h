// A physical volume: a BlockDevice carrying an LVM2 label, with its metadata areas.
//
// Pv::Open reads the label (first 4 sectors), then each metadata area's header and its
// committed text. An mda that fails to decode is remembered with its error (reported by
// vgck/pvs) but does not hide the others. Pv::Create writes an orphan PV as pvcreate does:
// other LABELONE sectors among 0..3 cleared, mda(s) initialized with empty slots, then the
// label in sector 1 (last, so a crash leaves either no PV or a whole orphan PV).
//
// Not thread-safe; a Pv is used by the one command or daemon task that holds its VG.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "lvm/label_format.h"
#include "lvm/metadata.h"
#include "lvm/metadata_area.h"

namespace volstack::lvm {

struct PvCreateOptions {
  std::string uuid;                           // raw 32 characters; empty: generate
  int metadata_copies = 1;                    // 0, 1 or 2 (--pvmetadatacopies)
  uint64_t data_alignment = kDefaultPeStart;  // pe_start, bytes
};

struct MdaCopy {
  std::optional<VolumeGroup> vg;  // the committed VG, if any and readable
  std::string text;               // its text
  Status error;                   // why the area or its text could not be read
};

class Pv {
 public:
  // NotFound if the device carries no LVM label; Corruption for a damaged one.
  static Result<std::unique_ptr<Pv>> Open(std::string name, bdev::BlockDevicePtr dev);
  static Result<std::unique_ptr<Pv>> Create(std::string name, bdev::BlockDevicePtr dev,
                                            const PvCreateOptions& options);

  const std::string& name() const { return name_; }
  const bdev::BlockDevicePtr& dev() const { return dev_; }
  const PvLabel& label() const { return label_; }
  const std::string& uuid() const { return label_.pv_uuid; }
  std::vector<MetadataArea>& mdas() { return mdas_; }
  const std::vector<MdaCopy>& copies() const { return copies_; }
  // First PE in bytes (the data area's offset).
  uint64_t pe_start_bytes() const;
  // Size the PV offers to a VG: what pe_count is computed from, in bytes (dev size minus
  // an mda at the end).
  uint64_t usable_end_bytes() const;

  // The highest-seqno VG among this PV's mdas, or nullptr (orphan or unreadable).
  const MdaCopy* best_copy() const;

  // Re-reads every mda (after a commit).
  Status Reload() { return LoadMdas(); }
  // Rewrites the label with PV_EXT_USED set or cleared.
  Status SetInUse(bool in_use);
  // Rewrites the label with a new PV UUID (32 raw characters) and flushes (pvchange -u; the
  // VG metadata naming the PV is the caller's, see Lvm::ChangePvUuid). On a failed write the
  // in-memory label keeps the old UUID.
  Status SetUuid(const std::string& raw_uuid);
  // Empties every mda (slot 0 cleared) and clears PV_EXT_USED: the PV becomes an orphan.
  Status MakeOrphan();
  // Zeroes the label sector (pvremove).
  Status Wipe();

 private:
  Pv(std::string name, bdev::BlockDevicePtr dev) : name_(std::move(name)), dev_(std::move(dev)) {}
  Status LoadMdas();
  Status WriteLabel();

  std::string name_;
  bdev::BlockDevicePtr dev_;
  PvLabel label_;
  std::vector<MetadataArea> mdas_;
  std::vector<MdaCopy> copies_;  // parallel to mdas_
};

}  // namespace volstack::lvm

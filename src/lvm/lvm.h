// volstack's LVM2-compatible volume manager: the session a command (or the daemon) works in.
//
// Theory. LVM2 keeps a volume group's whole description as text in a metadata area (mda)
// of its PVs. A PV is found by its label (sector 1); the label lists the PV's mdas; each
// mda's header points (slot 0) at the committed text in a circular buffer. Every PV of a VG
// carries the same text with the same seqno; the highest seqno readable anywhere wins. See
// docs/format/lvm2.md.
//
// Data flow. Lvm::Scan opens each candidate device through the caller's DeviceOpener
// (files, block devices, pool volumes: anything that is a BlockDevice), reads labels and
// mdas, and groups PVs into VGs by the VG UUID found in their metadata. A VG whose text
// lists a PV that no scanned device carries is "partial": it is reported, its LVs that do
// not touch the missing PV still activate, and it is never written.
//
// Writes. Commands change a copy of the VolumeGroup model (vg_ops.h, allocator.h), then
// Lvm::Commit runs lvm2's protocol on every mda of every PV of the VG:
//   1. ValidateVg (segments cover each LV, no PE used twice, references resolve);
//   2. seqno + 1, text exported in lvm2's on-disk form;
//   3. the text written after the committed copy in every mda; flush every PV;
//   4. precommit: every mda header's slot 1 = new text; flush;
//   5. commit: every mda header's slot 0 = new text, slot 1 cleared; flush.
// A crash before any slot-0 write leaves the old VG everywhere; a crash among the slot-0
// writes leaves mdas with seqno N and N+1, and readers take N+1, as lvm2's do. PVs join a
// VG (label flag PV_EXT_USED) before the first commit that names them and leave it after
// the commit that drops them.
//
// Activation. An active LV is an LvDevice (lv_device.h): a BlockDevice that remaps each
// request onto the PV devices without copying.
//
// Segment types volstack does not change (raid, mirror LVs, snapshot, thin, cache, vdo, ...)
// are kept as read (metadata.h). Their LVs and sub-LVs are unserved (kept_lvs.h): Activate
// refuses them, except raid1 and mirror LVs, which it serves as a MirroredDevice
// (mirrored_lv.h; their sub-LVs are still refused), and Commit refuses a VG in which any of
// them differs from the VG as read, so no command can change them while the rest of the VG
// is used as usual.
//
// Threads: an Lvm session is used by one thread (the command, or the daemon task holding
// the VG). LvDevices it creates are thread-safe and outlive it (they own their PV devices).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "lvm/activations.h"
#include "lvm/metadata.h"
#include "lvm/pv.h"

namespace volstack::lvm {

using DeviceOpener =
    std::function<Result<bdev::BlockDevicePtr>(const std::string& name, bool read_only)>;

// A VG as found by a scan.
struct VgHandle {
  VolumeGroup vg;
  std::vector<Pv*> pvs;       // parallel to vg.pvs; nullptr for a missing PV
  bool inconsistent = false;  // some mda holds an older or unreadable copy
  std::vector<std::string> warnings;

  bool partial() const;
  int mda_count() const;
};

struct ScanError {
  std::string device;
  Status status;
};

class Lvm {
 public:
  // `activations` are those of the stack the session belongs to (activations.h); null:
  // Activations::Default().
  Lvm(DeviceOpener opener, bool read_only, std::shared_ptr<Activations> activations = nullptr);
  ~Lvm();

  // Opens and probes each name (duplicates and devices without a label skipped; labels or
  // headers that do not decode recorded in scan_errors()), then assembles VGs.
  void Scan(const std::vector<std::string>& names);
  // Probes one more device. NotFound if it carries no label.
  Result<Pv*> AddDevice(const std::string& name);

  const std::vector<std::unique_ptr<Pv>>& pvs() const { return pvs_; }
  const std::vector<ScanError>& scan_errors() const { return scan_errors_; }
  std::vector<VgHandle>& vgs() { return vgs_; }

  VgHandle* FindVg(const std::string& name);
  Pv* FindPv(const std::string& name_or_uuid);
  // The VG whose metadata lists `pv`, or nullptr for an orphan.
  VgHandle* VgOfPv(const Pv* pv);

  // Writes a new orphan PV. EEXIST if the device already is a PV of a VG.
  Result<Pv*> CreatePv(const std::string& name, const PvCreateOptions& options);
  // Wipes an orphan PV's label. EBUSY if it belongs to a VG.
  Status RemovePv(Pv* pv);

  // Commits `vg` (a modified copy of handle->vg, or a new VG when handle is nullptr) to the
  // PVs it lists, which must all be present among pvs(). `released` are PVs leaving the VG:
  // they become orphans after the commit. On success the scan state is updated.
  Status Commit(VolumeGroup vg, const std::string& description,
                const std::vector<Pv*>& released = {});
  // pvchange -u: gives `pv` the new UUID `raw_uuid` (32 raw characters) as lvm2 does. An
  // orphan (vg unset) gets a new label only. A PV of a VG gets the new label, then `vg` is
  // committed: a modified copy of the VG's metadata in which that PV's id already is
  // `raw_uuid` (seqno + 1, every mda of every PV). If the commit fails before any mda took
  // the new metadata, the old label is written back. EEXIST if another scanned PV has that
  // UUID; ENOENT for a VG with missing PVs.
  //
  // Crash window (the same as lvm2's, whose pvchange also writes the label before
  // vg_write/vg_commit): between the label write and the last slot-0 commit, the PV's label
  // and its VG's committed metadata disagree and the PV reads as missing until the label
  // carries the UUID the metadata names (lvm2: pvcreate --uuid OLD --restorefile BACKUP).
  Status ChangePvUuid(Pv* pv, const std::string& raw_uuid, const VolumeGroup* vg,
                      const std::string& description);
  // Removes the VG: every PV becomes an orphan.
  Status RemoveVg(VgHandle* handle);

  // Activates `lv_name` as a BlockDevice. A VG with missing PVs activates only LVs that
  // do not touch them, and only when `partial` is set (lvm2's --activationmode partial).
  Result<bdev::BlockDevicePtr> Activate(VgHandle& handle, const std::string& lv_name,
                                        bool partial = false);

  // Opens every device read-write again (after a read-only scan) before a write.
  bool read_only() const { return read_only_; }
  Activations& activations() { return *activations_; }

  // Re-reads every PV's metadata areas and re-assembles the VGs: another session in this
  // process (a running pvmove) may have committed since this one scanned.
  Status Reload();

 private:
  void Assemble();

  DeviceOpener opener_;
  bool read_only_;
  std::shared_ptr<Activations> activations_;
  std::vector<std::unique_ptr<Pv>> pvs_;
  std::vector<ScanError> scan_errors_;
  std::vector<VgHandle> vgs_;
};

// Default text header fields: host name, uname, time now, "Write from <command>.".
struct ExportInfo MakeExportInfo(const std::string& description);

}  // namespace volstack::lvm

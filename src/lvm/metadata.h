// The in-memory model of an LVM2 volume group, as the text metadata describes it
// (lib/format_text/import_vsn1.c, export.c): a VG holds PVs (referenced by index in
// segment areas; written as "pv0", "pv1", ... in order) and LVs made of segments.
//
// Segment types volstack serves: "striped" (linear is striped with one stripe) and "mirror"
// only as lvm2's pvmove writes it (the pvmove0 LV's legs). An area names either a PV and its
// first PE, or an LV and its first LE (an LV whose segment maps onto pvmove0 during a move).
//
// Every other segment type lvm2 writes (raid*, mirror LVs, snapshot, thin-pool, thin, cache,
// cache-pool, writecache, integrity, vdo, vdo-pool, error, zero, and any type lvm2 itself
// does not know) is *kept*: its section is held as read (Segment::kept_items) and written
// back exactly, so a rewrite of other LVs never changes it. Such an LV, and every LV it
// names (its sub-LVs: rimage/rmeta, tdata/tmeta, the snapshot's origin and COW, ...), is
// "unserved" (kept_lvs.h): never activated and never changed, except that raid1 and mirror
// LVs are activated (mirrored_lv.h) while they and their sub-LVs still never change.
//
// Units as in the text: extent_size, pe_start, dev_size and stripe_size in 512-byte sectors;
// extents counted in u32.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lvm/config_text.h"
#include "util/result.h"

namespace volstack::lvm {

inline constexpr uint64_t kSector = 512;

struct PhysicalVolume {
  std::string id;      // 32 raw characters
  std::string device;  // hint: the path lvm2 saw it at
  std::vector<std::string> status = {"ALLOCATABLE"};
  std::vector<std::string> flags;
  std::vector<std::string> tags;
  std::string device_id_type;
  std::string device_id;
  uint64_t dev_size = 0;  // sectors
  uint64_t pe_start = 0;  // sectors
  uint32_t pe_count = 0;
  std::optional<uint64_t> ba_start, ba_size;

  bool HasStatus(std::string_view s) const;
  bool allocatable() const { return HasStatus("ALLOCATABLE"); }
};

struct SegmentArea {
  int pv = -1;         // index into VolumeGroup::pvs, or -1 when the area names an LV
  std::string lv;      // set when the area names an LV
  uint32_t start = 0;  // first PE on the PV, or first LE of the LV

  bool is_pv() const { return pv >= 0; }
  bool operator==(const SegmentArea&) const = default;
};

struct Segment {
  uint32_t start_extent = 0;  // first LE
  uint32_t extent_count = 0;  // LEs
  std::string type = "striped";
  uint32_t stripe_size = 0;  // sectors; set when there is more than one stripe
  std::vector<SegmentArea> areas;
  std::vector<std::string> tags;
  // "mirror" (pvmove0) only.
  uint32_t extents_moved = 0;
  uint32_t region_size = 0;
  std::string mirror_log;
  // A kept segment (type not served): every item of its section in the order and layout
  // lvm2 wrote them, start_extent, extent_count and type included. areas is empty.
  bool kept = false;
  std::vector<ConfigNode> kept_items;

  bool is_striped() const { return !kept && type == "striped"; }
  bool is_mirror() const { return !kept && type == "mirror"; }
  uint32_t stripe_count() const { return static_cast<uint32_t>(areas.size()); }
  // Extents each area covers: extent_count / stripes for striped, extent_count for mirror.
  uint32_t area_len() const;
};

struct LogicalVolume {
  std::string name;
  std::string id;  // 32 raw characters (the LV half of the lvid)
  std::vector<std::string> status = {"READ", "WRITE", "VISIBLE"};
  std::vector<std::string> flags;
  std::vector<std::string> tags;
  std::optional<uint64_t> creation_time;
  std::string creation_host;
  std::string allocation_policy;  // empty: inherit
  std::optional<int64_t> read_ahead;
  std::string lock_args;  // shared VGs
  std::string profile;
  std::optional<int64_t> major, minor;  // with status FIXED_MINOR
  std::vector<Segment> segments;

  uint32_t le_count() const;
  bool HasStatus(std::string_view s) const;
  bool visible() const { return HasStatus("VISIBLE"); }
};

struct VolumeGroup {
  std::string name;
  std::string id;  // 32 raw characters
  uint32_t seqno = 0;
  std::string format = "lvm2";
  std::vector<std::string> status = {"RESIZEABLE", "READ", "WRITE"};
  std::vector<std::string> flags;
  std::vector<std::string> tags;
  std::string system_id;
  std::string allocation_policy;
  uint32_t extent_size = 8192;  // sectors
  uint32_t max_lv = 0;
  uint32_t max_pv = 0;
  uint32_t metadata_copies = 0;
  std::vector<PhysicalVolume> pvs;
  std::vector<LogicalVolume> lvs;
  // historical_logical_volumes (removed thin LVs lvm2 keeps for lineage, with
  // record_lvs_history): the section as read, written back byte for byte after
  // logical_volumes. Its origin/descendants name LVs of `lvs` (or "-name", another historical
  // LV); ValidateVg refuses a VG in which a named LV is gone.
  std::optional<ConfigNode> historical_lvs;

  uint64_t extent_bytes() const { return uint64_t{extent_size} * kSector; }
  int FindPvById(std::string_view raw_id) const;  // -1 if absent
  LogicalVolume* FindLv(std::string_view name);
  const LogicalVolume* FindLv(std::string_view name) const;
  bool HasStatus(std::string_view s) const;
  uint64_t total_extents() const;
  uint64_t allocated_extents() const;  // PEs used by areas on PVs
  uint32_t pv_allocated_extents(int pv) const;
};

// Text header fields that are not part of the VG itself.
struct ExportInfo {
  std::string description;
  std::string creation_host;
  uint64_t creation_time = 0;
  std::string uname;         // the comment after creation_host
  bool backup_form = false;  // vgcfgbackup's layout: header first, tab indentation
};

// Parses metadata text (on-disk or backup form), then validates the VG. Errors are
// Corruption naming what is wrong.
Result<VolumeGroup> ImportVg(std::string_view text);
// The text lvm2 would write (on-disk form ends with "\n" and a NUL, counted in its size).
std::string ExportVg(const VolumeGroup& vg, const ExportInfo& info);
// Every invariant a VG must satisfy before it is written: names, references, segments
// covering 0..le_count-1, no PE used twice across all LVs. InvalidArgument if not.
Status ValidateVg(const VolumeGroup& vg);

// lvm2's name rules (lvm-string.c): [A-Za-z0-9._+-], not "-" first, not "." or "..", < 128.
bool IsValidLvmName(std::string_view name);
// An LV name a user may create: valid and not a reserved prefix or suffix.
bool IsValidNewLvName(std::string_view name);

}  // namespace volstack::lvm

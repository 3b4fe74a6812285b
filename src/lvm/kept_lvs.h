// LVs volstack keeps but does not serve (metadata.h: kept segments).
//
// An LV is unserved when one of its segments is kept (raid1, thin-pool, snapshot, ...), or
// when an unserved LV's kept segment names it: raid images and metadata, mirror legs and
// logs, thin and cache pools' data and metadata, a snapshot's origin and COW, a cache's
// origin. Writing to any of them outside the target lvm2 would load (dm-raid, dm-thin,
// dm-snapshot, ...) corrupts what that target keeps, so volstack neither activates nor
// changes them: Lvm::Activate refuses them (raid1 and mirror LVs excepted: it serves them
// itself, mirrored_lv.h), and Lvm::Commit refuses any VG in which one of them differs from
// what was read (CheckKeptUnchanged), whichever command made the change.
//
// Names are found the generic way: every string in a kept segment that is the name of an
// LV of the VG. lvm2 refers to sub-LVs only by name, and a type volstack has never seen is
// covered too; an unrelated string that happens to equal an LV name only makes that LV
// unserved, the safe direction.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "lvm/metadata.h"
#include "util/result.h"

namespace volstack::lvm {

struct UnservedLv {
  std::string type;   // the kept segment type that makes it unserved
  std::string owner;  // the LV holding that segment (the LV itself, or the one using it)
};

// Every unserved LV of `vg`, by name.
std::map<std::string, UnservedLv> FindUnservedLvs(const VolumeGroup& vg);

// The LVs a kept segment names, in the order they appear.
std::vector<std::string> KeptReferences(const VolumeGroup& vg, const Segment& seg);
// A string item of a kept segment ("" when absent or not a string).
std::string KeptString(const Segment& seg, std::string_view key);

// Ok, or NotSupported in one line naming the LV and the segment type, when `lv_name` is
// unserved: "<vg>/<lv> ... <verb>" (verb: "activated", "changed").
Status CheckServed(const VolumeGroup& vg, const std::string& lv_name, std::string_view verb);

// Ok when every unserved LV of `before` is in `after` exactly as it was (its PVs compared by
// UUID, so renumbering other PVs is no change); NotSupported naming the first one that
// changed or went away.
Status CheckKeptUnchanged(const VolumeGroup& before, const VolumeGroup& after);

}  // namespace volstack::lvm

namespace volstack::lvm {

// How lvm2's reports show an LV (lib/metadata/lv.c: lv_attr_dup, lv_is_visible, and the
// pool_lv, origin and mirror_log fields), for the roles that kept segments give LVs.
struct LvReportRole {
  bool listed = true;      // false for a snapshot's internal "snapshotN" LV: lvm2 never lists it
  bool visible = true;     // lvm2's lv_is_visible: a COW LV is visible when its origin is
  char volume_type = '-';  // lv_attr[0]
  char target_type = '-';  // lv_attr[6]
  char zero = '-';         // lv_attr[7]: a thin pool (and its thin LVs) zeroes new blocks
  std::string pool, origin, log;  // LV names; shown [bracketed] when not visible
};

// Roles of every LV of `vg` by name (LVs without a role have the defaults, visible from
// their status).
std::map<std::string, LvReportRole> LvReportRoles(const VolumeGroup& vg);

// lvm2's name for a segment type in reports: without the "+FLAG" suffixes lvm2 writes.
std::string ReportedSegType(const std::string& type);

}  // namespace volstack::lvm

// pvmove: moving the extents of live LVs from one PV to others, the way lvm2 does it, in
// metadata lvm2's own tools read. The theory (states, what reaches disk before what, crash
// recovery) is at the top of pvmove.cc and in docs/pvmove.md.
//
// Two layers:
//   - metadata transforms on a VolumeGroup copy (pvmove_plan.cc): PlanMove adds the pvmove0
//     LV and points the moved areas at it; MarkSegmentMoved checkpoints one segment;
//     FinishMove turns pvmove0 back into plain areas (on the destination, or on the source
//     for what an abort reverts) and removes it;
//   - the engine (pvmove.cc): RunMove copies segment by segment, committing each step through
//     Lvm::Commit (which remaps the LVs active in this process); AbortMove reverts.
//
// Threads: the metadata functions are pure. RunMove runs on the caller's thread with its own
// Lvm session (the copy adds a reader and a write-behind thread per segment, pvmove_copy.h); one
// move per VG per process at a time (a second RunMove on the same VG gets EBUSY).
// AbortMove/StopMove may be called from another thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lvm/lvm.h"
#include "lvm/metadata.h"

namespace volstack::lvm {

// PEs [start, start + count) of one PV.
struct PeRange {
  uint32_t start = 0;
  uint32_t count = 0;
  bool operator==(const PeRange&) const = default;
};

// Parses lvm2's ":PE[-PE|+N]..." suffix (the text after the PV name, without the first
// colon): "0-9:20+5". InvalidArgument on bad syntax or overlapping ranges.
Result<std::vector<PeRange>> ParsePeRanges(const std::string& text);

struct PvSelection {
  int pv = -1;                  // index in vg.pvs
  std::vector<PeRange> ranges;  // empty: the whole PV
};

struct MovePlan {
  PvSelection source;
  std::vector<PvSelection> dests;    // empty: every other allocatable PV
  std::string lv_name;               // -n: only this LV
  bool atomic = false;               // --atomic: all or nothing
  uint32_t max_segment_extents = 0;  // split the copy into segments of at most this (0: none)
};

// The LV of a move in progress (status PVMOVE), or nullptr.
const LogicalVolume* FindPvmoveLv(const VolumeGroup& vg);

// Adds a pvmove LV ("pvmove0", ...) to `vg` for `plan`: the moved areas of each LV are split
// off and pointed at it, the LVs gain LOCKED, and each pvmove segment mirrors a source run
// onto newly allocated destination PEs. Returns its name. On error `vg` is unchanged:
//   EBUSY   a move is already in progress in the VG
//   ENOENT  no such LV (-n), or nothing of the selection is allocated ("No data to move")
//   ENOSPC  the destinations lack free extents
//   EINVAL  overlapping ranges, a range past the end of a PV, a destination equal to the source
Result<std::string> PlanMove(VolumeGroup& vg, const MovePlan& plan);

// Marks segment `index` of pvmove LV `name` as copied (extents_moved = extent_count).
Status MarkSegmentMoved(VolumeGroup& vg, const std::string& name, size_t index);

// Ends the move: every area that names pvmove LV `name` goes back onto a PV — the destination
// for copied segments, the source for the rest (only when `abort`; otherwise every segment
// must be copied, else EAGAIN) — LOCKED is dropped, segments merged, the pvmove LV removed.
// An --atomic move's abort puts everything back on the source.
Status FinishMove(VolumeGroup& vg, const std::string& name, bool abort);

// Progress of a running move.
struct MoveProgress {
  std::string vg;
  std::string source;        // the source PV's device name
  uint64_t total_bytes = 0;  // bytes the move copies in all
  uint64_t done_bytes = 0;   // of which done (segments finished + the current one so far)
  bool finished = false;
};

struct MoveOptions {
  // Copied under one MirrorGate hold: a write to the LV that hits a region being copied
  // waits for that region's copy (pvmove_copy.h). 1 MiB measured as fast as 4 MiB (see
  // docs/pvmove.md) and keeps the writes' waits short.
  uint64_t region_bytes = 1 << 20;
  int depth = 2;  // regions in flight: read region N+1 while region N is written
  // Write-behind: a flush of the destination starts every this many bytes copied, so the
  // checkpoint's flush finds little left to write (0: flush only at checkpoints).
  uint64_t flush_behind_bytes = 16 << 20;
  // Called after every region and at each checkpoint, on the mover's thread.
  std::function<void(const MoveProgress&)> progress;
  // A test hook called between regions on the copy's reader thread, while the region before
  // may still be being written (crash tests write through the LV here).
  std::function<void()> between_regions;
  // Runs one metadata commit of the move (`step`) and returns its status. The daemon passes
  // its serialization here, so a request reading the VG's metadata (lvs) never runs while
  // the move's commit writes it. Unset: `step` runs as is.
  std::function<Status(const std::function<Status()>& step)> serialize;
};

// Copies the move in progress in VG `vg_name` to its end: segment by segment, a commit after
// each (the checkpoint), then the final plain metadata. Nothing to do (no move) is OK.
// Stopped by StopMove: ECANCELED, with the move left resumable. Errors leave it resumable too.
Status RunMove(Lvm& lvm, const std::string& vg_name, const MoveOptions& options = {});

// Reverts the move in progress in VG `vg_name` (see FinishMove); a RunMove running on it in
// this process is stopped first. `lvm` is reloaded before the change.
Status AbortMove(Lvm& lvm, const std::string& vg_name);

// Asks a RunMove on `vg_name` under `activations` (those of the Lvm it runs on; null:
// Activations::Default()) to stop at the next region; returns at once. False if none runs.
bool StopMove(const std::string& vg_name, Activations* activations = nullptr);

// The progress of the move RunMove is running on `vg_name` under `activations`, if any.
std::optional<MoveProgress> LiveMoveProgress(const std::string& vg_name,
                                             Activations* activations = nullptr);

}  // namespace volstack::lvm

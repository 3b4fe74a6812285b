// pvmove: the engine that moves live LVs' extents between PVs.
//
// Theory. lvm2's mechanism, with the metadata lvm2 writes (docs/pvmove.md has the states):
//
//   M0  plain: LV areas on the source PV.
//   M1  PlanMove + commit: the moved areas name "pvmove0", which has one "mirror" segment
//       per run (leg 0 = source PEs, leg 1 = new destination PEs, extents_moved = 0); the
//       LVs are LOCKED, pvmove0 is PVMOVE+LOCKED. Active LVs are remapped by the commit
//       (LvDevice): the first incomplete segment is a running mirror (reads from the
//       source, writes to both legs), later ones still map to the source only.
//   M2  for each segment in turn: copy source -> destination region by region; each region
//       is copied holding its range in the MirrorGate, so a write racing the copy either
//       finishes before the copy reads or starts after it wrote (it reaches both legs
//       anyway). Then MarkSegmentMoved + commit: the checkpoint. The commit flushes every
//       PV before it writes metadata, so the copy is durable before it is recorded; the
//       remap then sends the segment to the destination only and mirrors the next one.
//   M3  FinishMove + commit: the LVs' areas name the destination PEs, pvmove0 is gone,
//       LOCKED is dropped. Plain metadata again.
//
// Ordering that makes it online: a commit's remap returns only when no request still runs
// on the previous map (LvDevice::Remap), so when a segment becomes mirrored no write that
// went to the source alone can still be in flight while its region is copied.
//
// Crash recovery. Every state on disk is one of M1/M2 (some segments copied) or M0/M3.
// Resume (RunMove on a VG with a pvmove LV) copies the first incomplete segment again from
// its start: the source is authoritative for it (reads come from leg 0), and after a crash
// unflushed mirrored writes may have reached one leg and not the other, so a partial copy
// cannot be trusted, exactly as lvm2 re-syncs its core-logged mirror. Copied segments map
// to the destination only, which held every flushed write when the checkpoint committed.
// Abort (FinishMove with abort) keeps copied segments on the destination and puts the rest
// back on the source; an --atomic move mirrors every segment until the end and its abort
// reverts everything. The cost of a crash is bounded by the segment size
// (MovePlan::max_segment_extents, lvm2's pvmove_max_segment_size_mb).
//
// Holes. When the source device answers the allocation query, unallocated runs are not
// read; the destination is zeroed there only where it holds data (a pool volume's hole on
// both sides costs nothing).
//
// Threads: RunMove runs on its caller's thread; the per-VG table of running moves (stop
// flag, progress) is guarded by a mutex.
#include "lvm/pvmove.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "lvm/activations.h"
#include "lvm/lv_device.h"
#include "lvm/pvmove_copy.h"

namespace volstack::lvm {

struct RunningMove {
  std::atomic<bool> stop{false};
  MoveProgress progress;  // GUARDED_BY(Activations::Moves::mu)
};

namespace {

// Registers a running move for the lifetime of the object.
class MoveSlot {
 public:
  static Result<std::unique_ptr<MoveSlot>> Take(Activations::Moves& moves, const std::string& vg) {
    std::lock_guard lock(moves.mu);
    if (moves.by_vg.count(vg)) {
      return Status::Busy("a pvmove is already running on volume group " + vg);
    }
    auto r = std::make_shared<RunningMove>();
    moves.by_vg[vg] = r;
    return std::unique_ptr<MoveSlot>(new MoveSlot(moves, vg, r));
  }
  ~MoveSlot() {
    std::lock_guard lock(moves_.mu);
    moves_.by_vg.erase(vg_);
    moves_.cv.notify_all();
  }
  bool stopped() const { return running_->stop.load(); }
  void Publish(const MoveProgress& p) {
    std::lock_guard lock(moves_.mu);
    running_->progress = p;
  }

 private:
  MoveSlot(Activations::Moves& moves, std::string vg, std::shared_ptr<RunningMove> r)
      : moves_(moves), vg_(std::move(vg)), running_(r) {}
  Activations::Moves& moves_;
  std::string vg_;
  std::shared_ptr<RunningMove> running_;
};

// Commits change(copy of the VG); when another session of this process committed first
// (EAGAIN: Commit re-read the newer metadata), applies the change to that and tries again.
Status CommitChange(Lvm& lvm, const std::string& vg_name,
                    const std::function<Status(VolumeGroup&)>& change, const std::string& desc) {
  for (int attempt = 0;; attempt++) {
    VgHandle* h = lvm.FindVg(vg_name);
    if (!h) return Status::NotFound("Volume group \"" + vg_name + "\" not found");
    VolumeGroup next = h->vg;
    VS_RETURN_IF_ERROR(change(next));
    Status s = lvm.Commit(next, desc);
    if (s.code() != EAGAIN || attempt >= 8) return s;
  }
}

uint64_t SegBytes(const VolumeGroup& vg, const Segment& s) {
  return uint64_t{s.extent_count} * vg.extent_bytes();
}

}  // namespace

Status RunMove(Lvm& lvm, const std::string& vg_name, const MoveOptions& options) {
  VS_ASSIGN_OR_RETURN(auto slot, MoveSlot::Take(lvm.activations().moves(), vg_name));
  auto commit = [&](const std::function<Status(VolumeGroup&)>& change, const std::string& desc) {
    auto step = [&] { return CommitChange(lvm, vg_name, change, desc); };
    return options.serialize ? options.serialize(step) : step();
  };
  for (;;) {
    VgHandle* h = lvm.FindVg(vg_name);
    if (!h) return Status::NotFound("Volume group \"" + vg_name + "\" not found");
    const LogicalVolume* pm = FindPvmoveLv(h->vg);
    if (!pm) return Status::Ok();
    if (h->partial()) {
      return Status::NotFound("Cannot move extents in volume group " + vg_name +
                              " while PVs are missing");
    }
    const std::string name = pm->name;
    const bool atomic =
        std::find(pm->tags.begin(), pm->tags.end(), kAtomicMoveTag) != pm->tags.end();
    MoveProgress p;
    p.vg = vg_name;
    const Segment& first = pm->segments.front();
    p.source = first.areas.front().is_pv() && h->pvs[first.areas.front().pv]
                   ? h->pvs[first.areas.front().pv]->name()
                   : "";
    for (const auto& s : pm->segments) {
      p.total_bytes += SegBytes(h->vg, s);
      if (!atomic && s.extents_moved >= s.extent_count) p.done_bytes += SegBytes(h->vg, s);
    }
    // The segments to copy now: the first incomplete one, or (atomic) all of them.
    std::vector<size_t> todo;
    for (size_t i = 0; i < pm->segments.size(); i++) {
      if (atomic || pm->segments[i].extents_moved < pm->segments[i].extent_count) {
        todo.push_back(i);
        if (!atomic) break;
      }
    }
    bool finishing = true;
    for (size_t i = 0; i < pm->segments.size(); i++) {
      const bool queued = std::find(todo.begin(), todo.end(), i) != todo.end();
      if (!queued && pm->segments[i].extents_moved < pm->segments[i].extent_count) {
        finishing = false;
      }
    }
    for (size_t i : todo) {
      const Segment seg = pm->segments[i];
      const SegmentArea& sa = seg.areas.front();
      const SegmentArea& da = seg.areas.back();
      if (!sa.is_pv() || !da.is_pv()) return Status::Corruption(name + ": leg names an LV");
      const uint64_t ext = h->vg.extent_bytes();
      const uint64_t soff = h->vg.pvs[sa.pv].pe_start * kSector + uint64_t{sa.start} * ext;
      const uint64_t doff = h->vg.pvs[da.pv].pe_start * kSector + uint64_t{da.start} * ext;
      const std::string& gate_pv = h->vg.pvs[da.pv].id;
      SegmentCopy c;
      c.src = h->pvs[sa.pv]->dev();
      c.src_offset = soff;
      c.dst = h->pvs[da.pv]->dev();
      c.dst_offset = doff;
      c.length = SegBytes(h->vg, seg);
      c.gate_pv = gate_pv;
      c.gate = &lvm.activations().gate();
      c.region_bytes = options.region_bytes;
      c.depth = options.depth;
      c.flush_behind_bytes = options.flush_behind_bytes;
      c.stopped = [&] { return slot->stopped(); };
      c.region_done = [&](uint64_t, uint64_t n) {
        p.done_bytes += n;
        slot->Publish(p);
        if (options.progress) options.progress(p);
      };
      c.between_regions = options.between_regions;
      if (Status s = CopySegment(c); !s.ok()) {
        return s.code() == ECANCELED ? s : s.WithContext("pvmove copy");
      }
    }
    auto change = [&](VolumeGroup& v) -> Status {
      for (size_t i : todo) VS_RETURN_IF_ERROR(MarkSegmentMoved(v, name, i));
      return finishing ? FinishMove(v, name, /*abort=*/false) : Status::Ok();
    };
    if (finishing) {
      VS_RETURN_IF_ERROR(commit(change, "Write from pvmove (finished)."));
      p.done_bytes = p.total_bytes;
      p.finished = true;
      slot->Publish(p);
      if (options.progress) options.progress(p);
      return Status::Ok();
    }
    VS_RETURN_IF_ERROR(commit(change, "Write from pvmove (checkpoint)."));
  }
}

bool StopMove(const std::string& vg_name, Activations* activations) {
  auto& moves = (activations ? *activations : *Activations::Default()).moves();
  std::lock_guard lock(moves.mu);
  auto it = moves.by_vg.find(vg_name);
  if (it == moves.by_vg.end()) return false;
  it->second->stop = true;
  return true;
}

Status AbortMove(Lvm& lvm, const std::string& vg_name) {
  auto& moves = lvm.activations().moves();
  if (StopMove(vg_name, &lvm.activations())) {
    std::unique_lock lock(moves.mu);
    moves.cv.wait(lock, [&] { return !moves.by_vg.count(vg_name); });
  }
  VS_ASSIGN_OR_RETURN(auto slot, MoveSlot::Take(moves, vg_name));
  VS_RETURN_IF_ERROR(lvm.Reload());
  VgHandle* h = lvm.FindVg(vg_name);
  if (!h) return Status::NotFound("Volume group \"" + vg_name + "\" not found");
  const LogicalVolume* pm = FindPvmoveLv(h->vg);
  if (!pm) return Status::NotFound("No pvmove in progress in volume group " + vg_name);
  const std::string name = pm->name;
  return CommitChange(
      lvm, vg_name, [&](VolumeGroup& v) { return FinishMove(v, name, /*abort=*/true); },
      "Write from pvmove --abort.");
}

std::optional<MoveProgress> LiveMoveProgress(const std::string& vg_name, Activations* activations) {
  auto& moves = (activations ? *activations : *Activations::Default()).moves();
  std::lock_guard lock(moves.mu);
  auto it = moves.by_vg.find(vg_name);
  if (it == moves.by_vg.end()) return std::nullopt;
  return it->second->progress;
}

}  // namespace volstack::lvm

// Scrub and resilver: one walk over every block of the pool.
//
// What it does. A scan reads every block the synced pool names — the MOS, the space-map
// blocks, and every volume's and snapshot's tree of indirect and data blocks — from every
// child of its vdev (Vdev::ScrubBlock), checks each copy against the checksum in its
// pointer and rewrites each bad copy from a good one. It also rewrites label configs that
// no longer decode. A scrub counts the bad copies as checksum errors of their children;
// a resilver is the same walk after a child was replaced or attached: that child
// (RESILVERING: written by every commit, read by nobody) is bad everywhere, so the walk
// fills it, and it becomes readable when the walk ends.
//
// Why the walked tree stays put. The walk starts from the tree of the last synced txg T
// (read under sync_mu) and sets scan_pin_txg = T + 1: frees of txg T + 1 and later are
// not released to the allocator until the scan ends (txg_sync.cc), so every block of T's
// tree keeps its bytes while the walk reads it, however many txgs commit meanwhile. Blocks
// born after T are written by their commits to every usable child, the resilvering one
// included. The cost: space freed during a scan comes back only when it ends.
//
// A resilver starts with a commit (vdev_admin.cc), so data written early to the old
// children just before the attach is in the walked tree, and ends with one, so the filled
// children also hold the current uberblock.
//
// Progress (ScanInfo, zpool status's "scan:" lines): examined = allocated bytes of the
// blocks walked, issued = bytes read and verified, repaired = bytes rewritten, errors =
// blocks with no good copy (recorded in data_errors, zpool status -v). A shared subtree
// (a snapshot's and its volume's) is walked once.
//
// Simplifications on purpose: intent-log blocks are not scanned (they are verified by
// their own checksum at import, and a commit makes them obsolete); uberblock slots are
// not rewritten (every commit writes the current one to every label); a scrub cut short by
// a close or a crash is started again, from the beginning, by the next import (the pool
// property kScrubbingProp, set while it runs); a resilver is started again by the replace
// or attach that the crash left undone; scans are not throttled.
#include <chrono>
#include <unordered_set>

#include "pool/pool_impl.h"

namespace volstack::pool {

namespace {

uint64_t NowSeconds() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

struct ScanRoot {
  std::string name;  // the dataset, for the error list ("" for pool metadata)
  BlockPtr bp;
};

class Walker {
 public:
  explicit Walker(PoolImpl* pool) : pool_(pool) {}

  // False when the scan was cancelled or paused.
  bool Walk(const ScanRoot& root) {
    name_ = root.name;
    return Visit(root.bp);
  }

 private:
  bool Stopped() {
    std::lock_guard l(pool_->scan_mu);
    return pool_->scan_cancel || pool_->scan_pause || pool_->closed;
  }

  void Note(uint64_t examined, uint64_t issued, const HealCounts& heal, bool error) {
    std::lock_guard l(pool_->scan_mu);
    pool_->scan.examined += examined;
    pool_->scan.issued += issued;
    pool_->scan.repaired += heal.repaired_bytes;
    pool_->scan.errors += error;
  }

  bool Visit(const BlockPtr& bp) {
    if (bp.IsHole()) return true;
    if (Stopped()) return false;
    const Dva& d = bp.dva[0];
    if (!InRange(bp)) {
      Error(bp);
      Note(0, 0, {}, true);
      return true;
    }
    // Identical pointers name one subtree: a snapshot shares most of its volume's. A
    // subtree counts as seen once walked whole (a pause may cut a walk short).
    const uint64_t key = (uint64_t{d.vdev} << 48) ^ d.offset ^ (bp.birth << 1);
    if (bp.type == BlockType::kVolIndirect && seen_.count(key)) return true;
    HealCounts heal;
    std::vector<uint8_t> good;
    // Whole sectors (asize) are read and repaired; the checksum covers the first psize bytes
    // (all of them, unless the block is compressed).
    Status st = pool_->vdevs[d.vdev]->ScrubBlock(
        d.offset, d.asize(),
        [&](std::span<const uint8_t> b) {
          return ComputeChecksum(bp.cksum, b.first(bp.psize)) == bp.checksum;
        },
        &heal, &good);
    Note(d.asize(), bp.psize, heal, !st.ok());
    if (!st.ok()) {
      Error(bp);
      return true;
    }
    if (bp.type != BlockType::kVolIndirect) return true;
    std::vector<BlockPtr> kids;
    for (uint32_t i = 0; i < kBpsPerIndirect; i++) {
      auto child = DecodeBlockPtr(std::span<const uint8_t>(good.data() + i * kBlkptrSize, 128));
      if (child.ok() && !child->IsHole()) kids.push_back(*child);
    }
    if (bp.level == 1) {
      if (!VisitData(kids)) return false;
    } else {
      for (const auto& k : kids) {
        if (!Visit(k)) return false;
      }
    }
    seen_.insert(key);
    return true;
  }

  // An L1 block's data blocks, in runs of blocks adjacent on disk (up to kRunBytes) read
  // once per child: a volume written in order scrubs at the speed of large reads.
  static constexpr uint64_t kRunBytes = 1 << 20;
  bool VisitData(const std::vector<BlockPtr>& bps) {
    size_t i = 0;
    while (i < bps.size()) {
      if (Stopped()) return false;
      const Dva& d0 = bps[i].dva[0];
      if (!InRange(bps[i])) {
        Error(bps[i]);
        Note(0, 0, {}, true);
        i++;
        continue;
      }
      size_t j = i + 1;
      uint64_t end = d0.offset + d0.asize();
      while (j < bps.size() && InRange(bps[j]) && bps[j].dva[0].vdev == d0.vdev &&
             bps[j].dva[0].offset == end && end + bps[j].dva[0].asize() - d0.offset <= kRunBytes) {
        end += bps[j].dva[0].asize();
        j++;
      }
      std::vector<Vdev::ScrubPiece> pieces;
      uint64_t asize = 0, psize = 0;
      for (size_t k = i; k < j; k++) {
        const BlockPtr& b = bps[k];
        pieces.push_back({b.dva[0].offset - d0.offset, b.dva[0].asize(),
                          [&b](std::span<const uint8_t> x) {
                            return ComputeChecksum(b.cksum, x.first(b.psize)) == b.checksum;
                          },
                          false});
        asize += b.dva[0].asize();
        psize += b.psize;
      }
      HealCounts heal;
      pool_->vdevs[d0.vdev]->ScrubRun(d0.offset, end - d0.offset, pieces, &heal);
      uint64_t bad = 0;
      for (size_t k = 0; k < pieces.size(); k++) {
        if (pieces[k].bad) {
          Error(bps[i + k]);
          bad++;
        }
      }
      Note(asize, psize, heal, false);
      if (bad > 0) {
        std::lock_guard l(pool_->scan_mu);
        pool_->scan.errors += bad;
      }
      i = j;
    }
    return true;
  }

  bool InRange(const BlockPtr& bp) const {
    const Dva& d = bp.dva[0];
    return d.vdev < pool_->vdevs.size() && d.offset >= kAllocStart &&
           d.offset + d.asize() <= pool_->vdevs[d.vdev]->alloc_end() && bp.psize <= bp.lsize &&
           bp.psize <= d.asize();
  }

  void Error(const BlockPtr& bp) {
    std::string where = name_.empty() ? pool_->name : name_;
    if (bp.type == BlockType::kVolData) {
      where += ": <data> " + bp.ToString();
    } else {
      where += ": <metadata> " + bp.ToString();
    }
    pool_->NoteDataError(where);
  }

  PoolImpl* const pool_;
  std::string name_;
  std::unordered_set<uint64_t> seen_;
};

}  // namespace

Status PoolImpl::StartScan(bool resilver) {
  if (read_only) return Status::ReadOnly("pool " + name + " is imported read-only");
  VS_RETURN_IF_ERROR(CheckUsable());
  std::unique_lock l(scan_mu);
  if (scan_running) {
    if (scan_pause && !resilver) {
      scan_pause = false;  // zpool scrub on a paused scrub resumes it
      scan.state = "scanning";
      scan_cv.notify_all();
      return Status::Ok();
    }
    return Status::Busy(scan.func == "scrub" ? "currently scrubbing" : "currently resilvering");
  }
  if (scan_thread.joinable()) scan_thread.join();
  scan = ScanInfo{};
  scan.func = resilver ? "resilver" : "scrub";
  scan.state = "scanning";
  scan.start_time = NowSeconds();
  scan.to_examine = total_size() - free_bytes.load();
  scan_cancel = false;
  scan_pause = false;
  scan_running = true;
  scan_status = Status::Ok();
  scan_closing = false;
  if (!resilver) {
    // Committed with the next txg: a close (or a crash) from then on leaves it set.
    std::lock_guard m(mu);
    props[kScrubbingProp] = std::to_string(scan.start_time);
    mos_dirty = true;
  }
  scan_thread = std::thread([this, resilver] { RunScan(resilver); });
  return Status::Ok();
}

Status PoolImpl::WaitScan() {
  std::unique_lock l(scan_mu);
  scan_cv.wait(l, [&] { return !scan_running || scan_pause; });
  return scan_status;
}

void PoolImpl::StopScan() {
  {
    std::lock_guard l(scan_mu);
    if (scan_running) scan_cancel = scan_closing = true;
    scan_cv.notify_all();
  }
  if (scan_thread.joinable()) scan_thread.join();
}

void PoolImpl::RunScan(bool resilver) {
  std::vector<ScanRoot> roots;
  Status st;
  {
    std::lock_guard s(sync_mu);
    scan_pin_txg = synced_txg.load() + 1;
    roots.push_back({"", mos_bp});
    for (const auto& bp : sm_bps) roots.push_back({"", bp});
    for (const auto& [t, bps] : defer_bps) {
      for (const auto& bp : bps) roots.push_back({"", bp});  // deferred frees (defer_map.h)
    }
    std::lock_guard l(mu);
    for (auto& [n, v] : volumes) roots.push_back({n, v->synced_phys().root});
    for (auto& [n, v] : snapshots) roots.push_back({n, v->synced_phys().root});
  }
  // The children this walk fills: those marked before it read the tree. One marked later
  // waits for the next scan.
  std::vector<LeafPtr> filling;
  for (auto& v : vdevs) {
    for (auto& k : v->children()) {
      if (k->resilvering) filling.push_back(k);
    }
  }
  uint64_t labels_fixed = 0;
  {
    // Label writes are serialised under sync_mu (zpool add's among them: vdev_add.cc).
    std::lock_guard s(sync_mu);
    for (auto& v : vdevs) {
      auto fixed = v->RepairLabels(BaseLabelConfig(*v, PoolState::kActive, synced_txg.load()));
      if (fixed.ok()) labels_fixed += *fixed;
    }
  }
  if (labels_fixed > 0) {
    std::lock_guard l(scan_mu);
    scan.repaired += labels_fixed * kLabelConfigSize;
  }
  Walker walker(this);
  bool done = true;
  for (size_t i = 0; i < roots.size() && done; i++) {
    while (!(done = walker.Walk(roots[i]))) {
      // Paused: wait for a resume (the walk goes on from this root's start) or a cancel.
      std::unique_lock l(scan_mu);
      if (scan_cancel || closed || !scan_pause) {
        if (scan_cancel || closed) break;
        continue;
      }
      scan_cv.notify_all();
      scan_cv.wait(l, [&] { return scan_cancel || !scan_pause || closed; });
      if (scan_cancel || closed) break;
    }
  }
  // The repairs are durable before the scan says it is done.
  if (Status f = FlushAll(); !f.ok()) st = f;
  {
    std::lock_guard s(sync_mu);
    scan_pin_txg = 0;  // the held frees go back at the next commit
  }
  if (done && !filling.empty()) {
    for (auto& k : filling) k->resilvering = false;
    // The filled children missed the uberblocks of the txgs before they were marked: a
    // commit gives them the current one, so each alone now holds the pool.
    std::lock_guard s(sync_mu);
    if (Status c = SyncLocked(/*even_if_clean=*/true); !c.ok() && st.ok()) st = c;
  }
  bool closing;
  {
    std::lock_guard l(scan_mu);
    closing = scan_closing || closed;
  }
  if (!resilver && !closing) {
    std::lock_guard m(mu);
    if (props.erase(kScrubbingProp)) mos_dirty = true;
  }
  std::lock_guard l(scan_mu);
  scan.end_time = NowSeconds();
  scan.state = done ? "finished" : "canceled";
  scan_running = false;
  scan_status = st;
  scan_cv.notify_all();
}

}  // namespace volstack::pool

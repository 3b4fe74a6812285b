// LvDevice: an active logical volume as a BlockDevice, whose mapping can change while it is
// in use (lvextend, lvreduce, each step of a pvmove).
//
// Each segment of the LV becomes a mapping entry [start, start + length) in LV bytes onto
// its areas. A request is split at segment and stripe-chunk boundaries and each piece is
// passed to the area's device as a sub-span of the caller's buffer: no copies, no
// buffering. Linear is a striped segment with one area.
//
//   striped, N areas, chunk C:  LV offset r in the segment -> chunk k = r / C,
//                               area k % N, area offset (k / N) * C + r % C
//   area naming an LV:          the sub-LV (pvmove0) is activated as its own LvDevice and
//                               the area maps onto its bytes
//   area on a missing PV:       EIO (only with partial activation)
//   mirror segment (pvmove0), as lvm2's dm tables map it (lib/mirror/mirrored.c):
//     complete (extents_moved == extent_count): every request goes to the last leg (the
//       destination);
//     running (the first incomplete segment; every segment of an --atomic move): reads
//       from leg 0 (the source, which is authoritative until the segment completes),
//       writes, discards and zeroing to every leg, each holding its destination range in
//       the MirrorGate so a concurrent copy of that region cannot undo it;
//     pending (later incomplete segments): every request goes to leg 0.
//
// Fast path. Reads and writes of a map with no mirror entry and at most two stripes per
// segment (every linear or 2-striped LV not under pvmove) go through a compact copy of the
// map, one cache line per segment (FastEntry), with shifts for the stripe arithmetic; a
// request then touches the LvDevice, its map and that line before the PV. Reads never take
// the MirrorGate: only writes (and discards, zeroing) to a running mirror segment do.
//
// Live remapping. The mapping is an immutable Map object; Remap() builds a new one from new
// metadata and publishes it with one atomic pointer store. A request pins the map it
// started on (an in-flight counter on that map) and finishes on it, so no request ever sees
// half of a map. Remap() then waits until every request still pinned to the old map has
// finished: after it returns, nothing is still writing through the old layout (pvmove
// relies on that before it copies a segment that just became mirrored). Old maps are kept
// until the device is destroyed, so a request that loaded the pointer just before the swap
// never touches freed memory. Geometry is fixed at activation except the size, which
// follows the map (a remap to PVs with a larger logical block size is refused).
//
// Every LvDevice made by Create() is also listed, weakly, in a process-wide table keyed by
// the VG and LV UUIDs; RemapLiveLvs() (called by Lvm::Commit) refreshes each one from the
// committed metadata, so an LV active in the daemon follows lvextend/lvreduce/pvmove done in
// the same process.
//
// Geometry: logical block = the largest of the PVs' logical blocks, physical block = the
// largest physical block, optimal I/O = the widest stripe width (stripes * chunk), or the
// largest of the PVs' for a linear LV. Capabilities: FUA, discard and write-zeroes when every
// PV has them; the allocation query when any has (the others report data).
//
// Threads: every method is safe from any thread; Remap() calls are serialized internally.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "lvm/metadata.h"

namespace volstack::lvm {

class Activations;
class MirrorGate;

struct LvActivation {
  bool partial = false;  // map areas on missing PVs to EIO instead of refusing
  bool read_only = false;
  // Where the device is live and which mirror gate its writes take (activations.h); null:
  // Activations::Default().
  std::shared_ptr<Activations> activations;
};

// The tag an --atomic pvmove puts on its pvmove LV: every incomplete segment is mirrored.
inline constexpr char kAtomicMoveTag[] = "volstack_atomic_pvmove";

class LvDevice final : public bdev::BlockDevice {
 public:
  // `pv_devs` is parallel to vg.pvs (nullptr for a missing PV). Each present PV must be large
  // enough for every extent the LV uses. The device is named "<vg>/<lv>".
  static Result<std::shared_ptr<LvDevice>> Create(const VolumeGroup& vg, const std::string& lv_name,
                                                  const std::vector<bdev::BlockDevicePtr>& pv_devs,
                                                  const LvActivation& activation = {});

  struct Target {
    bdev::BlockDevicePtr dev;  // nullptr: a missing PV (EIO)
    uint64_t offset = 0;       // bytes on dev where the area starts
  };
  struct MapEntry {
    uint64_t start = 0;  // LV bytes
    uint64_t length = 0;
    uint64_t chunk = 0;        // striped: stripe size in bytes; 0 for one area
    bool mirror = false;       // a running mirror: read areas[0], write every area
    std::string gate_pv;       // mirror: the destination PV's UUID, the MirrorGate key
    uint64_t gate_offset = 0;  // mirror: byte offset on that PV of the entry's start
    std::vector<Target> areas;
  };

  // A copy of the current mapping.
  std::vector<MapEntry> map() const;
  const std::string& vg_id() const { return vg_id_; }
  const std::string& lv_id() const { return lv_id_; }

  // Rebuilds the mapping from `vg` (where the LV has the UUID lv_id(); its name may have
  // changed) and switches to it; returns once no request runs on the old mapping. On error
  // the old mapping stays. EINVAL if the new PVs need a larger logical block size.
  Status Remap(const VolumeGroup& vg, const std::vector<bdev::BlockDevicePtr>& pv_devs);
  // How many times the mapping changed (tests, status).
  uint64_t generation() const { return generation_.load(); }

  LvDevice(std::string name, const bdev::Geometry& geometry, std::vector<MapEntry> map,
           std::vector<bdev::BlockDevicePtr> lower);
  ~LvDevice() override;

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override;
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) override;
  Status DoFlush() override;
  Status DoDiscard(uint64_t offset, uint64_t length) override;
  Status DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) override;
  Result<std::vector<bdev::AllocationExtent>> DoQueryAllocation(uint64_t offset,
                                                                uint64_t length) override;

 private:
  // The read/write fast path's copy of one map entry, in one cache line: a linear or striped
  // entry with at most kFastAreas areas (raw pointers; the Map's `entries` own the devices).
  // A request through an LV pays for the cache lines it touches more than for its
  // instructions (the 4 KiB copy below evicts them), so the path is LvDevice -> Map -> this
  // line -> the PV device, and nothing else.
  static constexpr size_t kFastAreas = 2;
  struct FastArea {
    bdev::BlockDevice* dev;  // nullptr: a missing PV
    uint64_t offset;
  };
  struct alignas(64) FastEntry {
    uint64_t start = 0, end = 0;
    uint64_t chunk_mask = 0;  // striped: chunk - 1 (a power of two); 0 for one area
    uint32_t chunk_shift = 0;
    uint32_t areas_shift = 0;  // striped: log2 of the area count (1 or 2 areas)
    FastArea areas[kFastAreas] = {};
  };
  struct alignas(64) Map {
    mutable std::atomic<int64_t> inflight{0};
    // Set by Remap before it waits for inflight to drain: only then does the last request
    // pay for a notify (libstdc++'s notify touches a process-wide waiter table).
    mutable std::atomic<bool> draining{false};
    uint64_t size = 0;
    const FastEntry* fast = nullptr;  // n_fast entries, or nullptr: mirror legs or wide
    uint32_t n_fast = 0;              // stripes send every request the general way
    FastEntry first;                  // fast[0] of a one-segment LV (the line after this one)
    std::vector<FastEntry> more;      // fast[] of a LV with several segments
    std::vector<MapEntry> entries;
    std::vector<bdev::BlockDevicePtr> lower;  // unique devices, for Flush

    // Fills first/more and fast from entries when every entry qualifies.
    void BuildFast();
  };
  class Pin;

  // Calls fn(target, target_offset, done, piece_len) for each piece of [offset, offset +
  // length) on `map`; for a running mirror with all_legs, once per leg inside the gate.
  template <typename Fn>
  Status ForEachPiece(const Map& map, uint64_t offset, uint64_t length, bool all_legs, Fn&& fn);
  // The same on map.fast (no mirror, no gate): fn(device, device_offset, done, piece_len).
  template <typename Fn>
  Status ForEachFastPiece(const Map& map, uint64_t offset, uint64_t length, Fn&& fn);

  std::atomic<const Map*> map_;
  std::mutex remap_mu_;                     // serializes Remap
  std::vector<std::unique_ptr<Map>> maps_;  // GUARDED_BY(remap_mu_); every map ever used
  std::atomic<uint64_t> generation_{0};
  std::string vg_id_, lv_id_;
  LvActivation activation_;
  // The gate mirrored writes take: activation_'s Activations'.
  MirrorGate& Gate() const;

  friend Result<std::shared_ptr<LvDevice>> CreateLvDevice(const VolumeGroup&, const LogicalVolume&,
                                                          const std::vector<bdev::BlockDevicePtr>&,
                                                          const LvActivation&, int);
};

// Remaps every live LvDevice (made by LvDevice::Create under `activations`; null:
// Activations::Default()) of `vg` from its committed metadata; `pv_devs` parallel to
// vg.pvs. LVs no longer in `vg` keep their map. Returns the first error, naming the LV.
Status RemapLiveLvs(const VolumeGroup& vg, const std::vector<bdev::BlockDevicePtr>& pv_devs,
                    Activations* activations = nullptr);

// The live LvDevices of LV `lv_id` of VG `vg_id` under `activations` (null: the default).
std::vector<std::shared_ptr<LvDevice>> FindLiveLvs(const std::string& vg_id,
                                                   const std::string& lv_id,
                                                   Activations* activations = nullptr);

}  // namespace volstack::lvm

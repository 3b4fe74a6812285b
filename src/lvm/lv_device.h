// LvDevice: an active logical volume as a BlockDevice.
//
// Each segment of the LV becomes a mapping entry [start, start + length) in LV bytes onto
// its areas. A request is split at segment and stripe-chunk boundaries and each piece is
// passed to the area's device as a sub-span of the caller's buffer: no copies, no
// buffering, no state beyond the immutable map. Linear is a striped segment with one area.
//
//   striped, N areas, chunk C:  LV offset r in the segment -> chunk k = r / C,
//                               area k % N, area offset (k / N) * C + r % C
//   mirror (pvmove0):           reads from leg 0, writes, discards and zeroing to every leg
//   area naming an LV:          the sub-LV (pvmove0) is activated as its own LvDevice and
//                               the area maps onto its bytes
//   area on a missing PV:       EIO (only with partial activation)
//
// Geometry: logical block = the largest of the PVs' logical blocks, physical block = the
// largest physical block, optimal I/O = the widest stripe width (stripes * chunk), or the
// largest of the PVs' for a linear LV. Capabilities: FUA, discard and write-zeroes when every
// PV has them; the allocation query when any has (the others report data).
//
// Threads: the map is immutable after Create, so every method is safe from any thread; the
// PV devices are themselves thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "lvm/metadata.h"

namespace volstack::lvm {

struct LvActivation {
  bool partial = false;  // map areas on missing PVs to EIO instead of refusing
  bool read_only = false;
};

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
    uint64_t chunk = 0;  // striped: stripe size in bytes; 0 for one area
    bool mirror = false;
    std::vector<Target> areas;
  };

  const std::vector<MapEntry>& map() const { return map_; }

  LvDevice(std::string name, const bdev::Geometry& geometry, std::vector<MapEntry> map,
           std::vector<bdev::BlockDevicePtr> lower);

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override;
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) override;
  Status DoFlush() override;
  Status DoDiscard(uint64_t offset, uint64_t length) override;
  Status DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) override;
  Result<std::vector<bdev::AllocationExtent>> DoQueryAllocation(uint64_t offset,
                                                                uint64_t length) override;

 private:
  // Calls fn(area_index_or_-1_for_all_legs..., target, target_offset, lv_offset, piece_len)
  // for each piece of [offset, offset + length).
  template <typename Fn>
  Status ForEachPiece(uint64_t offset, uint64_t length, bool all_legs, Fn&& fn);

  const std::vector<MapEntry> map_;
  const std::vector<bdev::BlockDevicePtr> lower_;  // unique devices, for Flush
};

}  // namespace volstack::lvm

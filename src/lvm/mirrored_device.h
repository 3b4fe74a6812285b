// MirroredDevice: a raid1 or mirror LV served in userspace, as dm-raid (raid1) and dm-mirror
// (mirror) would serve it: reads from one in-sync leg, writes to every leg that has not
// failed.
//
// Theory. Each leg is a sub-LV holding a full copy (_rimage_N, _mimage_N). What the legs'
// copies are allowed to differ in is kept on disk in the kernel targets' own records
// (raid_format.h), so lvm2 with device-mapper reads the same state afterwards:
//   raid1:  each leg's _rmeta_N holds a dm-raid superblock (events, the failed-legs bits, the
//           leg's rebuild progress, the array's initial-sync progress) and an md write-intent
//           bitmap (one bit per region: the legs may differ there);
//   mirror: the _mlog sub-LV holds dm-log's clean bits (one per region: in sync); a mirror
//           with a core log keeps nothing, so every activation resyncs it, as dm-mirror does.
//
// Activation (Open) decides which legs hold current data and makes the others current before
// any request is served:
//   - raid1: legs whose superblock has the highest events, is not marked failed there, and is
//     not rebuilding are in sync; the first of them is the primary. No superblock anywhere (an
//     array lvm2 created and no kernel ever ran) means only leg 0 is authoritative, as in
//     dm-raid's initial sync. A present leg that is not in sync is rebuilt from the primary;
//     regions the bitmap marks (or every region, when the bitmap is missing or stale, or the
//     initial sync had not finished) are copied from the primary to the other in-sync legs.
//   - mirror: the primary is the first present leg (dm-mirror's default mirror is leg 0);
//     regions not clean in the log are copied from it.
//   The copy runs before Open returns (no background resync). A read-only activation copies
//   nothing and reads only the primary. Refused with one error naming the LV: no leg in sync
//   (every leg failed, stale or missing), superblocks that contradict the LV (another device
//   count, level, a reshape, an unknown incompatible feature), legs shorter than the LV.
//   After the copy, every present leg is in sync: the superblocks (events + 1, the missing
//   legs marked failed) and an all-clean bitmap/log are written and flushed.
// I/O:
//   - A write first makes its regions dirty on disk (bitmap bit set / log clean bit cleared,
//     written and flushed to every live leg's rmeta or the log) unless they already are, then
//     goes to every live leg at the same time (LegFanout: the request costs the slowest leg,
//     not the sum). A crash mid-write leaves the region dirty: the next activation copies it
//     from the primary, so the legs agree again (either content is a valid outcome of the
//     interrupted write). Bits are cleared only when the device is closed, after the
//     legs are flushed.
//   - A leg whose write, flush or read fails is failed: for raid1 its bit is set in the
//     superblocks of the legs still live (events + 1, flushed) before the request completes,
//     so the next activation never reads it; the request succeeds when one leg took it. A read
//     tries the next live leg. When the last leg fails, the request fails.
//   - Reads go to the first live leg (the primary unless it failed).
// Limits (documented in docs/format/lvm2.md): a mirror LV's leg failure lives only in memory
// (dm-log has no per-leg record; lvm2 would drop the leg from the VG metadata), so after a
// restart such a leg is resynced from leg 0; a raid1 leg that was missing while the others
// were written and then comes back alone is served as it is (md and dm-raid do the same).
//
// Threads: every method is safe from any thread; metadata writes are serialized by meta_mu_.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "lvm/leg_fanout.h"
#include "lvm/raid_format.h"

namespace volstack::lvm {

class MirroredDevice final : public bdev::BlockDevice {
 public:
  enum class Kind { kRaid1, kMirror };
  struct Leg {
    std::string name;           // the sub-LV, for messages ("vg/r1_rimage_0")
    bdev::BlockDevicePtr data;  // nullptr: its PV is missing
    bdev::BlockDevicePtr meta;  // raid1: the _rmeta_N sub-LV (nullptr: missing)
    bool rebuild = false;       // lvm2 marked the image REBUILD: not in sync
  };
  struct Config {
    Kind kind = Kind::kRaid1;
    std::string name;           // "vg/lv"
    uint64_t size = 0;          // bytes
    uint64_t region_bytes = 0;  // a power of two, a multiple of 512
    std::vector<Leg> legs;
    bdev::BlockDevicePtr log;  // mirror: the _mlog sub-LV; nullptr for a core log
    bool nosync = false;       // the LV has NOTSYNCED: lvm2 was told the legs agree
  };
  // What Open found and did (tests, reports).
  struct OpenReport {
    std::vector<bool> in_sync;  // per leg, after Open
    uint64_t regions_copied = 0;
    std::vector<uint32_t> legs_rebuilt;
  };

  static Result<std::shared_ptr<MirroredDevice>> Open(Config config, OpenReport* report = nullptr);
  ~MirroredDevice() override;

  // Whether leg i is live (present, in sync, not failed).
  bool leg_live(size_t i) const { return legs_[i].live.load(); }
  size_t leg_count() const { return legs_.size(); }

  MirroredDevice(Config config, const bdev::Geometry& g);

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override;
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) override;
  Status DoFlush() override;
  Status DoDiscard(uint64_t offset, uint64_t length) override;
  Status DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) override;

 private:
  struct LegState {
    Leg leg;
    std::atomic<bool> live{false};
  };

  // Runs op(leg) on every live leg; fails the legs it fails on. Ok when one leg succeeded.
  template <typename Op>
  Status AllLegs(const char* what, Op&& op);
  // Marks the regions of [offset, offset + length) dirty on disk before a write.
  Status MarkDirty(uint64_t offset, uint64_t length);
  // Takes leg i out of service and records it (raid1: in the live legs' superblocks).
  // (mirror: refuses every later write instead, as nothing on disk can say which leg failed.)
  Status FailLeg(size_t i, const Status& why);
  std::string RefusedWrites() const;
  // Writes the pages [first, last] of the log image to every live leg's rmeta or the log,
  // then flushes them. REQUIRES meta_mu_.
  Status WriteLogPages(uint64_t first_page, uint64_t last_page);
  // raid1: every live leg's superblock, events + 1. REQUIRES meta_mu_.
  Status WriteSuperblocks();
  // The log image with every region clean, written and flushed. REQUIRES meta_mu_.
  Status WriteAllClean();
  void SetRegionBit(uint64_t region, bool dirty);  // REQUIRES meta_mu_

  friend class MirroredOpener;

  Config config_;
  std::vector<LegState> legs_;               // parallel to config_.legs
  std::atomic<bool> writes_refused_{false};  // a mirror (not raid1) LV lost a leg
  uint64_t regions_ = 0;
  // The bitmap (raid1: superblock and bits, at kMdBitmapOffset of each rmeta) or dm-log
  // (header and clean bits, at 0 of the log), padded to 4 KiB pages. GUARDED_BY(meta_mu_).
  std::vector<uint8_t> log_image_;
  uint64_t bits_offset_ = 0;  // where the bits start in log_image_
  uint64_t log_device_offset_ = 0;
  // Regions dirty on disk: a set bit is durable before any write to the region is issued.
  std::unique_ptr<std::atomic<uint64_t>[]> dirty_;
  uint64_t events_ = 0;                // GUARDED_BY(meta_mu_)
  uint64_t failed_bits_ = 0;           // GUARDED_BY(meta_mu_); raid1 legs recorded as failed
  bool persist_ = false;               // writable: metadata is kept on disk
  std::unique_ptr<LegFanout> fanout_;  // writable with two legs or more: legs written at once
  std::mutex meta_mu_;
};

}  // namespace volstack::lvm

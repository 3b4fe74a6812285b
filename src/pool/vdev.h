// Vdev: one top-level vdev of a pool (what a DVA's vdev id names) and the label I/O on its
// leaves (labels, uberblock ring).
//
// A top-level vdev is one leaf device (a plain vdev), a mirror of 1-16 leaves (children)
// that all hold the same bytes at the same offsets, or a raidz of 2-16 leaves with one or
// two parity columns (raidz.h has its layout; vdev_raidz.cc its I/O). Data blocks are read and
// written through device(), a MirrorDevice (vdev.cc) over the leaves, each behind a thin
// layer that counts failed operations (zpool status's READ and WRITE columns): it writes
// and flushes every child in parallel and reads one (a plain vdev: it forwards). Reads
// that must be right go through ReadVerified, which tries the other children when a copy
// does not match its checksum and rewrites the bad copies (self-heal, counted in CKSUM).
// A raidz's device() is a RaidzDevice (vdev_raidz.cc): writes are split into columns with
// their parity, reads rebuild the columns of children that cannot be read; ReadVerified
// rebuilds from parity, trying the combinations of columns that may be bad until the
// checksum matches, and rewrites the columns found bad.
//
// Leaf states (zpool's words): ONLINE; OFFLINE (zpool offline: no I/O until online);
// FAULTED (a write or flush failed: no I/O until zpool clear or online, its copy may be
// stale and is healed by reads and scrub); UNAVAIL (missing at import). A RESILVERING leaf
// (replace, attach) is written but not read until its resilver has copied every block.
//
// Threads: I/O methods are safe from any thread and run beside each other. The children
// list changes only under children_mu_ held exclusively (replace, attach, detach), I/O
// holds it shared; leaf states and counters are atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "pool/label_format.h"
#include "pool/raidz.h"

namespace volstack::pool {

// Error counters of one leaf since the pool was opened.
struct VdevErrors {
  std::atomic<uint64_t> read{0};      // failed reads
  std::atomic<uint64_t> write{0};     // failed writes, zeroings and flushes
  std::atomic<uint64_t> checksum{0};  // blocks read whose checksum did not match
};

enum class LeafState : int { kOnline, kOffline, kFaulted, kUnavail };
const char* LeafStateName(LeafState s);

// One leaf device of a top-level vdev.
struct Leaf {
  bdev::BlockDevicePtr device;  // behind the error-counting layer; null when UNAVAIL
  uint64_t guid = 0;
  std::string path;  // the name it is known by (labels, zpool status)
  std::shared_ptr<VdevErrors> errors = std::make_shared<VdevErrors>();
  std::atomic<LeafState> state{LeafState::kOnline};
  std::atomic<bool> resilvering{false};  // written, not read, until its resilver is done
  // A raidz child that zpool replace put in: the child it replaces, still written and read
  // in its place while this one resilvers, as zfs's replacing vdev (null otherwise).
  // GUARDED_BY the vdev's children_mu_.
  std::shared_ptr<Leaf> replaces;
  bool usable() const { return device && state.load() == LeafState::kOnline; }
  bool readable() const { return usable() && !resilvering.load(); }
};
using LeafPtr = std::shared_ptr<Leaf>;

// What a verified read or a scrub did beyond reading.
struct HealCounts {
  uint64_t repaired_bytes = 0;  // bytes rewritten on children whose copy was bad
  uint64_t bad_copies = 0;      // copies that failed to read or did not match
};

// True when the bytes read are the block's (its checksum, or a log block's own check).
using BlockVerifier = std::function<bool(std::span<const uint8_t>)>;

class Vdev {
 public:
  // A plain vdev.
  Vdev(bdev::BlockDevicePtr device, uint32_t id, uint64_t guid, std::string path = {});
  // A mirror. A child with a null device is UNAVAIL. `alloc_end` is fixed for the life of
  // the pool (the smallest child's when created), so a child missing at import does not
  // change where blocks may go.
  struct ChildSpec {
    bdev::BlockDevicePtr device;
    uint64_t guid = 0;
    std::string path;
    bool offline = false;  // recorded offline in the labels: stays OFFLINE until online
  };
  Vdev(std::vector<ChildSpec> children, uint32_t id, uint64_t guid, uint64_t alloc_end);
  // A raidz (geometry.children == children.size()). `alloc_end` is the end of its logical
  // space (raidz.h), fixed for the life of the pool.
  Vdev(std::vector<ChildSpec> children, uint32_t id, uint64_t guid, uint64_t alloc_end,
       const RaidzGeometry& geometry);
  ~Vdev();

  bool is_mirror() const { return mirror_; }
  bool is_raidz() const { return raidz_.parity > 0; }
  const RaidzGeometry& raidz() const { return raidz_; }
  // zpool status's word: "disk", "mirror", "raidz1" or "raidz2".
  std::string TypeName() const;
  // True when the vdev still has every block readable without `leaf` (offline, detach).
  bool CanLose(const Leaf& leaf) const;
  // Where data blocks are read and written (see the top of this file).
  const bdev::BlockDevicePtr& device() const { return device_; }
  uint32_t id() const { return id_; }
  uint64_t guid() const { return guid_; }
  uint64_t alloc_start() const { return kAllocStart; }
  uint64_t alloc_end() const { return alloc_end_; }
  // A copy of the children list (a plain vdev: its one leaf).
  std::vector<LeafPtr> children() const;
  // ONLINE, DEGRADED (a mirror with a child not ONLINE but one readable) or UNAVAIL.
  std::string StateName() const;
  // True when every child is readable (no redundancy lost).
  bool healthy() const;
  // The sum of the children's counters.
  uint64_t ReadErrors() const;
  uint64_t WriteErrors() const;
  uint64_t ChecksumErrors() const;

  // Reads [offset, offset + buf.size()) from a readable child whose bytes `ok` accepts,
  // trying each in turn; the children that gave bad bytes (counted in their CKSUM) or
  // failed to read are rewritten with the good bytes. Corruption when no copy is good (an
  // I/O error when none could be read at all). `heal` (if given) adds what was repaired.
  // `count` false: a copy that `ok` refuses is not a checksum error (an intent-log chain
  // ends at the first block that is not the expected one).
  Status ReadVerified(uint64_t offset, std::span<uint8_t> buf, const BlockVerifier& ok,
                      HealCounts* heal = nullptr, bool count = true);
  // Scrub / resilver of one block: reads every readable child and every resilvering one,
  // and rewrites each copy that is not good from a good one. A resilvering child's bad
  // copy is expected (it is being filled) and not counted as a checksum error. Corruption
  // when no readable child has a good copy. `good` (if given) gets the good bytes.
  Status ScrubBlock(uint64_t offset, uint64_t length, const BlockVerifier& ok, HealCounts* heal,
                    std::vector<uint8_t>* good = nullptr);

  // ScrubBlock for adjacent blocks: the run [offset, offset + length) is read once from
  // each child and every piece is verified and repaired alone. A piece with no good copy
  // gets `bad` set.
  struct ScrubPiece {
    uint64_t rel = 0;  // offset in the run
    uint64_t length = 0;
    BlockVerifier ok;
    bool bad = false;
  };
  void ScrubRun(uint64_t offset, uint64_t length, std::vector<ScrubPiece>& pieces,
                HealCounts* heal);

  // Writes the config into the labels of every usable leaf with the given parity (0: L0,L2;
  // 1: L1,L3), each with its own leaf fields. A mirror needs one leaf to succeed.
  Status WriteLabelConfigs(const LabelConfig& config, int parity);
  // Writes `ub` into slot txg % kUberSlots of all four labels of every usable leaf.
  Status WriteUberblock(const Uberblock& ub);
  // Every uberblock that decodes, from all four labels of every leaf.
  std::vector<Uberblock> ReadUberblocks();
  // Scrub of the label configs: every copy that does not decode on a usable leaf is
  // rewritten from `config`. Returns the number rewritten.
  Result<uint64_t> RepairLabels(const LabelConfig& config);

  // Replaces child `index` with `device` (RESILVERING until its resilver ends), or appends
  // it when index == children count (attach). A plain vdev becomes a mirror. A raidz takes
  // only a replacement: the new child is its column, and the old one (Leaf::replaces) is
  // still written, and read for the column, until DropReplaced.
  Status AttachChild(size_t index, bdev::BlockDevicePtr device, uint64_t guid, std::string path);
  // A raidz replace is done (the new child `guid` resilvered): the old child is let go.
  void DropReplaced(uint64_t guid);
  // Removes the child (detach). A mirror keeps at least one readable child.
  Status DetachChild(uint64_t guid);
  // The leaf with this guid or path, or null.
  LeafPtr FindChild(const std::string& guid_or_path) const;

  // Whether reads rewrite bad copies (off until an import has passed its checks, and for a
  // read-only import).
  void set_repair(bool on) { repair_ = on; }

  // The newest valid config among the four labels, or the first error.
  static Result<LabelConfig> ReadLabelConfig(bdev::BlockDevice& device);

 private:
  class MirrorDevice;
  class RaidzDevice;
  class Fanout;  // runs one job per child in parallel (writes, scrub reads)
  // Raidz I/O (vdev_raidz.cc). `cols` are the children's extents of [offset, +len).
  Status RaidzRead(uint64_t offset, std::span<uint8_t> buf);
  Status RaidzWrite(uint64_t offset, std::span<const uint8_t> buf);
  Status RaidzReadVerified(uint64_t offset, std::span<uint8_t> buf, const BlockVerifier& ok,
                           HealCounts* heal, bool count);
  void RaidzScrubRun(uint64_t offset, uint64_t length, std::vector<ScrubPiece>& pieces,
                     HealCounts* heal, std::vector<uint8_t>* first_good);
  bdev::BlockDevicePtr MakeRaidzDevice();
  // The children, and for each the child it replaces while it resilvers (else null).
  void ColumnLeaves(std::vector<LeafPtr>* kids, std::vector<LeafPtr>* olds) const;
  // Fills the label fields a leaf of this vdev carries beyond the pool's.
  void LeafLabelFields(const Leaf& leaf, LabelConfig& c) const;
  Status WriteLeafLabels(Leaf& leaf, const LabelConfig& config, int parity);
  std::vector<LeafPtr> ReadableChildrenLocked(bool include_resilvering) const;
  void ScrubRunImpl(uint64_t offset, uint64_t length, std::vector<ScrubPiece>& pieces,
                    HealCounts* heal, std::vector<uint8_t>* first_good);

  mutable std::shared_mutex children_mu_;
  std::vector<LeafPtr> children_;  // GUARDED_BY(children_mu_)
  bool mirror_;                    // GUARDED_BY(children_mu_) for writes; read freely
  RaidzGeometry raidz_;            // parity 0: not a raidz
  std::unique_ptr<Fanout> fanout_;
  bdev::BlockDevicePtr device_;
  uint32_t id_;
  uint64_t guid_;
  uint64_t alloc_end_;
  std::atomic<uint32_t> rotor_{0};  // which child a read starts with
  std::atomic<bool> repair_{false};
};

}  // namespace volstack::pool

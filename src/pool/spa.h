// The pool (SPA: storage pool allocator): public API.
//
// A Pool owns a set of vdevs (any BlockDevices: files, block devices, other volstack
// volumes), striped, and the volumes (zvols) in it. It is created with Pool::Create, found on
// devices with DiscoverPools and opened with Pool::Import. Volumes are opened as
// bdev::BlockDevices (ZvolDevice) which keep the pool alive.
//
// Durability: writes to volumes are gathered in memory and committed atomically in
// transaction groups (txgs): on Sync(), every txg_timeout, and when dirty data passes a
// quarter of dirty_max (writers then block at dirty_max). A volume's Flush() (and FUA or
// sync=always writes) writes the volume's intent log instead (zil.h), unless
// logbias=throughput. Directory changes (create/destroy/set) are synced before their
// call returns.
//
// Lifetime: Close() (or the last reference dropping) syncs and stops the background txg
// thread; Export() also marks the labels exported; Destroy() marks them destroyed. After
// any of them, open volume devices fail every operation with ENXIO.
//
// Threads: every method is safe from any thread. See spa.cc for the theory and lock order.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bdev/block_device.h"
#include "util/result.h"

namespace volstack::pool {

class PoolImpl;

struct PoolTuning {
  uint64_t dirty_max_bytes = 64ull << 20;  // writers throttle above this much dirty data
  // Cached indirect blocks (clean, all volumes) plus verified data blocks (block_cache.h).
  uint64_t cache_max_bytes = 256ull << 20;
  bool cache_data = true;  // false: indirect blocks only, every data read goes to the vdev
  // The block cache's reserve (block_cache.h): a thread faulting its memory in ahead of
  // need, which readers leave that work to. false: readers fault it in themselves, so a
  // read caches what it missed at once (tests that count what a read caches).
  bool cache_reserve = true;
  std::chrono::milliseconds txg_timeout{5000};
  bool sync_thread = true;      // false: txgs commit only on Sync()/throttle (tests)
  size_t condense_blocks = 48;  // rewrite the space map once its log has this many blocks
  // Freed data blocks a commit leaves to its block-cache fill to forget (cache_fill.h); it
  // forgets the rest itself.
  size_t max_queued_forgets = 1 << 16;
  // Early writes (early_write.cc): runs of at least this many bytes of whole new blocks are
  // written by a pool thread while the txg is still open; 0 turns them off. Runs need the
  // sync thread (sync_thread); tests call PoolImpl::WriteEarlyNow instead.
  uint64_t early_write_run_bytes = 1 << 20;
  // Early flushes (early_flush.h): a vdev that has received this many bytes of data since
  // its last flush is flushed in the background, so a commit's flush finds less to drain;
  // 0 turns them off. They need the sync thread (sync_thread).
  uint64_t early_flush_bytes = 2 << 20;
};

struct PoolCreateOptions {
  uint32_t ashift = 12;  // allocation unit 2^ashift, 9..16
  bool force = false;    // overwrite vdevs that carry a label of an active/exported pool
  // Pool properties (comment, cachemax, dirtymax, user:prop); stored bounds override
  // `tuning`'s (memory_bounds.h).
  std::map<std::string, std::string> props;
  PoolTuning tuning;
};

struct PoolImportOptions {
  PoolTuning tuning;
  bool allow_active = true;  // false: refuse a pool whose labels say ACTIVE (zpool import)
  // Test hook: reject uberblocks newer than this txg (0 = none), like zpool import -T.
  uint64_t max_txg = 0;
  // Nonzero: the pool the caller expects (its cache entry). Vdevs that now hold another
  // pool are refused before anything is written to them.
  uint64_t expected_guid = 0;
  // When the newest uberblock's tree cannot be read, importing an older one discards the
  // txgs committed after it: refused (EUCLEAN, saying how many txgs and seconds would be
  // lost) unless `rewind` (zpool import -F) is set.
  bool rewind = false;
  // Writes nothing: no label update, no intent-log replay (the pool reads as of its last
  // txg), no txg ever. For commands that only look (zpool list/status/get, -F -n).
  bool read_only = false;
};

// What an import did that its caller should report (Pool::import_report()).
struct ImportReport {
  uint64_t newest_txg = 0;     // the newest uberblock with a valid checksum
  uint64_t imported_txg = 0;   // the one imported
  uint64_t imported_time = 0;  // the imported uberblock's timestamp (unix seconds)
  uint64_t lost_seconds = 0;   // between their timestamps
  std::string newest_error;    // why the newer ones could not be imported
  // Volumes whose intent log was not (or not wholly) replayed, and why.
  std::vector<std::string> log_losses;
  bool rewound() const { return imported_txg < newest_txg; }
  // "txg 7" or "txgs 6-7": the txgs a rewind discards.
  std::string LostTxgs() const {
    return imported_txg + 1 == newest_txg
               ? "txg " + std::to_string(newest_txg)
               : "txgs " + std::to_string(imported_txg + 1) + "-" + std::to_string(newest_txg);
  }
};

struct VolumeOptions {
  uint64_t volsize = 0;
  uint32_t volblocksize = 16384;  // 4K..128K, a power of two
  bool sparse = false;            // no refreservation (zfs create -s)
  std::map<std::string, std::string> props;
};

struct OpenVolumeOptions {
  bool read_only = false;
  uint32_t logical_block_size = 512;  // 512 or 4096
};

struct DatasetInfo {
  std::string name;  // "trunk" (the pool's root dataset) or "trunk/funk"
  std::string type;  // "filesystem" (root) or "volume"
  uint64_t guid = 0;
  uint64_t create_txg = 0;
  uint64_t creation_time = 0;
  uint64_t used = 0;  // referenced + unused refreservation (+ children for the root)
  uint64_t available = 0;
  uint64_t referenced = 0;  // bytes allocated to the tree
  // The same blocks by logical size (compression undone); for the root, the volumes'
  // logicalused summed (and `referenced` their trees and snapshots: it reports 0).
  uint64_t logical_referenced = 0;
  uint64_t volsize = 0;
  uint32_t volblocksize = 0;
  uint64_t refreservation = 0;
  // Snapshots (snapshot.cc). For a snapshot: used = what destroying it frees, written =
  // what it holds born since the previous snapshot. For a volume: written = since its
  // newest snapshot; usedbysnapshots = what destroying all its snapshots frees.
  uint64_t written = 0;
  uint64_t usedbysnapshots = 0;
  std::string origin;                        // a clone's origin snapshot
  std::vector<std::string> clones;           // a snapshot's clones
  std::map<std::string, std::string> props;  // every property, effective values
  std::vector<std::string> local;            // properties set explicitly (source "local")
};

struct VdevInfo {
  std::string name;
  uint64_t guid = 0;
  uint64_t size = 0;
  uint64_t allocated = 0;
  // Errors since the pool was opened, as zpool status counts them: failed reads, failed
  // writes (and flushes), and blocks that read but did not match their checksum.
  uint64_t read_errors = 0;
  uint64_t write_errors = 0;
  uint64_t checksum_errors = 0;
  std::string type = "disk";       // "disk" (a leaf), "mirror", "raidz1" or "raidz2"
  std::string state = "ONLINE";    // ONLINE, DEGRADED, OFFLINE, FAULTED, UNAVAIL
  bool resilvering = false;        // a leaf being filled by a resilver
  std::vector<VdevInfo> children;  // a mirror's or raidz's leaves (the counters: their sums)
};

// A scrub or resilver (scan.h): zpool status's "scan:" lines.
struct ScanInfo {
  std::string func;                       // "scrub" or "resilver"; empty when none ever ran
  std::string state;                      // "scanning", "paused", "finished", "canceled"
  uint64_t start_time = 0, end_time = 0;  // unix seconds
  uint64_t to_examine = 0;                // allocated bytes when it started
  uint64_t examined = 0;                  // bytes of blocks walked
  uint64_t issued = 0;                    // bytes read and verified
  uint64_t repaired = 0;                  // bytes rewritten
  uint64_t errors = 0;                    // blocks with no good copy
};

struct PoolInfo {
  std::string name;
  uint64_t guid = 0;
  // ONLINE, DEGRADED (a mirror lost a child: redundancy lost, data intact) or SUSPENDED
  // (a failed txg commit).
  std::string health;
  uint64_t size = 0;  // allocatable bytes
  uint64_t allocated = 0;
  uint64_t free = 0;
  uint64_t txg = 0;  // last synced
  uint32_t ashift = 12;
  std::vector<VdevInfo> vdevs;
  std::map<std::string, std::string> props;
  ScanInfo scan;
  // Data that could not be read from any copy since the pool was opened: "pool/vol:
  // offset N" or "pool/vol: <metadata>" (zpool status -v's permanent errors).
  std::vector<std::string> data_errors;
};

// A pool found by reading labels (zpool import without a name).
struct DiscoveredPool {
  std::string name;
  uint64_t guid = 0;
  std::string state;  // ACTIVE, EXPORTED, DESTROYED
  uint64_t txg = 0;
  std::vector<std::pair<uint32_t, std::string>> vdevs;  // (vdev id, path) found
  size_t vdev_count = 0;                                // how many the pool has
  // Every top-level vdev has a device here (a mirror: one child at least).
  bool complete() const {
    std::vector<bool> found(vdev_count, false);
    for (const auto& [id, path] : vdevs) {
      if (id < vdev_count) found[id] = true;
    }
    return std::find(found.begin(), found.end(), false) == found.end();
  }
};

// One top-level vdev to create: a plain vdev (one device), a mirror of 2-16, or (raidz
// 1 or 2) a raidz of raidz + 1 to 16 devices.
struct VdevSpec {
  bool mirror = false;
  std::vector<bdev::BlockDevicePtr> devices;
  std::vector<std::string> paths;  // names for labels and zpool status; default device names
  uint32_t raidz = 0;              // parity of a raidz (then `mirror` is false)
};

class Pool : public std::enable_shared_from_this<Pool> {
 public:
  // Writes fresh labels and an empty txg 1 on the vdevs (ids in the order given).
  static Result<std::shared_ptr<Pool>> Create(const std::string& name, std::vector<VdevSpec> vdevs,
                                              const PoolCreateOptions& options = {});
  // Writes fresh labels and an empty txg 1 on `vdevs` (in vdev-id order).
  static Result<std::shared_ptr<Pool>> Create(const std::string& name,
                                              std::vector<bdev::BlockDevicePtr> vdevs,
                                              const PoolCreateOptions& options = {});
  // Opens the pool whose vdevs are `vdevs` (any order). Every plain vdev must be there; a
  // mirror needs one child (the pool is then DEGRADED), else import refuses naming the
  // missing devices. Takes the newest
  // uberblock whose checksum, MOS and space map verify; an older one only with
  // options.rewind (else EUCLEAN, writing nothing). Every check is made before anything is
  // written.
  static Result<std::shared_ptr<Pool>> Import(std::vector<bdev::BlockDevicePtr> vdevs,
                                              const PoolImportOptions& options = {});

  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  const std::string& name() const;
  uint64_t guid() const;

  // Commits the open txg (if anything is dirty) and waits until it is durable.
  Status Sync();
  // Syncs and stops. Idempotent.
  Status Close();
  Status Export();
  Status Destroy();

  Result<DatasetInfo> CreateVolume(const std::string& name, const VolumeOptions& options);
  // EBUSY while the volume is open.
  Status DestroyVolume(const std::string& name);
  Result<bdev::BlockDevicePtr> OpenVolume(const std::string& name,
                                          const OpenVolumeOptions& options = {});

  // The root dataset first, then volumes by name.
  std::vector<DatasetInfo> ListDatasets();

  // Snapshots (snapshot.cc has the theory). Names are "pool/vol@snap".
  // Takes every snapshot named in one txg, or none: a bad or taken name, a missing volume,
  // two of one volume: the error, nothing changed. O(1) in the volumes' sizes.
  Status Snapshot(const std::vector<std::string>& names);
  // Frees what no other snapshot, clone or head holds. EBUSY while the snapshot is open or
  // held, EEXIST while it has clones. `dry_run`: changes nothing (checks only that it
  // exists). *freed (if given): the bytes freed, or that would be.
  Status DestroySnapshot(const std::string& name, bool dry_run = false, uint64_t* freed = nullptr);
  // zfs destroy of several snapshots (a list, a@b%c ranges resolved by the caller): all in
  // one txg, or none. Every one is checked first: missing (ENOENT), open or held (EBUSY),
  // with clones (EEXIST): that error, nothing destroyed. `dry_run`: changes nothing and
  // checks only that they exist. *freed: what destroying them all
  // together frees (not the sum of their `used`: a block two of them share is freed by
  // destroying both). A name given twice counts once.
  Status DestroySnapshots(const std::vector<std::string>& names, bool dry_run = false,
                          uint64_t* freed = nullptr);
  // Returns the volume to the snapshot's data (volsize included; properties stay). The
  // snapshot must be the volume's newest unless `destroy_later`, which destroys the later
  // ones in the same txg. EBUSY while the volume is open, or a later snapshot has clones.
  Status Rollback(const std::string& snapshot, bool destroy_later = false);
  // A writable volume `name` sharing every block of `snapshot` (origin). A sparse volume
  // unless options.props sets a refreservation; options' volsize and volblocksize are ignored.
  Result<DatasetInfo> Clone(const std::string& snapshot, const std::string& name,
                            const VolumeOptions& options = {});
  // zfs promote: the clone `clone` takes its origin's place (promote.cc has the theory): the
  // origin volume's snapshots up to the clone's origin become the clone's, the origin
  // volume becomes a clone of it, the space they hold moves with them. All in one txg.
  // EINVAL for a volume that is not a clone, EEXIST if the clone has a snapshot of a
  // moving one's name, EBUSY if a moving snapshot is open; nothing changed then.
  Status Promote(const std::string& clone);
  // User holds (zfs hold): a held snapshot cannot be destroyed (EBUSY). Hold: EEXIST if
  // the tag is there; Release: ESRCH-like ENOENT if not. Each is committed before it returns.
  Status Hold(const std::string& snapshot, const std::string& tag);
  Status Release(const std::string& snapshot, const std::string& tag);
  // tag -> time held (seconds since the epoch).
  Result<std::map<std::string, uint64_t>> Holds(const std::string& snapshot);
  // The snapshots of `volume` (of every volume if empty), each volume's oldest first.
  std::vector<DatasetInfo> ListSnapshots(const std::string& volume = "");
  // The names alone, cheaply (no space walk): `volume`'s snapshots (every volume's if
  // empty), each volume's oldest first; and a dataset's stored (non-default) properties.
  std::vector<std::string> SnapshotNames(const std::string& volume = "");
  Result<std::map<std::string, std::string>> StoredProperties(const std::string& dataset);
  // zfs's written@snap of `dataset` (a volume or a snapshot): the bytes it references born
  // after `snapshot` ("pool/vol@s", or "s" / "@s" of the dataset's own volume), which must
  // be an earlier snapshot of its lineage (its volume's, or up its origins'); EINVAL if not.
  Result<uint64_t> WrittenSince(const std::string& dataset, const std::string& snapshot);
  Result<DatasetInfo> GetDataset(const std::string& name);
  // volsize (grow only), readonly, sync, logbias, checksum, refreservation, user props (a:b).
  Status SetProperty(const std::string& dataset, const std::string& prop, const std::string& value);
  // Several at once: all are checked before any is applied (a failure changes nothing); a
  // property given twice is an error.
  Status SetProperties(const std::string& dataset,
                       const std::vector<std::pair<std::string, std::string>>& props);
  Status InheritProperty(const std::string& dataset, const std::string& prop);

  PoolInfo Info();
  // comment, cachemax and dirtymax (taking effect at the next import: memory_bounds.h),
  // user props (a:b). Synced before it returns.
  Status SetPoolProperty(const std::string& prop, const std::string& value);

  // Redundancy (vdev.h, scan.cc, vdev_admin.cc). Scrub starts a scan in the background (a
  // paused scrub resumes); EBUSY while one runs. WaitScan waits for it to end or pause.
  Status Scrub();
  Status CancelScrub();  // zpool scrub -s
  Status PauseScrub();   // zpool scrub -p
  Status WaitScan();
  // `device` names a leaf by its path or guid (as zpool status shows it). Offline/online
  // stop and restart I/O to a mirror's child (online also clears a FAULTED one; a scrub
  // heals what it missed); Clear resets the error counters and the error list and brings
  // FAULTED children back; on a SUSPENDED pool it first commits the dirty data again once
  // every vdev answers (an error, the pool still suspended, while one does not). Replace swaps a
  // child for `new_device` and resilvers it; Attach adds `new_device` beside `existing` (making or
  // widening a mirror) and resilvers; Detach removes a mirror's child.
  Status Offline(const std::string& device);
  Status Online(const std::string& device);
  Status Clear();
  Status Replace(const std::string& old_device, bdev::BlockDevicePtr new_device,
                 const std::string& new_path);
  Status Attach(const std::string& existing, bdev::BlockDevicePtr new_device,
                const std::string& new_path);
  Status Detach(const std::string& device);

  // zpool add: new top-level vdevs (plain, mirror or raidz, as Create takes them), used by
  // new writes from the next txg on. Every device is checked first (size, sector size, not
  // in this pool, no other pool's label unless `force`): a bad one is the error and nothing
  // changes. EBUSY while a scan runs. vdev_add.cc has the order of the writes.
  Status Add(std::vector<VdevSpec> vdevs, bool force = false);

  // What the import of this pool discarded, if anything (empty for a created pool).
  const ImportReport& import_report() const;

  // True once Close() has run (or begun): the pool takes no more writes.
  bool closed() const;

  PoolImpl* impl() { return impl_.get(); }  // internals for tests and the checker

  explicit Pool(std::unique_ptr<PoolImpl> impl);

 private:
  std::unique_ptr<PoolImpl> impl_;
};

// Reads the labels of each (path, device) and groups them by pool. Devices without a valid
// label are skipped. Pools are listed by name.
std::vector<DiscoveredPool> DiscoverPools(
    const std::vector<std::pair<std::string, bdev::BlockDevicePtr>>& devices);

// Pool and dataset component names as zfs takes them.
Status ValidatePoolName(const std::string& name);
Status ValidateDatasetName(const std::string& name);   // "pool/vol"
Status ValidateSnapshotName(const std::string& name);  // "pool/vol@snap"
// A settable pool property (comment, cachemax, dirtymax, a user property a:b) as it is
// stored: a memory bound in bytes (memory_bounds.h), anything else as given. EINVAL for a
// property that cannot be set or a value it cannot take.
Result<std::string> StoredPoolProperty(const std::string& prop, const std::string& value);

}  // namespace volstack::pool

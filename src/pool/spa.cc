// The pool: theory.
//
// What it is. A copy-on-write, checksummed block store over striped vdevs, holding volumes.
// Everything reachable from the newest valid uberblock is the pool: uberblock -> MOS block
// (dataset directory, properties, space-map block list) -> each volume's tree of indirect
// blocks -> data blocks. Every pointer carries its child's checksum, so one verified
// uberblock proves the whole tree (see docs/format/pool.md).
//
// States and data flow. Writes land in per-volume dirty maps (volume.h). A txg commit
// (txg_sync.cc) writes the dirty blocks and the changed indirect blocks to free space, the
// space-map records and a new MOS, flushes, then writes the uberblock into every label and
// flushes again. Until that last write lands, the previous uberblock describes an intact
// tree, because:
//   - live blocks are never overwritten: allocation only hands out free space;
//   - a block freed in txg N is handed out again only after txg N + kTxgDefer is durable,
//     so the last kTxgDefer + 1 trees stay intact on disk (import can rewind to them); the
//     lists of those frees are stored with the MOS, so this holds across imports
//     (defer_map.h).
// Import (spa_import.cc) picks the newest uberblock whose checksum, MOS and space map
// verify and whose volume roots read back; it reads metadata only. Since a valid uberblock
// always names a flushed tree, taking an older one means damage: it is refused unless the
// caller asks to rewind (zpool import -F), never done silently. Runs of a stream's whole
// blocks may be written ahead of their commit, by the early writer (early_write.cc), to
// space taken from the free set that only that commit's tree will name: the same data
// writes, moved earlier, so none of the above changes. Likewise the early flusher
// (early_flush.h) flushes a vdev once a few MiB of data have reached it, while the txg is
// still open or its commit is writing: flushes made sooner, never one fewer.
//
// Space accounting. The space map is a log of alloc/free records for tree blocks, one
// block per txg appended (condensed into a fresh list of live extents when long). The MOS
// and space-map blocks are not in it; import adds them from their pointers. So free space
// after import = allocatable range - (replayed live set) - (meta blocks); a crash loses
// neither (the log belongs to the same txg as the tree it describes). A write reserves
// room for every block it will dirty before it changes any (ReserveDirty,
// dirty_reservation.h), and before the blocks it overwrites are freed; a write that finds
// no room while commits would free some (dirty data, deferred frees) commits and tries
// again, up to kTxgDefer + 1 times, so a stream of overwrites in a half-empty pool waits
// for its frees instead of failing (ZvolDevice::RetryWhileSpaceIsComing).
//
// When txgs commit. On Sync(), on a timer (txg_timeout), when dirty data passes
// dirty_max/4 (the sync thread is kicked), and writers block at dirty_max; a volume's
// Flush() commits one only when its intent log cannot be used (see below). With nothing
// dirty the timer still commits while frees wait for release (at most kTxgDefer empty
// txgs after the last one), so freed space comes back on an idle pool.
//
// Locks (in order): sync_mu (one commit at a time, or an early write's allocations;
// allocator, space map, deferred frees)
// -> mu (directory, props, open txg; short) -> Volume::mu_ (dirty maps; short) ->
// Volume::tree_mu_ (indirect cache). I/O is never done under mu or Volume::mu_; data reads
// and writes of different volumes and blocks proceed in parallel with a commit. The cache
// refill's lock (cache_refill.h) is a leaf: the commit takes it under sync_mu (Clear, and
// Forget for frees past the fill's list), the fills under none, and no other lock, the
// block cache's included, is taken under it.
//
// Intent log (zil.cc has its theory). A volume's Flush(), FUA and sync=always writes do not
// commit a txg: they append the volume's changes since the last durable txg, as records,
// to the volume's chain of log blocks (header in its MOS entry) and flush the vdevs
// written; the txg commits later as above and frees the blocks it makes obsolete. Log
// blocks come from a reserve carved out of free space at txg commit; they are not in the
// space map: import claims every valid block of each chain, replays the records newer
// than the imported txg and commits. logbias=throughput turns the log off for a volume
// (flush = commit).
//
// Snapshots and clones (snapshot.cc has the theory): a snapshot keeps the root its txg
// wrote; a head frees a block only if it was born after its newest snapshot; destroying a
// snapshot frees what it alone names, found by a birth-pruned walk beside the next tree.
//
// Redundancy (vdev.h, scan.cc): a top-level vdev may be a mirror; a DVA names the mirror,
// whose children hold the same bytes. Every checksum-verified read (ReadBlock) heals: a
// copy that does not match is counted, the next is tried and the bad one is rewritten.
// A scrub walks every block of the synced tree and repairs every copy; a resilver is the
// same walk filling a new child.
//
// Compression (compress.h): a volume's data blocks are compressed by the commit
// (volume_compress.cc) and decoded by ReadBlock after their checksum verified.
//
// Simplifications on purpose: one DVA per pointer (no ditto copies), no compressed
// metadata, no promote, holds or bookmarks yet.
#include "pool/spa.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <random>

#include "pool/memory_bounds.h"
#include "pool/pool_impl.h"
#include "pool/send_stream.h"
#include "pool/zvol_device.h"
#include "util/size.h"

namespace volstack::pool {

namespace {

uint64_t NowSeconds() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

bool ValidComponent(const std::string& c) {
  if (c.empty() || c.size() > 255 || !std::isalnum(static_cast<unsigned char>(c[0]))) return false;
  for (char ch : c) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-' && ch != '.' &&
        ch != ':') {
      return false;
    }
  }
  return true;
}

bool IsUserProp(const std::string& p) { return p.find(':') != std::string::npos; }

// zfs's rules for a user property: a name of lower-case letters, digits and ":._-" (so it
// prints as one field of `zfs get -H`), at most 255 bytes; a value of at most 8 KiB.
Status ValidateUserProp(const std::string& prop, const std::string& value) {
  const bool name_ok = !prop.empty() && prop.size() <= 255 && prop.front() != ':' &&
                       std::all_of(prop.begin(), prop.end(), [](char c) {
                         return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ':' ||
                                c == '.' || c == '_' || c == '-';
                       });
  if (!name_ok) {
    return Status::InvalidArgument("invalid property '" + prop +
                                   "': user property names are lower-case letters, digits and "
                                   "':._-', with a ':', at most 255 characters");
  }
  if (value.size() > 8192) return Status::InvalidArgument("'" + prop + "' value is too long");
  return Status::Ok();
}

// Largest volume: what a Linux file or block device can be (sizes are signed 64-bit there).
constexpr uint64_t kMaxVolsize = (uint64_t{1} << 63) - 1;
// The largest compressed block ReadBlock reads: a data block is at most 128 KiB.
constexpr uint64_t kMaxCompressedRead = 128 << 10;

Status CheckVolsize(uint64_t size, uint32_t vbs) {
  if (size == 0) return Status::InvalidArgument("'volsize' must be greater than zero");
  if (size > kMaxVolsize) return Status::InvalidArgument("'volsize' is too large (at most 8E)");
  if (size % vbs != 0) {
    return Status::InvalidArgument("'volsize' must be a multiple of volume block size");
  }
  return Status::Ok();
}

}  // namespace

uint64_t MetaOverhead(const PoolImpl& pool, uint64_t nblocks) {
  uint64_t bytes = 0;
  for (uint64_t n = nblocks;;) {
    n = (n + kBpsPerIndirect - 1) / kBpsPerIndirect;
    bytes += n * pool.asize(kIndirectBlockSize);
    if (n <= 1) break;
  }
  return bytes;
}

uint64_t FullReservation(const PoolImpl& pool, uint64_t volsize, uint32_t vbs) {
  return volsize + MetaOverhead(pool, volsize / vbs);
}

Status ValidatePoolName(const std::string& name) {
  static const char* kReserved[] = {"mirror", "raidz", "draid", "spare", "log", "cache"};
  if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0])) || !ValidComponent(name)) {
    return Status::InvalidArgument("invalid pool name '" + name + "'");
  }
  for (const char* r : kReserved) {
    if (name.rfind(r, 0) == 0) {
      return Status::InvalidArgument("invalid pool name '" + name + "': name is reserved");
    }
  }
  return Status::Ok();
}

Status ValidateDatasetName(const std::string& name) {
  const auto slash = name.find('/');
  if (slash == std::string::npos) {
    return Status::InvalidArgument("invalid dataset name '" + name + "': expected pool/volume");
  }
  if (name.size() > 255) {
    return Status::InvalidArgument("invalid dataset name '" + name + "': name is too long");
  }
  VS_RETURN_IF_ERROR(ValidatePoolName(name.substr(0, slash)));
  const std::string rest = name.substr(slash + 1);
  if (rest.find('/') != std::string::npos) {
    return Status::NotFound("cannot create '" + name + "': parent does not exist");
  }
  if (!ValidComponent(rest)) {
    return Status::InvalidArgument("invalid dataset name '" + name + "'");
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------
// PoolImpl helpers

PoolImpl::~PoolImpl() {
  StopScan();
  StopSyncThread();
  FinishCacheFills();
  volumes.clear();
  pending_destroy.clear();
  // The cache's reserve thread reads cache_bytes, a later member destroyed before it; the
  // refill uses the cache.
  cache_refill.reset();
  block_cache.reset();
}

uint64_t PoolImpl::total_size() const {
  uint64_t t = 0;
  for (auto& v : vdevs) t += v->alloc_end() - v->alloc_start();
  return t;
}

Status PoolImpl::ReadBlock(const BlockPtr& bp, uint8_t* dst, bool cache_asked, bool offer,
                           uint32_t prefix) {
  const Dva& d = bp.dva[0];
  if (d.vdev >= vdevs.size() || d.offset < kAllocStart ||
      d.offset + d.asize() > vdevs[d.vdev]->alloc_end() ||
      (bp.comp == Compression::kNone) != (bp.psize == bp.lsize) || bp.psize > d.asize()) {
    return Status::IoError("pool " + name + ": block pointer out of range: " + bp.ToString());
  }
  const BlockKey key = CacheKey(bp);
  if (block_cache && !cache_asked && block_cache->Lookup(key, dst, 0, bp.lsize)) {
    return Status::Ok();
  }
  // A compressed block is read (whole sectors: its asize) into scratch, verified there, and
  // only then decoded into dst: the checksum covers the bytes on disk.
  const bool compressed = bp.comp != Compression::kNone;
  thread_local std::unique_ptr<uint8_t, decltype(&std::free)> raw_buf(nullptr, &std::free);
  if (compressed && !raw_buf) {
    raw_buf.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, kMaxCompressedRead)));
    VS_CHECK(raw_buf != nullptr);
  }
  if (compressed && d.asize() > kMaxCompressedRead) {
    return Status::IoError("pool " + name + ": compressed block too large: " + bp.ToString());
  }
  uint8_t* const raw = compressed ? raw_buf.get() : dst;
  const uint64_t read_len = compressed ? d.asize() : bp.psize;
  // Self-heal (vdev.h): a copy that does not match is counted against its child, the next
  // copy is tried and the bad ones are rewritten. Only the verified bytes leave here; the
  // decoding below works on them.
  HealCounts heal;
  Status st = vdevs[d.vdev]->ReadVerified(
      d.offset, std::span<uint8_t>(raw, read_len),
      [&](std::span<const uint8_t> b) {
        return ComputeChecksum(bp.cksum, b.first(bp.psize)) == bp.checksum;
      },
      &heal);
  if (heal.repaired_bytes > 0) healed_bytes += heal.repaired_bytes;
  if (!st.ok()) {
    // Bad bytes from disk are Corruption (EUCLEAN), not an I/O error: the device answered, and
    // what it gave does not match. devfs and NBD send it on as EIO (FuseErrno, WireError).
    if (st.IsCorruption()) {
      return Status::Corruption("pool " + name + ": checksum mismatch in " + bp.ToString());
    }
    return st;
  }
  const bool offered = block_cache && offer && bp.type == BlockType::kVolData;
  if (bp.comp == Compression::kLz4 && prefix != 0 && prefix < bp.lsize && !offered) {
    return DecompressLz4Prefix(std::span<const uint8_t>(raw, bp.psize),
                               std::span<uint8_t>(dst, prefix))
        .WithContext("pool " + name + ": " + bp.ToString());
  }
  if (compressed) {
    // Verified bytes that do not decode to lsize: damage the checksum cannot see (or a
    // writer's bug); never handed out as data.
    VS_RETURN_IF_ERROR(DecompressBlock(bp.comp, std::span<const uint8_t>(raw, bp.psize),
                                       std::span<uint8_t>(dst, bp.lsize))
                           .WithContext("pool " + name + ": " + bp.ToString()));
  }
  // Indirect blocks are cached decoded by their volume; only data is worth a second copy.
  if (offered) block_cache->Insert(key, dst, false, Offer::kRead);
  return Status::Ok();
}

Status PoolImpl::CheckUsable() const {
  if (closed) return Status::FromErrno(ENXIO, "pool " + name + " is closed");
  if (failed) return SuspendedError();
  return Status::Ok();
}

void PoolImpl::RecomputeReservations() {
  uint64_t total = 0;
  for (auto& [n, v] : volumes) {
    const uint64_t r = v->refreservation.load(), u = v->used();
    if (r > u) total = SaturatingAdd(total, r - u);
  }
  unused_reservation = total;
}

Result<DirtyReservation> PoolImpl::ReserveDirty(Volume* vol, uint64_t bytes) {
  // Dirty data and the other requests' reservations (all volumes) plus indirect/MOS/
  // space-map overhead plus every volume's unused reservation must fit in free space; the
  // part of this volume's dirty data its own reservation covers is not counted twice.
  // Beyond its reservation a write must also leave the slop (1/32 of the pool) for commits.
  std::lock_guard l(reserve_mu);
  const uint64_t slop = std::max<uint64_t>(total_size() / 32, 1 << 20);
  const uint64_t pending = PendingDirty() + bytes;
  // Indirect blocks: those of the dirty data (counted per L1 block: scattered small writes
  // need four times their size), those this request may add (an L1 per 128 blocks and one
  // more at each end, with their parents), and 2 MiB for the space map and the MOS.
  const uint64_t vbs = vol->volblocksize();
  const uint64_t request_l1s = bytes / vbs / kBpsPerIndirect + 2;
  const uint64_t request_meta =
      request_l1s * LevelsFor(vol->volsize() / vbs) * asize(kIndirectBlockSize);
  const uint64_t meta =
      std::max(pending / 32, dirty_meta_bytes.load() + request_meta) + kMetaSlackBytes;
  const uint64_t r = vol->refreservation.load(), u = vol->used();
  const uint64_t own_unused = r > u ? r - u : 0;
  const uint64_t own = vol->pending_dirty() + bytes;
  const uint64_t covered = std::min(own_unused, own);
  uint64_t need =
      SaturatingAdd(pending - std::min(pending, covered) + meta, unused_reservation.load());
  if (covered < own) need = SaturatingAdd(need, slop);
  if (free_bytes.load() < need) return Status::NoSpace("pool " + name + ": out of space");
  // Bytes are not enough: the commit needs whole runs for the indirect blocks and, for a
  // volume of 16 KiB blocks or more, for the data too (every volume's pending data is
  // counted: which of it is small is not tracked). Small frees elsewhere can cut the free
  // space into holes none of those fit in; the commit would fail and suspend the pool.
  // (A run of 16 KiB does not hold a larger block: those can still find none.)
  const uint64_t need_runs =
      vbs >= kIndirectBlockSize ? pending + meta + (covered < own ? slop : 0) : meta;
  if (free_run_bytes.load() < need_runs) {
    return Status::NoSpace("pool " + name + ": out of space (free space too fragmented)");
  }
  reserved_bytes += bytes;
  vol->reserved += bytes;
  return DirtyReservation(this, vol, bytes);
}

void PoolImpl::Throttle() {
  const uint64_t dirty = dirty_bytes.load();
  if (dirty < tuning.dirty_max_bytes / 4) return;
  if (!tuning.sync_thread) {
    if (dirty >= tuning.dirty_max_bytes) Sync().IgnoreError();  // failure suspends the pool
    return;
  }
  std::unique_lock l(mu);
  kick = true;
  cv.notify_all();
  cv.wait(l, [&] {
    return dirty_bytes.load() < tuning.dirty_max_bytes || failed || closed || stop_thread;
  });
}

Status PoolImpl::SyncIfDirtyAtLeast(uint64_t bytes) {
  std::lock_guard l(sync_mu);
  // The commit that held sync_mu meanwhile (typically a Flush()'s) may already have taken
  // the data that kicked us; committing the little written since would cost a txg (two
  // vdev flushes) for nothing.
  if (dirty_bytes.load() < bytes) return Status::Ok();
  return SyncLocked();
}

void PoolImpl::StartEarlyFlusher() {
  if (tuning.early_flush_bytes == 0) return;
  // Sized for every vdev the pool may have, so vdevs that zpool add brings are flushed early
  // too without a new flusher.
  early_flusher = std::make_unique<EarlyFlusher>(vdevs.capacity(), tuning.early_flush_bytes,
                                                 [this](uint32_t vdev) { EarlyFlush(vdev); });
}

void PoolImpl::EarlyFlush(uint32_t vdev) {
  if (failed || vdevs[vdev]->device()->Flush().ok()) return;
  {
    std::lock_guard l(mu);
    failed = true;
  }
  cv.notify_all();
}

void PoolImpl::StartSyncThread() {
  if (!tuning.sync_thread) return;
  StartEarlyFlusher();
  StartEarlyWriter();
  sync_thread = std::thread([this] {
    std::unique_lock l(mu);
    while (!stop_thread) {
      cv.wait_for(l, tuning.txg_timeout, [&] { return stop_thread || kick; });
      if (stop_thread) break;
      const bool kicked = kick;
      kick = false;
      l.unlock();
      // A failure suspends the pool; callers see it on their I/O.
      if (kicked) {
        SyncIfDirtyAtLeast(tuning.dirty_max_bytes / 4).IgnoreError();
        TrimHeap();
      } else {
        SyncOnTimer().IgnoreError();
      }
      l.lock();
    }
  });
}

void PoolImpl::StopSyncThread() {
  StopEarlyWriter();
  {
    std::lock_guard l(mu);
    stop_thread = true;
  }
  cv.notify_all();
  if (sync_thread.joinable()) sync_thread.join();
  std::lock_guard l(sync_mu);
  early_flusher.reset();
}

LabelConfig PoolImpl::BaseLabelConfig(const Vdev& v, PoolState state, uint64_t txg) const {
  LabelConfig c;
  c.name = name;
  c.state = state;
  c.pool_guid = pool_guid;
  c.vdev_guid = v.guid();
  c.vdev_id = v.id();
  c.vdev_guids = vdevs.guids();
  c.ashift = ashift;
  c.txg = txg;
  return c;
}

Status PoolImpl::WriteLabels(PoolState state, uint64_t txg) {
  std::lock_guard l(sync_mu);
  return WriteLabelsLocked(state, txg);
}

Status PoolImpl::WriteLabelsLocked(PoolState state, uint64_t txg) {
  for (int parity = 0; parity < 2; parity++) {
    for (auto& v : vdevs) {
      VS_RETURN_IF_ERROR(v->WriteLabelConfigs(BaseLabelConfig(*v, state, txg), parity));
    }
    VS_RETURN_IF_ERROR(FlushAll());
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------
// Pool

Pool::Pool(std::unique_ptr<PoolImpl> impl) : impl_(std::move(impl)) {}

Pool::~Pool() { Close().IgnoreError(); }

const std::string& Pool::name() const { return impl_->name; }
const ImportReport& Pool::import_report() const { return impl_->import_report; }

bool Pool::closed() const { return impl_->closed; }

uint64_t Pool::guid() const { return impl_->pool_guid; }

Status Pool::Sync() {
  VS_RETURN_IF_ERROR(impl_->CheckUsable());
  return impl_->Sync();
}

Status Pool::Close() {
  if (impl_->closed) return Status::Ok();
  impl_->StopScan();
  impl_->StopSyncThread();
  Status st = impl_->read_only ? Status::Ok() : impl_->Sync();
  impl_->closed = true;  // writes and flushes fail from here on
  // The cache fills stop. A commit already under way when `closed` was set may start one
  // more, which ~PoolImpl stops and joins.
  impl_->FinishCacheFills();
  impl_->cv.notify_all();
  return st;
}

namespace {
// Export / destroy: refuses while a device is open, then closes and marks the labels.
Status Leave(Pool& pool, PoolState state, const std::string& verb) {
  PoolImpl& impl = *pool.impl();
  {
    // Devices are opened under mu (OpenVolume), so none opens between this check and the
    // close: a device opened then would commit after the last txg, beside the labels.
    std::lock_guard l(impl.mu);
    for (auto& [n, v] : impl.snapshots) {
      if (v->open_count > 0) {
        return Status::Busy("cannot " + verb + " '" + impl.name + "': pool is busy");
      }
    }
    for (auto& [n, v] : impl.volumes) {
      if (v->open_count > 0) {
        return Status::Busy("cannot " + verb + " '" + impl.name + "': pool is busy");
      }
    }
    impl.leaving = true;
  }
  VS_RETURN_IF_ERROR(impl.CheckUsable());
  VS_RETURN_IF_ERROR(pool.Close());
  return impl.WriteLabels(state, impl.synced_txg);
}
}  // namespace

Status Pool::Export() { return Leave(*this, PoolState::kExported, "export"); }

Status Pool::Destroy() { return Leave(*this, PoolState::kDestroyed, "destroy"); }

// Validates and normalises a settable volume property into `props`.
Status ApplyVolumeProp(std::map<std::string, std::string>& props, const std::string& prop,
                       const std::string& value) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("'" + prop + "' " + why);
  };
  if (IsUserProp(prop)) {
    VS_RETURN_IF_ERROR(ValidateUserProp(prop, value));
    props[prop] = value;
  } else if (prop == "readonly") {
    if (value != "on" && value != "off") return bad("must be 'on' or 'off'");
    props[prop] = value;
  } else if (prop == "sync") {
    if (value != "standard" && value != "always" && value != "disabled") {
      return bad("must be one of 'standard | always | disabled'");
    }
    props[prop] = value;
  } else if (prop == "logbias") {
    if (value != "latency" && value != "throughput") {
      return bad("must be one of 'latency | throughput'");
    }
    props[prop] = value;
  } else if (prop == "checksum") {
    if (value == "off") return bad("off is not supported: every block is checksummed");
    if (auto c = ParseChecksumName(value); !c.ok()) return c.status();
    props[prop] = value;
  } else if (prop == "compression") {
    if (auto c = ParseCompression(value); !c.ok()) return c.status();
    props[prop] = value;
  } else if (prop == "snapdev") {
    // Whether the volume's snapshots are devices (read-only) in the stack: the stack reads
    // it (stack/snapshot_devices.cc); the pool only keeps it.
    if (value != "hidden" && value != "visible") return bad("must be one of 'hidden | visible'");
    props[prop] = value;
  } else if (prop == "refreservation") {
    if (value == "none") {
      props[prop] = "0";
    } else if (value == "auto") {
      props[prop] = value;  // the full size, and it follows volsize
    } else {
      VS_ASSIGN_OR_RETURN(uint64_t r, ParseSize(value));
      props[prop] = std::to_string(r);
    }
  } else {
    static const char* kReadOnly[] = {"used",      "available",  "referenced",   "type",
                                      "creation",  "guid",       "volblocksize", "name",
                                      "createtxg", "logicalused"};
    for (const char* r : kReadOnly) {
      if (prop == r) return Status::InvalidArgument("'" + prop + "' is readonly");
    }
    return Status::InvalidArgument("invalid property '" + prop + "'");
  }
  return Status::Ok();
}

Result<DatasetInfo> Pool::CreateVolume(const std::string& name, const VolumeOptions& options) {
  VS_RETURN_IF_ERROR(ValidateDatasetName(name));
  if (name.substr(0, name.find('/')) != impl_->name) {
    return Status::NotFound("cannot create '" + name + "': no such pool");
  }
  const uint32_t vbs = options.volblocksize;
  if (vbs < 4096 || vbs > 131072 || (vbs & (vbs - 1)) != 0) {
    return Status::InvalidArgument("'volblocksize' must be power of 2 from 4K to 128K");
  }
  VS_RETURN_IF_ERROR(CheckVolsize(options.volsize, vbs));
  std::map<std::string, std::string> props;
  for (const auto& [k, v] : options.props) {
    if (k == "volsize" || k == "volblocksize") continue;
    VS_RETURN_IF_ERROR(ApplyVolumeProp(props, k, v));
  }
  VS_RETURN_IF_ERROR(impl_->CheckUsable());
  const uint64_t nblocks = options.volsize / vbs;
  const uint64_t full = options.volsize + MetaOverhead(*impl_, nblocks);
  if (!props.count("refreservation")) props["refreservation"] = options.sparse ? "0" : "auto";
  const uint64_t refres =
      props["refreservation"] == "auto" ? full : std::stoull(props["refreservation"]);
  props["creation"] = std::to_string(NowSeconds());
  {
    std::lock_guard l(impl_->mu);
    if (impl_->volumes.count(name)) {
      return Status::Exists("cannot create '" + name + "': dataset already exists");
    }
    // A `receive -s` into this new name that broke holds the name (receive.cc), as zfs's
    // partially received dataset does.
    if (auto h = impl_->volumes.find(name + "%recv");
        h != impl_->volumes.end() && h->second->phys().props.count("resume:toguid")) {
      return Status::Exists("cannot create '" + name +
                            "': dataset already exists (partially received: zfs receive -A " +
                            name + " discards it)");
    }
    const uint64_t slop = std::max<uint64_t>(impl_->total_size() / 32, 1 << 20);
    const uint64_t free = impl_->FreeWithDeferred();
    if (refres > 0 && free < SaturatingAdd(SaturatingAdd(refres, impl_->unused_reservation.load()),
                                           slop + impl_->PendingDirty())) {
      return Status::NoSpace("cannot create '" + name + "': out of space");
    }
    DatasetPhys phys;
    phys.id = impl_->next_id++;
    phys.name = name;
    phys.guid = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
    phys.create_txg = impl_->open_txg;
    phys.volsize = options.volsize;
    phys.volblocksize = vbs;
    phys.levels = LevelsFor(nblocks);
    phys.props = props;
    auto vol = std::make_shared<Volume>(impl_.get(), phys);
    vol->refreservation = refres;
    impl_->volumes[name] = vol;
    impl_->mos_dirty = true;
    impl_->RecomputeReservations();
  }
  VS_RETURN_IF_ERROR(impl_->Sync());
  return GetDataset(name);
}

Status Pool::DestroyVolume(const std::string& name) {
  VS_RETURN_IF_ERROR(impl_->CheckUsable());
  // A snapshot operation checks and commits under it: none queued may lose its volume.
  std::lock_guard admin(impl_->snap_admin_mu);
  {
    std::lock_guard l(impl_->mu);
    auto it = impl_->volumes.find(name);
    if (it == impl_->volumes.end()) {
      return Status::NotFound("cannot open '" + name + "': dataset does not exist");
    }
    if (it->second->open_count > 0) {
      return Status::Busy("cannot destroy '" + name + "': dataset is busy");
    }
    if (auto snaps = impl_->SnapshotsOfLocked(name); !snaps.empty()) {
      std::string msg = "cannot destroy '" + name +
                        "': volume has children\nuse '-r' to destroy the following datasets:";
      for (const auto& s : snaps) msg += "\n" + s->synced_phys().name;
      return Status::Exists(msg);
    }
    it->second->destroyed = true;
    impl_->pending_destroy.push_back(it->second);
    impl_->volumes.erase(it);
    impl_->mos_dirty = true;
    impl_->RecomputeReservations();
  }
  return impl_->Sync();
}

Result<bdev::BlockDevicePtr> Pool::OpenVolume(const std::string& name,
                                              const OpenVolumeOptions& options) {
  VS_RETURN_IF_ERROR(impl_->CheckUsable());
  if (options.logical_block_size != 512 && options.logical_block_size != 4096) {
    return Status::InvalidArgument("logical block size must be 512 or 4096");
  }
  std::lock_guard l(impl_->mu);
  if (impl_->leaving) return Status::FromErrno(ENXIO, "pool " + impl_->name + " is closing");
  const bool snapshot = name.find('@') != std::string::npos;
  auto& map = snapshot ? impl_->snapshots : impl_->volumes;
  auto it = map.find(name);
  if (it == map.end()) {
    return Status::NotFound("cannot open '" + name + "': dataset does not exist");
  }
  const std::shared_ptr<Volume>& vol = it->second;
  const bool ro = snapshot || options.read_only || vol->Prop("readonly", "off") == "on";
  return bdev::BlockDevicePtr(
      std::make_shared<ZvolDevice>(shared_from_this(), vol, ro, options.logical_block_size));
}

namespace {
DatasetInfo VolumeInfo(PoolImpl& impl, Volume& v, uint64_t pool_avail) {
  DatasetPhys p = v.phys();
  DatasetInfo d;
  d.name = p.name;
  d.type = "volume";
  d.guid = p.guid;
  d.create_txg = p.create_txg;
  d.referenced = p.used;
  d.logical_referenced = p.lused;
  d.volsize = p.volsize;
  d.volblocksize = p.volblocksize;
  d.refreservation = v.refreservation.load();
  const uint64_t unused = d.refreservation > p.used ? d.refreservation - p.used : 0;
  d.used = p.used + unused;
  d.available = pool_avail + unused;
  auto it = p.props.find("creation");
  d.creation_time = it == p.props.end() ? 0 : std::strtoull(it->second.c_str(), nullptr, 10);
  d.props = p.props;
  d.props.erase("creation");
  // A thick volume's reservation is set by its creation ("auto"), a local value as in zfs;
  // a sparse one has none, the default.
  for (const auto& [k, val] : d.props) {
    if (k != "refreservation" || val != "0") d.local.push_back(k);
  }
  d.props.emplace("readonly", "off");
  d.props.emplace("sync", "standard");
  d.props.emplace("logbias", "latency");
  d.props.emplace("checksum", "on");
  d.props.emplace("compression", kDefaultCompression);
  d.props.emplace("snapdev", "hidden");
  d.props["refreservation"] = std::to_string(d.refreservation);
  d.props["type"] = "volume";
  d.props["available"] = std::to_string(d.available);
  PutDatasetNumbers(d);
  d.props["usedbyrefreservation"] = std::to_string(unused);
  (void)impl;
  return d;
}

}  // namespace

std::string CompressRatio(uint64_t logical, uint64_t physical) {
  // zfs's two decimals, truncated; nothing stored reads as 1.00x.
  const uint64_t r = physical == 0 ? 100 : logical * 100 / physical;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llu.%02llux", static_cast<unsigned long long>(r / 100),
                static_cast<unsigned long long>(r % 100));
  return buf;
}

void PutDatasetNumbers(DatasetInfo& d) {
  // A volume's logicalused and compressratio add its snapshots' blocks (ListDatasets).
  d.props["logicalreferenced"] = std::to_string(d.logical_referenced);
  d.props["logicalused"] = std::to_string(d.logical_referenced);
  d.props["refcompressratio"] = CompressRatio(d.logical_referenced, d.referenced);
  d.props["compressratio"] = d.props["refcompressratio"];
  d.props["used"] = std::to_string(d.used);
  d.props["referenced"] = std::to_string(d.referenced);
  d.props["volsize"] = std::to_string(d.volsize);
  d.props["volblocksize"] = std::to_string(d.volblocksize);
  d.props["guid"] = std::to_string(d.guid);
  d.props["createtxg"] = std::to_string(d.create_txg);
  d.props["creation"] = std::to_string(d.creation_time);
  d.props["mountpoint"] = "-";
}

namespace {

uint64_t PoolAvail(PoolImpl& impl) {
  const uint64_t slop = std::max<uint64_t>(impl.total_size() / 32, 1 << 20);
  const uint64_t held = slop + impl.unused_reservation.load();
  const uint64_t free = impl.FreeWithDeferred();
  return free > held ? free - held : 0;
}
}  // namespace

std::vector<DatasetInfo> Pool::ListDatasets() {
  std::vector<DatasetInfo> out;
  // Volumes with snapshots or an origin: their snapshot columns (snapshot.cc), from the
  // synced trees, which sync_mu keeps still.
  std::lock_guard s(impl_->sync_mu);
  struct Extra {
    uint64_t written = 0, usedbysnapshots = 0, logical_snapshots = 0, usedbydataset = 0;
  };
  std::map<std::string, Extra> extra;
  {
    std::vector<std::string> names;
    {
      std::lock_guard l(impl_->mu);
      for (auto& [n, v] : impl_->volumes) {
        if (!impl_->SnapshotsOfLocked(n).empty() || !v->synced_phys().origin.empty()) {
          names.push_back(n);
        }
      }
    }
    for (const auto& n : names) {
      Extra e;
      if (impl_
              ->VolumeSnapshotSpaceLocked(n, &e.written, &e.usedbysnapshots, &e.logical_snapshots,
                                          &e.usedbydataset)
              .ok()) {
        extra[n] = e;
      }
    }
  }
  std::lock_guard l(impl_->mu);
  const uint64_t avail = PoolAvail(*impl_);
  DatasetInfo root;
  root.name = impl_->name;
  root.type = "filesystem";
  root.guid = impl_->pool_guid;
  root.available = avail;
  root.creation_time = impl_->create_time;
  for (auto& [n, v] : impl_->volumes) {
    if (n.find('%') != std::string::npos) continue;  // a receive in progress (receive.cc)
    out.push_back(VolumeInfo(*impl_, *v, avail));
    DatasetInfo& d = out.back();
    d.written = d.referenced;
    uint64_t usedbydataset = d.referenced;
    uint64_t logical_used = d.logical_referenced;
    if (auto e = extra.find(n); e != extra.end()) {
      d.written = e->second.written;
      d.usedbysnapshots = e->second.usedbysnapshots;
      // A clone's `used` leaves out what it shares with its origin, as zfs's does: each
      // block is counted once, by the dataset that frees it (promote moves it).
      usedbydataset = e->second.usedbydataset;
      d.used = d.used - d.referenced + usedbydataset + d.usedbysnapshots;
      logical_used += e->second.logical_snapshots;
    }
    // zfs's compressratio covers the snapshots' blocks too; refcompressratio does not.
    d.props["logicalused"] = std::to_string(logical_used);
    d.props["compressratio"] = CompressRatio(logical_used, d.referenced + d.usedbysnapshots);
    d.origin = v->synced_phys().origin;
    if (auto h = impl_->volumes.find(n + "%recv"); h != impl_->volumes.end()) {
      if (auto r = ResumeFromProps(h->second->phys().props); r.ok()) {
        d.props["receive_resume_token"] = EncodeResumeToken(*r);  // receive -s (receive.cc)
      }
    }
    d.props["written"] = std::to_string(d.written);
    d.props["usedbysnapshots"] = std::to_string(d.usedbysnapshots);
    d.props["usedbydataset"] = std::to_string(usedbydataset);
    d.props["used"] = std::to_string(d.used);
    d.props["origin"] = d.origin.empty() ? "-" : d.origin;
    root.used += d.used;
    root.logical_referenced += logical_used;
    root.referenced += d.referenced + d.usedbysnapshots;
  }
  const uint64_t total = impl_->total_size();
  const uint64_t alloc = total - impl_->FreeWithDeferred();
  root.used = std::max(root.used, alloc);
  for (const auto& [k, v] : impl_->props) {
    if (k.rfind("root:", 0) == 0) {
      root.props[k.substr(5)] = v;
      root.local.push_back(k.substr(5));
    }
  }
  root.props["type"] = "filesystem";
  root.props["used"] = std::to_string(root.used);
  root.props["available"] = std::to_string(root.available);
  root.props["referenced"] = "0";
  root.props["logicalused"] = std::to_string(root.logical_referenced);
  root.props["logicalreferenced"] = "0";
  root.props["compressratio"] = CompressRatio(root.logical_referenced, root.referenced);
  root.props["refcompressratio"] = "1.00x";
  root.props["mountpoint"] = "none";
  root.props["guid"] = std::to_string(root.guid);
  root.props["creation"] = std::to_string(root.creation_time);
  root.props["readonly"] = "off";
  root.props["checksum"] = "on";
  root.props["compression"] = kDefaultCompression;
  out.insert(out.begin(), root);
  return out;
}

Result<DatasetInfo> Pool::GetDataset(const std::string& name) {
  if (const auto at = name.find('@'); at != std::string::npos) {
    for (auto& d : ListSnapshots(name.substr(0, at))) {
      if (d.name == name) return d;
    }
    return Status::NotFound("cannot open '" + name + "': dataset does not exist");
  }
  for (auto& d : ListDatasets()) {
    if (d.name == name) return d;
  }
  return Status::NotFound("cannot open '" + name + "': dataset does not exist");
}

Status Pool::SetProperty(const std::string& dataset, const std::string& prop,
                         const std::string& value) {
  return SetProperties(dataset, {{prop, value}});
}

Status Pool::SetProperties(const std::string& dataset,
                           const std::vector<std::pair<std::string, std::string>>& props) {
  VS_RETURN_IF_ERROR(impl_->CheckUsable());
  for (size_t i = 0; i < props.size(); i++) {
    for (size_t j = 0; j < i; j++) {
      if (props[j].first == props[i].first) {
        return Status::InvalidArgument("property '" + props[i].first +
                                       "' specified multiple times");
      }
    }
  }
  if (dataset == impl_->name) {
    for (const auto& [prop, value] : props) {
      if (!IsUserProp(prop)) {
        return Status::NotSupported("cannot set '" + prop + "' on the pool's root dataset");
      }
      VS_RETURN_IF_ERROR(ValidateUserProp(prop, value));
    }
    {
      std::lock_guard l(impl_->mu);
      for (const auto& [prop, value] : props) impl_->props["root:" + prop] = value;
      impl_->mos_dirty = true;
    }
    return impl_->Sync();
  }
  std::shared_ptr<Volume> vol;
  {
    std::lock_guard l(impl_->mu);
    auto it = impl_->volumes.find(dataset);
    if (it == impl_->volumes.end()) {
      return Status::NotFound("cannot open '" + dataset + "': dataset does not exist");
    }
    vol = it->second;
  }
  // Every property is checked before any is applied: a failing request changes nothing, as
  // zfs sets a request's properties together or not at all.
  DatasetPhys p = vol->phys();
  std::optional<uint64_t> new_size;
  for (const auto& [prop, value] : props) {
    if (prop != "volsize") {
      VS_RETURN_IF_ERROR(ApplyVolumeProp(p.props, prop, value));
      continue;
    }
    VS_ASSIGN_OR_RETURN(uint64_t size, ParseSize(value));
    VS_RETURN_IF_ERROR(CheckVolsize(size, p.volblocksize));
    if (size < p.volsize) return Status::NotSupported("shrinking a volume is not supported");
    if (vol->Prop("readonly", "off") == "on" && size != p.volsize) {
      return Status::FromErrno(EROFS, "'" + dataset + "' is read-only");
    }
    new_size = size;
  }
  const uint64_t volsize = new_size.value_or(p.volsize);
  const std::string r = p.props["refreservation"];
  const uint64_t refres =
      r == "auto" ? FullReservation(*impl_, volsize, p.volblocksize) : std::stoull(r);
  {
    // A larger reservation must fit in what the pool has available (zfs: "size is greater
    // than available space").
    std::lock_guard l(impl_->mu);
    const uint64_t used = vol->used();
    const uint64_t old_refres = vol->refreservation.load();
    const uint64_t unused_new = refres > used ? refres - used : 0;
    const uint64_t unused_old = old_refres > used ? old_refres - used : 0;
    if (unused_new > unused_old && unused_new - unused_old > PoolAvail(*impl_)) {
      return Status::NoSpace("size is greater than available space");
    }
    vol->refreservation = refres;
    vol->SetProps(p.props);
    impl_->mos_dirty = true;
    impl_->RecomputeReservations();
  }
  if (new_size) VS_CHECK(vol->Grow(*new_size).ok());  // checked above
  VS_RETURN_IF_ERROR(impl_->Sync());
  if (new_size) vol->NotifyResize();
  return Status::Ok();
}

Status Pool::InheritProperty(const std::string& dataset, const std::string& prop) {
  if (prop != "readonly" && prop != "sync" && prop != "checksum" && prop != "compression" &&
      prop != "logbias" && prop != "snapdev" && !IsUserProp(prop)) {
    return Status::InvalidArgument("'" + prop + "' cannot be inherited");
  }
  VS_RETURN_IF_ERROR(impl_->CheckUsable());
  if (dataset == impl_->name) {
    std::lock_guard l(impl_->mu);
    impl_->props.erase("root:" + prop);
    impl_->mos_dirty = true;
  } else {
    std::shared_ptr<Volume> vol;
    {
      std::lock_guard l(impl_->mu);
      auto it = impl_->volumes.find(dataset);
      if (it == impl_->volumes.end()) {
        return Status::NotFound("cannot open '" + dataset + "': dataset does not exist");
      }
      vol = it->second;
      impl_->mos_dirty = true;
    }
    DatasetPhys p = vol->phys();
    p.props.erase(prop);
    vol->SetProps(p.props);
  }
  return impl_->Sync();
}

PoolInfo Pool::Info() {
  PoolInfo info;
  info.name = impl_->name;
  info.guid = impl_->pool_guid;
  bool degraded = false;
  info.size = impl_->total_size();
  // Deferred frees count as free, as zfs's `available` counts them (defer_map.h).
  info.free = impl_->FreeWithDeferred();
  info.allocated = info.size - info.free;
  info.txg = impl_->synced_txg;
  info.ashift = impl_->ashift;
  {
    std::lock_guard l(impl_->sync_mu);
    for (auto& v : impl_->vdevs) {
      VdevInfo vi;
      vi.name = v->device()->name();
      vi.guid = v->guid();
      vi.size = v->alloc_end() - v->alloc_start();
      vi.allocated =
          vi.size - impl_->free[v->id()].total() -
          (v->id() < impl_->deferred_vdev_bytes.size() ? impl_->deferred_vdev_bytes[v->id()] : 0);
      vi.read_errors = v->ReadErrors();
      vi.write_errors = v->WriteErrors();
      vi.checksum_errors = v->ChecksumErrors();
      vi.state = v->StateName();
      degraded |= !v->healthy();
      auto kids = v->children();
      if (v->is_mirror() || v->is_raidz()) {
        vi.type = v->TypeName();
        for (auto& k : kids) {
          VdevInfo ci;
          ci.name = k->path;
          ci.guid = k->guid;
          ci.size = vi.size;
          ci.read_errors = k->errors->read.load();
          ci.write_errors = k->errors->write.load();
          ci.checksum_errors = k->errors->checksum.load();
          ci.state = LeafStateName(k->state.load());
          ci.resilvering = k->resilvering.load();
          vi.children.push_back(ci);
        }
      } else {
        vi.name = kids[0]->path;
        vi.resilvering = kids[0]->resilvering.load();
      }
      info.vdevs.push_back(vi);
    }
  }
  info.health = impl_->failed ? "SUSPENDED" : degraded ? "DEGRADED" : "ONLINE";
  info.scan = impl_->ScanInfoSnapshot();
  {
    std::lock_guard l(impl_->error_mu);
    info.data_errors.assign(impl_->data_errors.begin(), impl_->data_errors.end());
  }
  std::lock_guard l(impl_->mu);
  for (const auto& [k, v] : impl_->props) {
    if (k.rfind("root:", 0) != 0) info.props[k] = v;
  }
  return info;
}

Result<std::string> StoredPoolProperty(const std::string& prop, const std::string& value) {
  if (prop == "comment") {
    // zpool's rule: at most 32 printable characters.
    if (value.size() > 32 || !std::all_of(value.begin(), value.end(), [](char c) {
          return std::isprint(static_cast<unsigned char>(c));
        })) {
      return Status::InvalidArgument("comment must be at most 32 printable characters");
    }
    return value;
  }
  if (IsMemoryBound(prop)) return StoredMemoryBound(prop, value);
  if (IsUserProp(prop)) {
    VS_RETURN_IF_ERROR(ValidateUserProp(prop, value));
    return value;
  }
  static const char* kReadOnly[] = {"size",   "free", "allocated", "capacity",
                                    "health", "guid", "ashift",    "name"};
  for (const char* r : kReadOnly) {
    if (prop == r) return Status::InvalidArgument("property '" + prop + "' is readonly");
  }
  return Status::InvalidArgument("invalid property '" + prop + "'");
}

Status Pool::SetPoolProperty(const std::string& prop, const std::string& value) {
  VS_ASSIGN_OR_RETURN(std::string stored, StoredPoolProperty(prop, value));
  VS_RETURN_IF_ERROR(impl_->CheckUsable());
  {
    std::lock_guard l(impl_->mu);
    impl_->props[prop] = std::move(stored);
    impl_->mos_dirty = true;
  }
  return impl_->Sync();
}

}  // namespace volstack::pool

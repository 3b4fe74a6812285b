// zfs send: theory.
//
// A snapshot's tree never changes, and every pointer carries its block's birth txg, so the
// blocks a snapshot B holds that an earlier snapshot A of the same volume does not are
// exactly those born after A's txg: an indirect block is rewritten (born anew) whenever a
// block beneath it changes, so a subtree whose root pointer was born at or before A's txg
// is A's as it stands and is skipped unread. The send walks B's tree from its root,
// descending only into pointers born after A's txg (0 for a full stream): the blocks read
// are the changed ones and their parents, not the volume (ZFS's traverse_dataset with
// its min_txg).
//
// Holes. A hole pointer carries no birth txg, so it cannot say whether it was a hole at A.
// Inside a subtree born after A it may have been freed since, so it is sent as a FREE
// record; freeing what was already a hole is harmless. The walk never enters a subtree
// born by A's txg, so a thin volume's untouched holes cost one FREE record per run, and a
// full send of a sparse volume is about its written bytes.
//
// What is held. The snapshots sent are opened read-only for the whole send, so none can be
// destroyed (EBUSY) while their blocks are being read; the volume itself stays writable
// and in use: its later writes go elsewhere (copy-on-write).
//
// Format: send_stream.h, docs/format/send.md. Records come in block order. Data blocks
// travel decoded, or with `send -c` as they are stored: a compressed block's psize bytes
// (read and verified raw, never decoded), with its algorithm in the record. A -c stream's
// BEGIN names the algorithms its records may use, so that a receiver that cannot decode one
// refuses before anything is written: every algorithm this build compresses with when the
// pool has ever stored a compressed block, none otherwise. Naming exactly the ones used
// would take a walk of the metadata before the stream starts (about a seventh of a -c send's
// time in send_bench's CompressedWalk); zfs too names what the pool's features allow
// rather than walk (its lz4/zstd feature flags).
#include "pool/send.h"

#include <algorithm>

#include "pool/compress.h"
#include "pool/pool_impl.h"
#include "util/coding.h"

namespace volstack::pool {

namespace {

class TreeSender {
 public:
  // `resume`: records start at this volume offset (send -t); what lies before is skipped
  // unread. `compressed` (send -c): compressed blocks travel as stored.
  TreeSender(PoolImpl& pool, StreamWriter& w, const DatasetPhys& tree, uint64_t min_txg,
             bool dry_run, SendStats& stats, uint64_t resume = 0, bool compressed = false)
      : pool_(pool),
        w_(w),
        tree_(tree),
        min_txg_(min_txg),
        dry_run_(dry_run),
        stats_(stats),
        resume_(resume),
        compressed_(compressed) {}

  Status Run() {
    buf_.resize(tree_.volblocksize);
    return Visit(tree_.root, tree_.levels, 0);  // the root is an L`levels` block
  }

 private:
  // `index`: bp's place in its parent (for a data block read with its run).
  Status Visit(const BlockPtr& bp, uint32_t level, uint64_t first, uint32_t index = ~0u) {
    const uint64_t vbs = tree_.volblocksize;
    // `first` is the first data block under `bp`; level l covers 128^l of them, clipped at
    // the volume's end.
    const uint64_t nblocks = tree_.volsize / vbs;
    if (level > 8) return Status::Corruption(tree_.name + ": tree too tall");
    uint64_t span = 1;
    for (uint32_t l = 0; l < level; l++) span *= kBpsPerIndirect;
    if (first >= nblocks) return Status::Ok();
    const uint64_t start = first * vbs;
    const uint64_t len = std::min(span, nblocks - first) * vbs;
    if (start + len <= resume_) return Status::Ok();
    if (bp.IsHole()) {
      const uint64_t from = std::max(start, resume_);
      return w_.Free(from, start + len - from);
    }
    if (bp.birth <= min_txg_) return Status::Ok();
    if (bp.level != level) {
      return Status::Corruption(tree_.name + ": block pointer at level " + std::to_string(level) +
                                " claims level " + std::to_string(bp.level) + ": " + bp.ToString());
    }
    if (level == 0) {
      if (bp.type != BlockType::kVolData || bp.lsize != vbs) {
        return Status::Corruption(tree_.name + ": not a data block: " + bp.ToString());
      }
      // send -c: a compressed block's payload is its psize bytes as stored.
      const bool raw = compressed_ && bp.comp != Compression::kNone;
      if (bp.comp != Compression::kNone) stats_.comp_mask |= 1u << static_cast<uint8_t>(bp.comp);
      const uint64_t plen = raw ? bp.psize : vbs;
      const Compression comp = raw ? bp.comp : Compression::kNone;
      if (raw && (bp.psize == 0 || bp.psize >= vbs)) {
        return Status::Corruption(tree_.name + ": bad compressed block: " + bp.ToString());
      }
      stats_.data_bytes += plen;
      if (dry_run_) {
        // Only the record's size matters: no data, no checksum.
        static const uint8_t kNoChecksum[16] = {};
        return w_.Write(start, vbs, std::span<const uint8_t>(buf_).first(plen), comp, kNoChecksum);
      }
      // A verified xxh3 block's checksum (of its bytes as stored) is its WRITE record's
      // when the payload is those bytes: the data is hashed once.
      const uint8_t* known =
          bp.cksum == ChecksumType::kXxh3_128 && (raw || bp.comp == Compression::kNone)
              ? bp.checksum.bytes.data()
              : nullptr;
      if (index >= run_first_ && index < run_first_ + run_count_) {
        return w_.Write(start, vbs,
                        std::span<const uint8_t>(run_).subspan(run_off_[index - run_first_], plen),
                        comp, known);
      }
      if (raw) {
        VS_RETURN_IF_ERROR(ReadStored(bp));
        return w_.Write(start, vbs, std::span<const uint8_t>(raw_).first(plen), comp, known);
      }
      VS_RETURN_IF_ERROR(pool_.ReadBlock(bp, buf_.data(), false, /*offer=*/false));
      stats_.bytes_read += bp.psize;
      return w_.Write(start, vbs, buf_, Compression::kNone, known);
    }
    if (bp.type != BlockType::kVolIndirect || bp.lsize != kIndirectBlockSize) {
      return Status::Corruption(tree_.name + ": not an indirect block: " + bp.ToString());
    }
    std::vector<uint8_t> ind(kIndirectBlockSize);
    VS_RETURN_IF_ERROR(pool_.ReadBlock(bp, ind.data()));
    stats_.bytes_read += bp.psize;
    std::vector<BlockPtr> kids(kBpsPerIndirect);
    for (uint32_t i = 0; i < kBpsPerIndirect; i++) {
      VS_ASSIGN_OR_RETURN(kids[i], DecodeBlockPtr(std::span<const uint8_t>(ind).subspan(
                                       i * kBlkptrSize, kBlkptrSize)));
    }
    run_first_ = run_count_ = 0;
    for (uint32_t i = 0; i < kBpsPerIndirect; i++) {
      const uint64_t child_first = first + i * (span / kBpsPerIndirect);
      if (child_first >= nblocks) break;
      if (level == 1 && !dry_run_ && child_first * tree_.volblocksize >= resume_ &&
          Sendable(kids[i]) && (i < run_first_ || i >= run_first_ + run_count_)) {
        VS_RETURN_IF_ERROR(ReadRun(kids, i));
      }
      VS_RETURN_IF_ERROR(Visit(kids[i], level - 1, child_first, i));
    }
    return Status::Ok();
  }

  // A data block whose record's payload is its bytes on disk as they are: uncompressed, or
  // (send -c) compressed.
  bool Sendable(const BlockPtr& bp) const {
    if (bp.IsHole() || bp.birth <= min_txg_ || bp.level != 0 || bp.type != BlockType::kVolData ||
        bp.lsize != tree_.volblocksize) {
      return false;
    }
    if (bp.comp == Compression::kNone) return bp.psize == bp.lsize && bp.dva[0].asize() == bp.psize;
    return compressed_ && bp.psize > 0 && bp.psize < bp.lsize && bp.psize <= bp.dva[0].asize();
  }

  // Reads the data blocks kids[i..] that lie back to back on one vdev, up to kRunBytes, with
  // one vdev read (a block at a time would be a system call per 16 KiB), and verifies each
  // (its first psize bytes: a compressed block fills its allocation only partly).
  Status ReadRun(const std::vector<BlockPtr>& kids, uint32_t i) {
    const Dva& d0 = kids[i].dva[0];
    uint32_t n = 1;
    uint64_t bytes = d0.asize();
    run_off_.assign(1, 0);
    while (i + n < kids.size() && Sendable(kids[i + n]) && kids[i + n].dva[0].vdev == d0.vdev &&
           kids[i + n].dva[0].offset == d0.offset + bytes &&
           bytes + kids[i + n].dva[0].asize() <= kRunBytes) {
      run_off_.push_back(bytes);
      bytes += kids[i + n].dva[0].asize();
      n++;
    }
    if (d0.vdev >= pool_.vdevs.size() || d0.offset < kAllocStart ||
        d0.offset + bytes > pool_.vdevs[d0.vdev]->alloc_end()) {
      return Status::IoError(tree_.name + ": block pointer out of range: " + kids[i].ToString());
    }
    run_.resize(bytes);
    // Verified as the pool verifies any read (self-heal from another copy of a mirror).
    HealCounts heal;
    Status st = pool_.vdevs[d0.vdev]->ReadVerified(
        d0.offset, run_,
        [&](std::span<const uint8_t> b) {
          for (uint32_t k = 0; k < n; k++) {
            const BlockPtr& bp = kids[i + k];
            if (ComputeChecksum(bp.cksum, b.subspan(run_off_[k], bp.psize)) != bp.checksum) {
              return false;
            }
          }
          return true;
        },
        &heal);
    if (heal.repaired_bytes > 0) pool_.healed_bytes += heal.repaired_bytes;
    if (!st.ok()) {
      if (st.IsCorruption()) {
        return Status::Corruption(tree_.name + ": checksum mismatch in " + kids[i].ToString());
      }
      return st;
    }
    stats_.bytes_read += run_.size();
    run_first_ = i;
    run_count_ = n;
    return Status::Ok();
  }

  // One block's bytes as stored (whole sectors), verified, into raw_ (send -c, a block no
  // run took).
  Status ReadStored(const BlockPtr& bp) {
    const Dva& d = bp.dva[0];
    if (d.vdev >= pool_.vdevs.size() || d.offset < kAllocStart ||
        d.offset + d.asize() > pool_.vdevs[d.vdev]->alloc_end()) {
      return Status::IoError(tree_.name + ": block pointer out of range: " + bp.ToString());
    }
    raw_.resize(d.asize());
    HealCounts heal;
    Status st = pool_.vdevs[d.vdev]->ReadVerified(
        d.offset, raw_,
        [&](std::span<const uint8_t> b) {
          return ComputeChecksum(bp.cksum, b.first(bp.psize)) == bp.checksum;
        },
        &heal);
    if (heal.repaired_bytes > 0) pool_.healed_bytes += heal.repaired_bytes;
    if (!st.ok()) {
      if (st.IsCorruption()) {
        return Status::Corruption(tree_.name + ": checksum mismatch in " + bp.ToString());
      }
      return st;
    }
    stats_.bytes_read += raw_.size();
    return Status::Ok();
  }

  PoolImpl& pool_;
  StreamWriter& w_;
  const DatasetPhys tree_;
  const uint64_t min_txg_;
  const bool dry_run_;
  SendStats& stats_;
  const uint64_t resume_;
  const bool compressed_;
  std::vector<uint8_t> buf_, raw_;
  // The data blocks of the L1 block being sent that ReadRun read: children
  // [run_first_, run_first_ + run_count_), back to back in run_, child run_first_ + k at
  // run_off_[k].
  static constexpr uint64_t kRunBytes = 1 << 20;
  std::vector<uint8_t> run_;
  std::vector<uint64_t> run_off_;
  uint32_t run_first_ = 0, run_count_ = 0;
};

// The properties a stream carries: what was set on the volume, less what belongs to this
// pool (its reservation, its creation time).
std::map<std::string, std::string> SentProps(const DatasetPhys& head) {
  std::map<std::string, std::string> out = head.props;
  out.erase("creation");
  out.erase("refreservation");
  return out;
}

}  // namespace

Result<SendStats> Send(Pool& pool, const SendOptions& o, const StreamWriter::Sink& sink,
                       const std::function<void(const SendProgress&)>& progress) {
  PoolImpl& p = *pool.impl();
  VS_RETURN_IF_ERROR(p.CheckUsable());
  VS_RETURN_IF_ERROR(ValidateSnapshotName(o.snapshot));
  const std::string volume = o.snapshot.substr(0, o.snapshot.find('@'));
  std::string from = o.from;
  if (!from.empty() && from[0] == '@') from = volume + from;
  if (!from.empty()) {
    VS_RETURN_IF_ERROR(ValidateSnapshotName(from));
    if (from.substr(0, from.find('@')) != volume) {
      return Status::InvalidArgument("incremental source '" + from + "' is not a snapshot of '" +
                                     volume + "'");
    }
  }
  if (o.intermediates && from.empty()) {
    return Status::InvalidArgument("-I needs an incremental source");
  }
  if (o.resume && o.intermediates) {
    return Status::InvalidArgument("a resumed send carries one snapshot");
  }
  // The snapshots to send, oldest first; chain[0] is the origin (or none).
  std::vector<DatasetPhys> chain;
  DatasetPhys head;
  {
    std::lock_guard l(p.mu);
    auto h = p.volumes.find(volume);
    if (h == p.volumes.end() || !p.snapshots.count(o.snapshot)) {
      return Status::NotFound("cannot open '" + o.snapshot + "': dataset does not exist");
    }
    head = h->second->phys();
    auto list = p.SnapshotsOfLocked(volume);
    auto pos = [&](const std::string& n) {
      return std::find_if(list.begin(), list.end(),
                          [&](const auto& v) { return v->synced_phys().name == n; }) -
             list.begin();
    };
    const size_t to = pos(o.snapshot);
    size_t first = to;
    if (!from.empty()) {
      first = pos(from);
      if (first == list.size()) {
        return Status::NotFound("incremental source '" + from + "' does not exist");
      }
      if (first >= to) {
        return Status::InvalidArgument("incremental source '" + from + "' is not earlier than '" +
                                       o.snapshot + "'");
      }
    }
    for (size_t i = first; i <= to; i++) {
      if (o.intermediates || i == first || i == to) chain.push_back(list[i]->synced_phys());
    }
  }
  if (o.resume &&
      (chain.back().guid != o.toguid || (!from.empty() && chain.front().guid != o.fromguid))) {
    return Status::NotFound("cannot resume send: '" + o.snapshot +
                            "' is no longer the snapshot the token names");
  }
  // Held open (read-only) so that none is destroyed while its blocks are read.
  std::vector<bdev::BlockDevicePtr> held;
  for (const auto& s : chain) {
    VS_ASSIGN_OR_RETURN(auto dev, pool.OpenVolume(s.name, {.read_only = true}));
    held.push_back(std::move(dev));
  }
  {
    // Listed and opened under separate locks: a snapshot destroyed and made again by the same
    // name in between is not the one listed, and its listed tree may be freed.
    std::lock_guard l(p.mu);
    for (const auto& s : chain) {
      auto it = p.snapshots.find(s.name);
      if (it == p.snapshots.end() || it->second->synced_phys().guid != s.guid) {
        return Status::Busy("cannot send '" + s.name + "': it was replaced while the send began");
      }
    }
  }
  SendStats stats;
  uint64_t part_start = 0, part_blocks = 0;
  std::string part_name;
  StreamWriter w([&](std::span<const uint8_t> rec) -> Status {
    if (!o.dry_run) VS_RETURN_IF_ERROR(sink(rec));
    stats.stream_bytes += rec.size();
    if (DecodeLE32(rec.data()) == static_cast<uint32_t>(RecordType::kWrite)) part_blocks++;
    if (progress) {
      progress({part_name, stats.stream_bytes - part_start, stats.stream_bytes, part_blocks});
    }
    return Status::Ok();
  });
  const size_t first_to = from.empty() ? 0 : 1;
  for (size_t i = first_to; i < chain.size(); i++) {
    const DatasetPhys& to = chain[i];
    const DatasetPhys* prev = i > 0 ? &chain[i - 1] : nullptr;
    StreamBegin b;
    b.toguid = to.guid;
    b.fromguid = prev ? prev->guid : 0;
    b.volsize = to.volsize;
    b.volblocksize = to.volblocksize;
    auto c = to.props.find("creation");
    b.creation = c == to.props.end() ? 0 : std::strtoull(c->second.c_str(), nullptr, 10);
    b.toname = to.name;
    b.fromname = prev ? prev->name : "";
    b.props = SentProps(head);
    if (o.resume) {
      b.features |= kFeatureResume;
      b.resume_offset = o.resume_offset;
    }
    const uint64_t min_txg = prev ? prev->create_txg : 0;
    const uint64_t resume = o.resume ? o.resume_offset : 0;
    if (o.compressed) {
      b.features |= kFeatureCompressed;
      if (p.compressed_blocks) {
        for (Compression c : {Compression::kLz4, Compression::kZstd}) {
          b.compress.push_back(CompressionName(c));
        }
      }
    }
    part_start = stats.stream_bytes;
    part_blocks = 0;
    part_name = b.toname;
    VS_RETURN_IF_ERROR(w.Begin(b));
    VS_RETURN_IF_ERROR(TreeSender(p, w, to, min_txg, o.dry_run, stats, resume, o.compressed).Run());
    VS_RETURN_IF_ERROR(w.End());
    stats.parts.push_back({b.fromname, b.toname, stats.stream_bytes - part_start});
  }
  stats.write_records = w.write_records();
  stats.free_records = w.free_records();
  return stats;
}

Result<SendOptions> SendOptionsFromToken(const std::string& token) {
  VS_ASSIGN_OR_RETURN(ResumeState r, DecodeResumeToken(token));
  SendOptions o;
  o.snapshot = r.toname;
  o.from = r.fromname;
  o.resume = true;
  o.resume_offset = r.offset;
  o.toguid = r.toguid;
  o.fromguid = r.fromguid;
  o.compressed = r.compressed;
  return o;
}

}  // namespace volstack::pool

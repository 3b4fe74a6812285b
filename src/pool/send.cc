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
// Format: send_stream.h, docs/format/send.md. Records come in block order; data blocks
// travel uncompressed (a compressed block is decoded by ReadBlock; `send -c` is not there yet).
#include "pool/send.h"

#include <algorithm>

#include "pool/pool_impl.h"
#include "util/coding.h"

namespace volstack::pool {

namespace {

class TreeSender {
 public:
  // `resume`: records start at this volume offset (send -t); what lies before is skipped
  // unread.
  TreeSender(PoolImpl& pool, StreamWriter& w, const DatasetPhys& tree, uint64_t min_txg,
             bool dry_run, SendStats& stats, uint64_t resume = 0)
      : pool_(pool),
        w_(w),
        tree_(tree),
        min_txg_(min_txg),
        dry_run_(dry_run),
        stats_(stats),
        resume_(resume) {}

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
      stats_.data_bytes += vbs;
      // A verified xxh3 block's checksum is its WRITE record's: the data is hashed once.
      const uint8_t* known =
          !dry_run_ && bp.cksum == ChecksumType::kXxh3_128 ? bp.checksum.bytes.data() : nullptr;
      if (!dry_run_ && index >= run_first_ && index < run_first_ + run_count_) {
        return w_.Write(start, vbs,
                        std::span<const uint8_t>(run_).subspan((index - run_first_) * vbs, vbs),
                        Compression::kNone, known);
      }
      if (!dry_run_) {
        VS_RETURN_IF_ERROR(pool_.ReadBlock(bp, buf_.data(), false, /*offer=*/false));
        stats_.bytes_read += bp.psize;
      }
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

  bool Sendable(const BlockPtr& bp) const {
    return !bp.IsHole() && bp.birth > min_txg_ && bp.level == 0 && bp.type == BlockType::kVolData &&
           bp.lsize == tree_.volblocksize && bp.psize == bp.lsize && bp.dva[0].asize() == bp.psize;
  }

  // Reads the data blocks kids[i..] that lie back to back on one vdev, up to kRunBytes, with
  // one vdev read (a block at a time would be a system call per 16 KiB), and verifies each.
  Status ReadRun(const std::vector<BlockPtr>& kids, uint32_t i) {
    const uint32_t vbs = tree_.volblocksize;
    const Dva& d0 = kids[i].dva[0];
    uint32_t n = 1;
    while (i + n < kids.size() && (n + 1) * uint64_t{vbs} <= kRunBytes && Sendable(kids[i + n]) &&
           kids[i + n].dva[0].vdev == d0.vdev &&
           kids[i + n].dva[0].offset == d0.offset + uint64_t{n} * vbs) {
      n++;
    }
    if (d0.vdev >= pool_.vdevs.size() || d0.offset < kAllocStart ||
        d0.offset + uint64_t{n} * vbs > pool_.vdevs[d0.vdev]->alloc_end()) {
      return Status::IoError(tree_.name + ": block pointer out of range: " + kids[i].ToString());
    }
    run_.resize(uint64_t{n} * vbs);
    // Verified as the pool verifies any read (self-heal from another copy of a mirror).
    HealCounts heal;
    Status st = pool_.vdevs[d0.vdev]->ReadVerified(
        d0.offset, run_,
        [&](std::span<const uint8_t> b) {
          for (uint32_t k = 0; k < n; k++) {
            if (ComputeChecksum(kids[i + k].cksum, b.subspan(uint64_t{k} * vbs, vbs)) !=
                kids[i + k].checksum) {
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

  PoolImpl& pool_;
  StreamWriter& w_;
  const DatasetPhys tree_;
  const uint64_t min_txg_;
  const bool dry_run_;
  SendStats& stats_;
  const uint64_t resume_;
  std::vector<uint8_t> buf_;
  // The data blocks of the L1 block being sent that ReadRun read: children
  // [run_first_, run_first_ + run_count_), back to back in run_.
  static constexpr uint64_t kRunBytes = 1 << 20;
  std::vector<uint8_t> run_;
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
                       const std::function<void(uint64_t)>& progress) {
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
  SendStats stats;
  uint64_t part_start = 0;
  StreamWriter w([&](std::span<const uint8_t> rec) -> Status {
    if (!o.dry_run) VS_RETURN_IF_ERROR(sink(rec));
    if (progress) progress(stats.stream_bytes + rec.size());
    stats.stream_bytes += rec.size();
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
    part_start = stats.stream_bytes;
    VS_RETURN_IF_ERROR(w.Begin(b));
    VS_RETURN_IF_ERROR(TreeSender(p, w, to, prev ? prev->create_txg : 0, o.dry_run, stats,
                                  o.resume ? o.resume_offset : 0)
                           .Run());
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
  return o;
}

}  // namespace volstack::pool

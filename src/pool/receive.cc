// zfs receive: theory.
//
// Each substream (BEGIN .. END) is written into a hidden dataset named "pool/vol%recv"
// ('%' is not allowed in a dataset name, so no user dataset can be called that, and
// listings skip it), as zfs receives into its %recv child:
//   - a full stream: a new sparse volume of the stream's volsize and volblocksize;
//   - an incremental stream: a clone of the target's snapshot whose guid is the stream's
//     fromguid (keep_txg = its txg, so the blocks it shares with that snapshot stay put).
// WRITE records become whole-block writes, FREE records holes. Nothing the user can see
// changes until END has checked the whole substream; then one txg makes it visible:
//   - full: the hidden volume is renamed to the target and the snapshot taken (the stream's
//     toguid as its guid);
//   - incremental: SnapOp kRecvApply in the commit (snapshot.cc) frees the head's blocks
//     born after the origin (a rollback, so -F needs no separate step that could outlive a
//     failed receive), gives the head the hidden clone's tree, and the snapshot is taken;
//     with -F the later snapshots are destroyed in the same txg;
//   - full with -F into an existing volume: the same kRecvApply from txg 0 (every block of
//     the head freed, the received tree in its place) after its snapshots are destroyed, in
//     one txg; refused when it is a clone, open, or has a snapshot held, cloned or open.
//     When the stream's volblocksize differs from the volume's (a Volume's block size is
//     fixed for its life), the head itself is destroyed instead, as DestroyVolume does, and
//     the hidden volume renamed into its place, in that same txg: its snapshots' destroys
//     name the old head explicitly (SnapOp::source), since `volumes` then names the new one.
// Any failure before that commit destroys the hidden dataset (its own blocks only: a
// clone never frees what its origin holds) and the target is exactly as it was. A crash
// leaves a hidden dataset no listing shows and no snapshot: the next receive into the
// same target destroys it first.
//
// Resumable (-s): a substream that breaks keeps its hidden dataset, with where it stopped
// (records come in block order) as "resume:*" properties; the MOS is version 4 while one
// exists (mos_format.h). A stream from `send -t` (BEGIN's resume feature) continues it
// when its guids and offset match; anything else into that target is refused until
// `receive -A` (AbortReceive) destroys it.
//
// Refused before anything is written: a full stream into an existing volume without -F, an
// incremental one whose origin guid is not among the target's snapshots, a stream whose
// snapshot the target already has (the same guid: fed twice), a target in use (open),
// and without -F a target whose newest snapshot is not the origin or that was written
// since it.
//
// Locks: the final checks and the queueing run under snap_admin_mu (as every snapshot
// operation), so what they checked holds when the commit runs.
#include <algorithm>
#include <random>

#include "pool/compress.h"
#include "pool/pool_impl.h"
#include "pool/send.h"

namespace volstack::pool {

namespace {

constexpr uint64_t kMaxReceiveVolsize = uint64_t{1} << 60;

std::string HiddenName(const std::string& volume) { return volume + "%recv"; }

uint64_t NewGuid() {
  std::random_device rd;
  uint64_t g = 0;
  while (g == 0) g = (uint64_t{rd()} << 32) | rd();
  return g;
}

std::string NowString() {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
}

// Destroys a hidden dataset (a failed or interrupted receive), committing.
Status DropHidden(PoolImpl& p, const std::string& hidden) {
  {
    std::lock_guard l(p.mu);
    auto it = p.volumes.find(hidden);
    if (it == p.volumes.end()) return Status::Ok();
    it->second->destroyed = true;
    p.pending_destroy.push_back(it->second);
    p.volumes.erase(it);
    p.mos_dirty = true;
    p.RecomputeReservations();
  }
  return p.Sync();
}

Status WriteRetrying(PoolImpl& p, const std::function<Status()>& attempt) {
  for (uint64_t commits = 0;; commits++) {
    Status st = attempt();
    p.Throttle();
    if (st.code() != ENOSPC || commits > kTxgDefer || !p.CommitForSpace()) return st;
  }
}

class SubstreamReceiver {
 public:
  SubstreamReceiver(PoolImpl& p, const ReceiveOptions& o, StreamReader& reader,
                    const StreamBegin& b, ReceiveStats& stats)
      : p_(p), o_(o), reader_(reader), b_(b), stats_(stats) {}

  Status Run() {
    VS_RETURN_IF_ERROR(Check());
    if (b_.resumed()) {
      VS_RETURN_IF_ERROR(FindPartial());
    } else {
      VS_RETURN_IF_ERROR(DropHidden(p_, hidden_));  // left by an interrupted receive
      VS_RETURN_IF_ERROR(CreateHidden());
    }
    done_ = b_.resume_offset;
    Status st = Apply();
    if (!st.ok() && o_.resumable) {
      // -s: what arrived stays, with where it stopped (MOS version 4 while it exists).
      Status saved = SavePartial();
      if (saved.ok()) {
        return st.WithContext("partially-received state of '" + volume_ +
                              "' saved: resume with zfs send -t " + token_ + " ...");
      }
    }
    if (st.ok()) st = Commit();
    if (!st.ok()) {
      if (Status d = DropHidden(p_, hidden_); !d.ok()) {
        return st.WithContext("(and the partial receive was not removed: " + d.message() + ")");
      }
    }
    return st;
  }

 private:
  // Everything that can be refused, refused before anything is written.
  Status Check() {
    const std::string& t = o_.target;
    volume_ = t.substr(0, t.find('@'));
    VS_RETURN_IF_ERROR(ValidateDatasetName(volume_));
    if (volume_.substr(0, volume_.find('/')) != p_.name) {
      return Status::NotFound("cannot receive into '" + volume_ + "': no such pool");
    }
    snapshot_ = t.find('@') != std::string::npos && stats_.snapshots.empty()
                    ? t
                    : volume_ + b_.toname.substr(b_.toname.find('@'));
    VS_RETURN_IF_ERROR(ValidateSnapshotName(snapshot_));
    hidden_ = HiddenName(volume_);
    if (b_.volsize > kMaxReceiveVolsize) {
      return Status::InvalidArgument("cannot receive: volsize too large");
    }
    // The properties the received volume gets: the stream's, then -o's, each validated.
    props_ = {};
    auto add = [&](const std::map<std::string, std::string>& from) -> Status {
      for (const auto& [k, v] : from) {
        if (k == "volsize" || k == "volblocksize" || k == "creation") continue;
        VS_RETURN_IF_ERROR(ApplyVolumeProp(props_, k, v).WithContext("cannot receive"));
      }
      return Status::Ok();
    };
    VS_RETURN_IF_ERROR(add(b_.props));
    props_.erase("refreservation");  // the sender's pool's; -o may set one here
    VS_RETURN_IF_ERROR(add(o_.props));
    VS_RETURN_IF_ERROR(p_.Sync());  // the head's `written` below is of its synced tree
    std::lock_guard s(p_.sync_mu);
    std::lock_guard l(p_.mu);
    if (auto hd = p_.volumes.find(hidden_); hd != p_.volumes.end()) {
      const bool partial = ResumeFromProps(hd->second->phys().props).ok();
      if (partial && !b_.resumed()) {
        return Status::Exists("destination '" + volume_ +
                              "' contains partially-complete state from zfs receive -s: "
                              "resume it (zfs send -t with its receive_resume_token) or "
                              "abort it (zfs receive -A " +
                              volume_ + ")");
      }
    }
    if (b_.resumed() && !o_.resumable) {
      return Status::InvalidArgument("cannot receive a resumed stream without -s");
    }
    auto h = p_.volumes.find(volume_);
    if (!b_.incremental()) {
      if (h == p_.volumes.end()) return Status::Ok();
      if (!o_.force) {
        return Status::Exists("cannot receive new volume: destination '" + volume_ +
                              "' exists\nmust specify -F to overwrite it");
      }
      return CheckReplaceLocked(*h->second);
    }
    if (h == p_.volumes.end()) {
      return Status::NotFound("cannot receive incremental stream: destination '" + volume_ +
                              "' does not exist");
    }
    if (h->second->open_count > 0) {
      return Status::Busy("cannot receive into '" + volume_ + "': dataset is busy");
    }
    auto list = p_.SnapshotsOfLocked(volume_);
    size_t from = list.size();
    for (size_t i = 0; i < list.size(); i++) {
      const DatasetPhys s = list[i]->synced_phys();
      if (s.guid == b_.toguid) {
        return Status::Exists(
            "cannot receive incremental stream: destination already has "
            "snapshot '" +
            s.name + "' of this stream (received before)");
      }
      if (s.guid == b_.fromguid) from = i;
    }
    if (p_.snapshots.count(snapshot_)) {
      return Status::Exists("cannot receive: destination '" + snapshot_ + "' exists");
    }
    if (from == list.size()) {
      return Status::NotFound("cannot receive incremental stream: most recent snapshot of '" +
                              volume_ + "' does not match incremental source (" + b_.fromname +
                              ")");
    }
    origin_ = list[from]->synced_phys();
    for (size_t i = from + 1; i < list.size(); i++) later_.push_back(list[i]->synced_phys().name);
    if (!later_.empty() && !o_.force) {
      return Status::Exists("cannot receive incremental stream: most recent snapshot of '" +
                            volume_ + "' does not match incremental source (" + b_.fromname +
                            "); -F destroys the later snapshots");
    }
    if (!o_.force) {
      uint64_t written = 0, ubs = 0;
      p_.mu.unlock();
      Status st = p_.VolumeSnapshotSpaceLocked(volume_, &written, &ubs);
      p_.mu.lock();
      VS_RETURN_IF_ERROR(st);
      if (written > 0) {
        return Status::Exists("cannot receive incremental stream: destination '" + volume_ +
                              "' has been modified since most recent snapshot; -F rolls it "
                              "back");
      }
    }
    if (b_.volsize < origin_.volsize) {
      return Status::NotSupported("cannot receive: the stream shrinks '" + volume_ + "'");
    }
    return Status::Ok();
  }

  // -F with a full stream into an existing volume: its snapshots are destroyed and its
  // contents replaced, in the commit's txg, if nothing depends on them (zfs refuses a clone
  // the same way; a snapshot held, cloned or open, or the volume open, is refused here and
  // again at the commit).
  Status CheckReplaceLocked(const Volume& head) {
    if (head.open_count > 0) {
      return Status::Busy("cannot receive into '" + volume_ + "': dataset is busy");
    }
    if (!head.synced_phys().origin.empty()) {
      return Status::Exists("cannot receive new volume: destination '" + volume_ +
                            "' is a clone\nmust destroy it to overwrite it");
    }
    for (const auto& s : p_.SnapshotsOfLocked(volume_)) {
      const std::string n = s->synced_phys().name;
      if (s->open_count > 0 || HeldOrClonedLocked(n, *s)) {
        return Status::Busy("cannot receive new volume: -F cannot destroy '" + n +
                            "': it has dependent clones, holds or users");
      }
      later_.push_back(n);
    }
    if (p_.snapshots.count(snapshot_) &&
        std::find(later_.begin(), later_.end(), snapshot_) == later_.end()) {
      return Status::Exists("cannot receive: destination '" + snapshot_ + "' exists");
    }
    replace_ = true;
    return Status::Ok();
  }

  Status CreateHidden() {
    {
      std::lock_guard l(p_.mu);
      DatasetPhys phys;
      if (b_.incremental()) {
        auto s = p_.snapshots.find(origin_.name);
        if (s == p_.snapshots.end()) return Status::NotFound(origin_.name + " is gone");
        phys = s->second->synced_phys();
        phys.origin = origin_.name;
        phys.zil = {};
      } else {
        phys.volsize = b_.volsize;
        phys.volblocksize = b_.volblocksize;
        phys.levels = LevelsFor(b_.volsize / b_.volblocksize);
      }
      phys.id = p_.next_id++;
      phys.name = hidden_;
      phys.guid = NewGuid();
      phys.create_txg = p_.open_txg;
      phys.props = {{"refreservation", "0"}, {"creation", NowString()}};
      // The data is written (compressed, checksummed) as the target will keep it.
      for (const char* k : {"compression", "checksum"}) {
        if (auto it = props_.find(k); it != props_.end()) phys.props[k] = it->second;
      }
      vol_ = std::make_shared<Volume>(&p_, phys);
      if (b_.incremental()) vol_->keep_txg = origin_.create_txg;
      p_.volumes[hidden_] = vol_;
      p_.mos_dirty = true;
      p_.RecomputeReservations();
    }
    if (b_.incremental() && b_.volsize > vol_->volsize()) {
      VS_RETURN_IF_ERROR(vol_->Grow(b_.volsize));
    }
    if (b_.volblocksize != vol_->volblocksize()) {
      return Status::Corruption("cannot receive: the stream's volblocksize " +
                                std::to_string(b_.volblocksize) + " is not the origin's");
    }
    return p_.Sync();
  }

  Status Apply() {
    const uint64_t vbs = b_.volblocksize, size = b_.volsize;
    for (;;) {
      // A reader error returns with the pending writes dropped: done_ counts only what
      // reached the volume, so a resumed stream sends them again.
      VS_ASSIGN_OR_RETURN(StreamRecord r, reader_.Next());
      if (r.type != RecordType::kWrite || pending_off_ + pending_.size() != r.offset ||
          pending_.size() + r.length > kPendingMax) {
        VS_RETURN_IF_ERROR(FlushPending());
      }
      switch (r.type) {
        case RecordType::kWrite: {
          if (r.offset % vbs != 0 || r.length != vbs || r.offset > size - vbs) {
            return Status::Corruption("invalid send stream: WRITE at " + std::to_string(r.offset) +
                                      " of " + std::to_string(r.length) +
                                      " bytes is outside the volume");
          }
          if (pending_.empty()) pending_off_ = r.offset;
          const size_t at = pending_.size();
          if (r.comp == Compression::kNone) {
            pending_.insert(pending_.end(), r.payload.begin(), r.payload.end());
            pending_stored_.emplace_back();
          } else {
            // send -c: decoded once here (a payload that does not decode is refused before
            // it reaches the volume), stored as it came (Volume::WriteStored).
            pending_.resize(at + vbs);
            Status d = DecompressBlock(r.comp, r.payload, std::span(pending_).subspan(at, vbs));
            if (!d.ok()) {
              return Status::Corruption("invalid send stream: the WRITE at " +
                                        std::to_string(r.offset) +
                                        " does not decode: " + d.message());
            }
            pending_stored_.push_back({r.comp, std::move(r.payload)});
            pending_any_stored_ = true;
          }
          stats_.data_bytes += r.length;
          break;
        }
        case RecordType::kFree:
          if (r.offset % vbs != 0 || r.length % vbs != 0 || r.offset > size ||
              r.length > size - r.offset) {
            return Status::Corruption("invalid send stream: FREE of " + std::to_string(r.length) +
                                      " bytes at " + std::to_string(r.offset) +
                                      " is outside the volume");
          }
          VS_RETURN_IF_ERROR(WriteRetrying(
              p_, [&] { return vol_->Zero(r.offset, r.length, /*throttle=*/false); }));
          done_ = r.offset + r.length;
          break;
        case RecordType::kEnd:
          return Status::Ok();
        case RecordType::kBegin:
          return Status::Corruption("invalid send stream: BEGIN inside a substream");
      }
    }
  }

  // Adjacent WRITE records go to the volume as one write of up to kPendingMax (one space
  // reservation and throttle check instead of one a block).
  Status FlushPending() {
    if (pending_.empty()) return Status::Ok();
    VS_RETURN_IF_ERROR(WriteRetrying(p_, [&] {
      return pending_any_stored_ ? vol_->WriteStored(pending_off_, pending_, pending_stored_, false)
                                 : vol_->Write(pending_off_, pending_, /*throttle=*/false);
    }));
    done_ = pending_off_ + pending_.size();
    pending_.clear();
    pending_stored_.clear();
    pending_any_stored_ = false;
    return Status::Ok();
  }

  // A resumed stream continues the hidden dataset of the partial receive it resumes.
  Status FindPartial() {
    std::lock_guard l(p_.mu);
    auto hd = p_.volumes.find(hidden_);
    auto st = hd == p_.volumes.end() ? Result<ResumeState>(Status::NotFound(""))
                                     : ResumeFromProps(hd->second->phys().props);
    if (!st.ok()) {
      return Status::NotFound("cannot resume: '" + volume_ + "' has no partially-received state");
    }
    if (st->toguid != b_.toguid || st->fromguid != b_.fromguid || st->offset != b_.resume_offset) {
      return Status::InvalidArgument("cannot resume: the stream resumes " + b_.toname + " at " +
                                     std::to_string(b_.resume_offset) +
                                     ", the partial receive of '" + volume_ + "' is of " +
                                     st->toname + " up to " + std::to_string(st->offset));
    }
    vol_ = hd->second;
    return Status::Ok();
  }

  Status SavePartial() {
    ResumeState r;
    r.toguid = b_.toguid;
    r.fromguid = b_.fromguid;
    r.toname = b_.toname;
    r.fromname = b_.fromname;
    r.offset = done_;
    r.compressed = (b_.features & kFeatureCompressed) != 0;
    {
      std::lock_guard l(p_.mu);
      if (p_.volumes[hidden_] != vol_) return Status::NotFound("the partial receive vanished");
      auto props = vol_->phys().props;
      for (const auto& [k, v] : ResumeProps(r)) props[k] = v;
      vol_->SetProps(props);
      p_.mos_dirty = true;
    }
    token_ = EncodeResumeToken(r);
    return p_.Sync();
  }

  Status Commit() {
    VS_RETURN_IF_ERROR(p_.Sync());  // the hidden dataset's data into its tree
    std::lock_guard admin(p_.snap_admin_mu);
    VS_RETURN_IF_ERROR(p_.CheckUsable());
    {
      std::lock_guard l(p_.mu);
      if (p_.volumes[hidden_] != vol_) return Status::NotFound("the partial receive vanished");
      const bool replaced =  // -F destroys that one first
          replace_ && std::find(later_.begin(), later_.end(), snapshot_) != later_.end();
      if (p_.snapshots.count(snapshot_) && !replaced) {
        return Status::Exists("cannot receive: destination '" + snapshot_ + "' exists");
      }
      uint64_t refres = 0;
      if (auto r = props_.find("refreservation"); r != props_.end()) {
        refres = r->second == "auto" ? FullReservation(p_, b_.volsize, b_.volblocksize)
                                     : std::stoull(r->second);
      }
      if (!b_.incremental() && replace_) {
        // -F: the target's snapshots go (newest first), then its tree is freed whole and the
        // received one takes its place (kRecvApply from txg 0), all in this txg.
        auto h = p_.volumes.find(volume_);
        if (h == p_.volumes.end() || h->second->open_count > 0 ||
            !h->second->synced_phys().origin.empty()) {
          return Status::Busy("cannot receive into '" + volume_ + "': gone or in use");
        }
        auto list = p_.SnapshotsOfLocked(volume_);
        if (list.size() != later_.size()) {
          return Status::Busy("cannot receive: the snapshots of '" + volume_ + "' changed");
        }
        for (const auto& s : list) {
          const std::string n = s->synced_phys().name;
          if (s->open_count > 0 || HeldOrClonedLocked(n, *s)) {
            return Status::Busy("cannot receive new volume: -F cannot destroy '" + n + "': busy");
          }
        }
        const std::shared_ptr<Volume> head = h->second;
        // Decided here, on the head this commit replaces (a Volume's block size is fixed).
        const bool replace_head = head->volblocksize() != b_.volblocksize;
        for (auto it = later_.rbegin(); it != later_.rend(); ++it) {
          PoolImpl::SnapOp destroy{PoolImpl::SnapOp::Kind::kDestroy, *it, 0};
          if (replace_head) destroy.source = head;
          p_.pending_snap_ops.push_back(std::move(destroy));
        }
        p_.volumes.erase(hidden_);
        auto props = props_;
        props["creation"] = NowString();
        if (!props.count("refreservation")) props["refreservation"] = "0";
        if (replace_head) {
          head->destroyed = true;
          p_.pending_destroy.push_back(head);
          p_.volumes.erase(h);
          vol_->RenameLocked(volume_);
          vol_->SetProps(props);
          vol_->refreservation = refres;
          p_.volumes[volume_] = vol_;
        } else {
          PoolImpl::SnapOp apply{PoolImpl::SnapOp::Kind::kRecvApply, volume_, 0};
          apply.txg = 0;
          apply.source = vol_;
          p_.pending_snap_ops.push_back(std::move(apply));
          head->SetProps(props);
          head->refreservation = refres;
        }
      } else if (!b_.incremental()) {
        if (p_.volumes.count(volume_)) {
          return Status::Exists("cannot receive new volume: destination '" + volume_ + "' exists");
        }
        p_.volumes.erase(hidden_);
        vol_->RenameLocked(volume_);
        auto props = props_;
        props["creation"] = NowString();
        if (!props.count("refreservation")) props["refreservation"] = "0";
        vol_->SetProps(props);
        vol_->refreservation = refres;
        p_.volumes[volume_] = vol_;
      } else {
        auto h = p_.volumes.find(volume_);
        if (h == p_.volumes.end() || h->second->open_count > 0) {
          return Status::Busy("cannot receive into '" + volume_ + "': gone or in use");
        }
        // What Check saw must still hold: the same later snapshots, none pinned.
        auto list = p_.SnapshotsOfLocked(volume_);
        size_t n_later = 0;
        bool seen = false;
        for (const auto& s : list) {
          const std::string n = s->synced_phys().name;
          if (seen) {
            n_later++;
            if (s->open_count > 0 || HeldOrClonedLocked(n, *s)) {
              return Status::Busy("cannot receive: -F cannot destroy '" + n + "': busy");
            }
          }
          seen |= n == origin_.name;
        }
        if (!seen || n_later != later_.size()) {
          return Status::Busy("cannot receive: the snapshots of '" + volume_ + "' changed");
        }
        for (auto it = later_.rbegin(); it != later_.rend(); ++it) {
          p_.pending_snap_ops.push_back({PoolImpl::SnapOp::Kind::kDestroy, *it, 0});
        }
        p_.volumes.erase(hidden_);
        PoolImpl::SnapOp apply{PoolImpl::SnapOp::Kind::kRecvApply, volume_, 0};
        apply.txg = origin_.create_txg;
        apply.source = vol_;
        p_.pending_snap_ops.push_back(std::move(apply));
        auto props = h->second->phys().props;
        for (const auto& [k, v] : props_) props[k] = v;
        h->second->SetProps(props);
        if (props_.count("refreservation")) h->second->refreservation = refres;
      }
      PoolImpl::SnapOp create{PoolImpl::SnapOp::Kind::kCreate, snapshot_, p_.next_id++};
      create.guid = b_.toguid;
      p_.pending_snap_ops.push_back(std::move(create));
      p_.mos_dirty = true;
      p_.RecomputeReservations();
    }
    VS_RETURN_IF_ERROR(p_.Sync());
    stats_.snapshots.push_back(snapshot_);
    return Status::Ok();
  }

  bool HeldOrClonedLocked(const std::string& name, const Volume& s) {
    for (const auto& [k, v] : s.synced_phys().props) {
      if (k.rfind("hold:", 0) == 0) return true;
    }
    for (const auto& [vn, v] : p_.volumes) {
      if (v->synced_phys().origin == name) return true;
    }
    return false;
  }

  PoolImpl& p_;
  const ReceiveOptions& o_;
  StreamReader& reader_;
  const StreamBegin b_;
  ReceiveStats& stats_;
  std::string volume_, snapshot_, hidden_;
  std::map<std::string, std::string> props_;
  DatasetPhys origin_;
  std::vector<std::string> later_;  // the target's snapshots that -F destroys
  bool replace_ = false;            // -F, a full stream: the target's contents replaced
  std::shared_ptr<Volume> vol_;
  uint64_t done_ = 0;  // the volume bytes before it are received (records come in order)
  static constexpr size_t kPendingMax = 1 << 20;
  std::vector<uint8_t> pending_;  // WRITE payloads for [pending_off_, +size), not written yet
  std::vector<Volume::StoredForm> pending_stored_;  // a block's in pending_: its stored form
  bool pending_any_stored_ = false;
  uint64_t pending_off_ = 0;
  std::string token_;
};

}  // namespace

void Volume::RenameLocked(const std::string& name) {
  std::lock_guard l(tree_mu_);
  phys_.name = name;
  synced_.name = name;
}

Result<ReceiveStats> Receive(Pool& pool, const ReceiveOptions& options, StreamReader& reader,
                             const std::function<void(const StreamBegin&)>& on_snapshot) {
  PoolImpl& p = *pool.impl();
  VS_RETURN_IF_ERROR(p.CheckUsable());
  ReceiveStats stats;
  for (;;) {
    auto r = reader.Next();
    if (!r.ok() && reader.at_end()) {
      if (stats.snapshots.empty()) {
        return Status::InvalidArgument("cannot receive: no send stream on standard input");
      }
      break;
    }
    if (!r.ok()) return r.status();
    if (r->type != RecordType::kBegin) {
      return Status::Corruption("invalid send stream: expected BEGIN");
    }
    if (on_snapshot) on_snapshot(r->begin);
    VS_RETURN_IF_ERROR(SubstreamReceiver(p, options, reader, r->begin, stats).Run());
  }
  stats.stream_bytes = reader.offset();
  return stats;
}

Result<std::string> ReceiveResumeToken(Pool& pool, const std::string& volume) {
  PoolImpl& p = *pool.impl();
  std::lock_guard l(p.mu);
  auto hd = p.volumes.find(HiddenName(volume));
  if (hd == p.volumes.end()) return Status::NotFound("'" + volume + "': no partial receive");
  VS_ASSIGN_OR_RETURN(ResumeState r, ResumeFromProps(hd->second->phys().props));
  return EncodeResumeToken(r);
}

std::vector<DatasetInfo> ListPartialReceives(Pool& pool) {
  PoolImpl& p = *pool.impl();
  std::vector<DatasetInfo> out;
  std::lock_guard l(p.mu);
  for (const auto& [name, v] : p.volumes) {
    const size_t cut = name.size() - std::min<size_t>(name.size(), 5);
    if (name.compare(cut, std::string::npos, "%recv") != 0) continue;
    const std::string target = name.substr(0, cut);
    if (p.volumes.count(target)) continue;  // an incremental one: the target lists it
    const DatasetPhys phys = v->phys();
    auto r = ResumeFromProps(phys.props);
    if (!r.ok()) continue;
    DatasetInfo d;
    d.name = target;
    d.type = "volume";
    d.guid = phys.guid;
    d.create_txg = phys.create_txg;
    d.referenced = d.used = phys.used;
    d.logical_referenced = phys.lused;
    d.volsize = phys.volsize;
    d.volblocksize = phys.volblocksize;
    PutDatasetNumbers(d);
    d.props["type"] = "volume";
    d.props["receive_resume_token"] = EncodeResumeToken(*r);
    out.push_back(std::move(d));
  }
  return out;
}

Result<DatasetInfo> GetPartialReceive(Pool& pool, const std::string& name) {
  for (auto& d : ListPartialReceives(pool)) {
    if (d.name == name) return d;
  }
  return Status::NotFound("cannot open '" + name + "': dataset does not exist");
}

Status AbortReceive(Pool& pool, const std::string& volume) {
  PoolImpl& p = *pool.impl();
  VS_RETURN_IF_ERROR(p.CheckUsable());
  VS_RETURN_IF_ERROR(ValidateDatasetName(volume));
  if (!ReceiveResumeToken(pool, volume).ok()) {
    return Status::NotFound("'" + volume + "' does not have any resumable receive state to abort");
  }
  return DropHidden(p, HiddenName(volume));
}

}  // namespace volstack::pool

#include "lvm/mirrored_device.h"

#include <algorithm>
#include <bit>
#include <optional>

namespace volstack::lvm {

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kCopyChunk = 1 << 20;
// Legs beyond this many helpers are written by the calling thread, one after the other: two
// and three legs are what raid1 LVs have, and a thread per leg of a 64-leg LV would cost more
// than it saves.
constexpr size_t kMaxFanoutHelpers = 3;

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

MirroredDevice::MirroredDevice(Config config, const bdev::Geometry& g)
    : BlockDevice(config.name, g), config_(std::move(config)), legs_(config_.legs.size()) {
  for (size_t i = 0; i < legs_.size(); i++) legs_[i].leg = config_.legs[i];
  regions_ = (config_.size + config_.region_bytes - 1) / config_.region_bytes;
  const uint64_t words = (regions_ + 63) / 64;
  dirty_ = std::make_unique<std::atomic<uint64_t>[]>(words);
  for (uint64_t w = 0; w < words; w++) dirty_[w].store(0);
  const uint64_t bytes = (regions_ + 7) / 8;
  if (config_.kind == Kind::kRaid1) {
    bits_offset_ = kMdBitmapSuperBytes;
    log_device_offset_ = kMdBitmapOffset;
  } else {
    bits_offset_ = kMirrorLogBitsOffset;
    log_device_offset_ = 0;
  }
  log_image_.assign(RoundUp(bits_offset_ + bytes, kPage), 0);
}

// Open's steps, on a device not yet shared with anyone.
class MirroredOpener {
 public:
  MirroredOpener(MirroredDevice& d, MirroredDevice::OpenReport* r) : d_(d), report_(r) {}

  Status Run() {
    const size_t n = d_.legs_.size();
    in_sync_.assign(n, false);
    present_.assign(n, false);
    for (size_t i = 0; i < n; i++) {
      const auto& leg = d_.legs_[i].leg;
      present_[i] = leg.data && (d_.config_.kind == MirroredDevice::Kind::kMirror || leg.meta);
    }
    dirty_.assign(d_.regions_, false);
    VS_RETURN_IF_ERROR(d_.config_.kind == MirroredDevice::Kind::kRaid1 ? ReadRaid() : ReadMirror());
    if (primary_ < 0) {
      return Status::IoError("LV " + d_.name() +
                             ": no leg is in sync (every leg failed, stale or missing); "
                             "refusing to serve stale data");
    }
    if (!d_.persist_) {
      // Nothing can be copied: read the primary only, unless every in-sync leg is known to
      // agree.
      const bool any_dirty = std::find(dirty_.begin(), dirty_.end(), true) != dirty_.end();
      for (size_t i = 0; i < n; i++) {
        d_.legs_[i].live = in_sync_[i] && (!any_dirty || static_cast<int>(i) == primary_);
      }
      Report();
      return Status::Ok();
    }
    for (size_t i = 0; i < n; i++) d_.legs_[i].live = in_sync_[i];
    // Legs present but not in sync: rebuilt whole from the primary.
    for (size_t i = 0; i < n; i++) {
      if (!present_[i] || in_sync_[i]) continue;
      d_.legs_[i].live = true;
      if (CopyRange(0, d_.config_.size, {i}).ok()) {
        in_sync_[i] = true;
        rebuilt_.push_back(i);
        if (report_) report_->legs_rebuilt.push_back(static_cast<uint32_t>(i));
      } else {
        d_.legs_[i].live = false;
      }
    }
    // Regions that may differ: from the primary to every other in-sync leg (not to the legs
    // rebuilt just now, which are whole copies already).
    std::vector<size_t> targets;
    for (size_t i = 0; i < n; i++) {
      if (in_sync_[i] && static_cast<int>(i) != primary_ && !Rebuilt(i)) targets.push_back(i);
    }
    if (!targets.empty()) {
      for (uint64_t r = 0; r < d_.regions_;) {
        if (!dirty_[r]) {
          r++;
          continue;
        }
        uint64_t end = r;
        while (end < d_.regions_ && dirty_[end]) end++;
        const uint64_t off = r * d_.config_.region_bytes;
        const uint64_t len = std::min(end * d_.config_.region_bytes, d_.config_.size) - off;
        VS_RETURN_IF_ERROR(CopyRange(off, len, targets));
        if (report_) report_->regions_copied += end - r;
        r = end;
      }
    }
    std::lock_guard lock(d_.meta_mu_);
    d_.failed_bits_ = 0;
    for (size_t i = 0; i < n; i++) {
      if (!d_.legs_[i].live) d_.failed_bits_ |= uint64_t{1} << i;
    }
    if (d_.config_.kind == MirroredDevice::Kind::kRaid1) {
      d_.events_ = max_events_;  // WriteSuperblocks counts one more
      VS_RETURN_IF_ERROR(d_.WriteSuperblocks());
    }
    VS_RETURN_IF_ERROR(d_.WriteAllClean());
    Report();
    return Status::Ok();
  }

 private:
  bool Rebuilt(size_t i) const {
    return std::find(rebuilt_.begin(), rebuilt_.end(), i) != rebuilt_.end();
  }

  void Report() {
    if (!report_) return;
    report_->in_sync.clear();
    for (auto& l : d_.legs_) report_->in_sync.push_back(l.live.load());
  }

  void AllDirty(uint64_t from_byte = 0) {
    for (uint64_t r = from_byte / d_.config_.region_bytes; r < d_.regions_; r++) dirty_[r] = true;
  }

  Status ReadRaid() {
    const size_t n = d_.legs_.size();
    const std::string& lv = d_.name();
    std::vector<std::optional<DmRaidSuperblock>> sbs(n);
    std::vector<uint8_t> block(kDmRaidSuperblockBytes);
    for (size_t i = 0; i < n; i++) {
      if (!present_[i]) continue;
      const auto& leg = d_.legs_[i].leg;
      if (!leg.meta->Read(0, block).ok()) {
        present_[i] = false;  // an rmeta that cannot be read: the leg is failed
        continue;
      }
      auto sb = DecodeDmRaidSuperblock(block);
      if (sb.ok()) {
        sbs[i] = *sb;
      } else if (!sb.status().IsNotFound()) {
        return Status::Corruption("LV " + lv + ": metadata of leg " + std::to_string(i) + ": " +
                                  sb.status().message() + "; refusing to serve");
      }
    }
    int fresh = -1;
    for (size_t i = 0; i < n; i++) {
      if (sbs[i] && (fresh < 0 || sbs[i]->events > max_events_)) {
        fresh = static_cast<int>(i);
        max_events_ = sbs[i]->events;
      }
    }
    if (fresh < 0) {
      // No kernel ever ran the array: leg 0 is the copy dm-raid's initial sync would spread.
      for (size_t i = 0; i < n; i++) {
        if (!present_[i]) continue;
        if (primary_ < 0 || d_.config_.nosync) in_sync_[i] = true;
        if (primary_ < 0) primary_ = static_cast<int>(i);
      }
      if (primary_ != 0 && !d_.config_.nosync && primary_ >= 0) {
        // Leg 0 is missing from a never-synced array: the others may hold anything.
        return Status::IoError("LV " + lv + ": leg 0 of a raid1 that was never synced is " +
                               "missing; refusing to serve stale data");
      }
      return Status::Ok();
    }
    const DmRaidSuperblock& f = *sbs[fresh];
    auto refuse = [&](const std::string& why) {
      return Status::Corruption("LV " + lv + ": the raid superblock " + why +
                                "; refusing to serve");
    };
    if (f.num_devices != n) {
      return refuse("names " + std::to_string(f.num_devices) + " legs, the metadata " +
                    std::to_string(n));
    }
    if (f.level != 1) return refuse("is for raid level " + std::to_string(f.level));
    if (f.incompat_features != 0) return refuse("has unknown incompatible features");
    if (f.flags != 0) return refuse("records a reshape");
    if (f.data_offset != 0) return refuse("puts the data at an offset");
    for (size_t i = 0; i < n; i++) {
      if (sbs[i] && sbs[i]->array_position != i) {
        return refuse("of leg " + std::to_string(i) + " says it is leg " +
                      std::to_string(sbs[i]->array_position));
      }
    }
    for (size_t i = 0; i < n; i++) {
      in_sync_[i] = present_[i] && sbs[i] && sbs[i]->events == max_events_ && !f.leg_failed(i) &&
                    sbs[i]->disk_recovery_offset == kMaxSector && !d_.legs_[i].leg.rebuild;
      if (in_sync_[i] && primary_ < 0) primary_ = static_cast<int>(i);
    }
    if (primary_ < 0) return Status::Ok();
    if (f.array_resync_offset != kMaxSector) AllDirty(f.array_resync_offset * 512);
    // The write-intent bitmap: regions a write may have reached on some legs only.
    std::vector<uint8_t>& img = d_.log_image_;
    if (!d_.legs_[primary_].leg.meta->Read(d_.log_device_offset_, img).ok()) {
      AllDirty();
      return Status::Ok();
    }
    auto bm = DecodeMdBitmapSuper(img);
    if (!bm.ok() || bm->events < max_events_ || (bm->state & kMdBitmapStale) ||
        bm->chunksize != d_.config_.region_bytes) {
      AllDirty();
      return Status::Ok();
    }
    for (uint64_t r = 0; r < d_.regions_; r++) {
      if ((img[d_.bits_offset_ + r / 8] >> (r % 8)) & 1) dirty_[r] = true;
    }
    return Status::Ok();
  }

  Status ReadMirror() {
    const size_t n = d_.legs_.size();
    for (size_t i = 0; i < n; i++) {
      in_sync_[i] = present_[i] && !d_.legs_[i].leg.rebuild;
      if (in_sync_[i] && primary_ < 0) primary_ = static_cast<int>(i);
    }
    if (d_.config_.nosync) return Status::Ok();
    if (!d_.config_.log) {
      AllDirty();  // a core log: dm-mirror resyncs every activation
      return Status::Ok();
    }
    std::vector<uint8_t>& img = d_.log_image_;
    Status s = d_.config_.log->Read(0, img);
    if (!s.ok()) return s.WithContext("LV " + d_.name() + ": reading the mirror log");
    auto h = DecodeMirrorLogHeader(img);
    if (!h.ok() || h->version > kMirrorLogVersion || h->nr_regions != d_.regions_) {
      AllDirty();
      return Status::Ok();
    }
    for (uint64_t r = 0; r < d_.regions_; r++) {
      if (!((img[d_.bits_offset_ + r / 8] >> (r % 8)) & 1)) dirty_[r] = true;
    }
    return Status::Ok();
  }

  Status CopyRange(uint64_t off, uint64_t len, const std::vector<size_t>& targets) {
    const auto& src = d_.legs_[primary_].leg.data;
    std::vector<uint8_t> buf(std::min(len, kCopyChunk));
    for (uint64_t done = 0; done < len;) {
      const uint64_t piece = std::min<uint64_t>(buf.size(), len - done);
      auto span = std::span<uint8_t>(buf).first(piece);
      Status s = src->Read(off + done, span);
      if (!s.ok()) {
        return s.WithContext("LV " + d_.name() + ": resync from leg " + std::to_string(primary_));
      }
      for (size_t t : targets) {
        if (!d_.legs_[t].live) continue;
        if (!d_.legs_[t].leg.data->Write(off + done, span).ok()) d_.legs_[t].live = false;
      }
      done += piece;
    }
    for (size_t t : targets) {
      if (d_.legs_[t].live && !d_.legs_[t].leg.data->Flush().ok()) d_.legs_[t].live = false;
    }
    for (size_t t : targets) {
      if (!d_.legs_[t].live) return Status::IoError("LV " + d_.name() + ": resync of leg failed");
    }
    return Status::Ok();
  }

  MirroredDevice& d_;
  MirroredDevice::OpenReport* report_;
  std::vector<bool> present_, in_sync_, dirty_;
  std::vector<size_t> rebuilt_;
  uint64_t max_events_ = 0;
  int primary_ = -1;
};

Result<std::shared_ptr<MirroredDevice>> MirroredDevice::Open(Config c, OpenReport* report) {
  const std::string lv = c.name;
  const size_t n = c.legs.size();
  if (n < 1 || n > 64) return Status::NotSupported("LV " + lv + ": 1 to 64 legs are served");
  if (c.region_bytes < 512 || !std::has_single_bit(c.region_bytes)) {
    return Status::Corruption("LV " + lv + ": region size " + std::to_string(c.region_bytes) +
                              " bytes is not a power of two of at least 512");
  }
  bdev::Geometry g;
  g.size_bytes = c.size;
  g.logical_block_size = 512;
  g.physical_block_size = 512;
  g.caps = {true, false, true, false};
  bool any = false;
  const uint64_t regions = (c.size + c.region_bytes - 1) / c.region_bytes;
  for (size_t i = 0; i < n; i++) {
    const Leg& leg = c.legs[i];
    if (leg.data && leg.data->size() < c.size) {
      return Status::InvalidArgument("LV " + lv + ": leg " + leg.name + " is shorter than the LV " +
                                     "(the legs disagree in size); refusing to serve");
    }
    if (c.kind == Kind::kRaid1 && leg.data && leg.meta &&
        leg.meta->size() < kMdBitmapOffset + kMdBitmapSuperBytes + (regions + 7) / 8) {
      return Status::InvalidArgument("LV " + lv + ": metadata sub-LV of " + leg.name +
                                     " is too small for the bitmap");
    }
    for (const auto& d : {leg.data, leg.meta}) {
      if (!d) continue;
      any = true;
      const bdev::Geometry dg = d->geometry();
      g.logical_block_size = std::max(g.logical_block_size, dg.logical_block_size);
      g.physical_block_size = std::max(g.physical_block_size, dg.physical_block_size);
      g.optimal_io_size = std::max(g.optimal_io_size, dg.optimal_io_size);
      g.read_only |= dg.read_only;
      g.caps.fua &= dg.caps.fua;
      g.caps.write_zeroes &= dg.caps.write_zeroes;
    }
  }
  if (!any) return Status::NotFound("LV " + lv + ": every leg is on a missing PV");
  if (c.log) {
    g.read_only |= c.log->read_only();
    if (c.log->size() < kMirrorLogBitsOffset + (regions + 7) / 8) {
      return Status::InvalidArgument("LV " + lv + ": the mirror log is too small");
    }
  }
  if (c.region_bytes % g.logical_block_size != 0) {
    return Status::InvalidArgument("LV " + lv + ": region size below the legs' block size");
  }
  auto dev = std::make_shared<MirroredDevice>(std::move(c), g);
  dev->persist_ = !g.read_only;
  if (dev->persist_ && n > 1) {
    dev->fanout_ = std::make_unique<LegFanout>(std::min<size_t>(n - 1, kMaxFanoutHelpers));
  }
  MirroredOpener opener(*dev, report);
  VS_RETURN_IF_ERROR(opener.Run());
  return dev;
}

MirroredDevice::~MirroredDevice() {
  if (!persist_) return;
  std::lock_guard lock(meta_mu_);
  bool any = false;
  for (auto& l : legs_) {
    if (!l.live) continue;
    if (l.leg.data->Flush().ok()) {
      any = true;
    } else {
      l.live = false;
    }
  }
  // The legs agree everywhere now: the regions can be clean again. A failure only leaves
  // them dirty, which costs a copy at the next activation.
  if (any) WriteAllClean().IgnoreError();
}

void MirroredDevice::SetRegionBit(uint64_t region, bool dirty) {
  uint8_t& byte = log_image_[bits_offset_ + region / 8];
  const uint8_t bit = uint8_t(1u << (region % 8));
  // raid1's bitmap marks dirty regions; dm-log marks clean ones.
  const bool set = config_.kind == Kind::kRaid1 ? dirty : !dirty;
  byte = set ? (byte | bit) : (byte & ~bit);
}

Status MirroredDevice::WriteLogPages(uint64_t first_page, uint64_t last_page) {
  const uint64_t off = first_page * kPage;
  const auto bytes =
      std::span<const uint8_t>(log_image_).subspan(off, (last_page - first_page + 1) * kPage);
  if (config_.kind == Kind::kMirror) {
    if (!config_.log) return Status::Ok();
    VS_RETURN_IF_ERROR(config_.log->Write(log_device_offset_ + off, bytes));
    return config_.log->Flush();
  }
  for (bool retry = true; retry;) {
    retry = false;
    size_t ok = 0;
    for (size_t i = 0; i < legs_.size(); i++) {
      auto& l = legs_[i];
      if (!l.live) continue;
      Status s = l.leg.meta->Write(log_device_offset_ + off, bytes);
      if (s.ok()) s = l.leg.meta->Flush();
      if (s.ok()) {
        ok++;
        continue;
      }
      l.live = false;
      failed_bits_ |= uint64_t{1} << i;
      retry = true;  // the others' superblocks must say so
      break;
    }
    if (retry) {
      VS_RETURN_IF_ERROR(WriteSuperblocks());
      continue;
    }
    if (ok == 0) return Status::IoError(name() + ": no leg left to record writes on");
  }
  return Status::Ok();
}

Status MirroredDevice::WriteSuperblocks() {
  if (config_.kind != Kind::kRaid1) return Status::Ok();
  events_++;
  // The bitmap's events follow the superblock's, or the kernel would call it stale.
  {
    auto bm = DecodeMdBitmapSuper(log_image_);
    MdBitmapSuper s = bm.ok() ? *bm : MdBitmapSuper{};
    s.events = events_;
    if (!bm.ok()) {
      s.events_cleared = events_;
      s.sync_size = config_.size / 512;
      s.chunksize = static_cast<uint32_t>(config_.region_bytes);
    }
    EncodeMdBitmapSuper(s, log_image_);
  }
  std::vector<uint8_t> block(kDmRaidSuperblockBytes);
  for (;;) {
    bool failed_one = false;
    size_t ok = 0;
    for (size_t i = 0; i < legs_.size(); i++) {
      auto& l = legs_[i];
      if (!l.live) continue;
      DmRaidSuperblock sb;
      sb.num_devices = static_cast<uint32_t>(legs_.size());
      sb.array_position = static_cast<uint32_t>(i);
      sb.events = events_;
      sb.failed_devices = failed_bits_;
      sb.array_sectors = config_.size / 512;
      sb.sectors = l.leg.data->size() / 512;
      EncodeDmRaidSuperblock(sb, block);
      Status s = l.leg.meta->Write(0, block);
      if (s.ok()) s = l.leg.meta->Write(log_device_offset_, std::span(log_image_).first(kPage));
      if (s.ok()) s = l.leg.meta->Flush();
      if (s.ok()) {
        ok++;
        continue;
      }
      l.live = false;
      failed_bits_ |= uint64_t{1} << i;
      failed_one = true;
      break;
    }
    if (!failed_one) {
      if (ok == 0) return Status::IoError(name() + ": no leg left to record its state on");
      return Status::Ok();
    }
  }
}

Status MirroredDevice::WriteAllClean() {
  std::fill(log_image_.begin() + bits_offset_, log_image_.end(), 0);
  if (config_.kind == Kind::kRaid1) {
    MdBitmapSuper s;
    s.events = s.events_cleared = events_;
    s.sync_size = config_.size / 512;
    s.chunksize = static_cast<uint32_t>(config_.region_bytes);
    EncodeMdBitmapSuper(s, log_image_);
  } else {
    EncodeMirrorLogHeader({kMirrorLogVersion, regions_}, log_image_);
    for (uint64_t r = 0; r < regions_; r++) SetRegionBit(r, false);
  }
  for (uint64_t w = 0; w < (regions_ + 63) / 64; w++) dirty_[w].store(0);
  return WriteLogPages(0, log_image_.size() / kPage - 1);
}

Status MirroredDevice::MarkDirty(uint64_t offset, uint64_t length) {
  if (!persist_ || length == 0) return Status::Ok();
  const uint64_t first = offset / config_.region_bytes;
  const uint64_t last = (offset + length - 1) / config_.region_bytes;
  auto is_dirty = [&](uint64_t r) { return (dirty_[r / 64].load() >> (r % 64)) & 1; };
  bool all = true;
  for (uint64_t r = first; r <= last && all; r++) all = is_dirty(r);
  if (all) return Status::Ok();
  std::lock_guard lock(meta_mu_);
  uint64_t lo = UINT64_MAX, hi = 0;
  for (uint64_t r = first; r <= last; r++) {
    if (is_dirty(r)) continue;
    SetRegionBit(r, true);
    const uint64_t page = (bits_offset_ + r / 8) / kPage;
    lo = std::min(lo, page);
    hi = std::max(hi, page);
  }
  if (lo == UINT64_MAX) return Status::Ok();  // another writer got there first
  VS_RETURN_IF_ERROR(WriteLogPages(lo, hi));
  // Only now, with the bits durable, may writes to these regions be issued.
  for (uint64_t r = first; r <= last; r++) dirty_[r / 64].fetch_or(uint64_t{1} << (r % 64));
  return Status::Ok();
}

Status MirroredDevice::FailLeg(size_t i, const Status& why) {
  std::lock_guard lock(meta_mu_);
  if (!legs_[i].live.exchange(false)) return Status::Ok();
  failed_bits_ |= uint64_t{1} << i;
  bool any = false;
  for (auto& l : legs_) any |= l.live.load();
  if (!any) return why.WithContext(name() + ": the last live leg failed");
  if (!persist_) return Status::Ok();
  if (config_.kind == Kind::kMirror) {
    // dm-log keeps no per-leg record: a write acknowledged from the other legs alone would be
    // lost if the next activation trusted this leg again. So the LV takes no more writes.
    writes_refused_ = true;
    return why.WithContext(RefusedWrites());
  }
  return WriteSuperblocks();
}

std::string MirroredDevice::RefusedWrites() const {
  return name() + ": a leg failed and a mirror LV's log cannot record which, so it takes no " +
         "more writes (reads go on); repair the leg and activate it again";
}

template <typename Op>
Status MirroredDevice::AllLegs(const char* what, Op&& op) {
  // Every live leg at once (LegFanout), then the failures one by one: recording a failure
  // takes meta_mu_ and rewrites the superblocks, which must not race another leg's record.
  size_t live[64];
  size_t n = 0;
  for (size_t i = 0; i < legs_.size(); i++) {
    if (legs_[i].live) live[n++] = i;
  }
  Status results[64];
  auto one = [&](size_t k) { results[k] = op(*legs_[live[k]].leg.data); };
  if (fanout_ && n > 1) {
    fanout_->Run(n, one);
  } else {
    for (size_t k = 0; k < n; k++) one(k);
  }
  Status first;
  size_t ok = 0;
  for (size_t k = 0; k < n; k++) {
    const Status& s = results[k];
    if (s.ok()) {
      ok++;
      continue;
    }
    if (first.ok()) first = s;
    // When the failure cannot be recorded, the request fails: the leg it reached may be the
    // only one the next activation trusts.
    Status f = FailLeg(live[k], s);
    if (!f.ok()) return f;
  }
  if (ok == 0) {
    return first.ok() ? Status::IoError(name() + ": no live leg to " + what) : first;
  }
  return Status::Ok();
}

Status MirroredDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  Status first;
  for (size_t i = 0; i < legs_.size(); i++) {
    if (!legs_[i].live) continue;
    Status s = legs_[i].leg.data->Read(offset, buf);
    if (s.ok()) return s;
    if (first.ok()) first = s;
    FailLeg(i, s).IgnoreError();
  }
  return first.ok() ? Status::IoError(name() + ": no live leg to read") : first;
}

Status MirroredDevice::DoWrite(uint64_t offset, std::span<const uint8_t> buf,
                               bdev::WriteOptions opts) {
  if (writes_refused_) return Status::IoError(RefusedWrites());
  VS_RETURN_IF_ERROR(MarkDirty(offset, buf.size()));
  return AllLegs("write", [&](bdev::BlockDevice& d) { return d.Write(offset, buf, opts); });
}

Status MirroredDevice::DoFlush() {
  return AllLegs("flush", [&](bdev::BlockDevice& d) { return d.Flush(); });
}

Status MirroredDevice::DoDiscard(uint64_t, uint64_t) {
  return Status::NotSupported(name() + ": discard");
}

Status MirroredDevice::DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) {
  if (writes_refused_) return Status::IoError(RefusedWrites());
  VS_RETURN_IF_ERROR(MarkDirty(offset, length));
  return AllLegs("zero", [&](bdev::BlockDevice& d) { return d.WriteZeroes(offset, length, opts); });
}

}  // namespace volstack::lvm

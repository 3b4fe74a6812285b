#include "lvm/thin_pool.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "lvm/thin_btree.h"
#include "lvm/thin_space_map.h"
#include "util/coding.h"

namespace volstack::lvm {

Result<std::shared_ptr<ThinPool>> ThinPool::Open(Config c) {
  const std::string pool = "thin pool " + c.name;
  if (!c.meta || !c.data) return Status::NotFound(pool + ": its data or metadata LV is missing");
  std::vector<uint8_t> block(kThinBlockBytes);
  if (c.meta->size() < kThinBlockBytes) return Status::Corruption(pool + ": metadata LV too small");
  VS_RETURN_IF_ERROR(c.meta->Read(0, block));
  auto sbr = DecodeThinSuperblock(block);
  if (!sbr.ok()) {
    if (sbr.status().IsNotFound()) {
      return Status::NotSupported(pool + ": its metadata was never formatted (no kernel has " +
                                  "activated the pool)");
    }
    return sbr.status().WithContext(pool);
  }
  const ThinSuperblock& sb = *sbr;
  auto bad = [&](const std::string& why) { return Status::Corruption(pool + ": " + why); };
  if (sb.flags & 1) return bad("metadata is marked needs_check (run thin_check)");
  // A held metadata snapshot (dm-thin's reserve_metadata_snap) pins blocks of an older tree
  // that this pool's commits do not count as used, so they would be reused under it.
  if (sb.held_root != 0) {
    return Status::NotSupported(pool + ": its metadata holds a metadata snapshot (block " +
                                std::to_string(sb.held_root) +
                                "); release it (release_metadata_snap) before volstack serves it");
  }
  if (sb.data_block_size == 0 || sb.data_block_size != c.chunk_sectors) {
    return bad("data block size " + std::to_string(sb.data_block_size) +
               " sectors differs from the VG's chunk_size " + std::to_string(c.chunk_sectors));
  }
  if (sb.trans_id != c.transaction_id) {
    return bad("transaction_id is " + std::to_string(sb.trans_id) + ", while the VG expects " +
               std::to_string(c.transaction_id));
  }
  if (sb.metadata_nr_blocks == 0 || sb.metadata_nr_blocks * kThinBlockBytes > c.meta->size()) {
    return bad("metadata says " + std::to_string(sb.metadata_nr_blocks) +
               " blocks, more than its LV holds");
  }
  const uint64_t block_bytes = uint64_t{sb.data_block_size} * 512;
  if (sb.data_sm.nr_blocks > c.data->size() / block_bytes) {
    return bad("metadata says " + std::to_string(sb.data_sm.nr_blocks) +
               " data blocks, more than its data LV holds");
  }
  std::shared_ptr<ThinPool> p(new ThinPool(std::move(c)));
  p->block_bytes_ = block_bytes;
  p->state_.sb = sb;
  p->state_.data_refs.assign(sb.data_sm.nr_blocks, 0);
  ThinBtreeReader tree(p->config_.meta, sb.metadata_nr_blocks);
  std::vector<std::pair<uint64_t, uint64_t>> roots;
  VS_RETURN_IF_ERROR(tree.Walk(sb.data_mapping_root, 8,
                               [&](uint64_t id, std::span<const uint8_t> v) {
                                 roots.emplace_back(id, DecodeLE64(v.data()));
                                 return Status::Ok();
                               })
                         .WithContext(pool));
  VS_RETURN_IF_ERROR(tree.Walk(sb.device_details_root, kThinDeviceDetailsBytes,
                               [&](uint64_t id, std::span<const uint8_t> v) {
                                 auto& d = p->state_.devices[id];
                                 d.mapped_blocks = DecodeLE64(v.data());
                                 d.transaction_id = DecodeLE64(v.data() + 8);
                                 d.creation_time = DecodeLE32(v.data() + 16);
                                 d.snapshotted_time = DecodeLE32(v.data() + 20);
                                 return Status::Ok();
                               })
                         .WithContext(pool));
  for (const auto& [id, root] : roots) {
    auto it = p->state_.devices.find(id);
    if (it == p->state_.devices.end()) {
      return bad("device " + std::to_string(id) + " has a mapping but no details");
    }
    auto& map = it->second.map;
    bool first = true;
    uint64_t prev = 0;
    Status walked = tree.Walk(root, 8, [&](uint64_t vblock, std::span<const uint8_t> v) {
      if (!first && vblock <= prev) return Status::Corruption("mapping keys out of order");
      first = false;
      prev = vblock;
      const uint64_t raw = DecodeLE64(v.data());
      const uint64_t data = raw >> kThinTimeBits;
      if (data >= sb.data_sm.nr_blocks) {
        return Status::Corruption("device " + std::to_string(id) + ": virtual block " +
                                  std::to_string(vblock) + " maps to data block " +
                                  std::to_string(data) + ", outside the pool");
      }
      map.emplace_hint(map.end(), vblock, raw);
      p->state_.data_refs[data]++;
      return Status::Ok();
    });
    if (!walked.ok()) return walked.WithContext(pool);
  }
  for (const auto& [id, d] : p->state_.devices) {
    if (std::none_of(roots.begin(), roots.end(), [&](auto& r) { return r.first == id; })) {
      return bad("device " + std::to_string(id) + " has details but no mapping");
    }
  }
  p->committed_refs_ = p->state_.data_refs;
  p->writable_ = !p->config_.meta->read_only() && !p->config_.data->read_only();
  if (p->writable_) {
    auto used = ReadMetadataUsed(p->config_.meta, sb);
    if (!used.ok()) return used.status().WithContext(pool);
    p->meta_used_ = std::move(*used);
  }
  return p;
}

ThinPool::~ThinPool() {
  std::lock_guard lock(mu_);
  if (!dirty_) return;
  if (config_.data->Flush().ok()) CommitLocked().IgnoreError();
}

bool ThinPool::HasDevice(uint64_t id) const {
  std::lock_guard lock(mu_);
  return state_.devices.count(id) != 0;
}

std::map<uint64_t, uint64_t> ThinPool::Mapping(uint64_t id) const {
  std::lock_guard lock(mu_);
  std::map<uint64_t, uint64_t> out;
  auto it = state_.devices.find(id);
  if (it == state_.devices.end()) return out;
  for (const auto& [v, raw] : it->second.map) out.emplace(v, raw >> kThinTimeBits);
  return out;
}

ThinSuperblock ThinPool::superblock() const {
  std::lock_guard lock(mu_);
  return state_.sb;
}

Status ThinPool::Read(uint64_t id, uint64_t offset, std::span<uint8_t> buf) {
  while (!buf.empty()) {
    const uint64_t vblock = offset / block_bytes_;
    const uint64_t in = offset % block_bytes_;
    const size_t piece = static_cast<size_t>(std::min<uint64_t>(buf.size(), block_bytes_ - in));
    auto out = buf.first(piece);
    std::optional<uint64_t> data;
    {
      // A block's data block changes only when a write copies it away from a snapshot; a
      // read racing that write may see either version, as with any racing read.
      std::lock_guard lock(mu_);
      const auto& map = state_.devices.at(id).map;
      auto it = map.find(vblock);
      if (it != map.end()) data = it->second >> kThinTimeBits;
    }
    if (!data) {
      std::memset(out.data(), 0, piece);
    } else {
      VS_RETURN_IF_ERROR(config_.data->Read(*data * block_bytes_ + in, out));
    }
    offset += piece;
    buf = buf.subspan(piece);
  }
  return Status::Ok();
}

Result<uint64_t> ThinPool::AllocateData() {
  const uint64_t n = state_.data_refs.size();
  for (uint64_t k = 0; k < n; k++) {
    const uint64_t d = (next_data_ + k) % n;
    if (state_.data_refs[d] == 0 && committed_refs_[d] == 0) {
      next_data_ = d + 1;
      return d;
    }
  }
  return Status::NoSpace("thin pool " + config_.name + " is out of data space");
}

Status ThinPool::WriteBlock(ThinPoolState::Device& dev, uint64_t vblock, uint64_t in,
                            std::span<const uint8_t> piece) {
  auto it = dev.map.find(vblock);
  if (it != dev.map.end()) {
    const uint64_t d = it->second >> kThinTimeBits;
    // In place only when no other mapping names the block now or in the committed
    // transaction: a crash must not let the write show through another device's mapping.
    if (state_.data_refs[d] == 1 && committed_refs_[d] <= 1) {
      return config_.data->Write(d * block_bytes_ + in, piece);
    }
  }
  // A new block: zeroes or the shared block's data around the request.
  VS_ASSIGN_OR_RETURN(uint64_t fresh, AllocateData());
  std::vector<uint8_t> whole(block_bytes_, 0);
  if (it != dev.map.end() && piece.size() < block_bytes_) {
    const uint64_t old = it->second >> kThinTimeBits;
    VS_RETURN_IF_ERROR(config_.data->Read(old * block_bytes_, whole));
  }
  std::memcpy(whole.data() + in, piece.data(), piece.size());
  VS_RETURN_IF_ERROR(config_.data->Write(fresh * block_bytes_, whole));
  const uint64_t raw = fresh << kThinTimeBits | (state_.sb.time & ((1u << kThinTimeBits) - 1));
  if (it != dev.map.end()) {
    state_.data_refs[it->second >> kThinTimeBits]--;
    it->second = raw;
  } else {
    dev.map.emplace(vblock, raw);
    dev.mapped_blocks++;
  }
  state_.data_refs[fresh] = 1;
  dirty_ = true;
  return Status::Ok();
}

Status ThinPool::Write(uint64_t id, uint64_t offset, std::span<const uint8_t> buf) {
  if (!writable_) return Status::ReadOnly("thin pool " + config_.name + " is read-only");
  std::lock_guard lock(mu_);
  VS_RETURN_IF_ERROR(failed_);
  auto& dev = state_.devices.at(id);
  while (!buf.empty()) {
    const uint64_t vblock = offset / block_bytes_;
    const uint64_t in = offset % block_bytes_;
    const size_t piece = static_cast<size_t>(std::min<uint64_t>(buf.size(), block_bytes_ - in));
    VS_RETURN_IF_ERROR(WriteBlock(dev, vblock, in, buf.first(piece)));
    offset += piece;
    buf = buf.subspan(piece);
  }
  return Status::Ok();
}

Status ThinPool::Unmap(uint64_t id, uint64_t offset, uint64_t length) {
  if (!writable_) return Status::ReadOnly("thin pool " + config_.name + " is read-only");
  const uint64_t first = (offset + block_bytes_ - 1) / block_bytes_;
  const uint64_t end = (offset + length) / block_bytes_;
  if (first >= end) return Status::Ok();
  std::lock_guard lock(mu_);
  VS_RETURN_IF_ERROR(failed_);
  auto& dev = state_.devices.at(id);
  for (auto it = dev.map.lower_bound(first); it != dev.map.end() && it->first < end;) {
    state_.data_refs[it->second >> kThinTimeBits]--;
    dev.mapped_blocks--;
    it = dev.map.erase(it);
    dirty_ = true;
  }
  return Status::Ok();
}

Status ThinPool::CommitLocked() {
  VS_RETURN_IF_ERROR(failed_);
  if (Status st = CommitThinMetadata(config_.meta, state_, meta_used_); !st.ok()) {
    // The new superblock may have reached the disk though its write or flush failed, and
    // then the blocks this pool counts as free are the new transaction's: no write or
    // commit may go on until an activation reads again what the disk holds.
    failed_ = st.WithContext("thin pool " + config_.name +
                             ": commit failed; it takes no more writes until it is activated "
                             "again");
    return failed_;
  }
  committed_refs_ = state_.data_refs;
  dirty_ = false;
  return Status::Ok();
}

Status ThinPool::Flush() {
  // Under the lock: a block allocated between the data flush and the commit would otherwise
  // be mapped on disk before its data is.
  std::lock_guard lock(mu_);
  VS_RETURN_IF_ERROR(config_.data->Flush());
  if (!dirty_) return Status::Ok();
  return CommitLocked();
}

}  // namespace volstack::lvm

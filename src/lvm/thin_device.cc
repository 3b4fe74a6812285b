#include "lvm/thin_device.h"

#include <algorithm>
#include <cstring>

#include "lvm/thin_btree.h"
#include "util/coding.h"

namespace volstack::lvm {

Result<std::shared_ptr<ThinDevice>> ThinDevice::Open(Config c) {
  const std::string lv = "LV " + c.name;
  auto refuse = [&](Status s) { return s.WithContext(lv + ": thin pool metadata"); };
  if (!c.meta || !c.data) return Status::NotFound(lv + ": its pool's data or metadata is missing");
  std::vector<uint8_t> block(kThinBlockBytes);
  if (c.meta->size() < kThinBlockBytes) return Status::Corruption(lv + ": metadata LV too small");
  VS_RETURN_IF_ERROR(c.meta->Read(0, block));
  auto sbr = DecodeThinSuperblock(block);
  if (!sbr.ok()) {
    if (sbr.status().IsNotFound()) {
      return Status::NotSupported(lv + ": its pool's metadata was never formatted (no kernel " +
                                  "has activated the pool); not activated");
    }
    return refuse(sbr.status());
  }
  const ThinSuperblock& sb = *sbr;
  auto bad = [&](const std::string& why) {
    return Status::Corruption(lv + ": thin pool " + why + "; not activated");
  };
  if (sb.flags & 1) return bad("metadata is marked needs_check (run thin_check)");
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
  ThinBtreeReader tree(c.meta, sb.metadata_nr_blocks);
  auto details = tree.Lookup(sb.device_details_root, c.device_id, kThinDeviceDetailsBytes);
  if (!details.ok()) return refuse(details.status());
  auto root = tree.Lookup(sb.data_mapping_root, c.device_id, 8);
  if (!root.ok()) return refuse(root.status());
  if (!*details || !*root) {
    return bad("has no thin device " + std::to_string(c.device_id) + " (the LV's device_id)");
  }
  bdev::Geometry g;
  g.size_bytes = c.size;
  g.logical_block_size = 512;
  g.physical_block_size = static_cast<uint32_t>(std::min<uint64_t>(block_bytes, 4096));
  g.optimal_io_size = static_cast<uint32_t>(std::min<uint64_t>(block_bytes, 1 << 30));
  g.read_only = true;
  g.caps.allocation_query = true;
  auto dev = std::make_shared<ThinDevice>(std::move(c), g);
  dev->sb_ = sb;
  dev->block_bytes_ = block_bytes;
  bool first = true;
  uint64_t prev = 0;
  Status walked = tree.Walk(
      DecodeLE64((*root)->data()), 8, [&](uint64_t vblock, std::span<const uint8_t> v) -> Status {
        if (!first && vblock <= prev) {
          return Status::Corruption("mapping keys out of order");
        }
        first = false;
        prev = vblock;
        const uint64_t data = DecodeLE64(v.data()) >> kThinTimeBits;
        if (data >= sb.data_sm.nr_blocks) {
          return Status::Corruption("virtual block " + std::to_string(vblock) +
                                    " maps to data block " + std::to_string(data) +
                                    ", outside the pool");
        }
        dev->mapping_.emplace_hint(dev->mapping_.end(), vblock, data);
        return Status::Ok();
      });
  if (!walked.ok()) return refuse(walked);
  return dev;
}

Status ThinDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  while (!buf.empty()) {
    const uint64_t vblock = offset / block_bytes_;
    const uint64_t in = offset % block_bytes_;
    const size_t piece = static_cast<size_t>(std::min<uint64_t>(buf.size(), block_bytes_ - in));
    auto out = buf.first(piece);
    auto it = mapping_.find(vblock);
    if (it == mapping_.end()) {
      std::memset(out.data(), 0, piece);
    } else {
      VS_RETURN_IF_ERROR(config_.data->Read(it->second * block_bytes_ + in, out));
    }
    offset += piece;
    buf = buf.subspan(piece);
  }
  return Status::Ok();
}

Status ThinDevice::NotWritable() const {
  return Status::ReadOnly(name() + ": thin LVs are served read-only");
}

Status ThinDevice::DoWrite(uint64_t, std::span<const uint8_t>, bdev::WriteOptions) {
  return NotWritable();
}
Status ThinDevice::DoFlush() { return Status::Ok(); }
Status ThinDevice::DoDiscard(uint64_t, uint64_t) { return NotWritable(); }
Status ThinDevice::DoWriteZeroes(uint64_t, uint64_t, bdev::ZeroOptions) { return NotWritable(); }

Result<std::vector<bdev::AllocationExtent>> ThinDevice::DoQueryAllocation(uint64_t offset,
                                                                          uint64_t length) {
  std::vector<bdev::AllocationExtent> out;
  const uint64_t end = offset + length;
  auto add = [&](uint64_t from, uint64_t to, bool allocated) {
    if (to <= from) return;
    if (!out.empty() && out.back().allocated == allocated &&
        out.back().offset + out.back().length == from) {
      out.back().length += to - from;
    } else {
      out.push_back({from, to - from, allocated});
    }
  };
  // Only the mapped blocks in range are visited: a huge, mostly empty LV costs its mappings.
  uint64_t at = offset;
  for (auto it = mapping_.lower_bound(offset / block_bytes_);
       it != mapping_.end() && it->first * block_bytes_ < end; ++it) {
    const uint64_t from = std::max(offset, it->first * block_bytes_);
    const uint64_t to = std::min(end, (it->first + 1) * block_bytes_);
    add(at, from, false);
    add(from, to, true);
    at = to;
  }
  add(at, end, false);
  return out;
}

}  // namespace volstack::lvm

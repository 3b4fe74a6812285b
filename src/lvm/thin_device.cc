#include "lvm/thin_device.h"

#include <algorithm>

namespace volstack::lvm {

Result<std::shared_ptr<ThinDevice>> ThinDevice::Open(Config c) {
  ThinPool::Config pc;
  pc.name = c.name + "'s pool";
  pc.meta = c.meta;
  pc.data = c.data;
  pc.chunk_sectors = c.chunk_sectors;
  pc.transaction_id = c.transaction_id;
  auto pool = ThinPool::Open(std::move(pc));
  if (!pool.ok()) return pool.status().WithContext("LV " + c.name + ": not activated");
  return Open(*pool, c.device_id, c.name, c.size, c.read_only);
}

Result<std::shared_ptr<ThinDevice>> ThinDevice::Open(std::shared_ptr<ThinPool> pool, uint64_t id,
                                                     const std::string& name, uint64_t size,
                                                     bool read_only) {
  if (!pool->HasDevice(id)) {
    return Status::Corruption("LV " + name + ": its thin pool has no thin device " +
                              std::to_string(id) + " (the LV's device_id); not activated");
  }
  const uint64_t block_bytes = pool->block_bytes();
  bdev::Geometry g;
  g.size_bytes = size;
  g.logical_block_size = 512;
  g.physical_block_size = static_cast<uint32_t>(std::min<uint64_t>(block_bytes, 4096));
  g.optimal_io_size = static_cast<uint32_t>(std::min<uint64_t>(block_bytes, 1 << 30));
  g.read_only = read_only || !pool->writable();
  g.caps.allocation_query = true;
  g.caps.discard = true;
  g.caps.write_zeroes = true;
  return std::make_shared<ThinDevice>(std::move(pool), id, name, g);
}

Status ThinDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  return pool_->Read(id_, offset, buf);
}

Status ThinDevice::DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) {
  VS_RETURN_IF_ERROR(pool_->Write(id_, offset, buf));
  return opts.fua ? pool_->Flush() : Status::Ok();
}

Status ThinDevice::DoFlush() { return pool_->Flush(); }

Status ThinDevice::DoDiscard(uint64_t offset, uint64_t length) {
  return pool_->Unmap(id_, offset, length);
}

Status ThinDevice::DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) {
  const uint64_t bb = pool_->block_bytes();
  // Whole blocks are unmapped when allowed (they read as zeroes); the rest written as zeroes.
  uint64_t head_end = offset + length, tail_start = offset + length;
  if (opts.may_unmap) {
    const uint64_t first = (offset + bb - 1) / bb * bb;
    const uint64_t last = (offset + length) / bb * bb;
    if (first < last) {
      VS_RETURN_IF_ERROR(pool_->Unmap(id_, first, last - first));
      head_end = first;
      tail_start = last;
    }
  }
  std::vector<uint8_t> zero(std::min<uint64_t>(length, 1 << 20), 0);
  auto zeroes = [&](uint64_t from, uint64_t to) -> Status {
    for (uint64_t at = from; at < to;) {
      const uint64_t n = std::min<uint64_t>(zero.size(), to - at);
      VS_RETURN_IF_ERROR(pool_->Write(id_, at, std::span(zero).first(n)));
      at += n;
    }
    return Status::Ok();
  };
  VS_RETURN_IF_ERROR(zeroes(offset, head_end));
  if (tail_start != head_end) VS_RETURN_IF_ERROR(zeroes(tail_start, offset + length));
  return opts.fua ? pool_->Flush() : Status::Ok();
}

Result<std::vector<bdev::AllocationExtent>> ThinDevice::DoQueryAllocation(uint64_t offset,
                                                                          uint64_t length) {
  const uint64_t block_bytes = pool_->block_bytes();
  const auto mapping = pool_->Mapping(id_);
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
  for (auto it = mapping.lower_bound(offset / block_bytes);
       it != mapping.end() && it->first * block_bytes < end; ++it) {
    const uint64_t from = std::max(offset, it->first * block_bytes);
    const uint64_t to = std::min(end, (it->first + 1) * block_bytes);
    add(at, from, false);
    add(from, to, true);
    at = to;
  }
  add(at, end, false);
  return out;
}

}  // namespace volstack::lvm

#include "bdev/memory_device.h"

#include <algorithm>
#include <cstring>

namespace volstack::bdev {

std::shared_ptr<MemoryDevice> MemoryDevice::Create(uint64_t size, uint32_t logical_block_size,
                                                   uint32_t physical_block_size, std::string name) {
  Geometry g;
  g.size_bytes = size;
  g.logical_block_size = logical_block_size;
  g.physical_block_size = std::max(physical_block_size, logical_block_size);
  g.caps.discard = true;
  g.caps.write_zeroes = true;
  g.caps.allocation_query = true;
  return std::make_shared<MemoryDevice>(std::move(name), g);
}

MemoryDevice::MemoryDevice(std::string name, const Geometry& geometry)
    : BlockDevice(std::move(name), geometry) {}

uint64_t MemoryDevice::allocated_bytes() const {
  std::lock_guard lock(mu_);
  return chunks_.size() * uint64_t{kChunkSize};
}

std::shared_ptr<MemoryDevice> MemoryDevice::Clone() const {
  auto copy = std::make_shared<MemoryDevice>(name(), geometry());
  std::lock_guard lock(mu_);
  copy->chunks_ = chunks_;
  return copy;
}

Status MemoryDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  std::lock_guard lock(mu_);
  size_t done = 0;
  while (done < buf.size()) {
    const uint64_t pos = offset + done;
    const uint64_t idx = pos / kChunkSize;
    const size_t in = pos % kChunkSize;
    const size_t n = std::min<size_t>(buf.size() - done, kChunkSize - in);
    auto it = chunks_.find(idx);
    if (it == chunks_.end()) {
      std::memset(buf.data() + done, 0, n);
    } else {
      std::memcpy(buf.data() + done, it->second.data() + in, n);
    }
    done += n;
  }
  return Status::Ok();
}

Status MemoryDevice::DoWrite(uint64_t offset, std::span<const uint8_t> buf, WriteOptions) {
  std::lock_guard lock(mu_);
  size_t done = 0;
  while (done < buf.size()) {
    const uint64_t pos = offset + done;
    const uint64_t idx = pos / kChunkSize;
    const size_t in = pos % kChunkSize;
    const size_t n = std::min<size_t>(buf.size() - done, kChunkSize - in);
    auto& chunk = chunks_[idx];
    if (chunk.empty()) chunk.assign(kChunkSize, 0);
    std::memcpy(chunk.data() + in, buf.data() + done, n);
    done += n;
  }
  return Status::Ok();
}

void MemoryDevice::ZeroRangeLocked(uint64_t offset, uint64_t length) {
  const uint64_t end = offset + length;
  uint64_t pos = offset;
  while (pos < end) {
    const uint64_t idx = pos / kChunkSize;
    const size_t in = pos % kChunkSize;
    const size_t n = std::min<uint64_t>(end - pos, kChunkSize - in);
    auto it = chunks_.find(idx);
    if (it != chunks_.end()) {
      if (n == kChunkSize) {
        chunks_.erase(it);
      } else {
        std::memset(it->second.data() + in, 0, n);
      }
    }
    pos += n;
  }
}

Status MemoryDevice::DoDiscard(uint64_t offset, uint64_t length) {
  std::lock_guard lock(mu_);
  ZeroRangeLocked(offset, length);
  return Status::Ok();
}

Status MemoryDevice::DoWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions) {
  std::lock_guard lock(mu_);
  ZeroRangeLocked(offset, length);
  return Status::Ok();
}

Result<std::vector<AllocationExtent>> MemoryDevice::DoQueryAllocation(uint64_t offset,
                                                                      uint64_t length) {
  std::lock_guard lock(mu_);
  std::vector<AllocationExtent> out;
  const uint64_t end = offset + length;
  for (auto it = chunks_.lower_bound(offset / kChunkSize);
       it != chunks_.end() && it->first * kChunkSize < end; ++it) {
    const uint64_t s = std::max(offset, it->first * kChunkSize);
    const uint64_t t = std::min(end, (it->first + 1) * kChunkSize);
    out.push_back({s, t - s, true});
  }
  // The base fills gaps as data; report them as holes explicitly.
  std::vector<AllocationExtent> full;
  uint64_t pos = offset;
  for (const auto& e : out) {
    if (e.offset > pos) full.push_back({pos, e.offset - pos, false});
    full.push_back(e);
    pos = e.offset + e.length;
  }
  if (pos < end) full.push_back({pos, end - pos, false});
  return full;
}

}  // namespace volstack::bdev

#include "bdev/slice_device.h"

#include <string>

namespace volstack::bdev {

Result<std::shared_ptr<SliceDevice>> SliceDevice::Create(BlockDevicePtr below,
                                                         const SliceOptions& options) {
  if (below == nullptr) return Status::InvalidArgument("slice: no device below");
  const Geometry bg = below->geometry();
  const uint64_t lbs = bg.logical_block_size;
  const std::string where = below->name() + ": slice at " + std::to_string(options.offset);
  if (options.offset % lbs != 0 || options.size % lbs != 0) {
    return Status::InvalidArgument(where + " size " + std::to_string(options.size) +
                                   " is not aligned to the logical block size " +
                                   std::to_string(lbs));
  }
  if (options.offset > bg.size_bytes) {
    return Status::NoSpace(where + " starts beyond the end (" + std::to_string(bg.size_bytes) +
                           " bytes)");
  }
  const uint64_t size = options.size == 0 ? bg.size_bytes - options.offset : options.size;
  if (size > bg.size_bytes - options.offset) {
    return Status::NoSpace(where + " size " + std::to_string(size) + " reaches beyond the end (" +
                           std::to_string(bg.size_bytes) + " bytes)");
  }
  if (size == 0) return Status::InvalidArgument(where + ": the slice would be empty");

  Geometry g = bg;
  g.size_bytes = size;
  g.read_only = bg.read_only || options.read_only;
  // Keep physical blocks honest: a window starting mid-physical-block has smaller ones.
  if (options.offset != 0) {
    const uint64_t align = options.offset & (~options.offset + 1);  // lowest set bit
    if (align < g.physical_block_size) g.physical_block_size = static_cast<uint32_t>(align);
    if (g.optimal_io_size != 0 && options.offset % g.optimal_io_size != 0) g.optimal_io_size = 0;
  }
  std::string name = options.name;
  if (name.empty()) {
    name = below->name() + "[" + std::to_string(options.offset) + "+" + std::to_string(size) + "]";
  }
  return std::make_shared<SliceDevice>(std::move(below), options.offset, std::move(name), g);
}

SliceDevice::SliceDevice(BlockDevicePtr below, uint64_t offset, std::string name,
                         const Geometry& geometry)
    : BlockDevice(std::move(name), geometry), below_(std::move(below)), offset_(offset) {}

Status SliceDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  return below_->Read(offset_ + offset, buf);
}

Status SliceDevice::DoWrite(uint64_t offset, std::span<const uint8_t> buf, WriteOptions opts) {
  return below_->Write(offset_ + offset, buf, opts);
}

Status SliceDevice::DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                             WriteOptions opts) {
  return below_->WriteV(offset_ + offset, pieces, opts);
}

Status SliceDevice::DoFlush() { return below_->Flush(); }

void SliceDevice::DoStartWriteback(uint64_t offset, uint64_t length) {
  below_->StartWriteback(offset_ + offset, length);
}

Status SliceDevice::DoDiscard(uint64_t offset, uint64_t length) {
  return below_->Discard(offset_ + offset, length);
}

Status SliceDevice::DoWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts) {
  return below_->WriteZeroes(offset_ + offset, length, opts);
}

Result<std::vector<AllocationExtent>> SliceDevice::DoQueryAllocation(uint64_t offset,
                                                                     uint64_t length) {
  VS_ASSIGN_OR_RETURN(auto extents, below_->QueryAllocation(offset_ + offset, length));
  for (auto& e : extents) e.offset -= offset_;
  return extents;
}

}  // namespace volstack::bdev

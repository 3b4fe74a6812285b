#include "export/byte_range_io.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace volstack::exportfs {

namespace {
uint64_t RoundDown(uint64_t v, uint64_t a) { return v - v % a; }
uint64_t RoundUp(uint64_t v, uint64_t a) { return RoundDown(v + a - 1, a); }
}  // namespace

ByteRangeIo::ByteRangeIo(bdev::BlockDevicePtr device)
    : device_(std::move(device)), lbs_(device_->logical_block_size()) {}

Result<size_t> ByteRangeIo::Read(uint64_t offset, std::span<uint8_t> buf) {
  const uint64_t size = device_->size();
  if (offset >= size || buf.empty()) return size_t{0};
  const uint64_t length = std::min<uint64_t>(buf.size(), size - offset);
  if (Aligned(offset, length)) {
    VS_RETURN_IF_ERROR(device_->Read(offset, buf.first(length)));
    return static_cast<size_t>(length);
  }
  const uint64_t start = RoundDown(offset, lbs_);
  const uint64_t end = std::min(RoundUp(offset + length, lbs_), size);
  std::vector<uint8_t> bounce(end - start);
  VS_RETURN_IF_ERROR(device_->Read(start, bounce));
  std::memcpy(buf.data(), bounce.data() + (offset - start), length);
  return static_cast<size_t>(length);
}

Status ByteRangeIo::CheckWritable(const char* op, uint64_t offset, uint64_t length) const {
  if (device_->read_only()) {
    return Status::ReadOnly(device_->name() + ": " + op + " on a read-only device");
  }
  const uint64_t size = device_->size();
  if (offset > size || length > size - offset) {
    return Status::NoSpace(device_->name() + ": " + op + " at " + std::to_string(offset) +
                           " length " + std::to_string(length) + " is beyond the end (" +
                           std::to_string(size) + " bytes)");
  }
  return Status::Ok();
}

Status ByteRangeIo::Write(uint64_t offset, std::span<const uint8_t> buf, bool fua) {
  VS_RETURN_IF_ERROR(CheckWritable("write", offset, buf.size()));
  if (Aligned(offset, buf.size())) {
    std::shared_lock lock(rmw_mu_);
    return device_->Write(offset, buf, bdev::WriteOptions{.fua = fua});
  }
  // Read-modify-write of the enclosing aligned range, in one device write.
  const uint64_t start = RoundDown(offset, lbs_);
  const uint64_t end = RoundUp(offset + buf.size(), lbs_);
  std::vector<uint8_t> block(end - start);
  std::unique_lock lock(rmw_mu_);
  if (offset != start) {
    VS_RETURN_IF_ERROR(device_->Read(start, std::span(block).first(lbs_)));
  }
  if ((offset + buf.size()) % lbs_ != 0 && (end - start > lbs_ || offset == start)) {
    VS_RETURN_IF_ERROR(device_->Read(end - lbs_, std::span(block).last(lbs_)));
  }
  std::memcpy(block.data() + (offset - start), buf.data(), buf.size());
  return device_->Write(start, block, bdev::WriteOptions{.fua = fua});
}

Status ByteRangeIo::PatchBlock(uint64_t offset, uint64_t length, const uint8_t* data) {
  const uint64_t start = RoundDown(offset, lbs_);
  std::vector<uint8_t> block(lbs_);
  VS_RETURN_IF_ERROR(device_->Read(start, block));
  if (data != nullptr) {
    std::memcpy(block.data() + (offset - start), data, length);
  } else {
    std::memset(block.data() + (offset - start), 0, length);
  }
  return device_->Write(start, block);
}

Status ByteRangeIo::WriteZeroes(uint64_t offset, uint64_t length, bool may_unmap, bool fua) {
  VS_RETURN_IF_ERROR(CheckWritable("write-zeroes", offset, length));
  const bdev::ZeroOptions opts{.may_unmap = may_unmap, .fua = fua};
  if (Aligned(offset, length)) {
    std::shared_lock lock(rmw_mu_);
    return device_->WriteZeroes(offset, length, opts);
  }
  std::unique_lock lock(rmw_mu_);
  const uint64_t end = offset + length;
  const uint64_t mid_start = RoundUp(offset, lbs_);
  const uint64_t mid_end = RoundDown(end, lbs_);
  if (mid_start > mid_end) {  // inside one block
    VS_RETURN_IF_ERROR(PatchBlock(offset, length, nullptr));
    return fua ? device_->Flush() : Status::Ok();
  }
  if (offset < mid_start) VS_RETURN_IF_ERROR(PatchBlock(offset, mid_start - offset, nullptr));
  if (mid_end < end) VS_RETURN_IF_ERROR(PatchBlock(mid_end, end - mid_end, nullptr));
  if (mid_start < mid_end) {
    VS_RETURN_IF_ERROR(device_->WriteZeroes(mid_start, mid_end - mid_start, opts));
  } else if (fua) {
    VS_RETURN_IF_ERROR(device_->Flush());
  }
  return Status::Ok();
}

Status ByteRangeIo::Discard(uint64_t offset, uint64_t length) {
  VS_RETURN_IF_ERROR(CheckWritable("discard", offset, length));
  if (!device_->geometry().caps.discard) return Status::Ok();
  const uint64_t start = RoundUp(offset, lbs_);
  const uint64_t end = RoundDown(offset + length, lbs_);
  if (end <= start) return Status::Ok();
  std::shared_lock lock(rmw_mu_);
  return device_->Discard(start, end - start);
}

}  // namespace volstack::exportfs

#include "bdev/pattern_device.h"

#include <algorithm>
#include <cstring>

#include "util/check.h"
#include "util/coding.h"

namespace volstack::bdev {

std::shared_ptr<PatternDevice> PatternDevice::Create(const PatternOptions& options) {
  Geometry g;
  g.size_bytes = options.size;
  g.logical_block_size = options.logical_block_size;
  g.physical_block_size = std::max(options.physical_block_size, options.logical_block_size);
  g.read_only = !options.writable;
  g.caps.discard = options.writable;
  g.caps.write_zeroes = options.writable;
  VS_CHECK_OP(options.size % options.logical_block_size, ==, 0u);
  return std::make_shared<PatternDevice>(options.name, g);
}

PatternDevice::PatternDevice(std::string name, const Geometry& geometry)
    : BlockDevice(std::move(name), geometry) {}

void PatternDevice::FillPattern(uint64_t offset, std::span<uint8_t> buf) {
  size_t done = 0;
  while (done < buf.size()) {
    const uint64_t pos = offset + done;
    const uint64_t word = pos & ~uint64_t{7};
    uint8_t bytes[8];
    EncodeBE64(bytes, word);
    const size_t in = pos - word;
    const size_t n = std::min<size_t>(8 - in, buf.size() - done);
    std::memcpy(buf.data() + done, bytes + in, n);
    done += n;
  }
}

std::optional<uint64_t> PatternDevice::CheckPattern(uint64_t offset, std::span<const uint8_t> buf) {
  std::vector<uint8_t> expect(std::min<size_t>(buf.size(), 1 << 16));
  for (size_t done = 0; done < buf.size(); done += expect.size()) {
    const size_t n = std::min(expect.size(), buf.size() - done);
    FillPattern(offset + done, std::span<uint8_t>(expect.data(), n));
    if (std::memcmp(expect.data(), buf.data() + done, n) != 0) {
      for (size_t i = 0; i < n; i++) {
        if (expect[i] != buf[done + i]) return done + i;
      }
    }
  }
  return std::nullopt;
}

size_t PatternDevice::overlay_blocks() const {
  std::lock_guard lock(mu_);
  return overlay_.size();
}

Status PatternDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  FillPattern(offset, buf);
  std::lock_guard lock(mu_);
  if (overlay_.empty()) return Status::Ok();
  const uint64_t lbs = logical_block_size();
  const uint64_t end = offset + buf.size();
  for (auto it = overlay_.lower_bound(offset / lbs); it != overlay_.end() && it->first * lbs < end;
       ++it) {
    std::memcpy(buf.data() + (it->first * lbs - offset), it->second.data(), lbs);
  }
  return Status::Ok();
}

Status PatternDevice::DoWrite(uint64_t offset, std::span<const uint8_t> buf, WriteOptions) {
  const uint64_t lbs = logical_block_size();
  std::lock_guard lock(mu_);
  for (uint64_t done = 0; done < buf.size(); done += lbs) {
    overlay_[(offset + done) / lbs].assign(buf.data() + done, buf.data() + done + lbs);
  }
  return Status::Ok();
}

void PatternDevice::ZeroLocked(uint64_t offset, uint64_t length) {
  const uint64_t lbs = logical_block_size();
  for (uint64_t done = 0; done < length; done += lbs) {
    overlay_[(offset + done) / lbs].assign(lbs, 0);
  }
}

Status PatternDevice::DoDiscard(uint64_t offset, uint64_t length) {
  std::lock_guard lock(mu_);
  ZeroLocked(offset, length);
  return Status::Ok();
}

Status PatternDevice::DoWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions) {
  std::lock_guard lock(mu_);
  ZeroLocked(offset, length);
  return Status::Ok();
}

}  // namespace volstack::bdev

#include "bdev/block_device.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "util/check.h"

namespace volstack::bdev {

namespace {
// The hot path of every request: one mask test and two compares, inlined into Read/Write;
// building the error message is left to CheckRange, out of line.
inline bool Valid(uint64_t lbs, uint64_t dev_size, uint64_t offset, uint64_t length) {
  return ((offset | length) & (lbs - 1)) == 0 && offset <= dev_size && length <= dev_size - offset;
}

// The zero buffer used to emulate WriteZeroes: large enough to amortise calls, small enough
// to share.
constexpr size_t kZeroChunk = 1 << 20;
const std::vector<uint8_t>& ZeroChunk() {
  static const std::vector<uint8_t> zeroes(kZeroChunk, 0);
  return zeroes;
}
}  // namespace

BlockDevice::BlockDevice(std::string name, const Geometry& geometry)
    : name_(std::move(name)), geometry_(geometry), size_(geometry.size_bytes) {
  VS_CHECK(geometry.logical_block_size >= 512);
  VS_CHECK((geometry.logical_block_size & (geometry.logical_block_size - 1)) == 0);
  VS_CHECK_OP(geometry.physical_block_size, >=, geometry.logical_block_size);
}

Geometry BlockDevice::geometry() const {
  Geometry g = geometry_;
  g.size_bytes = size();
  return g;
}

Status BlockDevice::CheckRange(const char* op, uint64_t offset, uint64_t length) const {
  const uint64_t lbs = geometry_.logical_block_size;
  if (offset % lbs != 0 || length % lbs != 0) {
    return Status::InvalidArgument(
        name_ + ": " + op + " at " + std::to_string(offset) + " length " + std::to_string(length) +
        " is not aligned to the logical block size " + std::to_string(lbs));
  }
  const uint64_t dev_size = size();
  if (offset > dev_size || length > dev_size - offset) {
    return Status::NoSpace(name_ + ": " + op + " at " + std::to_string(offset) + " length " +
                           std::to_string(length) + " is beyond the end (" +
                           std::to_string(dev_size) + " bytes)");
  }
  return Status::Ok();
}

Status BlockDevice::Read(uint64_t offset, std::span<uint8_t> buf) {
  if (!Valid(geometry_.logical_block_size, size(), offset, buf.size())) [[unlikely]] {
    return CheckRange("read", offset, buf.size());
  }
  if (buf.empty()) [[unlikely]]
    return Status::Ok();
  return DoRead(offset, buf);
}

Status BlockDevice::Write(uint64_t offset, std::span<const uint8_t> buf, WriteOptions opts) {
  if (geometry_.read_only) [[unlikely]] {
    return Status::ReadOnly(name_ + ": write to a read-only device");
  }
  if (!Valid(geometry_.logical_block_size, size(), offset, buf.size())) [[unlikely]] {
    return CheckRange("write", offset, buf.size());
  }
  if (buf.empty()) return opts.fua ? DoFlush() : Status::Ok();
  if (opts.fua && !geometry_.caps.fua) {
    VS_RETURN_IF_ERROR(DoWrite(offset, buf, WriteOptions{}));
    return DoFlush();
  }
  return DoWrite(offset, buf, opts);
}

Status BlockDevice::WriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                           WriteOptions opts) {
  if (geometry_.read_only) [[unlikely]] {
    return Status::ReadOnly(name_ + ": write to a read-only device");
  }
  uint64_t total = 0;
  for (const auto& p : pieces) {
    if (p.size() > UINT64_MAX - total) [[unlikely]] {
      return Status::NoSpace(name_ + ": vectored write at " + std::to_string(offset) +
                             " is longer than 2^64 bytes");
    }
    total += p.size();
  }
  if (!Valid(geometry_.logical_block_size, size(), offset, total)) [[unlikely]] {
    return CheckRange("write", offset, total);
  }
  if (total == 0) return opts.fua ? DoFlush() : Status::Ok();
  if (opts.fua && !geometry_.caps.fua) {
    VS_RETURN_IF_ERROR(DoWriteV(offset, pieces, WriteOptions{}));
    return DoFlush();
  }
  return DoWriteV(offset, pieces, opts);
}

Status BlockDevice::Flush() { return DoFlush(); }

void BlockDevice::StartWriteback(uint64_t offset, uint64_t length) {
  const uint64_t end = size();
  if (offset >= end || length == 0) return;
  DoStartWriteback(offset, std::min(length, end - offset));
}

void BlockDevice::DoStartWriteback(uint64_t, uint64_t) {}

Status BlockDevice::Discard(uint64_t offset, uint64_t length) {
  if (geometry_.read_only) return Status::ReadOnly(name_ + ": discard on a read-only device");
  if (!geometry_.caps.discard) return Status::NotSupported(name_ + ": discard");
  VS_RETURN_IF_ERROR(CheckRange("discard", offset, length));
  if (length == 0) return Status::Ok();
  return DoDiscard(offset, length);
}

Status BlockDevice::WriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts) {
  if (geometry_.read_only) {
    return Status::ReadOnly(name_ + ": write-zeroes on a read-only device");
  }
  VS_RETURN_IF_ERROR(CheckRange("write-zeroes", offset, length));
  if (length == 0) return opts.fua ? DoFlush() : Status::Ok();
  if (!geometry_.caps.write_zeroes) return EmulateWriteZeroes(offset, length, opts);
  if (opts.fua && !geometry_.caps.fua) {
    VS_RETURN_IF_ERROR(DoWriteZeroes(offset, length, ZeroOptions{opts.may_unmap, false}));
    return DoFlush();
  }
  return DoWriteZeroes(offset, length, opts);
}

Status BlockDevice::EmulateWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts) {
  const auto& zeroes = ZeroChunk();
  while (length > 0) {
    const uint64_t n = std::min<uint64_t>(length, zeroes.size());
    VS_RETURN_IF_ERROR(DoWrite(offset, std::span<const uint8_t>(zeroes.data(), n), {}));
    offset += n;
    length -= n;
  }
  return opts.fua ? DoFlush() : Status::Ok();
}

Result<std::vector<AllocationExtent>> BlockDevice::QueryAllocation(uint64_t offset,
                                                                   uint64_t length) {
  VS_RETURN_IF_ERROR(CheckRange("allocation query", offset, length));
  std::vector<AllocationExtent> merged;
  if (length == 0) return merged;
  if (!geometry_.caps.allocation_query) {
    merged.push_back({offset, length, true});
    return merged;
  }
  VS_ASSIGN_OR_RETURN(auto raw, DoQueryAllocation(offset, length));
  // The walk below needs runs in order; a device may return them in any.
  std::sort(raw.begin(), raw.end(), [](const AllocationExtent& a, const AllocationExtent& b) {
    return a.offset < b.offset;
  });
  // Clip to the request, fill gaps as data (never claim a hole we were not told of), merge.
  uint64_t pos = offset;
  const uint64_t end = offset + length;
  auto append = [&merged](uint64_t off, uint64_t len, bool allocated) {
    if (len == 0) return;
    if (!merged.empty() && merged.back().allocated == allocated &&
        merged.back().offset + merged.back().length == off) {
      merged.back().length += len;
    } else {
      merged.push_back({off, len, allocated});
    }
  };
  for (const auto& e : raw) {
    uint64_t s = std::max(e.offset, pos);
    uint64_t t = std::min(e.offset + e.length, end);
    if (t <= s) continue;
    append(pos, s - pos, true);
    append(s, t - s, e.allocated);
    pos = t;
  }
  append(pos, end - pos, true);
  return merged;
}

Status BlockDevice::DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                             WriteOptions opts) {
  // Whole blocks go straight from their piece; a block that straddles pieces is gathered
  // into `partial` first. Every DoWrite below is block-aligned, in order.
  if (pieces.size() == 1) return DoWrite(offset, pieces[0], opts);
  // Several writes with FUA: write them all, then one flush makes them durable together.
  const WriteOptions each{};
  const size_t lbs = geometry_.logical_block_size;
  std::vector<uint8_t> partial;
  size_t have = 0;  // bytes gathered in `partial`
  for (auto piece : pieces) {
    if (have > 0) {
      const size_t n = std::min(piece.size(), lbs - have);
      if (n > 0) std::memcpy(partial.data() + have, piece.data(), n);
      have += n;
      piece = piece.subspan(n);
      if (have < lbs) continue;
      VS_RETURN_IF_ERROR(DoWrite(offset, partial, each));
      offset += lbs;
      have = 0;
    }
    const size_t whole = piece.size() / lbs * lbs;
    if (whole > 0) {
      VS_RETURN_IF_ERROR(DoWrite(offset, piece.first(whole), each));
      offset += whole;
    }
    if (whole < piece.size()) {
      partial.resize(lbs);
      have = piece.size() - whole;
      std::memcpy(partial.data(), piece.data() + whole, have);
    }
  }
  VS_CHECK_OP(have, ==, 0u);  // the total is a multiple of the block size
  return opts.fua ? DoFlush() : Status::Ok();
}

Status BlockDevice::DoDiscard(uint64_t, uint64_t) {
  return Status::NotSupported(name_ + ": discard");
}

Status BlockDevice::DoWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts) {
  return EmulateWriteZeroes(offset, length, opts);
}

Result<std::vector<AllocationExtent>> BlockDevice::DoQueryAllocation(uint64_t offset,
                                                                     uint64_t length) {
  return std::vector<AllocationExtent>{{offset, length, true}};
}

}  // namespace volstack::bdev

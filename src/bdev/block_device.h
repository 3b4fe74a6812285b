// BlockDevice: the one contract every volstack layer implements and consumes.
//
// Theory. A block device is an array of `size` bytes addressed in units of its logical block
// size. Layers stack by ownership: a pool volume, an LV, a slice or an export each hold a
// shared_ptr to the device(s) below and add only their own mapping; nothing knows what sits
// above it. Data moves by plain calls on the device below, never through a copy a layer
// does not need.
//
// Checking happens once, at the boundary: the public methods are non-virtual; they check
// range, alignment, read-only and capability, then call the protected Do* hooks. So a Do*
// implementation may assume: offset and length are multiples of the logical block size,
// offset + length <= size, length > 0 (a zero-length request succeeds without reaching it),
// and the device is writable for mutating calls.
//
// Errors: misaligned -> EINVAL; beyond the end -> ENOSPC (as a kernel block device answers a
// write past its end) ; a mutation on a read-only device -> EROFS; an operation the device
// does not support -> EOPNOTSUPP. A device that cannot prove data correct returns EIO, never
// wrong bytes.
//
// Durability: when Flush() returns OK, every write that completed before Flush() was called
// survives a crash. A write with `fua` is durable when it returns. Nothing else is promised.
// Devices without native FUA get it emulated here as write + flush.
//
// Threads: every method may be called from many threads at once. Writes to overlapping
// ranges that run concurrently land in an unspecified order, as on real hardware.
//
// Vectored writes: WriteV(offset, pieces) writes the concatenation of `pieces` as one
// request, with exactly the checks, semantics and failure outcome of Write() of those bytes
// gathered into one buffer, but without the caller making that copy (the pool's commit
// writes runs of adjacent dirty blocks from their own buffers this way). Only the total
// length is checked for alignment; pieces may have any length, empty ones included, and
// must not change while the call runs. DoWriteV's default writes the pieces in order
// through DoWrite (whole blocks straight from the pieces, a block that straddles pieces
// through a one-block bounce buffer), so it is correct for every device that implements
// DoWrite; a device overrides it only to go faster (FileDevice: pwritev) or to keep it one
// request (ForwardingDevice forwards it, so observers and FaultDevice see one write).
//
// Write-back hints: StartWriteback(offset, length) tells the device that a Flush() is coming
// for what earlier writes left in [offset, offset + length), so it may start moving those
// bytes to stable storage now, without waiting (a file: sync_file_range WRITE; the pool's
// commit hints each large run it writes, so the disk works while the commit writes the
// rest). It promises nothing: durability still comes only from Flush() or FUA. Ranges are
// clipped to the device; the default does nothing, so a remapper that does not pass it on
// is merely slower.
//
// Layers: an observer (trace, stats) derives from ForwardingDevice; a remapper (slice, LV,
// pool volume) derives from BlockDevice and implements every pure Do* hook, so an operation
// added here later cannot slip through it unshifted (DoWriteV needs no override: its default
// goes through the remapper's DoWrite). Devices in this directory: file, memory,
// slice, forwarding, trace, pattern and fault (crash testing); every one passes the typed
// conformance suite in block_device_conformance.h, which other layers reuse. See
// docs/blockdev.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "util/result.h"
#include "util/status.h"

namespace volstack::bdev {

// What a device can do natively. Write-zeroes is always available (emulated by writing
// zeroes when not native); flush is always callable (a no-op where nothing is volatile).
struct Capabilities {
  bool fua = false;               // native force-unit-access writes
  bool discard = false;           // Discard() frees space / unmaps
  bool write_zeroes = false;      // native zeroing without data transfer
  bool allocation_query = false;  // QueryAllocation() can report holes
};

// Fixed at open except `size_bytes`, which a resize may grow (see BlockDevice::size()).
struct Geometry {
  uint64_t size_bytes = 0;
  uint32_t logical_block_size = 512;    // smallest addressable unit: 512 or 4096
  uint32_t physical_block_size = 4096;  // below this, writes are read-modify-write
  uint32_t optimal_io_size = 0;         // 0 = no preference
  bool read_only = false;
  Capabilities caps;
};

struct WriteOptions {
  bool fua = false;
};

struct ZeroOptions {
  bool may_unmap = true;  // the range may become a hole (NBD's !NO_HOLE)
  bool fua = false;
};

// One run of an allocation map: [offset, offset + length) is data or a hole. Holes read as
// zeroes. A device that cannot tell reports everything as data.
struct AllocationExtent {
  uint64_t offset = 0;
  uint64_t length = 0;
  bool allocated = true;

  bool operator==(const AllocationExtent&) const = default;
};

class BlockDevice {
 public:
  virtual ~BlockDevice() = default;
  BlockDevice(const BlockDevice&) = delete;
  BlockDevice& operator=(const BlockDevice&) = delete;

  // A short human name for messages ("file:/tmp/a", "trunk/funk").
  const std::string& name() const { return name_; }
  // Geometry with the current size.
  Geometry geometry() const;
  uint64_t size() const { return size_.load(std::memory_order_acquire); }
  uint32_t logical_block_size() const { return geometry_.logical_block_size; }
  bool read_only() const { return geometry_.read_only; }

  // Reads buf.size() bytes at `offset`. On failure buf's contents are unspecified.
  Status Read(uint64_t offset, std::span<uint8_t> buf);
  // Writes buf at `offset`. On failure the range holds old data, new data or a mix.
  Status Write(uint64_t offset, std::span<const uint8_t> buf, WriteOptions opts = {});
  // Writes the concatenation of `pieces` at `offset`: the same request as Write() of those
  // bytes in one buffer (checks on the total length; pieces of any length).
  Status WriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                WriteOptions opts = {});
  // Makes every previously completed write durable.
  Status Flush();
  // A hint that a Flush() will follow: start writing back this range's completed writes.
  // No effect on durability; never fails.
  void StartWriteback(uint64_t offset, uint64_t length);
  // Tells the device the range's contents are no longer needed; afterwards the range reads
  // as zeroes or as the old data (as with TRIM; callers needing zeroes use WriteZeroes).
  Status Discard(uint64_t offset, uint64_t length);
  // After success the range reads as zeroes.
  Status WriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts = {});
  // Returns runs covering exactly [offset, offset + length), in order, adjacent runs of the
  // same kind merged.
  Result<std::vector<AllocationExtent>> QueryAllocation(uint64_t offset, uint64_t length);

  // Checks a request against the geometry: the error Read/Write would return, or OK.
  Status CheckRange(const char* op, uint64_t offset, uint64_t length) const;

 protected:
  BlockDevice(std::string name, const Geometry& geometry);

  // For devices that can grow or shrink (a volume's volsize, an extended LV).
  void SetSize(uint64_t size_bytes) { size_.store(size_bytes, std::memory_order_release); }

  virtual Status DoRead(uint64_t offset, std::span<uint8_t> buf) = 0;
  virtual Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, WriteOptions opts) = 0;
  virtual Status DoFlush() = 0;
  // The pieces total a non-zero multiple of the logical block size, within the device;
  // single pieces may be of any length (empty too). Default: in order through DoWrite.
  virtual Status DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                          WriteOptions opts);
  // The range is clipped to the device and not empty. Default: nothing.
  virtual void DoStartWriteback(uint64_t offset, uint64_t length);
  // Called only when caps.discard.
  virtual Status DoDiscard(uint64_t offset, uint64_t length);
  // Called only when caps.write_zeroes; otherwise the base writes zero buffers.
  virtual Status DoWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts);
  // Called only when caps.allocation_query; otherwise everything is data. May return runs
  // unmerged; the base merges and clips them.
  virtual Result<std::vector<AllocationExtent>> DoQueryAllocation(uint64_t offset, uint64_t length);

 private:
  Status EmulateWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts);

  const std::string name_;
  const Geometry geometry_;
  std::atomic<uint64_t> size_;
};

using BlockDevicePtr = std::shared_ptr<BlockDevice>;

// The total length of a vectored write's pieces.
inline uint64_t TotalLength(std::span<const std::span<const uint8_t>> pieces) {
  uint64_t n = 0;
  for (const auto& p : pieces) n += p.size();
  return n;
}

}  // namespace volstack::bdev

// Runs the BlockDevice conformance suite (block_device_conformance.h) on every device in
// src/bdev: memory (512 and 4096-byte blocks), file (buffered and O_DIRECT), slice (over
// memory, at an offset that is not physical-block aligned, and over a file), fault, trace
// and a writable pattern device.
#include <stdlib.h>
#include <unistd.h>

#include "bdev/block_device_conformance.h"
#include "bdev/fault_device.h"
#include "bdev/file_device.h"
#include "bdev/memory_device.h"
#include "bdev/pattern_device.h"
#include "bdev/slice_device.h"
#include "bdev/trace_device.h"

namespace volstack::bdev {
namespace {

constexpr uint64_t kSize = 8 << 20;

BlockDevicePtr ReadOnlyMemory(uint64_t size, uint32_t lbs = 512) {
  Geometry g;
  g.size_bytes = size;
  g.logical_block_size = lbs;
  g.read_only = true;
  g.caps.discard = true;
  g.caps.write_zeroes = true;
  g.caps.allocation_query = true;
  return std::make_shared<MemoryDevice>("memory-ro", g);
}

// A FileDevice on an unlinked temporary file: the open fd keeps it alive, nothing leaks.
BlockDevicePtr TempFile(FileDeviceOptions options, bool read_only = false) {
  char path[] = "/tmp/volstack-conformance-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return nullptr;
  ::close(fd);
  auto dev = FileDevice::Create(path, kSize + (1 << 20), options);
  BlockDevicePtr out;
  if (dev.ok()) {
    out = *dev;
    if (read_only) {
      options.read_only = true;
      auto ro = FileDevice::Open(path, options);
      out = ro.ok() ? BlockDevicePtr(*ro) : nullptr;
    }
  }
  ::unlink(path);
  return out;
}

struct Memory512 {
  static BlockDevicePtr Make() { return MemoryDevice::Create(kSize, 512); }
  static BlockDevicePtr MakeReadOnly() { return ReadOnlyMemory(kSize); }
};
struct Memory4K {
  static BlockDevicePtr Make() { return MemoryDevice::Create(kSize, 4096); }
  static BlockDevicePtr MakeReadOnly() { return ReadOnlyMemory(kSize, 4096); }
};
struct BufferedFile {
  static BlockDevicePtr Make() { return TempFile({}); }
  static BlockDevicePtr MakeReadOnly() { return TempFile({}, true); }
};
struct DirectFile {
  static FileDeviceOptions Options() {
    FileDeviceOptions o;
    o.direct_io = true;
    o.logical_block_size = 4096;
    return o;
  }
  static BlockDevicePtr Make() { return TempFile(Options()); }
  static BlockDevicePtr MakeReadOnly() { return TempFile(Options(), true); }
};
struct SliceOfMemory {
  static BlockDevicePtr Slice(BlockDevicePtr below, bool read_only) {
    SliceOptions o;
    o.offset = 64 * 1024 + 3 * 512;
    o.size = kSize;
    o.read_only = read_only;
    auto s = SliceDevice::Create(std::move(below), o);
    return s.ok() ? BlockDevicePtr(*s) : nullptr;
  }
  static BlockDevicePtr Make() { return Slice(MemoryDevice::Create(kSize + (1 << 20)), false); }
  static BlockDevicePtr MakeReadOnly() {
    return Slice(MemoryDevice::Create(kSize + (1 << 20)), true);
  }
};
struct SliceOfFile {
  static BlockDevicePtr Make() {
    SliceOptions o;
    o.offset = 1 << 20;
    auto s = SliceDevice::Create(TempFile({}), o);
    return s.ok() ? BlockDevicePtr(*s) : nullptr;
  }
};
struct Fault {
  static BlockDevicePtr Make() { return FaultDevice::CreateInMemory(kSize, 512, 1); }
  static BlockDevicePtr MakeReadOnly() { return FaultDevice::Create(ReadOnlyMemory(kSize)); }
};
struct FaultOverFile {
  static BlockDevicePtr Make() { return FaultDevice::Create(TempFile({})); }
};
struct Trace {
  static BlockDevicePtr Make() { return TraceDevice::Create(MemoryDevice::Create(kSize)); }
  static BlockDevicePtr MakeReadOnly() { return TraceDevice::Create(ReadOnlyMemory(kSize)); }
};
struct WritablePattern {
  static BlockDevicePtr Make() { return PatternDevice::Create({.size = kSize, .writable = true}); }
  static BlockDevicePtr MakeReadOnly() { return PatternDevice::Create({.size = kSize}); }
};

using AllDevices = ::testing::Types<Memory512, Memory4K, BufferedFile, DirectFile, SliceOfMemory,
                                    SliceOfFile, Fault, FaultOverFile, Trace, WritablePattern>;

}  // namespace
}  // namespace volstack::bdev

INSTANTIATE_TYPED_TEST_SUITE_P(Bdev, BlockDeviceConformance, volstack::bdev::AllDevices);

#include "lvm/pvmove_copy.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>

#include "bdev/fault_device.h"
#include "bdev/file_device.h"
#include "bdev/memory_device.h"
#include "lvm/mirror_gate.h"
#include "lvm/pvmove_lock.h"

namespace volstack::lvm {
namespace {

std::vector<uint8_t> Random(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::vector<uint8_t> ReadAll(bdev::BlockDevice& d, uint64_t off, uint64_t n) {
  std::vector<uint8_t> v(n);
  EXPECT_TRUE(d.Read(off, v).ok());
  return v;
}

SegmentCopy Copy(bdev::BlockDevicePtr src, bdev::BlockDevicePtr dst, uint64_t len) {
  SegmentCopy c;
  c.src = std::move(src);
  c.src_offset = 64 << 10;
  c.dst = std::move(dst);
  c.dst_offset = 128 << 10;
  c.length = len;
  c.gate_pv = "copy-test-pv";
  c.region_bytes = 32 << 10;
  return c;
}

TEST(PvmoveCopyTest, CopiesEveryDepthAndRegionSizeExactly) {
  const uint64_t len = (1 << 20) + (12 << 10);  // not a multiple of the region
  for (int depth : {1, 2, 3}) {
    for (uint64_t region : {uint64_t{4096}, uint64_t{32} << 10, uint64_t{4} << 20}) {
      auto src = bdev::MemoryDevice::Create(2 << 20);
      auto dst = bdev::MemoryDevice::Create(2 << 20);
      const auto data = Random(len, depth * 7 + region);
      ASSERT_TRUE(src->Write(64 << 10, data).ok());
      SegmentCopy c = Copy(src, dst, len);
      c.depth = depth;
      c.region_bytes = region;
      c.flush_behind_bytes = 64 << 10;
      uint64_t reported = 0, next = 0;
      c.region_done = [&](uint64_t off, uint64_t n) {
        EXPECT_EQ(off, next);  // in order
        next = off + n;
        reported += n;
      };
      ASSERT_TRUE(CopySegment(c).ok());
      EXPECT_EQ(reported, len);
      EXPECT_EQ(ReadAll(*dst, 128 << 10, len), data) << depth << " " << region;
      EXPECT_EQ(MirrorGate::Global().held(), 0u);
    }
  }
}

TEST(PvmoveCopyTest, FileDestinationWithWriteBehind) {
  char path[] = "/tmp/volstack_copy_test_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  auto dst = bdev::FileDevice::Create(path, 8 << 20);
  ::unlink(path);
  ASSERT_TRUE(dst.ok());
  auto src = bdev::MemoryDevice::Create(8 << 20);
  const uint64_t len = 6 << 20;
  const auto data = Random(len, 3);
  ASSERT_TRUE(src->Write(64 << 10, data).ok());
  SegmentCopy c = Copy(src, *dst, len);
  c.region_bytes = 256 << 10;
  ASSERT_TRUE(CopySegment(c).ok());
  EXPECT_EQ(ReadAll(**dst, 128 << 10, len), data);
}

// A failing read or write, or a stop, ends the copy with every region released.
TEST(PvmoveCopyTest, FailuresAndStopsReleaseEveryRegion) {
  for (int which = 0; which < 3; which++) {
    auto src = bdev::FaultDevice::CreateInMemory(2 << 20, 512, 1);
    auto dst = bdev::FaultDevice::CreateInMemory(2 << 20, 512, 2);
    ASSERT_TRUE(src->Write(0, Random(2 << 20, 4)).ok());  // data: no holes to skip
    SegmentCopy c = Copy(src, dst, 1 << 20);
    int regions = 0;
    if (which == 0) src->FailOps(bdev::OpBit(bdev::OpType::kRead), 5);
    if (which == 1) dst->FailOps(bdev::OpBit(bdev::OpType::kWrite), 5);
    if (which == 2) c.stopped = [&] { return regions >= 5; };
    c.region_done = [&](uint64_t, uint64_t) { regions++; };
    Status s = CopySegment(c);
    EXPECT_EQ(s.code(), which == 2 ? ECANCELED : EIO) << which << " " << s.ToString();
    EXPECT_EQ(regions, 5) << which;
    EXPECT_EQ(MirrorGate::Global().held(), 0u) << which;
  }
}

// Writes through the gate racing a double-buffered copy are never undone by it: each write
// goes to both "legs" inside the gate (as LvDevice's mirror does), and afterwards the
// destination equals the source.
TEST(PvmoveCopyTest, RacingMirroredWritesSurvive) {
  const uint64_t len = 2 << 20;
  auto src = bdev::MemoryDevice::Create(4 << 20);
  auto dst = bdev::MemoryDevice::Create(4 << 20);
  ASSERT_TRUE(src->Write(64 << 10, Random(len, 9)).ok());
  SegmentCopy c = Copy(src, dst, len);
  c.region_bytes = 16 << 10;
  std::atomic<bool> done{false};
  std::atomic<int> writes{0};
  std::thread writer([&] {
    std::mt19937_64 rng(5);
    std::vector<uint8_t> b(4096);
    while (!done) {
      for (auto& x : b) x = static_cast<uint8_t>(rng());
      const uint64_t off = (rng() % (len / 4096)) * 4096;
      MirrorWriteGuard g(MirrorGate::Global(), c.gate_pv, c.dst_offset + off, b.size());
      ASSERT_TRUE(src->Write(c.src_offset + off, b).ok());
      ASSERT_TRUE(dst->Write(c.dst_offset + off, b).ok());
      writes++;
    }
  });
  c.between_regions = [&] {
    const int target = writes + 2;
    for (int i = 0; i < 2000 && writes < target; i++) std::this_thread::yield();
  };
  ASSERT_TRUE(CopySegment(c).ok());
  done = true;
  writer.join();
  EXPECT_GT(writes.load(), 50);
  EXPECT_EQ(ReadAll(*dst, c.dst_offset, len), ReadAll(*src, c.src_offset, len));
}

TEST(PvmoveLockTest, OneMoverPerVgAndAdoption) {
  char dir[] = "/tmp/volstack_lock_test_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  {
    auto a = MoverLock::Take(dir, "vg");
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    auto b = MoverLock::Take(dir, "vg");
    ASSERT_EQ(b.status().code(), EBUSY);
    EXPECT_NE(b.status().message().find(std::to_string(::getpid())), std::string::npos);
    EXPECT_TRUE(MoverLock::Take(dir, "other").ok());
    // A descriptor of this lock file is adopted; one of another file is not.
    const int dup = ::dup((*a)->fd());
    auto adopted = MoverLock::Adopt(dir, "vg", dup);
    EXPECT_TRUE(adopted.ok()) << adopted.status().ToString();
    const int wrong = ::dup((*a)->fd());
    EXPECT_FALSE(MoverLock::Adopt(dir, "other", wrong).ok());
    ::close(wrong);
  }
  EXPECT_TRUE(MoverLock::Take(dir, "vg").ok());  // released
  ::unlink(MoverLock::Path(dir, "vg").c_str());
  ::unlink(MoverLock::Path(dir, "other").c_str());
  ::rmdir(dir);
}

// A background mover rewrites the PID its parent wrote for it while `pvmove` may be asking
// who holds the lock: a reader must never find the file empty.
TEST(PvmoveLockTest, AReaderAlwaysFindsThePid) {
  char dir[] = "/tmp/volstack_lock_test_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  {
    auto held = MoverLock::Take(dir, "vg");
    ASSERT_TRUE(held.ok()) << held.status().ToString();
    std::atomic<bool> done{false};
    std::atomic<int> reads{0}, missing{0};
    std::thread reader([&] {
      const int fd = ::open(MoverLock::Path(dir, "vg").c_str(), O_RDONLY | O_CLOEXEC);
      while (!done) {
        char buf[32] = {};
        if (::pread(fd, buf, sizeof buf - 1, 0) <= 0 || std::atoi(buf) != ::getpid()) missing++;
        reads++;
      }
      ::close(fd);
    });
    for (int i = 0; i < 20000 || reads < 1000; i++) {
      auto adopted = MoverLock::Adopt(dir, "vg", ::dup((*held)->fd()));
      ASSERT_TRUE(adopted.ok()) << adopted.status().ToString();
      (*adopted)->KeepPidOnClose();
    }
    done = true;
    reader.join();
    EXPECT_EQ(missing.load(), 0) << "of " << reads.load() << " reads";
  }
  ::unlink(MoverLock::Path(dir, "vg").c_str());
  ::rmdir(dir);
}

}  // namespace
}  // namespace volstack::lvm

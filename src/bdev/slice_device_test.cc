#include "bdev/slice_device.h"

#include <gtest/gtest.h>

#include "bdev/fault_device.h"
#include "bdev/memory_device.h"
#include "bdev/pattern_device.h"
#include "bdev/trace_device.h"

namespace volstack::bdev {
namespace {

SliceOptions Window(uint64_t offset, uint64_t size, bool read_only = false) {
  SliceOptions o;
  o.offset = offset;
  o.size = size;
  o.read_only = read_only;
  return o;
}

TEST(SliceDeviceTest, CreateValidatesTheWindow) {
  auto mem = MemoryDevice::Create(1 << 20, 4096);
  EXPECT_EQ(SliceDevice::Create(mem, Window(512, 4096)).status().code(), EINVAL);
  EXPECT_EQ(SliceDevice::Create(mem, Window(4096, 512)).status().code(), EINVAL);
  EXPECT_EQ(SliceDevice::Create(mem, Window(2 << 20, 0)).status().code(), ENOSPC);
  EXPECT_EQ(SliceDevice::Create(mem, Window(4096, 1 << 20)).status().code(), ENOSPC);
  EXPECT_EQ(SliceDevice::Create(mem, Window(1 << 20, 0)).status().code(), EINVAL);  // empty
  EXPECT_EQ(SliceDevice::Create(nullptr, Window(0, 0)).status().code(), EINVAL);
  auto whole = SliceDevice::Create(mem, Window(0, 0));
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ((*whole)->size(), 1u << 20);
  auto tail = SliceDevice::Create(mem, Window(8192, 0));
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ((*tail)->size(), (1u << 20) - 8192);
  EXPECT_EQ((*tail)->name(), "memory[8192+1040384]");
}

TEST(SliceDeviceTest, ReadsLandAtTheOffsetBelow) {
  auto pattern = PatternDevice::Create({.size = 4 << 20});
  auto slice = SliceDevice::Create(pattern, Window(3 * 512, 1 << 20));
  ASSERT_TRUE(slice.ok());
  std::vector<uint8_t> buf(8192);
  ASSERT_TRUE((*slice)->Read(4096, buf).ok());
  EXPECT_EQ(PatternDevice::CheckPattern(3 * 512 + 4096, buf), std::nullopt);
  EXPECT_NE(PatternDevice::CheckPattern(4096, buf), std::nullopt);
}

TEST(SliceDeviceTest, EveryOperationIsShifted) {
  auto mem = MemoryDevice::Create(4 << 20, 512);
  auto trace = TraceDevice::Create(mem);
  const uint64_t off = 1 << 20;
  auto slice = SliceDevice::Create(trace, Window(off, 1 << 20));
  ASSERT_TRUE(slice.ok());
  auto& s = **slice;
  trace->StartRecording();
  std::vector<uint8_t> buf(1024, 0x5a);
  ASSERT_TRUE(s.Write(512, buf, {.fua = true}).ok());
  ASSERT_TRUE(s.Read(1024, buf).ok());
  ASSERT_TRUE(s.Discard(2048, 512).ok());
  ASSERT_TRUE(s.WriteZeroes(4096, 512).ok());
  ASSERT_TRUE(s.Flush().ok());
  auto q = s.QueryAllocation(0, 1 << 20);
  ASSERT_TRUE(q.ok());
  auto events = trace->StopRecording();
  // MemoryDevice has no native FUA: the write becomes write + flush below the trace.
  std::vector<TraceEvent> want = {{OpType::kWrite, off + 512, 1024, false, 0},
                                  {OpType::kFlush, 0, 0, false, 0},
                                  {OpType::kRead, off + 1024, 1024, false, 0},
                                  {OpType::kDiscard, off + 2048, 512, false, 0},
                                  {OpType::kWriteZeroes, off + 4096, 512, false, 0},
                                  {OpType::kFlush, 0, 0, false, 0},
                                  {OpType::kQueryAllocation, off, 1 << 20, false, 0}};
  EXPECT_EQ(events, want);
  // The allocation map comes back in the slice's own offsets.
  ASSERT_FALSE(q->empty());
  EXPECT_EQ(q->front().offset, 0u);
  EXPECT_TRUE(q->front().allocated);  // the chunk holding the write
  uint64_t total = 0;
  for (const auto& e : *q) total += e.length;
  EXPECT_EQ(total, 1u << 20);
}

TEST(SliceDeviceTest, GeometryInheritsAndStaysHonestAboutPhysicalBlocks) {
  auto mem = MemoryDevice::Create(4 << 20, 512, 4096);
  auto aligned = SliceDevice::Create(mem, Window(8192, 1 << 20));
  ASSERT_TRUE(aligned.ok());
  EXPECT_EQ((*aligned)->geometry().logical_block_size, 512u);
  EXPECT_EQ((*aligned)->geometry().physical_block_size, 4096u);
  EXPECT_TRUE((*aligned)->geometry().caps.discard);
  EXPECT_TRUE((*aligned)->geometry().caps.allocation_query);
  auto skewed = SliceDevice::Create(mem, Window(1024 + 8192, 1 << 20));
  ASSERT_TRUE(skewed.ok());
  EXPECT_EQ((*skewed)->geometry().physical_block_size, 1024u);
}

TEST(SliceDeviceTest, DesignatedInitializersCompileWarningFree) {
  auto slice = SliceDevice::Create(MemoryDevice::Create(1 << 20), {.offset = 4096});
  ASSERT_TRUE(slice.ok());
  EXPECT_EQ((*slice)->offset(), 4096u);
  EXPECT_EQ(FaultDevice::Create(MemoryDevice::Create(1 << 20), {.seed = 3})->name(),
            "fault:memory");
}

TEST(SliceDeviceTest, ReadOnlySlicesAndSlicesOfReadOnlyDevices) {
  auto mem = MemoryDevice::Create(1 << 20);
  auto ro = SliceDevice::Create(mem, Window(0, 0, true));
  ASSERT_TRUE(ro.ok());
  std::vector<uint8_t> buf(512);
  EXPECT_EQ((*ro)->Write(0, buf).code(), EROFS);
  EXPECT_TRUE((*ro)->Read(0, buf).ok());
  auto pattern = PatternDevice::Create({.size = 1 << 20});  // read-only
  auto over = SliceDevice::Create(pattern, Window(512, 0, false));
  ASSERT_TRUE(over.ok());
  EXPECT_TRUE((*over)->read_only());
  EXPECT_EQ((*over)->Write(0, buf).code(), EROFS);
}

TEST(SliceDeviceTest, WritesStayInsideTheWindow) {
  auto mem = MemoryDevice::Create(3 * 4096, 512);
  auto slice = SliceDevice::Create(mem, Window(4096, 4096));
  ASSERT_TRUE(slice.ok());
  std::vector<uint8_t> ones(4096, 1);
  ASSERT_TRUE((*slice)->Write(0, ones).ok());
  EXPECT_EQ((*slice)->Write(512, ones).code(), ENOSPC);
  ASSERT_TRUE((*slice)->WriteZeroes(0, 512).ok());
  std::vector<uint8_t> all(3 * 4096);
  ASSERT_TRUE(mem->Read(0, all).ok());
  for (size_t i = 0; i < all.size(); i++) {
    const uint8_t want = (i >= 4096 + 512 && i < 8192) ? 1 : 0;
    ASSERT_EQ(all[i], want) << "byte " << i;
  }
}

}  // namespace
}  // namespace volstack::bdev

// Tests of the base class's own work: boundary checks order, emulated FUA and write-zeroes,
// and the clipping / gap-filling / merging of allocation maps.
#include "bdev/block_device.h"

#include <gtest/gtest.h>

#include "bdev/slice_device.h"
#include "bdev/trace_device.h"

namespace volstack::bdev {
namespace {

// A device with no native anything, whose allocation answer the test scripts.
class ScriptedDevice final : public BlockDevice {
 public:
  explicit ScriptedDevice(const Geometry& g) : BlockDevice("scripted", g), data_(g.size_bytes) {}

  std::vector<AllocationExtent> answer;

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override {
    std::copy_n(data_.begin() + static_cast<ptrdiff_t>(offset), buf.size(), buf.begin());
    return Status::Ok();
  }
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, WriteOptions) override {
    std::copy(buf.begin(), buf.end(), data_.begin() + static_cast<ptrdiff_t>(offset));
    return Status::Ok();
  }
  Status DoFlush() override { return Status::Ok(); }
  Result<std::vector<AllocationExtent>> DoQueryAllocation(uint64_t, uint64_t) override {
    return answer;
  }
  void DoStartWriteback(uint64_t offset, uint64_t length) override {
    hints.emplace_back(offset, length);
  }

 public:
  std::vector<std::pair<uint64_t, uint64_t>> hints;

 private:
  std::vector<uint8_t> data_;
};

Geometry Plain(uint64_t size, bool allocation_query = false) {
  Geometry g;
  g.size_bytes = size;
  g.caps.allocation_query = allocation_query;
  return g;
}

TEST(BlockDeviceTest, EmulatesFuaAsWriteThenFlushAndZeroesAsWrites) {
  auto base = std::make_shared<ScriptedDevice>(Plain(4 << 20));
  auto trace = TraceDevice::Create(base);  // same (non-native) capabilities as `base`
  trace->StartRecording();
  std::vector<uint8_t> buf(512, 7);
  ASSERT_TRUE(trace->Write(0, buf, {.fua = true}).ok());
  ASSERT_TRUE(trace->WriteZeroes(0, (1 << 20) + 512, {.may_unmap = true, .fua = true}).ok());
  auto events = trace->StopRecording();
  std::vector<TraceEvent> want = {{OpType::kWrite, 0, 512, false, 0},
                                  {OpType::kFlush, 0, 0, false, 0},
                                  {OpType::kWrite, 0, 1 << 20, false, 0},
                                  {OpType::kWrite, 1 << 20, 512, false, 0},
                                  {OpType::kFlush, 0, 0, false, 0}};
  EXPECT_EQ(events, want);
  ASSERT_TRUE(base->Read(0, buf).ok());
  EXPECT_EQ(buf, std::vector<uint8_t>(512, 0));
}

TEST(BlockDeviceTest, DiscardWithoutTheCapabilityIsNotSupported) {
  ScriptedDevice dev(Plain(1 << 20));
  EXPECT_EQ(dev.Discard(0, 512).code(), EOPNOTSUPP);
}

TEST(BlockDeviceTest, AllocationWithoutTheCapabilityIsAllData) {
  ScriptedDevice dev(Plain(1 << 20));
  auto q = dev.QueryAllocation(512, 4096);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, (std::vector<AllocationExtent>{{512, 4096, true}}));
}

TEST(BlockDeviceTest, AllocationAnswersAreSortedClippedFilledAndMerged) {
  ScriptedDevice dev(Plain(1 << 20, true));
  // Out of order, overlapping the request's edges, with a gap and same-kind neighbours.
  dev.answer = {{8192, 4096, false},
                {0, 2048, false},
                {2048, 2048, false},
                {12288, 8192, true},
                {30000 - 30000 % 512, 512, false}};
  auto q = dev.QueryAllocation(1024, 16384);
  ASSERT_TRUE(q.ok());
  std::vector<AllocationExtent> want = {{1024, 3072, false},  // 0..4096 merged and clipped
                                        {4096, 4096, true},   // gap: data, never a guessed hole
                                        {8192, 4096, false},
                                        {12288, 5120, true}};  // clipped at 17408
  EXPECT_EQ(*q, want);
}

TEST(BlockDeviceTest, ChecksReadOnlyBeforeRangeAndAlignment) {
  Geometry g = Plain(1 << 20);
  g.read_only = true;
  ScriptedDevice dev(g);
  std::vector<uint8_t> buf(100);
  EXPECT_EQ(dev.Write(3, buf).code(), EROFS);
  EXPECT_EQ(dev.Read(3, buf).code(), EINVAL);
}

TEST(BlockDeviceTest, WritebackHintsAreClippedAndPassedDownShifted) {
  using Hints = std::vector<std::pair<uint64_t, uint64_t>>;
  auto base = std::make_shared<ScriptedDevice>(Plain(4 << 20));
  base->StartWriteback((4 << 20) - 512, 8192);  // clipped to the end
  base->StartWriteback(4 << 20, 512);           // wholly past the end: dropped
  base->StartWriteback(0, 0);                   // empty: dropped
  EXPECT_EQ(base->hints, (Hints{{(4 << 20) - 512, 512}}));
  base->hints.clear();
  auto trace = TraceDevice::Create(base);
  auto slice = SliceDevice::Create(trace, {.offset = 1 << 20, .size = 1 << 20});
  ASSERT_TRUE(slice.ok()) << slice.status().ToString();
  (*slice)->StartWriteback(4096, 2 << 20);  // clipped to the slice, then shifted
  EXPECT_EQ(base->hints, (Hints{{(1 << 20) + 4096, (1 << 20) - 4096}}));
}

}  // namespace
}  // namespace volstack::bdev

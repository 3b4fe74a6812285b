#include "bdev/trace_device.h"

#include <gtest/gtest.h>

#include <thread>

#include "bdev/fault_device.h"
#include "bdev/memory_device.h"

namespace volstack::bdev {
namespace {

TEST(TraceDeviceTest, CountsOpsAndBytesPerType) {
  auto trace = TraceDevice::Create(MemoryDevice::Create(1 << 20));
  EXPECT_EQ(trace->name(), "memory");
  std::vector<uint8_t> buf(4096);
  ASSERT_TRUE(trace->Write(0, buf).ok());
  ASSERT_TRUE(trace->Write(4096, buf).ok());
  ASSERT_TRUE(trace->Read(0, std::span<uint8_t>(buf.data(), 1024)).ok());
  ASSERT_TRUE(trace->WriteZeroes(0, 8192).ok());
  ASSERT_TRUE(trace->Discard(0, 512).ok());
  ASSERT_TRUE(trace->Flush().ok());
  ASSERT_TRUE(trace->QueryAllocation(0, 1 << 20).ok());
  EXPECT_EQ(trace->Read(1, buf).code(), EINVAL);  // refused at the boundary: not counted
  auto c = trace->Counters();
  EXPECT_EQ(c[OpType::kWrite].ops, 2u);
  EXPECT_EQ(c[OpType::kWrite].bytes, 8192u);
  EXPECT_EQ(c[OpType::kRead].ops, 1u);
  EXPECT_EQ(c[OpType::kRead].bytes, 1024u);
  EXPECT_EQ(c[OpType::kWriteZeroes].bytes, 8192u);
  EXPECT_EQ(c[OpType::kDiscard].ops, 1u);
  EXPECT_EQ(c[OpType::kFlush].ops, 1u);
  EXPECT_EQ(c[OpType::kQueryAllocation].ops, 1u);
  EXPECT_EQ(c.total_ops(), 7u);
  trace->ResetCounters();
  EXPECT_EQ(trace->Counters().total_ops(), 0u);
}

TEST(TraceDeviceTest, VectoredWritesAreOneWriteAndReachTheTargetAsOne) {
  auto fault = FaultDevice::CreateInMemory(1 << 20);
  auto trace = TraceDevice::Create(fault);
  std::vector<uint8_t> a(1000, 1), b(24, 2), c(2048, 3);
  std::vector<std::span<const uint8_t>> pieces = {a, b, {}, c};
  trace->StartRecording();
  ASSERT_TRUE(trace->WriteV(4096, pieces, {.fua = true}).ok());
  EXPECT_EQ(trace->StopRecording(),
            (std::vector<TraceEvent>{{OpType::kWrite, 4096, 3072, true, 0}}));
  EXPECT_EQ(trace->Counters()[OpType::kWrite].bytes, 3072u);
  EXPECT_EQ(fault->counters()[OpType::kWrite], 1u);  // forwarded as one request
  std::vector<uint8_t> back(3072), want;
  for (auto p : pieces) want.insert(want.end(), p.begin(), p.end());
  ASSERT_TRUE(trace->Read(4096, back).ok());
  EXPECT_EQ(back, want);
}

TEST(TraceDeviceTest, CountsErrorsAndFuaAndRecordsEvents) {
  auto fault = FaultDevice::CreateInMemory(1 << 20);
  auto trace = TraceDevice::Create(fault, "traced");
  EXPECT_EQ(trace->name(), "traced");
  EXPECT_TRUE(trace->geometry().caps.fua);
  fault->FailOps(OpBit(OpType::kRead));
  std::vector<uint8_t> buf(512);
  trace->StartRecording(2);
  ASSERT_TRUE(trace->Write(512, buf, {.fua = true}).ok());
  EXPECT_EQ(trace->Read(0, buf).code(), EIO);
  ASSERT_TRUE(trace->Flush().ok());  // counted, not kept: max_events = 2
  auto events = trace->StopRecording();
  std::vector<TraceEvent> want = {{OpType::kWrite, 512, 512, true, 0},
                                  {OpType::kRead, 0, 512, false, EIO}};
  EXPECT_EQ(events, want);
  auto c = trace->Counters();
  EXPECT_EQ(c[OpType::kWrite].fua, 1u);
  EXPECT_EQ(c[OpType::kRead].errors, 1u);
  EXPECT_EQ(c[OpType::kFlush].ops, 1u);
  ASSERT_TRUE(trace->Flush().ok());
  EXPECT_TRUE(trace->StopRecording().empty()) << "nothing is kept once recording stopped";
}

TEST(TraceDeviceTest, CountersAreExactUnderConcurrency) {
  auto trace = TraceDevice::Create(MemoryDevice::Create(8 << 20));
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; t++) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> buf(4096);
      for (int i = 0; i < 500; i++) {
        EXPECT_TRUE(trace->Write((static_cast<uint64_t>(t) * 500 + i) % 2048 * 4096, buf).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(trace->Counters()[OpType::kWrite].ops, 4000u);
  EXPECT_EQ(trace->Counters()[OpType::kWrite].bytes, 4000u * 4096);
}

}  // namespace
}  // namespace volstack::bdev

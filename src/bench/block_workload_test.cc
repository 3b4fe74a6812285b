#include "bench/block_workload.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

#include "bdev/memory_device.h"
#include "bench/cancel.h"

namespace volstack::bench {
namespace {

TEST(LatencyHistogramTest, SmallValuesAreExact) {
  LatencyHistogram h;
  for (uint64_t v = 0; v < 32; ++v) h.Record(v);
  EXPECT_EQ(h.count(), 32u);
  EXPECT_EQ(h.max(), 31u);
  EXPECT_EQ(h.Percentile(50), 15u);
  EXPECT_EQ(h.Percentile(100), 31u);
}

TEST(LatencyHistogramTest, RelativeErrorIsBounded) {
  // Every value lands in a bucket whose upper bound is within 1/16 above it.
  for (uint64_t v : {33ull, 1000ull, 123456ull, 987654321ull, 1ull << 40}) {
    LatencyHistogram h;
    h.Record(v);
    h.Record(v * 4);  // so the max does not clamp the answer for v
    uint64_t p = h.Percentile(50);
    EXPECT_GE(p, v) << v;
    EXPECT_LE(static_cast<double>(p), static_cast<double>(v) * (1 + 1.0 / 16)) << v;
  }
}

TEST(LatencyHistogramTest, PercentilesAndMerge) {
  LatencyHistogram a, b;
  for (int i = 0; i < 990; ++i) a.Record(1000);    // 1 us
  for (int i = 0; i < 10; ++i) b.Record(1000000);  // 1 ms
  a.Merge(b);
  EXPECT_EQ(a.count(), 1000u);
  EXPECT_LE(a.Percentile(50), 1063u);
  EXPECT_LE(a.Percentile(99), 1063u);
  EXPECT_GE(a.Percentile(99.9), 1000000u);
  EXPECT_EQ(a.max(), 1000000u);
  EXPECT_EQ(LatencyHistogram().Percentile(99), 0u);
}

TEST(BlockWorkloadTest, RunsEveryPhaseOnMemoryDevice) {
  ResetCancel();
  auto dev = bdev::MemoryDevice::Create(64 << 20, 512, 4096);
  BlockWorkloadOptions o;
  o.threads = 2;
  o.seconds = 0.2;
  std::vector<std::string> phases_seen;
  o.on_progress = [&](const std::string& phase, double) {
    if (phases_seen.empty() || phases_seen.back() != phase) phases_seen.push_back(phase);
  };
  auto r = RunBlockWorkload(*dev, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 4u);
  const char* names[] = {"seqwrite-1m", "randwrite-4k", "seqread-1m", "randread-4k"};
  const uint64_t blocks[] = {1 << 20, 4096, 1 << 20, 4096};
  for (size_t i = 0; i < 4; ++i) {
    const auto& w = (*r)[i];
    EXPECT_EQ(w.name, names[i]);
    EXPECT_GT(w.ops, 0u) << w.name;
    EXPECT_EQ(w.bytes, w.ops * blocks[i]) << w.name;
    EXPECT_GE(w.seconds, 0.2) << w.name;
    EXPECT_NEAR(w.iops, w.ops / w.seconds, 1e-6 * w.iops);
    EXPECT_NEAR(w.mb_s, w.bytes / w.seconds / 1e6, 1e-6 * w.mb_s);
    EXPECT_LE(w.p50_us, w.p99_us);
    EXPECT_LE(w.p99_us, w.p999_us);
    EXPECT_LE(w.p999_us, w.max_us);
  }
  // The prefill wrote the whole device, so reads found data, not holes.
  EXPECT_EQ(dev->allocated_bytes(), 64u << 20);
  ASSERT_GE(phases_seen.size(), 1u);
  EXPECT_EQ(phases_seen.back(), "randread-4k");
}

// A device that fails every write after the first `ok_writes`.
class FailingDevice final : public bdev::BlockDevice {
 public:
  explicit FailingDevice(int ok_writes)
      : BlockDevice("failing", bdev::Geometry{16 << 20, 512, 4096, 0, false, {}}),
        ok_writes_(ok_writes) {}

 protected:
  Status DoRead(uint64_t, std::span<uint8_t> buf) override {
    std::fill(buf.begin(), buf.end(), 0);
    return Status::Ok();
  }
  Status DoWrite(uint64_t, std::span<const uint8_t>, bdev::WriteOptions) override {
    if (ok_writes_.fetch_sub(1) <= 0) return Status::IoError("injected");
    return Status::Ok();
  }
  Status DoFlush() override { return Status::Ok(); }

 private:
  std::atomic<int> ok_writes_;
};

TEST(BlockWorkloadTest, FirstErrorStopsTheRunAndNamesThePhase) {
  ResetCancel();
  FailingDevice dev(3);
  BlockWorkloadOptions o;
  o.threads = 2;
  o.seconds = 0.1;
  auto r = RunBlockWorkload(dev, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EIO);
  EXPECT_NE(r.status().message().find("prefill at offset"), std::string::npos)
      << r.status().ToString();
}

TEST(BlockWorkloadTest, CancelStopsPromptly) {
  auto dev = bdev::MemoryDevice::Create(8 << 20);
  BlockWorkloadOptions o;
  o.threads = 1;
  o.seconds = 30;
  o.prefill = false;
  RequestCancel();
  auto start = std::chrono::steady_clock::now();
  auto r = RunBlockWorkload(*dev, o);
  ResetCancel();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ECANCELED);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(BlockWorkloadTest, RejectsTinyDevice) {
  auto dev = bdev::MemoryDevice::Create(512 << 10);
  auto r = RunBlockWorkload(*dev, BlockWorkloadOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EINVAL);
}

}  // namespace
}  // namespace volstack::bench

#include "bench/fio_workload.h"

#include <gtest/gtest.h>

namespace volstack::bench {
namespace {

// Trimmed from what fio 3.33 printed for a 4 KiB random write phase on a loop device.
constexpr const char* kRandWrite =
    R"(note: both iodepth >= 1 and synchronous I/O engine are selected
{
  "fio version" : "fio-3.33",
  "jobs" : [
    {
      "jobname" : "randwrite-4k",
      "read" : { "io_bytes" : 0, "bw_bytes" : 0, "iops" : 0.0, "runtime" : 0, "total_ios" : 0 },
      "write" : {
        "io_bytes" : 409600000,
        "bw_bytes" : 81920000,
        "iops" : 20000.5,
        "runtime" : 5000,
        "total_ios" : 100000,
        "clat_ns" : {
          "min" : 1000, "max" : 9000000, "mean" : 1500000.0,
          "percentile" : { "50.000000" : 1400000, "99.000000" : 4000000, "99.900000" : 7000000 }
        }
      }
    }
  ]
}
)";

const FioPhase& Phase(const std::string& name) {
  for (const auto& p : FioPhases()) {
    if (p.name == name) return p;
  }
  ADD_FAILURE() << "no phase " << name;
  return FioPhases().front();
}

TEST(FioWorkloadTest, ParsesTheWriteSectionOfAWritePhase) {
  auto r = ParseFioJson(kRandWrite, Phase("randwrite-4k"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->name, "randwrite-4k");
  EXPECT_EQ(r->ops, 100000u);
  EXPECT_EQ(r->bytes, 409600000u);
  EXPECT_DOUBLE_EQ(r->seconds, 5.0);
  EXPECT_DOUBLE_EQ(r->iops, 20000.5);
  EXPECT_DOUBLE_EQ(r->mb_s, 81.92);
  EXPECT_DOUBLE_EQ(r->p50_us, 1400.0);
  EXPECT_DOUBLE_EQ(r->p99_us, 4000.0);
  EXPECT_DOUBLE_EQ(r->p999_us, 7000.0);
  EXPECT_DOUBLE_EQ(r->max_us, 9000.0);
  EXPECT_FALSE(r->volstack_cpu_seconds.has_value());
}

TEST(FioWorkloadTest, OnlyTheJobNamedAfterThePhaseIsReported) {
  constexpr const char* kTwoJobs = R"({"jobs": [
    {"jobname": "writer", "read": {"total_ios": 0},
     "write": {"total_ios": 50, "io_bytes": 52428800, "runtime": 1000, "iops": 50.0}},
    {"jobname": "randread-4k-under-seqwrite",
     "read": {"total_ios": 700, "io_bytes": 2867200, "runtime": 1000, "iops": 700.0},
     "write": {"total_ios": 0}}]})";
  auto r = ParseFioJson(kTwoJobs, Phase("randread-4k-under-seqwrite"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->iops, 700.0);
  EXPECT_FALSE(ParseFioJson(kTwoJobs, Phase("randread-4k")).ok());
}

TEST(FioWorkloadTest, AReadPhaseWithNoReadsIsCorruptionNotZero) {
  auto r = ParseFioJson(kRandWrite, Phase("randread-4k"));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
}

TEST(FioWorkloadTest, TextThatIsNotFiosReportIsCorruption) {
  for (const char* text : {"", "fio: unrecognized option", "{", "{\"jobs\": []}",
                           "{\"jobs\": [{\"write\": {\"iops\": \"many\", \"total_ios\": 1}}]}"}) {
    auto r = ParseFioJson(text, Phase("randwrite-4k"));
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_TRUE(r.status().IsCorruption()) << text << ": " << r.status().ToString();
  }
}

TEST(FioWorkloadTest, PhasesWriteBeforeTheyReadAndUseTheBlockWorkloadsNames) {
  std::vector<std::string> names;
  for (const auto& p : FioPhases()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"randwrite-4k", "randread-4k", "seqwrite-1m",
                                             "seqread-1m", "randread-4k-under-seqwrite"}));
}

}  // namespace
}  // namespace volstack::bench

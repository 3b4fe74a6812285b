#include "bench/dbench_output.h"

#include <gtest/gtest.h>

#include "bench/dbench_samples_test.h"

namespace volstack::bench {
namespace {

TEST(DbenchOutputTest, ParsesShortRunWithoutWarmup) {
  auto r = ParseDbenchOutput(testdata::kDbenchShortRun);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->throughput_mb_s, 461.145);
  EXPECT_EQ(r->clients, 2);
  EXPECT_EQ(r->procs, 2);
  EXPECT_DOUBLE_EQ(r->max_latency_ms, 6.910);
  ASSERT_EQ(r->ops.size(), 16u);
  EXPECT_EQ(r->ops.front().name, "NTCreateX");
  EXPECT_EQ(r->ops.front().count, 43076u);
  EXPECT_DOUBLE_EQ(r->ops.front().avg_ms, 0.029);
  EXPECT_DOUBLE_EQ(r->ops.front().max_ms, 4.211);
  const OpStat* flush = r->Find("Flush");
  ASSERT_NE(flush, nullptr);
  EXPECT_EQ(flush->count, 3036u);
  EXPECT_DOUBLE_EQ(flush->avg_ms, 0.617);
  EXPECT_DOUBLE_EQ(flush->max_ms, 6.897);
  EXPECT_EQ(r->Find("Rmdir"), nullptr);
}

TEST(DbenchOutputTest, ParsesRunWithWarmup) {
  auto r = ParseDbenchOutput(testdata::kDbenchWarmupRun);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->throughput_mb_s, 383.77);
  EXPECT_DOUBLE_EQ(r->max_latency_ms, 10.395);
  EXPECT_EQ(r->ops.size(), 16u);
  EXPECT_EQ(r->Find("ReadX")->count, 231627u);
  EXPECT_DOUBLE_EQ(r->Find("Flush")->max_ms, 10.386);
}

TEST(DbenchOutputTest, ParsesTheSeedsTable) {
  // The seed's second table (no Deltree/Mkdir rows: they did not run in the execute phase).
  const char* seed = R"( Operation      Count    AvgLat    MaxLat
 ----------------------------------------
 NTCreateX    2019488     0.112   346.872
 Close        1481790     0.032   246.645
 Flush         141610    38.198   420.011
Throughput 524.834 MB/sec  50 clients  50 procs  max_latency=420.017 ms
)";
  auto r = ParseDbenchOutput(seed);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ops.size(), 3u);
  EXPECT_EQ(r->clients, 50);
  EXPECT_DOUBLE_EQ(r->Find("Flush")->avg_ms, 38.198);
  EXPECT_DOUBLE_EQ(r->throughput_mb_s, 524.834);
}

TEST(DbenchOutputTest, SyncFlagsInThroughputLine) {
  const char* text = R"( Operation      Count    AvgLat    MaxLat
 ----------------------------------------
 Flush              5     1.000     2.000

Throughput 12.5 MB/sec (sync open)  3 clients  3 procs  max_latency=9.000 ms
)";
  auto r = ParseDbenchOutput(text);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->clients, 3);
  EXPECT_DOUBLE_EQ(r->max_latency_ms, 9.0);
}

TEST(DbenchOutputTest, InterruptedRunIsCorruption) {
  std::string text = testdata::kDbenchShortRun;
  std::string cut = text.substr(0, text.find(" Operation"));
  auto r = ParseDbenchOutput(cut);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption());
  // A table without the Throughput line is no result either.
  auto r2 = ParseDbenchOutput(text.substr(0, text.find("Throughput")));
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("Throughput"), std::string::npos);
  EXPECT_FALSE(ParseDbenchOutput("").ok());
}

TEST(DbenchOutputTest, GarbageRowEndsTheTable) {
  const char* text = R"( Operation      Count    AvgLat    MaxLat
 ----------------------------------------
 NTCreateX     10     0.5     1.0
 Close         xx     0.1     0.2
 Flush         20     3.0     4.0
Throughput 1 MB/sec  1 clients  1 procs  max_latency=1.000 ms
)";
  auto r = ParseDbenchOutput(text);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->ops.size(), 1u);
  EXPECT_EQ(r->ops[0].name, "NTCreateX");
}

TEST(DbenchOutputTest, ProgressLines) {
  auto p =
      ParseDbenchProgressLine("   2     33109   391.44 MB/sec  warmup   1 sec  latency 4.774 ms");
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->warmup);
  EXPECT_EQ(p->seconds, 1);
  EXPECT_DOUBLE_EQ(p->mb_s, 391.44);
  auto e =
      ParseDbenchProgressLine("   2    417937   378.07 MB/sec  execute  10 sec  latency 7.022 ms");
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(e->warmup);
  EXPECT_EQ(e->seconds, 10);
  EXPECT_DOUBLE_EQ(e->latency_ms, 7.022);
  EXPECT_FALSE(ParseDbenchProgressLine("   2  cleanup  12 sec").has_value());
  EXPECT_FALSE(ParseDbenchProgressLine("releasing clients").has_value());
}

TEST(DbenchOutputTest, FormatMatchesDbenchAndRoundTrips) {
  auto r = ParseDbenchOutput(testdata::kDbenchShortRun);
  ASSERT_TRUE(r.ok());
  std::string table = FormatDbenchTable(*r);
  // Byte-identical rows to dbench's own " %-12s %7u %9.3f %9.3f".
  EXPECT_NE(table.find(" NTCreateX      43076     0.029     4.211\n"), std::string::npos) << table;
  EXPECT_NE(table.find(" Flush           3036     0.617     6.897\n"), std::string::npos);
  EXPECT_NE(table.find("Throughput 461.145 MB/sec  2 clients  2 procs  max_latency=6.910 ms"),
            std::string::npos);
  auto again = ParseDbenchOutput(table);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->ops.size(), r->ops.size());
  for (size_t i = 0; i < r->ops.size(); ++i) {
    EXPECT_EQ(again->ops[i].name, r->ops[i].name);
    EXPECT_EQ(again->ops[i].count, r->ops[i].count);
    EXPECT_DOUBLE_EQ(again->ops[i].avg_ms, r->ops[i].avg_ms);
  }
  EXPECT_DOUBLE_EQ(again->throughput_mb_s, r->throughput_mb_s);
}

}  // namespace
}  // namespace volstack::bench

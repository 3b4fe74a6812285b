#include "bench/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench/svg_chart.h"

namespace volstack::bench {
namespace {

DbenchRun Run(int repeat, double mb_s, double flush_avg, double flush_max, uint64_t rss_kib = 0,
              double cpu = 0) {
  DbenchRun r;
  r.repeat = repeat;
  r.ok = true;
  r.device = "/dev/loop7";
  r.sector_size = 4096;
  r.result.throughput_mb_s = mb_s;
  r.result.clients = 10;
  r.result.procs = 10;
  r.result.max_latency_ms = flush_max + 1;
  r.result.ops = {{"NTCreateX", 1000, 0.1, 2.0}, {"Flush", 50, flush_avg, flush_max}};
  if (rss_kib > 0) r.usage = VolstackUsage{1, rss_kib, cpu};
  return r;
}

BenchReport SampleReport() {
  BenchReport r;
  r.volstack_version = "0.1.0";
  r.started_at = "2026-11-30T12:00:00Z";
  r.finished_at = "2026-11-30T12:10:00Z";
  r.config.stacks = {"file", "zvol", "lvm-on-zvol", "lvm-on-loop-on-zvol", "lvm-on-file"};
  r.config.dbench_version = "dbench version 4.00";
  r.config.loadfile = "/usr/share/dbench/client.txt";
  StackReport file{"file", "plain file", StackStatus::kOk, "", {}, {}};
  file.runs = {Run(1, 900, 10, 100), Run(2, 1000, 12, 120), Run(3, 950, 11, 110)};
  StackReport zvol{"zvol", "pool volume", StackStatus::kOk, "", {}, {}};
  zvol.runs = {Run(1, 800, 20, 200, 102400, 3.0), Run(2, 820, 22, 220, 204800, 4.0),
               Run(3, 780, 21, 210, 153600, 5.0)};
  StackReport lvm{"lvm-on-zvol", "LV on a pool volume", StackStatus::kOk, "", {}, {}};
  lvm.runs = {Run(1, 790, 21, 200), Run(2, 810, 23, 240)};
  DbenchRun failed;
  failed.repeat = 3;
  failed.error = "dbench exit 1";
  lvm.runs.push_back(failed);
  StackReport seed{"lvm-on-loop-on-zvol",
                   "the seed's way",
                   StackStatus::kUnavailable,
                   "no <dbench> & co in PATH",
                   {},
                   {}};
  StackReport broken{"lvm-on-file", "LV on a file", StackStatus::kFailed, "setup failed", {}, {}};
  DbenchRun b;
  b.repeat = 1;
  b.error = "setup failed";
  broken.runs.push_back(b);
  r.stacks = {file, zvol, lvm, seed, broken};
  return r;
}

const DbenchComparison& Row(const std::vector<DbenchComparison>& rows, const std::string& name) {
  for (const auto& r : rows) {
    if (r.stack == name) return r;
  }
  ADD_FAILURE() << "no row " << name;
  return rows.front();
}

TEST(ReportTest, CompareDbenchTakesMediansAndRatiosOfMedians) {
  BenchReport report = SampleReport();
  auto rows = CompareDbench(report);
  ASSERT_EQ(rows.size(), 5u);
  const auto& file = Row(rows, "file");
  const auto& zvol = Row(rows, "zvol");
  const auto& lvm = Row(rows, "lvm-on-zvol");
  EXPECT_DOUBLE_EQ(file.throughput->median, 950);
  EXPECT_DOUBLE_EQ(file.throughput->min, 900);
  EXPECT_DOUBLE_EQ(file.throughput->max, 1000);
  EXPECT_DOUBLE_EQ(zvol.throughput->median, 800);
  EXPECT_EQ(lvm.runs_ok, 2);  // the failed run does not count
  EXPECT_DOUBLE_EQ(lvm.throughput->median, 800);
  EXPECT_DOUBLE_EQ(*lvm.throughput_vs_zvol, 1.0);
  EXPECT_DOUBLE_EQ(*zvol.throughput_vs_file, 800.0 / 950.0);
  EXPECT_DOUBLE_EQ(*zvol.throughput_vs_zvol, 1.0);
  EXPECT_DOUBLE_EQ(*lvm.flush_avg_vs_zvol, 22.0 / 21.0);
  EXPECT_DOUBLE_EQ(*lvm.flush_max_vs_zvol, 220.0 / 210.0);
  EXPECT_DOUBLE_EQ(*zvol.flush_avg_vs_file, 21.0 / 11.0);
  // Resource usage: MiB of peak RSS and CPU seconds, medians.
  EXPECT_DOUBLE_EQ(zvol.peak_rss_mib->median, 150.0);
  EXPECT_DOUBLE_EQ(zvol.cpu_seconds->median, 4.0);
  EXPECT_FALSE(file.peak_rss_mib.has_value());
  const auto& seed = Row(rows, "lvm-on-loop-on-zvol");
  EXPECT_EQ(seed.status, StackStatus::kUnavailable);
  EXPECT_FALSE(seed.throughput.has_value());
  EXPECT_FALSE(seed.throughput_vs_zvol.has_value());
}

TEST(ReportTest, NoReferenceStackMeansNoRatios) {
  BenchReport report = SampleReport();
  report.stacks.erase(report.stacks.begin(), report.stacks.begin() + 2);  // drop file, zvol
  auto rows = CompareDbench(report);
  EXPECT_FALSE(Row(rows, "lvm-on-zvol").throughput_vs_zvol.has_value());
  EXPECT_FALSE(Row(rows, "lvm-on-zvol").throughput_vs_file.has_value());
}

TEST(ReportTest, MedianRunIndex) {
  BenchReport report = SampleReport();
  EXPECT_EQ(MedianRunIndex(report.stacks[0]), 2);  // 900, 1000, 950 -> 950 is runs[2]
  EXPECT_EQ(MedianRunIndex(report.stacks[2]), 0);  // 790, 810 -> the lower middle
  EXPECT_EQ(MedianRunIndex(report.stacks[3]), -1);
}

TEST(ReportTest, JsonParsesAndCarriesEverything) {
  BenchReport report = SampleReport();
  auto j = nlohmann::json::parse(ReportToJson(report));
  EXPECT_EQ(j["tool"], "volstack bench");
  EXPECT_EQ(j["config"]["mode"], "dbench");
  ASSERT_EQ(j["stacks"].size(), 5u);
  EXPECT_EQ(j["stacks"][3]["status"], "unavailable");
  EXPECT_EQ(j["stacks"][3]["reason"], "no <dbench> & co in PATH");
  EXPECT_EQ(j["stacks"][0]["runs"].size(), 3u);
  EXPECT_EQ(j["stacks"][0]["runs"][0]["operations"][1]["name"], "Flush");
  EXPECT_DOUBLE_EQ(j["stacks"][0]["runs"][0]["throughput_mb_s"].get<double>(), 900);
  EXPECT_EQ(j["stacks"][2]["runs"][2]["ok"], false);
  EXPECT_EQ(j["stacks"][2]["runs"][2]["error"], "dbench exit 1");
  auto& cmp = j["comparison"];
  ASSERT_EQ(cmp.size(), 5u);
  EXPECT_EQ(cmp[1]["stack"], "zvol");
  EXPECT_DOUBLE_EQ(cmp[1]["throughput_mb_s"]["median"].get<double>(), 800);
  EXPECT_DOUBLE_EQ(cmp[1]["throughput_vs_file"].get<double>(), 800.0 / 950.0);
  EXPECT_TRUE(cmp[3]["throughput_mb_s"].is_null());
  EXPECT_TRUE(cmp[3]["throughput_vs_zvol"].is_null());
}

TEST(ReportTest, MarkdownHasTheComparisonAndTheSeedsTables) {
  std::string md = ReportToMarkdown(SampleReport());
  EXPECT_NE(md.find("| zvol | 800.00 | 780.0–820.0 | 1.00 | 0.84 | 21.000 |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| lvm-on-loop-on-zvol | unavailable: no <dbench>"), std::string::npos);
  EXPECT_NE(md.find(" Flush             50    11.000   110.000"), std::string::npos);
  EXPECT_NE(md.find("Throughput 950.000 MB/sec  10 clients  10 procs"), std::string::npos);
  EXPECT_NE(md.find("failed: dbench exit 1"), std::string::npos);
}

TEST(ReportTest, TerminalTableNamesEveryStack) {
  std::string t = FormatComparisonTable(SampleReport());
  for (const char* s : {"file", "zvol", "lvm-on-zvol", "lvm-on-loop-on-zvol", "lvm-on-file"}) {
    EXPECT_NE(t.find(std::string(" ") + s + " "), std::string::npos) << s << "\n" << t;
  }
  EXPECT_NE(t.find("unavailable: no <dbench>"), std::string::npos);
  EXPECT_NE(t.find("failed: setup failed"), std::string::npos);
  EXPECT_NE(t.find("800.00"), std::string::npos);
}

TEST(ReportTest, SvgIsWellFormedAndEscaped) {
  std::string svg = ReportToSvg(SampleReport());
  ASSERT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  // Reasons with markup characters are escaped; raw ones would break the file.
  EXPECT_EQ(svg.find("<dbench>"), std::string::npos);
  EXPECT_NE(svg.find("&lt;dbench&gt; &amp; co"), std::string::npos);
  // Every opened text element is closed.
  size_t open = 0, close = 0;
  for (size_t p = 0; (p = svg.find("<text", p)) != std::string::npos; ++p) ++open;
  for (size_t p = 0; (p = svg.find("</text>", p)) != std::string::npos; ++p) ++close;
  EXPECT_EQ(open, close);
  // Three stacks ran: three throughput bars, six flush bars, plus the background rect and
  // the two legend swatches of the flush panel.
  size_t rects = 0;
  for (size_t p = 0; (p = svg.find("<rect", p)) != std::string::npos; ++p) ++rects;
  EXPECT_EQ(rects, 1u + 3u + 6u + 2u);
  // Whiskers: one per bar with more than one run.
  EXPECT_NE(svg.find("stroke=\"#222\""), std::string::npos);
}

TEST(ReportTest, XmlEscape) { EXPECT_EQ(XmlEscape("a<b>&\"c"), "a&lt;b&gt;&amp;&quot;c"); }

TEST(ReportTest, FioModeReportsCpuSecondsPerGibMoved) {
  BenchReport r;
  r.config.mode = "fio";
  StackReport zvol{"zvol", "z", StackStatus::kOk, "", {}, {}};
  for (double cpu : {2.0, 4.0, 3.0}) {
    BlockRun run;
    run.ok = true;
    run.workloads = {{"randwrite-4k", 1, 2ull << 30, 1.0, 1, 1, 1, 1, 1, 1, cpu}};
    zvol.block_runs.push_back(run);
  }
  r.stacks = {zvol};
  auto rows = CompareBlock(r);
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_TRUE(rows[0].cpu_s_per_gib.has_value());
  EXPECT_DOUBLE_EQ(rows[0].cpu_s_per_gib->median, 1.5);  // 3 s for 2 GiB
  std::string table = FormatComparisonTable(r);
  EXPECT_NE(table.find("fio (libaio"), std::string::npos) << table;
  EXPECT_NE(table.find("CPU s/GiB"), std::string::npos) << table;
  EXPECT_NE(table.find("1.50"), std::string::npos) << table;
  EXPECT_NE(ReportToMarkdown(r).find("CPU s/GiB"), std::string::npos);
}

TEST(ReportTest, BlockModeComparison) {
  BenchReport r;
  r.config.mode = "block";
  StackReport file{"file", "f", StackStatus::kOk, "", {}, {}};
  StackReport zvol{"zvol", "z", StackStatus::kUnavailable, "no pool", {}, {}};
  for (int i = 1; i <= 3; ++i) {
    BlockRun run;
    run.repeat = i;
    run.ok = true;
    run.workloads = {{"randread-4k", 1000, 4096000, 1.0, 1000.0 * i, 4.096 * i, 10, 20, 30, 40, {}},
                     {"seqwrite-1m", 10, 10 << 20, 1.0, 10, 10.0 * i, 100, 200, 300, 400, {}}};
    file.block_runs.push_back(run);
  }
  r.stacks = {file, zvol};
  auto rows = CompareBlock(r);
  ASSERT_EQ(rows.size(), 2u);  // the unavailable stack has no rows
  EXPECT_EQ(rows[0].workload, "randread-4k");
  EXPECT_DOUBLE_EQ(rows[0].iops->median, 2000);
  EXPECT_DOUBLE_EQ(*rows[0].mb_s_vs_file, 1.0);
  EXPECT_FALSE(rows[0].mb_s_vs_zvol.has_value());
  auto j = nlohmann::json::parse(ReportToJson(r));
  EXPECT_EQ(j["stacks"][0]["runs"][0]["workloads"][1]["name"], "seqwrite-1m");
  EXPECT_EQ(j["comparison"].size(), 2u);
  std::string t = FormatComparisonTable(r);
  EXPECT_NE(t.find("zvol"), std::string::npos);
  EXPECT_NE(t.find("unavailable: no pool"), std::string::npos);
  std::string svg = ReportToSvg(r);
  EXPECT_NE(svg.find("seqwrite-1m"), std::string::npos);
  EXPECT_NE(ReportToMarkdown(r).find("| file | randread-4k | 2000 |"), std::string::npos);
}

TEST(ReportTest, WritesThreeFiles) {
  auto dir =
      std::filesystem::temp_directory_path() / ("volstack-report-test-" + std::to_string(getpid()));
  ASSERT_TRUE(WriteReportFiles(SampleReport(), dir.string() + "/nested").ok());
  for (const char* f : {"report.json", "report.md", "report.svg"}) {
    EXPECT_GT(std::filesystem::file_size(dir / "nested" / f), 100u) << f;
  }
  std::ifstream in(dir / "nested" / "report.json");
  EXPECT_NO_THROW(nlohmann::json::parse(in));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace volstack::bench

#include "bench/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "bench/cancel.h"

namespace volstack::bench {
namespace {

TEST(SubprocessTest, CapturesOutputAndExitCode) {
  std::vector<std::string> lines;
  CommandOptions o;
  o.on_line = [&](std::string_view l) { lines.emplace_back(l); };
  auto r = RunCommand({"sh", "-c", "echo one; echo two >&2; printf three; exit 3"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->success());
  EXPECT_EQ(r->output, "one\ntwo\nthree");
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_EQ(r->Tail(2), "two | three");
}

TEST(SubprocessTest, RunCheckedNamesTheCommandAndTail) {
  auto ok = RunChecked({"echo", "hello"});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, "hello\n");
  auto bad = RunChecked({"sh", "-c", "echo nope; exit 4"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "sh -c 'echo nope; exit 4': exit 4: nope");
}

TEST(SubprocessTest, MissingProgramIsNotFound) {
  auto r = RunCommand({"volstack-no-such-program-xyz"});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsNotFound());
  EXPECT_FALSE(ProgramExists("volstack-no-such-program-xyz"));
  EXPECT_TRUE(ProgramExists("sh"));
}

TEST(SubprocessTest, TimeoutStopsTheWholeGroup) {
  CommandOptions o;
  o.timeout_seconds = 0.3;
  auto start = std::chrono::steady_clock::now();
  // The grandchild (sleep) holds the output pipe; it must not keep us waiting.
  auto r = RunCommand({"sh", "-c", "sleep 60 & sleep 60"}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_FALSE(r->success());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(SubprocessTest, CancelStopsTheChild) {
  ResetCancel();
  CommandOptions o;
  int ticks = 0;
  o.on_tick = [&] {
    if (++ticks == 3) RequestCancel();
  };
  auto r = RunCommand({"sleep", "60"}, o);
  ResetCancel();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->cancelled);
  auto checked = [&] {
    ResetCancel();
    CommandOptions o2;
    o2.on_tick = [] { RequestCancel(); };
    auto c = RunChecked({"sleep", "60"}, o2);
    ResetCancel();
    return c;
  }();
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.status().code(), ECANCELED);
}

TEST(SubprocessTest, BackgroundProcessStartsAndStops) {
  std::string log = ::testing::TempDir() + "/bg-" + std::to_string(getpid()) + ".log";
  auto pid = StartBackground({"sh", "-c", "echo started; exec sleep 60"}, log);
  ASSERT_TRUE(pid.ok());
  EXPECT_TRUE(ChildRunning(*pid));
  auto usage = ReadProcessUsage(*pid);
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  EXPECT_GT(usage->peak_rss_kib, 0u);
  EXPECT_TRUE(StopProcess(*pid, 5).ok());
  EXPECT_NE(kill(*pid, 0), 0);  // reaped, gone
  unlink(log.c_str());
}

TEST(SubprocessTest, StopProcessKillsWhatIgnoresSigterm) {
  std::string log = ::testing::TempDir() + "/bg2-" + std::to_string(getpid()) + ".log";
  auto pid = StartBackground({"sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"}, log);
  ASSERT_TRUE(pid.ok());
  usleep(200000);  // let the shell install its trap
  Status s = StopProcess(*pid, 0.3);
  EXPECT_EQ(s.code(), EBUSY);
  EXPECT_FALSE(ChildRunning(*pid));
  unlink(log.c_str());
}

TEST(SubprocessTest, ParseProcessUsage) {
  const char* status =
      "Name:\tvolstack\nVmPeak:\t  300000 kB\nVmHWM:\t   12345 kB\nVmRSS:\t   "
      " 2345 kB\n";
  // comm with a space and a parenthesis, then fields 3..15: utime=250, stime=50 ticks.
  const char* stat = "4242 (vol stack)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0";
  auto u = ParseProcessUsage(status, stat, 100);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->peak_rss_kib, 12345u);
  EXPECT_EQ(u->rss_kib, 2345u);
  EXPECT_DOUBLE_EQ(u->cpu_seconds, 3.0);
  EXPECT_FALSE(ParseProcessUsage(status, "garbage", 100).ok());
  EXPECT_FALSE(ParseProcessUsage(status, "1 (x) S 1 2", 100).ok());
}

TEST(SubprocessTest, OwnUsageIsPlausible) {
  auto u = ReadProcessUsage(getpid());
  ASSERT_TRUE(u.ok());
  EXPECT_GE(u->peak_rss_kib, u->rss_kib);
  EXPECT_GE(u->cpu_seconds, 0.0);
}

TEST(SubprocessTest, JoinCommandQuotes) {
  EXPECT_EQ(JoinCommand({"a", "b c", "", "d'e"}), "a 'b c' '' 'd'e'");
}

}  // namespace
}  // namespace volstack::bench

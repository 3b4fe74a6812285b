#include "bench/bench.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "bench/bench_internal.h"
#include "bench/stack_builder.h"

namespace volstack::bench {
namespace {

TEST(BenchOptionsTest, StackList) {
  auto all = ParseStackList("all");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, AllStackNames());
  EXPECT_EQ(all->size(), 9u);
  auto two = ParseStackList("zvol,file,zvol");
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::vector<std::string>{"zvol", "file"}));  // order kept, duplicates dropped
  auto bad = ParseStackList("file,nope");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown stack 'nope'"), std::string::npos);
  EXPECT_FALSE(ParseStackList(",").ok());
}

TEST(BenchOptionsTest, StackNamesAreTheIssues) {
  EXPECT_EQ(
      AllStackNames(),
      (std::vector<std::string>{"file", "zvol", "lvm-on-zvol", "lvm-on-loop-on-zvol", "lvm-on-file",
                                "zvol-512", "zvol-uring", "zvol-lz4", "zvol-zstd"}));
}

TEST(BenchOptionsTest, QuickFillsOnlyWhatWasNotGiven) {
  BenchOptions o;
  o.quick = true;
  QuickOverrides set;
  set.clients = true;
  o.clients = 7;
  ApplyQuickDefaults(o, set);
  EXPECT_EQ(o.seconds, 5);
  EXPECT_EQ(o.clients, 7);
  EXPECT_EQ(o.repeat, 1);
  EXPECT_EQ(o.size_bytes, 1ull << 30);
  BenchOptions normal;
  ApplyQuickDefaults(normal, {});
  EXPECT_EQ(normal.seconds, 20);
  EXPECT_EQ(normal.clients, 10);
  EXPECT_EQ(normal.repeat, 3);
  EXPECT_EQ(normal.size_bytes, 2ull << 30);
}

TEST(BenchOptionsTest, Validate) {
  BenchOptions o;
  o.dir = ::testing::TempDir();
  EXPECT_TRUE(ValidateOptions(o).ok());
  BenchOptions small = o;
  small.size_bytes = 100 << 20;
  EXPECT_EQ(ValidateOptions(small).code(), EINVAL);
  small.block = true;  // the block workload needs no filesystem
  EXPECT_TRUE(ValidateOptions(small).ok());
  BenchOptions bad = o;
  bad.repeat = 0;
  EXPECT_FALSE(ValidateOptions(bad).ok());
  bad = o;
  bad.dir = "/nonexistent/volstack";
  EXPECT_NE(ValidateOptions(bad).message().find("--dir"), std::string::npos);
  bad = o;
  bad.stacks = {"zfs-on-lvm"};
  EXPECT_FALSE(ValidateOptions(bad).ok());
}

TEST(BenchTest, RemoveTreeRemovesEverything) {
  std::string root = ::testing::TempDir() + "/rmtree-" + std::to_string(getpid());
  std::filesystem::create_directories(root + "/a/b");
  std::ofstream(root + "/a/b/f") << "x";
  std::ofstream(root + "/g") << "y";
  symlink("/etc/hostname", (root + "/link").c_str());
  ASSERT_TRUE(RemoveTree(root).ok());
  EXPECT_FALSE(std::filesystem::exists(root));
  EXPECT_TRUE(std::filesystem::exists("/etc/hostname"));  // the link, not its target
  EXPECT_TRUE(RemoveTree(root).ok());                     // missing is fine
}

TEST(BenchTest, BlockModeEndToEndOnTheFileStack) {
  // The whole command in --block mode on the one stack every build has: it must make the
  // scratch dir, run, remove the scratch dir and write three report files.
  std::string dir = ::testing::TempDir() + "/bench-e2e-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  BenchOptions o;
  o.block = true;
  o.stacks = {"file", "zvol-512"};
  o.seconds = 1;
  o.clients = 2;
  o.repeat = 1;
  o.size_bytes = 16 << 20;
  o.dir = dir;
  o.output = dir + "/out";
  o.volstack = "/bin/false";  // --block runs no volstack binary: in-process stacks only
  testing::internal::CaptureStdout();
  int rc = RunBench(o);
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("randread-4k"), std::string::npos) << out;
  EXPECT_NE(out.find("zvol-512"), std::string::npos) << out;
  for (const char* f : {"report.json", "report.md", "report.svg"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/out/" + f)) << f;
  }
  // Only the results are left: the scratch directory is gone.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "out");
  }
  EXPECT_EQ(entries, 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace volstack::bench

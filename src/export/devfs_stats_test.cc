#include "export/devfs_stats.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <string>

namespace volstack::exportfs {
namespace {

std::string Dump(const DevfsStats& stats) {
  char* data = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&data, &size);
  stats.DumpTo(out);
  std::fclose(out);
  std::string s(data, size);
  std::free(data);
  return s;
}

TEST(DevfsStats, OffWithoutTheVariable) {
  ::unsetenv("VOLSTACK_DEVFS_STATS");
  EXPECT_EQ(DevfsStats::FromEnvironment(), nullptr);
  ::setenv("VOLSTACK_DEVFS_STATS", "0", 1);
  EXPECT_EQ(DevfsStats::FromEnvironment(), nullptr);
  ::setenv("VOLSTACK_DEVFS_STATS", "1", 1);
  EXPECT_NE(DevfsStats::FromEnvironment(), nullptr);
  ::unsetenv("VOLSTACK_DEVFS_STATS");
}

TEST(DevfsStats, CountsRequestsSizesAndConcurrency) {
  DevfsStats stats;
  {
    DevfsStats::Scope a(&stats, DevfsOp::kWrite, 4096);
    DevfsStats::Scope b(&stats, DevfsOp::kWrite, 4096);
    DevfsStats::Scope c(&stats, DevfsOp::kWrite, 1 << 20);
  }
  { DevfsStats::Scope r(&stats, DevfsOp::kRead, 512); }
  { DevfsStats::Scope r(&stats, DevfsOp::kRead, 5000); }  // rounds up into the 8K bucket
  stats.Begin();
  stats.Record(DevfsOp::kFsync, 0, std::chrono::milliseconds(3));
  { DevfsStats::Scope nothing(nullptr, DevfsOp::kGetAttr); }  // no stats: not counted

  const std::string out = Dump(stats);
  EXPECT_NE(out.find("WRITE               3"), std::string::npos) << out;
  EXPECT_NE(out.find("READ                2"), std::string::npos) << out;
  EXPECT_NE(out.find("FSYNC               1"), std::string::npos) << out;
  EXPECT_NE(out.find("3.00"), std::string::npos) << out;  // the fsync's max, in ms
  EXPECT_EQ(out.find("GETATTR"), std::string::npos) << out;
  EXPECT_NE(out.find("WRITE sizes: 4K:2 1024K:1"), std::string::npos) << out;
  EXPECT_NE(out.find("READ sizes: <=512:1 8K:1"), std::string::npos) << out;
  EXPECT_NE(out.find("in service at once: 3"), std::string::npos) << out;
}

}  // namespace
}  // namespace volstack::exportfs

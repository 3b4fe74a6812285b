// FuseUringParameter restores the owner's value even when holders overlap (needs root and a
// kernel with the parameter; skipped otherwise).
#include "export/fuse_uring_parameter.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>
#include <thread>
#include <vector>

namespace volstack::exportfs {
namespace {

std::string Read() {
  std::ifstream in(FuseUringParameter::kPath);
  std::string v;
  in >> v;
  return v;
}

// The owner's value can only be read while no holder is at work: other test processes
// (devfs's uring cases) switch the parameter on and off beside this one.
std::string ReadOwnersValue() {
  const int fd = ::open(FuseUringParameter::kLockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::flock(fd, LOCK_EX), 0);
  std::string v = Read();
  ::close(fd);
  return v;
}

TEST(FuseUringParameterTest, OverlappingHoldersLeaveTheOwnersValue) {
  if (!FuseUringParameter::Available()) GTEST_SKIP() << "no writable " << FuseUringParameter::kPath;
  const std::string owner = ReadOwnersValue();
  {
    auto on = FuseUringParameter::Set(true);
    ASSERT_TRUE(on.ok()) << on.status().ToString();
    EXPECT_EQ(Read(), "Y");
    // A second holder waits for the first instead of noting its temporary value.
    auto blocked = FuseUringParameter::Set(false, 0);
    ASSERT_FALSE(blocked.ok());
    EXPECT_EQ(blocked.status().code(), ETIMEDOUT);
    EXPECT_EQ(Read(), "Y");
  }
  EXPECT_EQ(ReadOwnersValue(), owner);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; i++) {
    threads.emplace_back([i] {
      for (int r = 0; r < 5; r++) {
        auto p = FuseUringParameter::Set((i + r) % 2 == 0);
        EXPECT_TRUE(p.ok()) << p.status().ToString();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ReadOwnersValue(), owner);
}

}  // namespace
}  // namespace volstack::exportfs

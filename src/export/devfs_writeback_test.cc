#include "export/devfs_writeback.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "bdev/file_device.h"
#include "bdev/memory_device.h"

namespace volstack::exportfs {
namespace {

TEST(DevfsFile, OnlyFilesWrittenThroughThePageCacheGetAWriteBackFd) {
  EXPECT_EQ(DevfsFile(bdev::MemoryDevice::Create(1 << 20)).page_cache_fd, -1);
  char path[] = "/tmp/devfs_writeback_test.XXXXXX";
  const int tmp = mkstemp(path);
  ASSERT_GE(tmp, 0);
  ::close(tmp);
  auto buffered = bdev::FileDevice::Create(path, 1 << 20);
  ASSERT_TRUE(buffered.ok());
  EXPECT_EQ(DevfsFile(*buffered).page_cache_fd, (*buffered)->fd());
  bdev::FileDeviceOptions direct;
  direct.direct_io = true;
  auto odirect = bdev::FileDevice::Open(path, direct);
  if (odirect.ok()) {  // tmpfs has no O_DIRECT
    EXPECT_EQ(DevfsFile(*odirect).page_cache_fd, -1);
  }
  ::unlink(path);
}

TEST(DevfsWriteBehind, AKickedFileIsWrittenBackAndKeptOpenUntilThen) {
  char path[] = "/tmp/devfs_writeback_test.XXXXXX";
  const int tmp = mkstemp(path);
  ASSERT_GE(tmp, 0);
  ::close(tmp);
  auto device = bdev::FileDevice::Create(path, 1 << 20);
  ASSERT_TRUE(device.ok());
  auto file = std::make_shared<DevfsFile>(*device);
  ASSERT_GE(file->page_cache_fd, 0);
  std::vector<uint8_t> data(64 << 10, 0x42);
  ASSERT_TRUE(file->io.Write(0, data).ok());
  device->reset();  // the DevfsFile holds the device (and so the fd) alone now

  DevfsWriteBehind write_behind;
  write_behind.Kick(file);
  // A second kick while queued adds no pass of its own; one that comes after the worker
  // took the file (and cleared its flag) queues it again: so one pass or two.
  write_behind.Kick(file);
  for (int i = 0; i < 500 && (write_behind.passes() == 0 || file->writeback_queued.load()); i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_GE(write_behind.passes(), 1u);
  EXPECT_LE(write_behind.passes(), 2u);
  EXPECT_FALSE(file->writeback_queued.load());
  std::vector<uint8_t> back(data.size());
  ASSERT_TRUE(file->io.Read(0, back).ok());
  EXPECT_EQ(back, data);
  ::unlink(path);
}

}  // namespace
}  // namespace volstack::exportfs

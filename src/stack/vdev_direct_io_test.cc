// A pool's vdev files are opened O_DIRECT by the stack (docs/performance.md), buffered where
// the file system refuses O_DIRECT, and a file opened for anything else stays buffered. The
// open file's flags are read back from /proc/self/fdinfo.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "bdev/file_device.h"
#include "stack/pool_cache.h"
#include "stack/stack.h"
#include "stack/test_kernel.h"

namespace volstack::stack {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// The flags of this process's open file for `path` (the first fd found), if any.
std::optional<int> OpenFlags(const std::string& path) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (ec || target != path) continue;
    std::ifstream in("/proc/self/fdinfo/" + entry.path().filename().string());
    std::string key;
    while (in >> key) {
      if (key == "flags:") {
        std::string octal;
        in >> octal;
        return static_cast<int>(std::stol(octal, nullptr, 8));
      }
    }
  }
  return std::nullopt;
}

class VdevDirectIoTest : public ::testing::Test {
 protected:
  // `dir`: where the state dir and the vdev file go (its file system decides O_DIRECT).
  bool SetUpIn(const std::string& dir) {
    std::string tmpl = dir + "/volstack-vdev-direct-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return false;
    root_ = tmpl;
    state_.root = root_ + "/state";
    std::filesystem::create_directory(state_.root);
    vdev_ = root_ + "/vdev";
    auto file = bdev::FileDevice::Create(vdev_, 128 * kMiB, {});
    if (!file.ok()) return false;
    auto p = pool::Pool::Create("tank", {*file}, {});
    if (!p.ok()) return false;
    pool::VolumeOptions v;
    v.volsize = 16 * kMiB;
    if (!(*p)->CreateVolume("tank/vol", v).ok()) return false;
    const uint64_t guid = (*p)->guid();
    if (!(*p)->Close().ok()) return false;
    return AddToPoolCache(state_.root, {"tank", guid, {vdev_}}).ok();
  }
  void TearDown() override {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }
  std::unique_ptr<Stack> OpenStack() {
    Stack::Options o;
    o.kernel = std::make_shared<TestKernel>();
    return Stack::Open(state_, Mode::kOneShot, o);
  }

  std::string root_, vdev_;
  StateDir state_;
};

TEST_F(VdevDirectIoTest, PoolVdevFileIsOpenedDirect) {
  ASSERT_TRUE(SetUpIn("/var/tmp"));
  auto stack = OpenStack();
  auto pool = stack->OpenPool("tank", /*read_only=*/false);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  const auto flags = OpenFlags(vdev_);
  ASSERT_TRUE(flags.has_value());
  // A file system without O_DIRECT here would make the check meaningless: say so.
  if (!(*flags & O_DIRECT)) {
    const int fd = ::open(vdev_.c_str(), O_RDONLY | O_DIRECT);
    if (fd < 0) GTEST_SKIP() << "/var/tmp has no O_DIRECT";
    ::close(fd);
  }
  EXPECT_TRUE(*flags & O_DIRECT);

  // Data written through it reads back, after the pool is closed and opened again.
  std::vector<uint8_t> data(4096, 0xa7), back(4096);
  {
    auto vol = stack->OpenDevice("tank/vol", Access::kReadWrite);
    ASSERT_TRUE(vol.ok()) << vol.status().ToString();
    ASSERT_TRUE((*vol)->Write(12288, data).ok());
    ASSERT_TRUE((*vol)->Flush().ok());
  }
  pool = Status::NotFound("dropped");
  stack.reset();
  stack = OpenStack();
  auto vol = stack->OpenDevice("tank/vol", Access::kReadOnly);
  ASSERT_TRUE(vol.ok()) << vol.status().ToString();
  ASSERT_TRUE((*vol)->Read(12288, back).ok());
  EXPECT_EQ(back, data);
}

TEST_F(VdevDirectIoTest, FileThatIsNotAVdevStaysBuffered) {
  ASSERT_TRUE(SetUpIn("/var/tmp"));
  auto stack = OpenStack();
  auto dev = stack->OpenDevice(vdev_, Access::kReadOnly);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  const auto flags = OpenFlags(vdev_);
  ASSERT_TRUE(flags.has_value());
  EXPECT_FALSE(*flags & O_DIRECT);
}

TEST_F(VdevDirectIoTest, FileSystemWithoutDirectIoFallsBackToBuffered) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  ASSERT_TRUE(SetUpIn("/dev/shm"));
  auto stack = OpenStack();
  auto pool = stack->OpenPool("tank", /*read_only=*/false);
  // tmpfs before Linux 6.6 refuses O_DIRECT: the pool still opens, buffered. Where tmpfs
  // takes O_DIRECT, the vdev is direct as anywhere else.
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  const auto flags = OpenFlags(vdev_);
  ASSERT_TRUE(flags.has_value());
  const int fd = ::open(vdev_.c_str(), O_RDONLY | O_DIRECT);
  const bool shm_direct = fd >= 0;
  if (fd >= 0) ::close(fd);
  EXPECT_EQ(bool(*flags & O_DIRECT), shm_direct);
}

}  // namespace
}  // namespace volstack::stack

// Devfs mounted for real (needs root and /dev/fuse; skipped otherwise): devices appear and
// disappear with the registry, I/O reaches the device, and unmounting is clean or refused.
// Every mounted test runs on both transports: classic /dev/fuse and FUSE over io_uring. The
// ring needs the fuse module's enable_uring parameter at INIT time: the io_uring run sets it
// for the mount and puts the old value back right after (the connection keeps the ring), and
// is skipped where the kernel has no such parameter.
#include "export/devfs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "bdev/file_device.h"
#include "bdev/forwarding_device.h"
#include "bdev/memory_device.h"
#include "export/devfs_impl.h"
#include "export/fuse_uring_parameter.h"

namespace volstack::exportfs {

// Test names and failures say "uring"/"classic", not the enum's byte.
void PrintTo(FuseTransport transport, std::ostream* os) { *os << FuseTransportName(transport); }

namespace {

// A device that counts its flushes, can fail the next one, and can change size, as an LV
// does on lvextend.
class WatchedDevice : public bdev::ForwardingDevice {
 public:
  explicit WatchedDevice(bdev::BlockDevicePtr target) : ForwardingDevice(std::move(target)) {}
  void Resize(uint64_t size) { SetSize(size); }
  int flushes() const { return flushes_.load(); }
  std::atomic<bool> fail_next_flush{false};

 protected:
  Status DoFlush() override {
    flushes_++;
    if (fail_next_flush.exchange(false)) return Status::IoError("injected flush failure");
    return ForwardingDevice::DoFlush();
  }

 private:
  std::atomic<int> flushes_{0};
};

// A device whose every read finds bad bytes, as a pool volume's read does on a checksum
// mismatch.
class CorruptDevice : public bdev::ForwardingDevice {
 public:
  explicit CorruptDevice(bdev::BlockDevicePtr target) : ForwardingDevice(std::move(target)) {}

 protected:
  Status DoRead(uint64_t, std::span<uint8_t>) override {
    return Status::Corruption("injected checksum mismatch");
  }
};

// FUSE callers get errno values the kernel and programs expect: Corruption (EUCLEAN inside
// volstack) goes out as EIO, as a disk's bad sector would; other codes go out as they are.
TEST(FuseErrnoTest, CorruptionIsEioAtTheEdge) {
  EXPECT_EQ(FuseErrno(Status::Ok()), 0);
  EXPECT_EQ(FuseErrno(Status::Corruption("x")), EIO);
  EXPECT_EQ(FuseErrno(Status::IoError("x")), EIO);
  EXPECT_EQ(FuseErrno(Status::NoSpace("x")), ENOSPC);
  EXPECT_EQ(FuseErrno(Status::InvalidArgument("x")), EINVAL);
}

constexpr const char* kEnableUring = FuseUringParameter::kPath;

class DevfsTest : public ::testing::TestWithParam<FuseTransport> {
 protected:
  void SetUp() override {
    if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0) {
      GTEST_SKIP() << "needs root and /dev/fuse";
    }
    if (GetParam() == FuseTransport::kUring && ::access(kEnableUring, F_OK) != 0) {
      GTEST_SKIP() << "this kernel has no FUSE over io_uring (" << kEnableUring << ")";
    }
    char dir[] = "/tmp/devfs_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    device_ = bdev::MemoryDevice::Create(4 << 20, 512, 4096);
    ASSERT_TRUE(registry_.Add("pool/vol", device_).ok());
    MountWith({});
  }
  // Mounts on the test's transport; the ring's parameter is on only while mounting.
  void MountWith(DevfsOptions options) {
    options.transport = GetParam();
    std::unique_ptr<FuseUringParameter> param;
    if (GetParam() == FuseTransport::kUring) {
      auto set = FuseUringParameter::Set(true);
      ASSERT_TRUE(set.ok()) << set.status().ToString();
      param = std::move(*set);
    }
    auto fs = Devfs::Mount(dir_ + "/mnt", registry_, options);
    ASSERT_TRUE(fs.ok()) << fs.status().ToString();
    fs_ = std::move(*fs);
    ASSERT_EQ(fs_->transport(), GetParam());
    StartWatchdog();
  }

  // A request devfs never answers would hang the test in a syscall, and no signal frees it:
  // client and server are one process, so the server's /dev/fuse fd stays open while the
  // client waits. After 30 s the watchdog aborts the connection (a forced unmount), so every
  // waiting call fails instead.
  void StartWatchdog() {
    StopWatchdog();
    const std::string mnt = dir_ + "/mnt";
    watchdog_ = std::thread([this, mnt] {
      std::unique_lock lock(watchdog_mu_);
      if (watchdog_cv_.wait_for(lock, std::chrono::seconds(30),
                                [this] { return watchdog_stop_; })) {
        return;
      }
      ADD_FAILURE() << "devfs did not answer within 30 s: aborting the connection";
      ::umount2(mnt.c_str(), MNT_FORCE);
    });
  }
  void StopWatchdog() {
    {
      std::lock_guard lock(watchdog_mu_);
      watchdog_stop_ = true;
    }
    watchdog_cv_.notify_all();
    if (watchdog_.joinable()) watchdog_.join();
    watchdog_stop_ = false;
  }

  void TearDown() override {
    StopWatchdog();
    fs_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return dir_ + "/mnt/" + name; }

  std::string dir_;
  bdev::DeviceRegistry registry_;
  std::shared_ptr<bdev::MemoryDevice> device_;
  std::unique_ptr<Devfs> fs_;
  std::thread watchdog_;
  std::mutex watchdog_mu_;
  std::condition_variable watchdog_cv_;
  bool watchdog_stop_ = false;
};

TEST_P(DevfsTest, FilesFollowTheRegistry) {
  struct stat st;
  ASSERT_EQ(::stat(Path("pool/vol").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 4 << 20);
  EXPECT_EQ(st.st_blksize, 4096);
  EXPECT_NE(::stat(Path("pool/new").c_str(), &st), 0);  // a negative lookup first

  ASSERT_TRUE(registry_.Add("pool/new", bdev::MemoryDevice::Create(1 << 20)).ok());
  ASSERT_EQ(::stat(Path("pool/new").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 1 << 20);

  ASSERT_TRUE(registry_.Remove("pool/new").ok());
  ASSERT_TRUE(registry_.Remove("pool/vol").ok());
  EXPECT_NE(::stat(Path("pool/new").c_str(), &st), 0);
  EXPECT_NE(::stat(Path("pool").c_str(), &st), 0);
}

TEST_P(DevfsTest, IoReachesTheDevice) {
  const int fd = ::open(Path("pool/vol").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> data(8192, 0x5a);
  ASSERT_EQ(::pwrite(fd, data.data(), data.size(), 4096), 8192);
  ASSERT_EQ(::pwrite(fd, "xyz", 3, 100), 3);  // unaligned
  ASSERT_EQ(::fsync(fd), 0);
  std::vector<uint8_t> back(8192);
  ASSERT_TRUE(device_->Read(4096, back).ok());
  EXPECT_EQ(back, data);
  std::vector<uint8_t> head(512);
  ASSERT_TRUE(device_->Read(0, head).ok());
  EXPECT_EQ(std::string(head.begin() + 100, head.begin() + 103), "xyz");
  EXPECT_EQ(head[99], 0);

  ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 4096), 0);
  ASSERT_TRUE(device_->Read(4096, back).ok());
  EXPECT_EQ(std::vector<uint8_t>(back.begin(), back.begin() + 4096), std::vector<uint8_t>(4096, 0));
  EXPECT_EQ(back[4096], 0x5a);
  EXPECT_EQ(::lseek(fd, 0, SEEK_DATA), 0);
  EXPECT_EQ(::lseek(fd, 128 * 1024, SEEK_DATA), -1);  // only holes after the first chunk
  EXPECT_EQ(errno, ENXIO);

  // Past the end: reads are short, writes fail.
  char c;
  EXPECT_EQ(::pread(fd, &c, 1, 4 << 20), 0);
  EXPECT_EQ(::pwrite(fd, "a", 1, 4 << 20), -1);
  EXPECT_EQ(::ftruncate(fd, 1 << 20), -1);
  ::close(fd);
}

TEST_P(DevfsTest, ACorruptBlockReadsAsEio) {
  ASSERT_TRUE(
      registry_
          .Add("pool/bad", std::make_shared<CorruptDevice>(bdev::MemoryDevice::Create(1 << 20)))
          .ok());
  const int fd = ::open(Path("pool/bad").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> buf(4096);
  errno = 0;
  EXPECT_EQ(::pread(fd, buf.data(), buf.size(), 0), -1);
  EXPECT_EQ(errno, EIO);
  ::close(fd);
}

TEST_P(DevfsTest, UnmountIsRefusedWhileAFileIsOpen) {
  const int fd = ::open(Path("pool/vol").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(fs_->Unmount().code(), EBUSY);
  char c;
  EXPECT_EQ(::pread(fd, &c, 1, 0), 1);  // still serving
  ::close(fd);
  EXPECT_TRUE(fs_->Unmount().ok());
  struct stat st;
  EXPECT_NE(::stat(Path("pool/vol").c_str(), &st), 0);
}

TEST_P(DevfsTest, DestructionWithAnOpenFileDoesNotHang) {
  const int fd = ::open(Path("pool/vol").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  fs_.reset();  // forced: detach and abort
  char c;
  EXPECT_EQ(::pread(fd, &c, 1, 0), -1);  // the connection is gone
  ::close(fd);
}

TEST_P(DevfsTest, FsyncFlushesTheDeviceOnlyWhenSomethingWasWritten) {
  auto watched = std::make_shared<WatchedDevice>(bdev::MemoryDevice::Create(1 << 20));
  ASSERT_TRUE(registry_.Add("pool/watched", watched).ok());
  const int fd = ::open(Path("pool/watched").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> data(4096, 0x11);
  ASSERT_EQ(::pwrite(fd, data.data(), data.size(), 0), 4096);
  ASSERT_EQ(::fsync(fd), 0);
  EXPECT_EQ(watched->flushes(), 1);
  ASSERT_EQ(::fsync(fd), 0);  // nothing written since: no device flush
  ASSERT_EQ(::fdatasync(fd), 0);
  EXPECT_EQ(watched->flushes(), 1);
  ASSERT_EQ(::pwrite(fd, data.data(), data.size(), 8192), 4096);
  ASSERT_EQ(::fdatasync(fd), 0);
  EXPECT_EQ(watched->flushes(), 2);
  // A zeroing is a write too.
  ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0);
  ASSERT_EQ(::fsync(fd), 0);
  EXPECT_EQ(watched->flushes(), 3);
  ::close(fd);
}

// The kernel hands a file's failed flush to one fsync only; a FileDevice on the file keeps
// failing every flush and FUA write after it (file_device.h), so no later success can be
// taken as proof that the lost writes are durable. A new FileDevice starts afresh.
TEST_P(DevfsTest, AFileDeviceOnAFileWhoseFlushFailedFailsEveryFlushAfter) {
  auto watched = std::make_shared<WatchedDevice>(bdev::MemoryDevice::Create(1 << 20));
  ASSERT_TRUE(registry_.Add("pool/failing", watched).ok());
  auto file = bdev::FileDevice::Open(Path("pool/failing"));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  std::vector<uint8_t> data(4096, 0x22);
  ASSERT_TRUE((*file)->Write(0, data).ok());
  watched->fail_next_flush = true;
  EXPECT_EQ((*file)->Flush().code(), EIO);
  EXPECT_EQ(watched->flushes(), 1);

  ASSERT_TRUE((*file)->Write(4096, data).ok());
  EXPECT_EQ((*file)->Flush().code(), EIO);
  EXPECT_EQ((*file)->Write(8192, data, {.fua = true}).code(), EIO);
  EXPECT_EQ(watched->flushes(), 1);  // the file was not asked again
  // The device itself is fine, as a FileDevice opened afresh on the file shows.
  auto fresh = bdev::FileDevice::Open(Path("pool/failing"));
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*fresh)->Write(0, data).ok());
  EXPECT_TRUE((*fresh)->Flush().ok());
  EXPECT_EQ(watched->flushes(), 2);
}

TEST_P(DevfsTest, ASizeChangeReachesTheKernelBeforeTheAttributeTimeout) {
  fs_.reset();
  auto watched = std::make_shared<WatchedDevice>(bdev::MemoryDevice::Create(8 << 20));
  watched->Resize(4 << 20);
  ASSERT_TRUE(registry_.Add("vg/lv", watched).ok());
  DevfsOptions options;
  options.attr_timeout = 3600;  // without a notification the kernel keeps the old size
  MountWith(options);
  const std::string path = Path("vg/lv");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  ASSERT_EQ(st.st_size, 4 << 20);

  auto size_becomes = [&](off_t want) {
    for (int i = 0; i < 300; i++) {  // up to 3 s; the watcher looks every 50 ms
      if (::stat(path.c_str(), &st) == 0 && st.st_size == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  watched->Resize(8 << 20);  // lvextend
  EXPECT_TRUE(size_becomes(8 << 20));
  watched->Resize(2 << 20);  // lvreduce
  EXPECT_TRUE(size_becomes(2 << 20));
}

// Many requests at once from several threads, each checking what it reads back: on the ring
// they spread over every queue's entries (and wait in the kernel's queue when all are busy).
TEST_P(DevfsTest, ConcurrentIoFromManyThreadsIsServedIntact) {
  const int fd = ::open(Path("pool/vol").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  constexpr int kThreads = 8;
  constexpr int kRounds = 120;  // 8 * 120 distinct 4 KiB blocks: no two threads share one
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> buf(4096), back(4096);
      for (int r = 0; r < kRounds; r++) {
        const off_t off = static_cast<off_t>(t * kRounds + r) * 4096;
        std::fill(buf.begin(), buf.end(), static_cast<uint8_t>(t * 31 + r));
        if (::pwrite(fd, buf.data(), buf.size(), off) != 4096) bad++;
        if (::pread(fd, back.data(), back.size(), off) != 4096 || back != buf) bad++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  // A 1 MiB request fills a whole payload buffer.
  std::vector<uint8_t> big(1 << 20, 0x77), big_back(1 << 20);
  ASSERT_EQ(::pwrite(fd, big.data(), big.size(), 1 << 20), 1 << 20);
  ASSERT_EQ(::pread(fd, big_back.data(), big_back.size(), 1 << 20), 1 << 20);
  EXPECT_EQ(big_back, big);
  std::vector<uint8_t> direct(1 << 20);
  ASSERT_TRUE(device_->Read(1 << 20, direct).ok());
  EXPECT_EQ(direct, big);
  ::close(fd);
}

INSTANTIATE_TEST_SUITE_P(Transports, DevfsTest,
                         ::testing::Values(FuseTransport::kClassic, FuseTransport::kUring),
                         [](const auto& info) {
                           return std::string(FuseTransportName(info.param));
                         });

// Without the module parameter the kernel offers no ring: auto serves through /dev/fuse and
// says why; a mount that insists on the ring fails with one clear error and leaves nothing
// mounted.
TEST(DevfsTransportTest, WithoutTheParameterAutoFallsBackAndUringIsRefused) {
  if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0) {
    GTEST_SKIP() << "needs root and /dev/fuse";
  }
  if (!FuseUringParameter::Available()) GTEST_SKIP() << "no settable " << kEnableUring;
  auto param = FuseUringParameter::Set(false);
  ASSERT_TRUE(param.ok()) << param.status().ToString();
  char dir[] = "/tmp/devfs_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string mnt = std::string(dir) + "/mnt";
  bdev::DeviceRegistry registry;
  ASSERT_TRUE(registry.Add("vol", bdev::MemoryDevice::Create(1 << 20)).ok());
  {
    DevfsOptions options;
    options.transport = FuseTransport::kAuto;
    auto fs = Devfs::Mount(mnt, registry, options);
    EXPECT_TRUE(fs.ok()) << fs.status().ToString();
    if (!fs.ok()) return;
    EXPECT_EQ((*fs)->transport(), FuseTransport::kClassic);
    EXPECT_NE((*fs)->transport_reason().find("did not offer"), std::string::npos)
        << (*fs)->transport_reason();
    struct stat st;
    EXPECT_EQ(::stat((mnt + "/vol").c_str(), &st), 0);
  }
  DevfsOptions options;
  options.transport = FuseTransport::kUring;
  auto fs = Devfs::Mount(mnt, registry, options);
  ASSERT_FALSE(fs.ok());
  EXPECT_EQ(fs.status().code(), EOPNOTSUPP);
  EXPECT_NE(fs.status().message().find("enable_uring"), std::string::npos)
      << fs.status().ToString();
  std::ifstream mounts("/proc/self/mounts");
  std::string line;
  while (std::getline(mounts, line)) EXPECT_EQ(line.find(mnt), std::string::npos) << line;
  std::filesystem::remove_all(dir);
}

// The kernel offered the ring but refused an entry: it must drop the ring (devfs makes it)
// and serve through /dev/fuse, not hold every request for a ring that never completes. auto
// then serves classic and says why; uring fails the mount and leaves nothing mounted.
TEST(DevfsTransportTest, ARefusedRingEntryFallsBackToDevFuse) {
  if (::geteuid() != 0 || ::access("/dev/fuse", R_OK | W_OK) != 0) {
    GTEST_SKIP() << "needs root and /dev/fuse";
  }
  if (!FuseUringParameter::Available()) GTEST_SKIP() << "no settable " << kEnableUring;
  char dir[] = "/tmp/devfs_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string mnt = std::string(dir) + "/mnt";
  bdev::DeviceRegistry registry;
  auto device = bdev::MemoryDevice::Create(1 << 20);
  ASSERT_TRUE(registry.Add("vol", device).ok());
  DevfsOptions options;
  options.uring_refuse_first_entry_for_test = true;
  // A kernel left waiting for the ring would hang the calls below: abort after 20 s.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mu);
    if (cv.wait_for(lock, std::chrono::seconds(20), [&] { return done; })) return;
    ADD_FAILURE() << "devfs did not answer within 20 s: aborting the connection";
    ::umount2(mnt.c_str(), MNT_FORCE);
  });
  struct StopWatchdog {
    std::function<void()> stop;
    ~StopWatchdog() { stop(); }
  } stop_watchdog{[&] {
    {
      std::lock_guard lock(mu);
      done = true;
    }
    cv.notify_all();
    watchdog.join();
  }};
  {
    auto param = FuseUringParameter::Set(true);
    ASSERT_TRUE(param.ok()) << param.status().ToString();
    options.transport = FuseTransport::kAuto;
    auto fs = Devfs::Mount(mnt, registry, options);
    param->reset();
    EXPECT_TRUE(fs.ok()) << fs.status().ToString();
    if (!fs.ok()) return;
    EXPECT_EQ((*fs)->transport(), FuseTransport::kClassic);
    EXPECT_NE((*fs)->transport_reason().find("REGISTER"), std::string::npos)
        << (*fs)->transport_reason();
    const int fd = ::open((mnt + "/vol").c_str(), O_RDWR);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::pwrite(fd, "abcd", 4, 4096), 4);
    char back[4] = {};
    EXPECT_EQ(::pread(fd, back, 4, 4096), 4);
    EXPECT_EQ(std::string(back, 4), "abcd");
    ::close(fd);
  }
  {
    auto param = FuseUringParameter::Set(true);
    ASSERT_TRUE(param.ok()) << param.status().ToString();
    options.transport = FuseTransport::kUring;
    auto fs = Devfs::Mount(mnt, registry, options);
    param->reset();
    EXPECT_FALSE(fs.ok());
    EXPECT_NE(fs.status().message().find("REGISTER"), std::string::npos) << fs.status().ToString();
  }
  std::ifstream mounts("/proc/self/mounts");
  std::string line;
  while (std::getline(mounts, line)) EXPECT_EQ(line.find(mnt), std::string::npos) << line;
  std::filesystem::remove_all(dir);
}

TEST(DevfsTransportTest, NamesParseAndBadNamesAreRefused) {
  EXPECT_EQ(*ParseFuseTransport("uring"), FuseTransport::kUring);
  EXPECT_EQ(*ParseFuseTransport("classic"), FuseTransport::kClassic);
  EXPECT_EQ(*ParseFuseTransport("auto"), FuseTransport::kAuto);
  EXPECT_EQ(ParseFuseTransport("io_uring").status().code(), EINVAL);
}

}  // namespace
}  // namespace volstack::exportfs

// NbdClientDevice against a real server: nbdkit's memory plugin on a Unix socket, started by
// the test (and ended by PID; --exit-with-parent covers a crashed test). The typed BlockDevice
// conformance suite, plus what is particular to a remote device: errors at open, read-only
// exports, several connections when the server allows multi-conn, data seen by another
// client.
#include "remote/nbd_client_device.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "bdev/block_device_conformance.h"

namespace volstack::remote {
namespace {

// One nbdkit per test process, killed at exit.
class Nbdkit {
 public:
  explicit Nbdkit(std::vector<std::string> extra) {
    char dir[] = "/tmp/nbd_client_test.XXXXXX";
    if (::mkdtemp(dir) == nullptr) std::abort();
    dir_ = dir;
    socket_ = dir_ + "/nbd.sock";
    std::vector<std::string> args = {"nbdkit", "-f", "--exit-with-parent", "-U", socket_};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp("nbdkit", argv.data());
      ::_exit(127);
    }
    // The socket file appears at bind(), before nbdkit listens: wait until a connect is
    // accepted, else the first test's connect may be refused.
    for (int i = 0; i < 200 && !Accepts(socket_); i++) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
  ~Nbdkit() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    ::unlink(socket_.c_str());
    ::rmdir(dir_.c_str());
  }
  bool running() const { return pid_ > 0; }
  static bool Accepts(const std::string& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
  }
  std::string Uri(const std::string& extra_query = "") const {
    return "nbd+unix:///?socket=" + socket_ + extra_query;
  }

 private:
  std::string dir_, socket_;
  pid_t pid_ = -1;
};

const Nbdkit& MemoryServer() {
  static Nbdkit* server = [] {
    auto* s = new Nbdkit({"memory", "64M"});
    std::atexit([] { delete server; });
    return s;
  }();
  return *server;
}

struct NbdkitMemoryFactory {
  static bdev::BlockDevicePtr Make() {
    if (!MemoryServer().running()) {
      ADD_FAILURE() << "nbdkit did not start (is it installed? scripts/setup.sh lists it)";
      return nullptr;
    }
    auto d = NbdClientDevice::Open(MemoryServer().Uri());
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? bdev::BlockDevicePtr(*d) : nullptr;
  }
  static bdev::BlockDevicePtr MakeReadOnly() {
    NbdClientOptions o;
    o.read_only = true;
    auto d = NbdClientDevice::Open(MemoryServer().Uri(), o);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? bdev::BlockDevicePtr(*d) : nullptr;
  }
};

using NbdTypes = ::testing::Types<NbdkitMemoryFactory>;
INSTANTIATE_TYPED_TEST_SUITE_P(NbdClient, BlockDeviceConformance, NbdTypes);

TEST(NbdClientDeviceTest, RecognisesLibnbdUris) {
  EXPECT_TRUE(IsNbdUri("nbd://127.0.0.1:10809/vol"));
  EXPECT_TRUE(IsNbdUri("nbds://host/vol"));
  EXPECT_TRUE(IsNbdUri("nbd+unix:///vol?socket=/run/s"));
  EXPECT_TRUE(IsNbdUri("nbds+unix:///vol?socket=/run/s"));
  EXPECT_FALSE(IsNbdUri("/dev/nbd0"));
  EXPECT_FALSE(IsNbdUri("nbd/vol"));
  EXPECT_FALSE(IsNbdUri("trunk/funk"));
}

TEST(NbdClientDeviceTest, OpenErrorsNameTheUri) {
  auto bad = NbdClientDevice::Open("/tmp/x");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), EINVAL);
  const std::string uri = "nbd+unix:///?socket=/nonexistent/nbd.sock";
  auto missing = NbdClientDevice::Open(uri);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(uri), std::string::npos) << missing.status().ToString();
}

TEST(NbdClientDeviceTest, GeometryMultiConnAndDataSeenByAnotherClient) {
  ASSERT_TRUE(MemoryServer().running());
  auto a = NbdClientDevice::Open(MemoryServer().Uri());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ((*a)->size(), 64u << 20);
  EXPECT_FALSE((*a)->read_only());
  EXPECT_GT((*a)->connections(), 1u) << "nbdkit memory allows multi-conn";
  std::vector<uint8_t> data(64 << 10);
  for (size_t i = 0; i < data.size(); i++) data[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_TRUE((*a)->Write(1 << 20, data).ok());
  ASSERT_TRUE((*a)->Flush().ok());
  auto b = NbdClientDevice::Open(MemoryServer().Uri());
  ASSERT_TRUE(b.ok());
  std::vector<uint8_t> back(data.size());
  ASSERT_TRUE((*b)->Read(1 << 20, back).ok());
  EXPECT_EQ(back, data);
}

// A server that accepts the connection and never answers: Open gives up after the connect
// timeout with one error, instead of blocking forever in libnbd's handshake.
TEST(NbdClientDeviceTest, ASilentServerTimesOutWithOneError) {
  char dir[] = "/tmp/nbd_client_test.XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/silent.sock";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 8), 0);  // the kernel completes connects; nobody ever writes
  NbdClientOptions o;
  o.connect_timeout = std::chrono::milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  const std::string uri = "nbd+unix:///?socket=" + path;
  auto d = NbdClientDevice::Open(uri, o);
  const auto took = std::chrono::steady_clock::now() - start;
  ::close(fd);
  ::unlink(path.c_str());
  ::rmdir(dir);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), ETIMEDOUT) << d.status().ToString();
  EXPECT_NE(d.status().message().find(uri), std::string::npos) << d.status().ToString();
  EXPECT_NE(d.status().message().find("300 ms"), std::string::npos) << d.status().ToString();
  EXPECT_LT(took, std::chrono::seconds(3));
}

TEST(NbdClientDeviceTest, ReadOnlyExportIsReadOnly) {
  Nbdkit ro({"-r", "memory", "1M"});
  ASSERT_TRUE(ro.running());
  auto d = NbdClientDevice::Open(ro.Uri());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE((*d)->read_only());
  std::vector<uint8_t> b(4096, 1);
  EXPECT_EQ((*d)->Write(0, b).code(), EROFS);
}

}  // namespace
}  // namespace volstack::remote

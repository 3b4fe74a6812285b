#include "stack/control_socket.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace volstack::stack {
namespace {

class ControlSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/volstack-control-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/daemon.sock";
  }
  void TearDown() override {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }

  // Runs ForwardToDaemon with this process's stdout pointed at a pipe; returns what the
  // daemon wrote there.
  std::string ForwardCapturingStdout(const std::vector<std::string>& argv, int* exit_code) {
    int p[2];
    EXPECT_EQ(::pipe(p), 0);
    std::fflush(stdout);
    const int saved = ::dup(1);
    ::dup2(p[1], 1);
    ::close(p[1]);
    auto code = ForwardToDaemon(path_, argv);
    std::fflush(stdout);
    ::dup2(saved, 1);
    ::close(saved);
    EXPECT_TRUE(code.ok()) << code.status().ToString();
    *exit_code = code.ok() ? *code : -1;
    std::string out;
    char buf[256];
    ssize_t n;
    while ((n = ::read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    ::close(p[0]);
    return out;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(ControlSocketTest, RunsTheCommandWithTheClientsStdoutAndReturnsItsExitCode) {
  auto server = ControlServer::Start(path_, [](const ControlRequest& r) {
    std::string joined;
    for (const auto& a : r.argv) joined += a + "|";
    std::printf("%s", joined.c_str());
    return 7;
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_TRUE(DaemonIsRunning(path_));
  int code = 0;
  EXPECT_EQ(ForwardCapturingStdout({"volstack", "zfs", "list"}, &code), "volstack|zfs|list|");
  EXPECT_EQ(code, 7);
}

TEST_F(ControlSocketTest, RefusesASecondServerAndReplacesAStaleSocket) {
  {
    auto first = ControlServer::Start(path_, [](const ControlRequest&) { return 0; });
    ASSERT_TRUE(first.ok());
    auto second = ControlServer::Start(path_, [](const ControlRequest&) { return 0; });
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), EADDRINUSE);
  }
  // A socket file left by a daemon that died: nobody answers, so a new daemon takes over.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ::close(fd);
  EXPECT_FALSE(DaemonIsRunning(path_));
  auto server = ControlServer::Start(path_, [](const ControlRequest&) { return 3; });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  int code = 0;
  ForwardCapturingStdout({"volstack", "status"}, &code);
  EXPECT_EQ(code, 3);
}

TEST_F(ControlSocketTest, SurvivesGarbageAndKeepsServing) {
  auto server = ControlServer::Start(path_, [](const ControlRequest&) { return 0; });
  ASSERT_TRUE(server.ok());
  for (const std::string& garbage :
       {std::string("\xff\xff\xff\x7f", 4), std::string("xx"), std::string("\x05\0\0\0{bad}", 9)}) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::write(fd, garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
    ::shutdown(fd, SHUT_WR);
    char c;
    EXPECT_LE(::read(fd, &c, 1), 0);  // the daemon hangs up without answering
    ::close(fd);
  }
  int code = -1;
  ForwardCapturingStdout({"volstack", "status"}, &code);
  EXPECT_EQ(code, 0);
}

TEST_F(ControlSocketTest, NoDaemonIsAClearError) {
  auto code = ForwardToDaemon(path_, {"volstack", "status"});
  ASSERT_FALSE(code.ok());
  EXPECT_TRUE(code.status().code() == ENOENT || code.status().code() == ECONNREFUSED);
}

}  // namespace
}  // namespace volstack::stack

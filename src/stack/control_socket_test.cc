// The control protocol end to end on a real socket: a request's output reaches its own
// client only; the hello refuses another protocol version; bad bytes get one error frame and
// the server keeps serving; a request runs in the client's working directory while the
// server's stays where it was.
#include "stack/control_socket.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "stack/protocol.h"
#include "util/coding.h"
#include "util/request_io.h"

namespace volstack::stack {
namespace {

// A client's streams: stdin from /dev/null, stdout and stderr into pipes read afterwards.
class CapturedIo {
 public:
  CapturedIo() {
    EXPECT_EQ(::pipe2(out_, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(err_, O_CLOEXEC), 0);
    in_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    io_.in_fd = in_;
    io_.out_fd = out_[1];
    io_.err_fd = err_[1];
    io_.out = ::fdopen(::dup(out_[1]), "w");
    io_.err = ::fdopen(::dup(err_[1]), "w");
  }
  ~CapturedIo() {
    for (int fd : {in_, out_[0], err_[0]}) ::close(fd);
  }
  const RequestIo* io() const { return &io_; }
  // Closes the writing ends and returns what was written: {stdout, stderr}.
  std::pair<std::string, std::string> Finish() {
    std::fclose(io_.out);
    std::fclose(io_.err);
    ::close(out_[1]);
    ::close(err_[1]);
    return {Drain(out_[0]), Drain(err_[0])};
  }

 private:
  static std::string Drain(int fd) {
    std::string s;
    char buf[256];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
    return s;
  }
  int in_ = -1, out_[2] = {-1, -1}, err_[2] = {-1, -1};
  RequestIo io_;
};

class ControlSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/volstack-control-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/daemon.sock";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Forwards argv with captured streams; returns {stdout, stderr}.
  std::pair<std::string, std::string> Forward(const std::vector<std::string>& argv,
                                              Result<int>* code) {
    CapturedIo captured;
    {
      ScopedRequestIo scoped(captured.io());
      *code = ForwardToDaemon(path_, argv);
    }
    return captured.Finish();
  }

  int Raw() {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    return fd;
  }

  std::string dir_;
  std::string path_;
};

// A daemon's answer that is not what the protocol says is one error, never an exception.
TEST(CallAnswerTest, MalformedAnswersAreErrors) {
  for (const char* body : {R"({})", R"({"type":5})", R"({"type":null})", R"({"type":"reply"})",
                           R"({"type":"progress"})", R"({"type":"other"})", R"([1])", "{"}) {
    auto a = DecodeCallAnswer(body);
    EXPECT_FALSE(a.ok()) << body;
  }
  auto ok = DecodeCallAnswer(R"({"type":"reply","code":0,"data":{},"errors":[]})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->reply.code, 0);
}

TEST_F(ControlSocketTest, RunsTheCommandWithTheClientsStreamsAndReturnsItsExitCode) {
  auto server = ControlServer::Start(path_, [](const ControlRequest& r) -> Result<int> {
    std::string joined;
    for (const auto& a : r.argv) joined += a + "|";
    std::fprintf(Out(), "%s verb=%s", joined.c_str(), r.verb.c_str());
    std::fprintf(Err(), "warning");
    return 7;
  });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_TRUE(DaemonIsRunning(path_));
  Result<int> code = 0;
  auto [out, err] = Forward({"volstack", "--state-dir", "/x", "zfs", "list"}, &code);
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 7);
  EXPECT_EQ(out, "volstack|--state-dir|/x|zfs|list| verb=zfs");
  EXPECT_EQ(err, "warning");
}

TEST_F(ControlSocketTest, RefusesASecondServerAndReplacesAStaleSocket) {
  {
    auto first =
        ControlServer::Start(path_, [](const ControlRequest&) -> Result<int> { return 0; });
    ASSERT_TRUE(first.ok());
    auto second =
        ControlServer::Start(path_, [](const ControlRequest&) -> Result<int> { return 0; });
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
  auto server = ControlServer::Start(path_, [](const ControlRequest&) -> Result<int> { return 3; });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Result<int> code = 0;
  Forward({"volstack", "status"}, &code);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 3);
}

TEST_F(ControlSocketTest, BadBytesGetOneClearErrorAndTheServerKeepsServing) {
  int served = 0;
  auto server = ControlServer::Start(path_, [&](const ControlRequest&) -> Result<int> {
    served++;
    return 0;
  });
  ASSERT_TRUE(server.ok());
  struct Case {
    std::string bytes;
    std::string error;  // "" when the server just hangs up (nothing to answer)
  };
  const std::string hello = EncodeHello(kProtocolVersion);
  auto frame = [](const std::string& body) {
    uint8_t len[4];
    EncodeLE32(len, static_cast<uint32_t>(body.size()));
    return std::string(reinterpret_cast<char*>(len), 4) + body;
  };
  for (const Case& c : {
           Case{std::string("\xff\xff\xff\x7f", 4), "a frame of 2147483647 bytes"},
           Case{"xx", ""},
           Case{std::string("\x05\0\0\0{bad}", 9), "the hello is not a JSON object"},
           Case{frame("{\"type\":\"request\"}"), "expected a hello"},
           Case{frame("{\"type\":\"hello\",\"version\":\"1\"}"), "no integer \"version\""},
           // A good hello, then a request that is not one (no descriptors either).
           Case{frame(hello) + frame("[1,2]"), "the request is not a JSON object"},
           Case{frame(hello) + frame("{\"type\":\"request\",\"verb\":\"a\",\"args\":[\"b\"],"
                                     "\"cwd\":\"/\"}"),
                "request.verb 'a' is not the verb of its args"},
           // Typed calls: a malformed one, and a good one to a server that answers none.
           Case{frame(hello) + frame("{\"type\":\"call\",\"verb\":\"jobs\",\"args\":[1]}"),
                "call.args is not an object"},
           Case{frame(hello) + frame("{\"type\":\"call\",\"args\":{}}"),
                "call.verb is not a string"},
           Case{frame(hello) + frame(EncodeCall({"jobs", nlohmann::json::object()})),
                "this daemon answers no typed requests"},
       }) {
    const int fd = Raw();
    ASSERT_EQ(::write(fd, c.bytes.data(), c.bytes.size()), static_cast<ssize_t>(c.bytes.size()));
    ::shutdown(fd, SHUT_WR);
    std::string last;
    for (;;) {
      auto f = RecvFrame(fd);
      if (!f.ok()) break;
      last = *f;
    }
    ::close(fd);
    if (c.error.empty()) {
      EXPECT_EQ(last, "") << c.bytes;
    } else {
      auto reply = DecodeReply(last);
      ASSERT_FALSE(reply.ok()) << last;
      EXPECT_NE(reply.status().message().find(c.error), std::string::npos)
          << reply.status().message();
    }
  }
  EXPECT_EQ(served, 0);
  Result<int> code = -1;
  Forward({"volstack", "status"}, &code);
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(served, 1);
}

TEST_F(ControlSocketTest, AnotherProtocolVersionIsOneClearError) {
  auto server = ControlServer::Start(path_, [](const ControlRequest&) -> Result<int> { return 0; });
  ASSERT_TRUE(server.ok());
  const int fd = Raw();
  ASSERT_TRUE(SendFrame(fd, EncodeHello(kProtocolVersion + 1)).ok());
  auto reply = RecvFrame(fd);
  ::close(fd);
  ASSERT_TRUE(reply.ok());
  auto hello = DecodeHello(*reply);
  ASSERT_FALSE(hello.ok());
  EXPECT_EQ(hello.status().message(),
            "the daemon speaks control protocol version " + std::to_string(kProtocolVersion) +
                ", this volstack speaks version " + std::to_string(kProtocolVersion + 1) +
                ": use the volstack that started the daemon, or restart it (volstack down; "
                "volstack up)");
}

TEST_F(ControlSocketTest, ARequestRunsInTheClientsDirectoryAndTheServersStaysPut) {
  char before[4096];
  ASSERT_NE(::getcwd(before, sizeof before), nullptr);
  // A thread the request starts (a job) is left in the daemon's directory once the request
  // has ended, so no client's directory stays held.
  std::atomic<bool> go{false};
  std::string job_cwd;
  std::thread job;
  auto server = ControlServer::Start(path_, [&](const ControlRequest& r) -> Result<int> {
    job = std::thread([&] {
      while (!go) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      char cwd[4096];
      job_cwd = ::getcwd(cwd, sizeof cwd);
    });
    char cwd[4096];
    std::fprintf(Out(), "%s", ::getcwd(cwd, sizeof cwd));
    // A relative path resolves in the client's directory.
    return ::access("daemon.sock", F_OK) == 0 ? 0 : 1;
  });
  ASSERT_TRUE(server.ok());
  // The client runs in dir_ on a thread of its own; the process stays in `before`.
  Result<int> code = -1;
  std::pair<std::string, std::string> captured;
  std::thread client([&] {
    if (::unshare(CLONE_FS) != 0 || ::chdir(dir_.c_str()) != 0) return;
    captured = Forward({"volstack", "status"}, &code);
  });
  client.join();
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 0);
  EXPECT_EQ(captured.first, std::filesystem::canonical(dir_).string());
  char after[4096];
  ASSERT_NE(::getcwd(after, sizeof after), nullptr);
  EXPECT_STREQ(before, after);
  go = true;
  job.join();
  EXPECT_EQ(job_cwd, before);
}

TEST_F(ControlSocketTest, NoDaemonIsAClearError) {
  auto code = ForwardToDaemon(path_, {"volstack", "status"});
  ASSERT_FALSE(code.ok());
  EXPECT_TRUE(code.status().code() == ENOENT || code.status().code() == ECONNREFUSED);
}

}  // namespace
}  // namespace volstack::stack

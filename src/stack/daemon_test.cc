#include "stack/daemon.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include "stack/test_kernel.h"
#include "util/request_io.h"

namespace volstack::stack {
namespace {

using std::chrono_literals::operator""ms;

// A job doing serialized steps never runs one while a request runs; a request that releases
// the serialization (the pvmove follower) lets the job go on; StopAll inside a request does
// not deadlock with a job waiting for the serialization.
TEST(DaemonTest, JobsAndRequestsShareTheSerialization) {
  char tmpl[] = "/tmp/volstack-daemon-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const StateDir state{tmpl};
  std::atomic<bool> in_request{false}, job_stop{false};
  std::atomic<int> overlaps{0}, job_steps{0};

  Daemon::Hooks hooks;
  hooks.handle_request = [&](Stack& stack, const ControlRequest& r) -> int {
    const std::string verb = r.argv.size() > 1 ? r.argv[1] : "";
    if (verb == "start") {
      Status s = stack.jobs().Start(
          [&, sp = &stack] {
            while (!job_stop) {
              sp->jobs()
                  .Serialized([&] {
                    if (in_request) overlaps++;
                    job_steps++;
                    std::this_thread::sleep_for(1ms);
                    if (in_request) overlaps++;
                    return Status::Ok();
                  })
                  .IgnoreError();
              std::this_thread::sleep_for(1ms);
            }
          },
          [&] { job_stop = true; });
      return s.ok() ? 0 : 1;
    }
    if (verb == "work") {
      in_request = true;
      std::this_thread::sleep_for(20ms);
      in_request = false;
      return 0;
    }
    if (verb == "follow") {
      const int start = job_steps;
      ControlServer::ReleaseCurrentRequest();
      Jobs::ReleaseSerialization();
      for (int i = 0; i < 500 && job_steps < start + 5; i++) std::this_thread::sleep_for(10ms);
      ControlServer::ReacquireCurrentRequest();
      Jobs::ReacquireSerialization();
      return job_steps >= start + 5 ? 0 : 1;
    }
    if (verb == "stop") {
      stack.jobs().StopAll();
      stack.RequestStop();
      return 0;
    }
    return 2;
  };
  std::promise<Status> ready;
  std::thread daemon([&] {
    Stack::Options options;
    options.kernel = std::make_shared<TestKernel>();
    Status s = Daemon::Run(
        state, hooks, [&](Status up) { ready.set_value(up); }, options);
    EXPECT_TRUE(s.ok()) << s.ToString();
  });
  ASSERT_TRUE(ready.get_future().get().ok());
  auto start = ForwardToDaemon(state.socket_path(), {"volstack", "start"});
  ASSERT_TRUE(start.ok());
  ASSERT_EQ(*start, 0);
  for (int i = 0; i < 10; i++) {
    auto code = ForwardToDaemon(state.socket_path(), {"volstack", "work"});
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    EXPECT_EQ(*code, 0);
  }
  auto follow = ForwardToDaemon(state.socket_path(), {"volstack", "follow"});
  ASSERT_TRUE(follow.ok());
  EXPECT_EQ(*follow, 0);
  auto stop = ForwardToDaemon(state.socket_path(), {"volstack", "stop"});
  ASSERT_TRUE(stop.ok());
  EXPECT_EQ(*stop, 0);
  daemon.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_GT(job_steps.load(), 5);
  std::filesystem::remove_all(tmpl);
}

// Two clients at once against a daemon running a background job: one follows the job (and so
// lets other requests run), the other runs requests meanwhile. Each client gets exactly its
// own output; the job's messages reach neither; `jobs` lists the job with its progress.
TEST(DaemonTest, ConcurrentRequestsGetOnlyTheirOwnOutput) {
  char tmpl[] = "/tmp/volstack-daemon-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const StateDir state{tmpl};
  std::atomic<bool> job_stop{false}, following{false};
  std::atomic<int> job_steps{0}, said_while_following{0};

  Daemon::Hooks hooks;
  hooks.handle_request = [&](Stack& stack, const ControlRequest& r) -> Result<int> {
    const std::string arg = r.argv.size() > 2 ? r.argv[2] : "";
    if (r.verb == "start") {
      auto job = stack.jobs().Start(
          "slow", "tank",
          [&](JobRecord& record) {
            while (!job_stop) {
              // A job thread has no request: this is the daemon's own output.
              if (job_steps % 50 == 0) std::fprintf(Out(), "JOB-MESSAGE\n");
              if (job_steps % 50 == 0) std::fprintf(Err(), "JOB-MESSAGE\n");
              record.SetProgress("step " + std::to_string(++job_steps));
              std::this_thread::sleep_for(2ms);
            }
            return Status::Ok();
          },
          [&] { job_stop = true; });
      return job.ok() ? 0 : 1;
    }
    if (r.verb == "follow") {
      std::fprintf(Out(), "follow-begin\n");
      const int start = job_steps;
      ControlServer::ReleaseCurrentRequest();
      Jobs::ReleaseSerialization();
      following = true;
      for (int i = 0; i < 1000 && (said_while_following < 5 || job_steps < start + 20); i++) {
        std::this_thread::sleep_for(5ms);
      }
      following = false;
      std::fprintf(Out(), "follow-end\n");
      ControlServer::ReacquireCurrentRequest();
      Jobs::ReacquireSerialization();
      return 0;
    }
    if (r.verb == "say") {
      std::fprintf(Out(), "say %s\n", arg.c_str());
      std::fprintf(Err(), "err %s\n", arg.c_str());
      if (following) said_while_following++;
      return 0;
    }
    if (r.verb == "list") {
      for (const auto& j : stack.jobs().List()) {
        std::fprintf(Out(), "%llu %s %s %s\n", static_cast<unsigned long long>(j.id),
                     j.kind.c_str(), j.target.c_str(), j.state.c_str());
      }
      return 0;
    }
    if (r.verb == "stop") {
      stack.jobs().StopAll();
      stack.RequestStop();
      return 0;
    }
    return 2;
  };
  std::promise<Status> ready;
  std::thread daemon([&] {
    Stack::Options options;
    options.kernel = std::make_shared<TestKernel>();
    Status s = Daemon::Run(
        state, hooks, [&](Status up) { ready.set_value(up); }, options);
    EXPECT_TRUE(s.ok()) << s.ToString();
  });
  ASSERT_TRUE(ready.get_future().get().ok());

  // Forwards argv with the streams of a pipe each; returns the exit code, stdout, stderr.
  struct Outcome {
    int code = -1;
    std::string out, err;
  };
  auto forward = [&](std::vector<std::string> argv) {
    int out[2], err[2];
    EXPECT_EQ(::pipe(out), 0);
    EXPECT_EQ(::pipe(err), 0);
    RequestIo io;
    io.in_fd = ::open("/dev/null", O_RDONLY);
    io.out_fd = out[1];
    io.err_fd = err[1];
    io.out = ::fdopen(::dup(out[1]), "w");
    io.err = ::fdopen(::dup(err[1]), "w");
    Outcome o;
    {
      ScopedRequestIo scoped(&io);
      auto code = ForwardToDaemon(state.socket_path(), argv);
      EXPECT_TRUE(code.ok()) << code.status().ToString();
      o.code = code.ok() ? *code : -1;
    }
    std::fclose(io.out);
    std::fclose(io.err);
    for (int fd : {io.in_fd, out[1], err[1]}) ::close(fd);
    for (auto [fd, dst] : {std::pair{out[0], &o.out}, std::pair{err[0], &o.err}}) {
      char buf[512];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof buf)) > 0) dst->append(buf, static_cast<size_t>(n));
      ::close(fd);
    }
    return o;
  };

  ASSERT_EQ(forward({"volstack", "start"}).code, 0);
  Outcome followed;
  std::thread a([&] { followed = forward({"volstack", "follow"}); });
  for (int i = 0; i < 1000 && !following; i++) std::this_thread::sleep_for(2ms);
  ASSERT_TRUE(following.load());
  std::vector<Outcome> said;
  for (int i = 0; i < 5; i++) said.push_back(forward({"volstack", "say", "B" + std::to_string(i)}));
  const Outcome listed = forward({"volstack", "list"});
  a.join();

  EXPECT_EQ(followed.code, 0);
  EXPECT_EQ(followed.out, "follow-begin\nfollow-end\n");
  EXPECT_EQ(followed.err, "");
  for (int i = 0; i < 5; i++) {
    EXPECT_EQ(said[i].code, 0);
    EXPECT_EQ(said[i].out, "say B" + std::to_string(i) + "\n");
    EXPECT_EQ(said[i].err, "err B" + std::to_string(i) + "\n");
  }
  EXPECT_EQ(said_while_following.load(), 5);  // they ran while the follower waited
  EXPECT_EQ(listed.out, "1 slow tank running\n");
  EXPECT_GT(job_steps.load(), 0);
  ASSERT_EQ(forward({"volstack", "stop"}).code, 0);
  daemon.join();
  std::filesystem::remove_all(tmpl);
}

// Typed calls: `jobs` answered with data; a waiting `jobs -w` passes the job's progress on as
// it changes, and another call (`jobs -s`) is answered meanwhile.
TEST(DaemonTest, TypedCallsListWaitWithProgressAndStop) {
  char tmpl[] = "/tmp/volstack-daemon-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const StateDir state{tmpl};
  std::atomic<bool> job_stop{false};
  Daemon::Hooks hooks;
  hooks.handle_request = [&](Stack& stack, const ControlRequest& r) -> Result<int> {
    if (r.verb == "stop") {
      stack.RequestStop();
      return 0;
    }
    auto job = stack.jobs().Start(
        "slow", "tank",
        [&](JobRecord& record) {
          for (int step = 1; !job_stop; step++) {
            record.SetProgress("step " + std::to_string(step));
            std::this_thread::sleep_for(5ms);
          }
          return Status::Ok();
        },
        [&] { job_stop = true; });
    return job.ok() ? 0 : 1;
  };
  std::promise<Status> ready;
  std::thread daemon([&] {
    Stack::Options options;
    options.kernel = std::make_shared<TestKernel>();
    EXPECT_TRUE(Daemon::Run(
                    state, hooks, [&](Status up) { ready.set_value(up); }, options)
                    .ok());
  });
  ASSERT_TRUE(ready.get_future().get().ok());
  auto run = [&](const std::string& verb) {
    RequestIo io;
    io.in_fd = ::open("/dev/null", O_RDONLY);
    io.out_fd = io.err_fd = ::open("/dev/null", O_WRONLY);
    io.out = io.err = stdout;
    ScopedRequestIo scoped(&io);
    auto code = ForwardToDaemon(state.socket_path(), {"volstack", verb});
    ::close(io.in_fd);
    ::close(io.out_fd);
    return code.ok() ? *code : -1;
  };
  ASSERT_EQ(run("start"), 0);

  auto listed = CallDaemon(state.socket_path(), {"jobs", nlohmann::json::object()}, {});
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->data["jobs"].size(), 1u);
  EXPECT_EQ(listed->data["jobs"][0]["kind"], "slow");
  EXPECT_EQ(listed->data["jobs"][0]["state"], "running");

  std::mutex mu;
  std::vector<std::string> lines;
  std::atomic<bool> got_progress{false};
  Result<Reply> waited = Status::FromErrno(EPROTO, "not yet");
  std::thread waiter([&] {
    waited = CallDaemon(state.socket_path(), {"jobs", {{"wait", true}, {"ids", {1}}}},
                        [&](const std::string& line) {
                          std::lock_guard l(mu);
                          lines.push_back(line);
                          got_progress = true;
                        });
  });
  for (int i = 0; i < 1000 && !got_progress; i++) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(got_progress.load());
  // The waiter holds no lock while it waits: a stop is answered.
  auto stopped = CallDaemon(state.socket_path(), {"jobs", {{"stop", true}, {"ids", {1}}}}, {});
  waiter.join();
  ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
  EXPECT_EQ(stopped->code, 0);
  ASSERT_TRUE(waited.ok()) << waited.status().ToString();
  EXPECT_EQ(waited->code, 0);
  ASSERT_EQ(waited->data["results"].size(), 1u);
  EXPECT_EQ(waited->data["results"][0]["job"]["id"], 1);
  EXPECT_NE(waited->data["results"][0]["job"]["state"], "running");
  EXPECT_FALSE(lines.empty());
  if (!lines.empty()) {
    EXPECT_EQ(lines[0].rfind("job 1 (slow tank): step ", 0), 0u) << lines[0];
  }

  auto missing = CallDaemon(state.socket_path(), {"jobs", {{"wait", true}, {"ids", {9}}}}, {});
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->code, 1);
  EXPECT_NE(missing->data["results"][0]["error"].get<std::string>().find("no job 9"),
            std::string::npos);
  // A call this daemon does not know is refused with one message.
  auto unknown = CallDaemon(state.socket_path(), {"nonesuch", nlohmann::json::object()}, {});
  EXPECT_EQ(unknown.status().code(), EPROTO);
  EXPECT_NE(unknown.status().message().find("no typed request 'nonesuch'"), std::string::npos);

  ASSERT_EQ(run("stop"), 0);
  daemon.join();
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace volstack::stack

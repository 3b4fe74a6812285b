#include "stack/daemon.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "stack/test_kernel.h"

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

}  // namespace
}  // namespace volstack::stack

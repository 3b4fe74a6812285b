#include "stack/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "stack/requests.h"
#include "util/file_util.h"
#include "util/state_file.h"

namespace volstack::stack {

namespace {
std::atomic<bool> g_signalled{false};

void OnSignal(int) { g_signalled = true; }
}  // namespace

Status Daemon::Run(const StateDir& state, Hooks hooks, std::function<void(Status)> ready,
                   Stack::Options options) {
  VS_RETURN_IF_ERROR(PrepareStateDir(state.root));
  // One daemon per state dir: the pid file is locked for the daemon's lifetime.
  VS_ASSIGN_OR_RETURN(const int pid_fd, OpenStateFile(state.pid_path(), O_RDWR));
  if (::flock(pid_fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(pid_fd);
    return Status::Busy("a daemon is already running for " + state.root);
  }
  const std::string pid_text = std::to_string(::getpid()) + "\n";
  if (::ftruncate(pid_fd, 0) != 0 || ::pwrite(pid_fd, pid_text.data(), pid_text.size(), 0) < 0) {
    ::close(pid_fd);
    return ErrnoStatus("write " + state.pid_path());
  }

  auto stack = Stack::Open(state, Mode::kDaemon, std::move(options));
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  Status up = Status::Ok();
  {
    Jobs::Scope serial(stack->jobs());
    up = stack->Up();
  }
  // Requests run one at a time under the control server's lock, and under the stack's
  // serialization, which jobs share (jobs.h).
  auto handler = [&stack, &hooks](const ControlRequest& request) -> Result<int> {
    Jobs::Scope serial(stack->jobs());
    return hooks.handle_request(*stack, request);
  };
  auto call_handler = [&stack](const Request& request,
                               const ProgressFn& progress) -> Result<Reply> {
    Jobs::Scope serial(stack->jobs());
    return Handle(*stack, request, progress);
  };
  auto server = ControlServer::Start(state.socket_path(), handler, call_handler);
  if (!server.ok()) {
    {
      Jobs::Scope serial(stack->jobs());
      stack->Down(/*force=*/true).IgnoreError();
    }
    stack.reset();
    ::unlink(state.pid_path().c_str());
    ::close(pid_fd);
    return server.status();
  }
  if (ready) ready(up);
  while (!g_signalled && !stack->stop_requested()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Background jobs stop first (their followers answer their clients), then requests.
  stack->jobs().StopAll();
  // Stop taking requests before tearing down what they would use.
  server.value().reset();
  Status down = Status::Ok();
  {
    Jobs::Scope serial(stack->jobs());
    down = stack->Down(/*force=*/true);
  }
  stack.reset();
  ::unlink(state.pid_path().c_str());
  ::close(pid_fd);
  return down;
}

}  // namespace volstack::stack

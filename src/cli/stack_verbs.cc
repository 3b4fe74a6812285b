// up, down, status, daemon: the verbs that run a stack as a whole (see stack/daemon.h).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "cli/status.h"
#include "cli/verbs.h"
#include "stack/control_socket.h"
#include "stack/daemon.h"
#include "stack/stack.h"
#include "util/request_io.h"
#include "util/state_file.h"

namespace volstack::cli {

namespace {

stack::Daemon::Hooks MakeHooks() {
  stack::Daemon::Hooks hooks;
  hooks.handle_request = [](stack::Stack& live,
                            const stack::ControlRequest& request) -> Result<int> {
    // These start or serve a stack of their own; a client never forwards them.
    if (request.verb == "daemon" || request.verb == "bench" || request.verb == "devfs") {
      return Status::InvalidArgument("the daemon does not run '" + request.verb + "'");
    }
    std::vector<char*> argv;
    for (const auto& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int code = Main(static_cast<int>(request.argv.size()), argv.data(), &live);
    std::fflush(Out());
    live.Reconcile();
    return code;
  };
  return hooks;
}

// Starts the daemon in a child process and returns once it answers (or failed to start).
int StartDaemonInBackground(const stack::StateDir& state) {
  int ready_pipe[2];
  if (::pipe2(ready_pipe, O_CLOEXEC) != 0) return ReportFailure(ErrnoStatus("pipe"));
  const pid_t pid = ::fork();
  if (pid < 0) return ReportFailure(ErrnoStatus("fork"));
  if (pid == 0) {
    ::close(ready_pipe[0]);
    ::setsid();
    if (::fork() > 0) ::_exit(0);  // the daemon is reparented to init, never a zombie of ours
    auto opened = OpenStateFile(state.log_path(), O_WRONLY | O_APPEND);
    const int log = opened.ok() ? *opened : -1;
    const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) ::dup2(null, 0);
    if (log >= 0) {
      ::dup2(log, 1);
      ::dup2(log, 2);
    }
    bool reported = false;
    auto report = [&](const Status& s) {
      const std::string msg = s.ok() ? "ok" : s.ToString();
      if (::write(ready_pipe[1], msg.data(), msg.size()) < 0) {
      }
      ::close(ready_pipe[1]);
      reported = true;
    };
    Status s = stack::Daemon::Run(state, MakeHooks(), report);
    if (!reported) report(s.ok() ? Status::IoError("daemon stopped before it was ready") : s);
    ::_exit(s.ok() ? 0 : 1);
  }
  ::close(ready_pipe[1]);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = ::read(ready_pipe[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
  ::close(ready_pipe[0]);
  if (msg == "ok") return kExitOk;
  // The daemon runs even when part of the stack could not come up; say what is missing.
  std::fprintf(Err(), "volstack: %s\n", msg.empty() ? "daemon failed to start" : msg.c_str());
  return kExitFailure;
}

}  // namespace

void RegisterStackVerbs(CLI::App& app, Context& ctx) {
  auto foreground = std::make_shared<bool>(false);
  auto* daemon =
      AddVerb(app, ctx, "daemon", "Run the daemon that owns open devices", [&ctx, foreground] {
        const stack::StateDir state{ctx.global.state_dir};
        if (ctx.stack().live()) {
          return ReportFailure(Status::Busy("the daemon is already running"));
        }
        if (!*foreground) return StartDaemonInBackground(state);
        Status s = stack::Daemon::Run(state, MakeHooks(), [](Status up) {
          if (!up.ok()) std::fprintf(Err(), "volstack: %s\n", up.ToString().c_str());
        });
        return s.ok() ? kExitOk : ReportFailure(s);
      });
  daemon->add_flag("--foreground", *foreground, "Stay in the foreground (for systemd and tests)");

  AddVerb(app, ctx, "up", "Restore the whole stack from the state directory", [&ctx] {
    if (ctx.stack().live()) {
      Status s = ctx.stack().Up();
      return s.ok() ? kExitOk : ReportFailure(s);
    }
    return StartDaemonInBackground(stack::StateDir{ctx.global.state_dir});
  });

  auto force = std::make_shared<bool>(false);
  auto* down = AddVerb(app, ctx, "down", "Flush and take the stack down", [&ctx, force] {
    stack::Stack& live = ctx.stack();
    if (!live.live()) {
      std::fprintf(Err(), "volstack: no daemon is running for %s\n", ctx.global.state_dir.c_str());
      return kExitOk;
    }
    Status s = live.Down(*force);
    if (!s.ok()) return ReportFailure(s);
    live.RequestStop();
    return kExitOk;
  });
  down->add_flag("--force", *force, "Take down even what a loop device or mount still uses");

  AddVerb(app, ctx, "status", "Show the stack as a tree", [&ctx] { return PrintStatus(ctx); });
  RegisterJobsVerb(app, ctx);
}

}  // namespace volstack::cli

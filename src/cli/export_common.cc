#include "cli/export_common.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "export/devfs.h"
#include "export/loop_bindings.h"
#include "remote/rbd_device.h"
#include "remote/remote_device.h"
#include "util/file_util.h"
#include "util/request_io.h"
#include "util/state_file.h"

namespace volstack::cli {

std::pair<std::string, std::string> SplitExportArg(const std::string& arg) {
  if (remote::IsRemoteDeviceName(arg)) {
    // Its '=' belong to the name (rbd:P/I:conf=PATH, a URI's query): never NAME=DEVICE,
    // which would open the conf file instead. An image is exported as POOL/IMAGE[@SNAP].
    if (auto n = remote::ParseRbdName(arg); n.ok()) {
      return {n->pool + "/" + n->image + (n->snap.empty() ? "" : "@" + n->snap), arg};
    }
    return {arg, arg};
  }
  const size_t eq = arg.find('=');
  if (eq != std::string::npos && eq > 0) return {arg.substr(0, eq), arg.substr(eq + 1)};
  if (!arg.empty() && (arg.front() == '/' || arg.front() == '.')) {
    return {std::filesystem::path(arg).filename().string(), arg};
  }
  return {arg, arg};
}

std::string DevfsDir(const Context& ctx, const std::string& devfs_option) {
  if (!devfs_option.empty()) return devfs_option;
  return exportfs::DefaultDevfsDir(ctx.global.state_dir);
}

namespace {

void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0 && errno != EINTR) return;
    if (n > 0) done += static_cast<size_t>(n);
  }
}

}  // namespace

int RunServer(const Context& ctx, const std::string& what, bool foreground,
              const std::function<Status()>& start, const std::function<void()>& stop) {
  int ready_pipe[2] = {-1, -1};
  if (!foreground) {
    if (::pipe2(ready_pipe, O_CLOEXEC) != 0) return ReportFailure(ErrnoStatus("pipe"));
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) return ReportFailure(ErrnoStatus("fork"));
    if (pid > 0) {
      // Parent: wait for the child's verdict.
      ::close(ready_pipe[1]);
      std::string msg;
      char buf[512];
      ssize_t n;
      while ((n = ::read(ready_pipe[0], buf, sizeof(buf))) != 0) {
        if (n < 0) {
          if (errno == EINTR) continue;
          break;
        }
        msg.append(buf, static_cast<size_t>(n));
      }
      ::close(ready_pipe[0]);
      if (msg == "ok") return kExitOk;
      if (msg.empty()) msg = what + ": the server exited before it was ready";
      std::fprintf(Err(), "volstack: %s\n", msg.c_str());
      return kExitFailure;
    }
    ::close(ready_pipe[0]);
    ::setsid();
  }
  // Signals are taken by sigwait in this thread only: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  Status started = start();
  if (!started.ok()) {
    if (!foreground) {
      WriteAll(ready_pipe[1], started.ToString());
      ::close(ready_pipe[1]);
      stop();
      ::_exit(kExitFailure);
    }
    stop();
    return ReportFailure(started);
  }
  const std::string pid_file = ctx.global.state_dir + "/" + what + ".pid";
  ReplaceStateFile(ctx.global.state_dir, pid_file, std::to_string(::getpid()) + "\n").IgnoreError();
  if (!foreground) {
    const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    const std::string log = ctx.global.state_dir + "/" + what + ".log";
    auto opened = OpenStateFile(log, O_WRONLY | O_APPEND);
    const int log_fd = opened.ok() ? *opened : -1;
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(null_fd, STDOUT_FILENO);
    ::dup2(log_fd >= 0 ? log_fd : null_fd, STDERR_FILENO);
    if (null_fd >= 0) ::close(null_fd);
    if (log_fd >= 0) ::close(log_fd);
    WriteAll(ready_pipe[1], "ok");
    ::close(ready_pipe[1]);
  }
  int sig = 0;
  sigwait(&signals, &sig);
  stop();
  ::unlink(pid_file.c_str());
  return kExitOk;
}

}  // namespace volstack::cli

// The daemon's control socket: how a CLI process hands a command to the running daemon.
//
// Protocol (Unix stream socket <state_dir>/daemon.sock, mode 0600, root only):
//   client -> daemon: one message carrying the client's stdin, stdout and stderr as
//                     SCM_RIGHTS fds, with payload = u32 length + JSON {"argv": [...],
//                     "cwd": "..."}.
//   daemon -> client: u32 length + JSON {"exit": N} once the command has finished.
// The daemon runs the very same command code the CLI would run offline, writing straight to
// the client's own stdout/stderr, so output is byte-identical with or without a daemon.
//
// Threads: ControlServer accepts on its own thread; requests run one at a time (they share
// the process's stdio, which is pointed at the client's fds for the duration).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "util/result.h"

namespace volstack::stack {

struct ControlRequest {
  std::vector<std::string> argv;
  std::string cwd;
};

class ControlServer {
 public:
  using Handler = std::function<int(const ControlRequest&)>;

  // Binds `socket_path` (replacing a stale socket; EADDRINUSE if a live daemon answers there)
  // and starts accepting.
  static Result<std::unique_ptr<ControlServer>> Start(const std::string& socket_path,
                                                      Handler handler);
  ~ControlServer();  // stops accepting, waits for the running request, removes the socket

  const std::string& socket_path() const { return socket_path_; }

  // For a long request (pvmove) that should not hold up the others. Called on the request's
  // own thread, inside the handler: ReleaseCurrentRequest() restores the daemon's stdio and
  // cwd (the caller keeps dup()s of the client's fds it still wants to write to) and lets the
  // next request run; ReacquireCurrentRequest() takes the request lock again before the
  // handler goes on to work that must be serialized. Both are no-ops outside a request.
  static void ReleaseCurrentRequest();
  static void ReacquireCurrentRequest();

  ControlServer(std::string socket_path, int listen_fd, Handler handler);

 private:
  void AcceptLoop();
  void Serve(int conn);

  const std::string socket_path_;
  const int listen_fd_;
  const Handler handler_;
  std::atomic<bool> stopping_{false};
  std::mutex request_mu_;  // one command at a time: it owns fds 0-2 while it runs
  // Requests that released request_mu_ and have not finished; the destructor waits for them.
  std::mutex released_mu_;
  std::condition_variable released_cv_;
  int released_ = 0;  // GUARDED_BY(released_mu_)
  std::thread acceptor_;
};

// True when a daemon answers on `socket_path`.
bool DaemonIsRunning(const std::string& socket_path);

// Sends argv to the daemon with this process's stdio and waits for the exit code.
// ECONNREFUSED / ENOENT when no daemon listens.
Result<int> ForwardToDaemon(const std::string& socket_path, const std::vector<std::string>& argv);

}  // namespace volstack::stack

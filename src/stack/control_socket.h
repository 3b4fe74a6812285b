// The daemon's control socket: how a CLI process hands a command to the running daemon, in
// the typed protocol of stack/protocol.h (a versioned hello, then one request carrying the
// client's stdin/stdout/stderr as descriptors, then the exit code; or a typed call, answered
// by progress lines and a typed reply the client formats).
//
// Each connection is served on a thread of its own. The request's descriptors become that
// thread's RequestIo (util/request_io.h) and the thread gets a working directory of its own
// (unshare(CLONE_FS), then chdir to the request's cwd), so relative paths resolve as they do
// in the client; the daemon's own fds 0-2 and working directory are never touched, and a
// background job, which runs on a thread with no request, can write to no client.
//
// Threads: requests run one at a time (request_mu_), except a request that waits for a job
// (ReleaseCurrentRequest) while it waits. A client that sends nothing within kIdleTimeout is
// dropped; a malformed frame gets one error frame and the connection is closed; others are
// served meanwhile.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "stack/protocol.h"
#include "util/result.h"

namespace volstack::stack {

class ControlServer {
 public:
  // Runs the request with the client's streams installed as the thread's RequestIo; returns
  // the exit code. A Status is sent to the client as an error frame.
  using Handler = std::function<Result<int>(const ControlRequest&)>;
  // Answers a typed request (stack/requests.h), sending each progress line to the client as
  // it comes. A Status is sent as an error frame.
  using CallHandler = std::function<Result<Reply>(
      const Request&, const std::function<void(const std::string&)>& progress)>;

  // Binds `socket_path` (replacing a stale socket; EADDRINUSE if a live daemon answers there)
  // and starts accepting. Without a `call_handler`, calls are refused.
  static Result<std::unique_ptr<ControlServer>> Start(const std::string& socket_path,
                                                      Handler handler,
                                                      CallHandler call_handler = {});
  // Stops accepting, drops connections still saying hello, waits for running requests, removes
  // the socket.
  ~ControlServer();

  const std::string& socket_path() const { return socket_path_; }

  // For a request that waits for a job (pvmove, jobs -w): called on the request's own thread,
  // inside the handler, lets the next request run while it waits; Reacquire takes the request
  // lock back. No-ops outside a request.
  static void ReleaseCurrentRequest();
  static void ReacquireCurrentRequest();

  ControlServer(std::string socket_path, int listen_fd, Handler handler, CallHandler call_handler);

 private:
  void AcceptLoop();
  void Serve(int conn);
  void RunRequest(int conn, ControlRequest request, int fds[3]);
  void RunCall(int conn, const Request& request);

  const std::string socket_path_;
  const int listen_fd_;
  const Handler handler_;
  const CallHandler call_handler_;
  std::atomic<bool> stopping_{false};
  std::mutex request_mu_;  // one request at a time
  std::mutex conn_mu_;
  std::condition_variable conn_cv_;
  int connections_ = 0;  // GUARDED_BY(conn_mu_); serving threads alive
  std::thread acceptor_;
};

// True when a daemon answers on `socket_path`.
bool DaemonIsRunning(const std::string& socket_path);

// Runs argv (argv[0] the program) in the daemon with this thread's RequestIo (its descriptors
// and terminal facts) and this process's working directory; returns the command's exit code.
// ECONNREFUSED / ENOENT when no daemon listens; EPROTO with the daemon's message when it
// refused (another protocol version, a verb it does not run).
Result<int> ForwardToDaemon(const std::string& socket_path, const std::vector<std::string>& argv);

// Sends `request` to the daemon as a typed call and returns its reply; each progress frame
// before it is passed to `progress`. Errors as ForwardToDaemon.
Result<Reply> CallDaemon(const std::string& socket_path, const Request& request,
                         const std::function<void(const std::string&)>& progress);

// The frames themselves, for tests that speak the protocol by hand.
Status SendFrame(int fd, const std::string& body);
Result<std::string> RecvFrame(int fd);

}  // namespace volstack::stack

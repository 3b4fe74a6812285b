// The standard streams of the request a thread is serving.
//
// A command prints and reads its input through this, never through the process's own stdio:
// in the daemon (stack/daemon.h) many clients are served by
// one process, each request on a thread of its own with the client's descriptors (received
// over the control socket) installed here for the request's duration, so a request's output
// reaches only its client and a background job (a thread with no request) writes only to the
// daemon's own log. Outside a request (a command run with no daemon, a job) the thread's
// request is the process: fds 0-2, stdout/stderr. (A request's working directory is its
// thread's own: stack/control_socket.h.)
//
// Threads: each thread has its own current request; a ScopedRequestIo installs one for its
// scope on the constructing thread. The FILE*s belong to whoever made the RequestIo.
#pragma once

#include <cstdio>
#include <string>

namespace volstack {

struct RequestIo {
  FILE* out = stdout;
  FILE* err = stderr;
  int in_fd = 0;
  int out_fd = 1;
  int err_fd = 2;
  // The client's terminal facts, as the client saw them.
  bool stdin_tty = false;
  bool stdout_tty = false;
  bool stderr_tty = false;
};

// The current thread's request (the process's own streams when none is installed).
const RequestIo& CurrentIo();
inline FILE* Out() { return CurrentIo().out; }
inline FILE* Err() { return CurrentIo().err; }

class ScopedRequestIo {
 public:
  explicit ScopedRequestIo(const RequestIo* io);
  ~ScopedRequestIo();
  ScopedRequestIo(const ScopedRequestIo&) = delete;
  ScopedRequestIo& operator=(const ScopedRequestIo&) = delete;

 private:
  const RequestIo* previous_;
};

}  // namespace volstack

#include "stack/control_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "util/coding.h"
#include "util/request_io.h"

namespace volstack::stack {

namespace {

// How long a connection may take to say hello and send its request.
constexpr int kIdleTimeoutSeconds = 10;

// The process's working directory when the first server started, which request threads
// return to when their request ends.
int DaemonHome() {
  static const int fd = ::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  return fd;
}

// The request lock of the request running on this thread, for ReleaseCurrentRequest.
thread_local std::unique_lock<std::mutex>* t_request_lock = nullptr;

Result<sockaddr_un> SocketAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("control socket path too long: " + path);
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

Status SendAll(int fd, const void* data, size_t n) {
  auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("control socket send");
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status RecvAll(int fd, void* data, size_t n) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return Status::FromErrno(ETIMEDOUT, "control socket: client silent");
      return ErrnoStatus("control socket receive");
    }
    if (r == 0) return Status::FromErrno(ECONNRESET, "control socket closed");
    p += r;
    n -= static_cast<size_t>(r);
  }
  return Status::Ok();
}

Status CheckLength(uint32_t len) {
  if (len > kMaxMessageBytes) {
    return Status::Corruption("control protocol: a frame of " + std::to_string(len) +
                              " bytes (at most " + std::to_string(kMaxMessageBytes) + ")");
  }
  return Status::Ok();
}

Result<int> Connect(const std::string& socket_path) {
  VS_ASSIGN_OR_RETURN(sockaddr_un addr, SocketAddress(socket_path));
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket");
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    Status s = ErrnoStatus("connect " + socket_path);
    ::close(fd);
    return s;
  }
  return fd;
}

// A request frame: the length prefix travels with the client's three descriptors.
Result<std::string> RecvFrameWithFds(int conn, int fds[3]) {
  uint8_t len_bytes[4];
  char control[CMSG_SPACE(3 * sizeof(int))];
  iovec iov{len_bytes, sizeof len_bytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(conn, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    int got[3] = {-1, -1, -1};
    std::memcpy(got, CMSG_DATA(c), std::min<size_t>(count, 3) * sizeof(int));
    for (size_t i = 0; i < std::min<size_t>(count, 3); i++) fds[i] = got[i];
  }
  if (n < 0) return ErrnoStatus("control socket receive");
  if (n != 4) return Status::FromErrno(ECONNRESET, "control socket closed");
  if (msg.msg_flags & MSG_CTRUNC)
    return Status::Corruption("control protocol: too many descriptors");
  const uint32_t len = DecodeLE32(len_bytes);
  VS_RETURN_IF_ERROR(CheckLength(len));
  std::string body(len, '\0');
  VS_RETURN_IF_ERROR(RecvAll(conn, body.data(), len));
  return body;
}

}  // namespace

Status SendFrame(int fd, const std::string& body) {
  uint8_t len_bytes[4];
  EncodeLE32(len_bytes, static_cast<uint32_t>(body.size()));
  VS_RETURN_IF_ERROR(SendAll(fd, len_bytes, 4));
  return SendAll(fd, body.data(), body.size());
}

Result<std::string> RecvFrame(int fd) {
  uint8_t len_bytes[4];
  VS_RETURN_IF_ERROR(RecvAll(fd, len_bytes, 4));
  const uint32_t len = DecodeLE32(len_bytes);
  VS_RETURN_IF_ERROR(CheckLength(len));
  std::string body(len, '\0');
  VS_RETURN_IF_ERROR(RecvAll(fd, body.data(), len));
  return body;
}

bool DaemonIsRunning(const std::string& socket_path) {
  auto fd = Connect(socket_path);
  if (!fd.ok()) return false;
  ::close(*fd);
  return true;
}

Result<std::unique_ptr<ControlServer>> ControlServer::Start(const std::string& socket_path,
                                                            Handler handler,
                                                            CallHandler call_handler) {
  if (DaemonIsRunning(socket_path)) {
    return Status::FromErrno(EADDRINUSE, "a daemon is already running on " + socket_path);
  }
  ::unlink(socket_path.c_str());  // a stale socket from a daemon that died
  VS_ASSIGN_OR_RETURN(sockaddr_un addr, SocketAddress(socket_path));
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket");
  const mode_t old_mask = ::umask(0077);  // root only
  const int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::umask(old_mask);
  if (rc != 0 || ::listen(fd, 16) != 0) {
    Status s = ErrnoStatus("bind " + socket_path);
    ::close(fd);
    return s;
  }
  return std::make_unique<ControlServer>(socket_path, fd, std::move(handler),
                                         std::move(call_handler));
}

ControlServer::ControlServer(std::string socket_path, int listen_fd, Handler handler,
                             CallHandler call_handler)
    : socket_path_(std::move(socket_path)),
      listen_fd_(listen_fd),
      handler_(std::move(handler)),
      call_handler_(std::move(call_handler)) {
  DaemonHome();
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

void ControlServer::ReleaseCurrentRequest() {
  if (t_request_lock != nullptr && t_request_lock->owns_lock()) t_request_lock->unlock();
}

void ControlServer::ReacquireCurrentRequest() {
  if (t_request_lock != nullptr && !t_request_lock->owns_lock()) t_request_lock->lock();
}

ControlServer::~ControlServer() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  // Connection threads use this object until they end: a silent client times out, a request
  // finishes (jobs are stopped before the server, so no request waits on one for long).
  {
    std::unique_lock l(conn_mu_);
    conn_cv_.wait(l, [this] { return connections_ == 0; });
  }
  ::close(listen_fd_);
  ::unlink(socket_path_.c_str());
}

void ControlServer::AcceptLoop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    {
      std::lock_guard l(conn_mu_);
      connections_++;
    }
    // A thread per connection: a slow or silent client holds up no one, and each request
    // gets its own streams and working directory.
    std::thread([this, conn] {
      Serve(conn);
      ::close(conn);
      std::lock_guard l(conn_mu_);
      connections_--;
      conn_cv_.notify_all();
    }).detach();
  }
}

void ControlServer::Serve(int conn) {
  // Only root (or the daemon's own user) may drive the daemon.
  ucred cred{};
  socklen_t cred_len = sizeof cred;
  if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0 ||
      (cred.uid != 0 && cred.uid != ::getuid())) {
    SendFrame(conn, EncodeError("only root may use the volstack daemon")).IgnoreError();
    return;
  }
  timeval tv{kIdleTimeoutSeconds, 0};
  ::setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  auto refuse = [conn](const Status& why) {
    SendFrame(conn, EncodeError(why.message())).IgnoreError();
  };
  auto hello = RecvFrame(conn);
  if (!hello.ok()) {
    if (hello.status().IsCorruption()) refuse(hello.status());
    return;
  }
  auto version = DecodeHello(*hello);
  if (!version.ok()) return refuse(version.status());
  if (*version != kProtocolVersion) {
    return refuse(Status::FromErrno(
        EPROTO, "the daemon speaks control protocol version " + std::to_string(kProtocolVersion) +
                    ", this volstack speaks version " + std::to_string(*version) +
                    ": use the volstack that started the daemon, or restart it (volstack down; "
                    "volstack up)"));
  }
  if (!SendFrame(conn, EncodeHello(kProtocolVersion)).ok()) return;

  int fds[3] = {-1, -1, -1};
  auto body = RecvFrameWithFds(conn, fds);
  auto close_fds = [&fds] {
    for (int& f : fds) {
      if (f >= 0) ::close(f);
      f = -1;
    }
  };
  if (!body.ok()) {
    close_fds();
    if (body.status().IsCorruption()) refuse(body.status());
    return;
  }
  if (FrameType(*body) == "call") {
    close_fds();  // a call carries no streams: its client prints the reply
    auto call = DecodeCall(*body);
    if (!call.ok()) return refuse(call.status());
    if (!call_handler_) {
      return refuse(Status::FromErrno(EPROTO, "this daemon answers no typed requests"));
    }
    return RunCall(conn, *call);
  }
  auto request = DecodeRequest(*body);
  if (!request.ok()) {
    close_fds();
    return refuse(request.status());
  }
  if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0) {
    close_fds();
    return refuse(Status::Corruption(
        "control protocol: a request must carry stdin, stdout and stderr descriptors"));
  }
  RunRequest(conn, std::move(*request), fds);
}

void ControlServer::RunRequest(int conn, ControlRequest request, int fds[3]) {
  // This thread's working directory becomes the client's; the daemon's stays where it is.
  if (::unshare(CLONE_FS) != 0) {
    for (int i = 0; i < 3; i++) ::close(fds[i]);
    SendFrame(conn, EncodeError(ErrnoStatus("cannot give the request a working directory of its "
                                            "own (unshare CLONE_FS)")
                                    .message()))
        .IgnoreError();
    return;
  }
  if (::chdir(request.cwd.c_str()) != 0) {
    // Relative paths would resolve elsewhere: run from / and let them fail visibly.
    if (::chdir("/") != 0) {
    }
  }
  RequestIo io;
  io.in_fd = fds[0];
  io.out_fd = fds[1];
  io.err_fd = fds[2];
  io.stdin_tty = request.stdin_tty;
  io.stdout_tty = request.stdout_tty;
  io.stderr_tty = request.stderr_tty;
  // Buffered as a process's own stdio would be: stdout by line on a terminal and fully
  // otherwise, stderr not at all.
  io.out = ::fdopen(::dup(fds[1]), "w");
  io.err = ::fdopen(::dup(fds[2]), "w");
  Result<int> code = Status::IoError("cannot open the client's streams");
  if (io.out != nullptr && io.err != nullptr) {
    std::setvbuf(io.out, nullptr, request.stdout_tty ? _IOLBF : _IOFBF, BUFSIZ);
    std::setvbuf(io.err, nullptr, _IONBF, 0);
    std::unique_lock lock(request_mu_);
    t_request_lock = &lock;
    {
      ScopedRequestIo scoped(&io);
      code = handler_(request);
    }
    t_request_lock = nullptr;
  }
  // Threads the request started (a job, a listener) share this thread's directory: give
  // them the daemon's, so no client's directory (say, inside a mount) stays held.
  if (::fchdir(DaemonHome()) != 0) {
  }
  if (io.out != nullptr) std::fclose(io.out);
  if (io.err != nullptr) std::fclose(io.err);
  for (int i = 0; i < 3; i++) ::close(fds[i]);
  const std::string reply = code.ok() ? EncodeExit(*code) : EncodeError(code.status().message());
  SendFrame(conn, reply).IgnoreError();
}

void ControlServer::RunCall(int conn, const Request& request) {
  Result<Reply> reply = Status::FromErrno(EPROTO, "no reply");
  {
    std::unique_lock lock(request_mu_);
    t_request_lock = &lock;
    // A client that has gone away stops receiving progress; the request still ends.
    bool connected = true;
    auto progress = [conn, &connected](const std::string& text) {
      if (connected) connected = SendFrame(conn, EncodeProgress(text)).ok();
    };
    reply = call_handler_(request, progress);
    t_request_lock = nullptr;
  }
  const std::string frame =
      reply.ok() ? EncodeTypedReply(*reply) : EncodeError(reply.status().message());
  if (frame.size() > kMaxMessageBytes) {
    SendFrame(conn, EncodeError("the reply is larger than a frame may be")).IgnoreError();
    return;
  }
  SendFrame(conn, frame).IgnoreError();
}

// The client's half of the hello: both sides must speak this protocol version.
static Status Greet(int fd) {
  VS_RETURN_IF_ERROR(SendFrame(fd, EncodeHello(kProtocolVersion)));
  auto hello = RecvFrame(fd);
  if (!hello.ok()) return hello.status().WithContext("the daemon did not answer");
  VS_ASSIGN_OR_RETURN(const int version, DecodeHello(*hello));
  if (version != kProtocolVersion) {
    return Status::FromErrno(EPROTO, "the daemon answered with control protocol version " +
                                         std::to_string(version) + ", not " +
                                         std::to_string(kProtocolVersion));
  }
  return Status::Ok();
}

Result<Reply> CallDaemon(const std::string& socket_path, const Request& request,
                         const std::function<void(const std::string&)>& progress) {
  VS_ASSIGN_OR_RETURN(int fd, Connect(socket_path));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  VS_RETURN_IF_ERROR(Greet(fd));
  const std::string body = EncodeCall(request);
  if (body.size() > kMaxMessageBytes) return Status::InvalidArgument("request too long");
  VS_RETURN_IF_ERROR(SendFrame(fd, body));
  while (true) {
    auto frame = RecvFrame(fd);
    if (!frame.ok()) return frame.status().WithContext("the daemon did not answer");
    VS_ASSIGN_OR_RETURN(CallAnswer answer, DecodeCallAnswer(*frame));
    if (!answer.progress) return std::move(answer.reply);
    if (progress) progress(*answer.progress);
  }
}

Result<int> ForwardToDaemon(const std::string& socket_path, const std::vector<std::string>& argv) {
  VS_ASSIGN_OR_RETURN(int fd, Connect(socket_path));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  VS_RETURN_IF_ERROR(Greet(fd));
  const RequestIo& io = CurrentIo();
  ControlRequest request;
  request.argv = argv;
  request.verb =
      VerbOf(std::vector<std::string>(argv.size() > 1 ? argv.begin() + 1 : argv.end(), argv.end()));
  char cwd[4096];
  request.cwd = ::getcwd(cwd, sizeof cwd) != nullptr ? cwd : "/";
  request.stdin_tty = io.stdin_tty;
  request.stdout_tty = io.stdout_tty;
  request.stderr_tty = io.stderr_tty;
  const std::string body = EncodeRequest(request);
  if (body.size() > kMaxMessageBytes) return Status::InvalidArgument("command line too long");
  std::fflush(io.out);
  std::fflush(io.err);
  uint8_t len_bytes[4];
  EncodeLE32(len_bytes, static_cast<uint32_t>(body.size()));
  int fds[3] = {io.in_fd, io.out_fd, io.err_fd};
  char control[CMSG_SPACE(sizeof fds)] = {};
  iovec iov{len_bytes, sizeof len_bytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  if (::sendmsg(fd, &msg, MSG_NOSIGNAL) != 4) return ErrnoStatus("send to daemon");
  VS_RETURN_IF_ERROR(SendAll(fd, body.data(), body.size()));
  auto reply = RecvFrame(fd);
  if (!reply.ok()) return reply.status().WithContext("the daemon did not answer");
  return DecodeReply(*reply);
}

}  // namespace volstack::stack

#include "stack/control_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "util/coding.h"

namespace volstack::stack {

namespace {

constexpr uint32_t kMaxMessage = 1 << 20;

// The request running on this thread, for ReleaseCurrentRequest.
struct RunningRequest {
  std::unique_lock<std::mutex>* lock = nullptr;
  int saved[3] = {-1, -1, -1};
  std::string old_cwd;
  bool released = false;
  std::function<void()> on_release;  // counts the request as released in its server
};
thread_local RunningRequest* t_request = nullptr;

void RestoreProcessState(RunningRequest& r) {
  std::fflush(stdout);
  std::fflush(stderr);
  for (int i = 0; i < 3; i++) {
    ::dup2(r.saved[i], i);
    ::close(r.saved[i]);
    r.saved[i] = -1;
  }
  if (!r.old_cwd.empty() && ::chdir(r.old_cwd.c_str()) != 0) {
  }
}

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
      return ErrnoStatus("control socket receive");
    }
    if (r == 0) return Status::FromErrno(ECONNRESET, "control socket closed");
    p += r;
    n -= static_cast<size_t>(r);
  }
  return Status::Ok();
}

Result<std::string> RecvMessage(int fd) {
  uint8_t len_bytes[4];
  VS_RETURN_IF_ERROR(RecvAll(fd, len_bytes, 4));
  const uint32_t len = DecodeLE32(len_bytes);
  if (len > kMaxMessage) return Status::Corruption("control message too large");
  std::string body(len, '\0');
  VS_RETURN_IF_ERROR(RecvAll(fd, body.data(), len));
  return body;
}

Status SendMessage(int fd, const std::string& body) {
  uint8_t len_bytes[4];
  EncodeLE32(len_bytes, static_cast<uint32_t>(body.size()));
  VS_RETURN_IF_ERROR(SendAll(fd, len_bytes, 4));
  return SendAll(fd, body.data(), body.size());
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

}  // namespace

bool DaemonIsRunning(const std::string& socket_path) {
  auto fd = Connect(socket_path);
  if (!fd.ok()) return false;
  ::close(*fd);
  return true;
}

Result<std::unique_ptr<ControlServer>> ControlServer::Start(const std::string& socket_path,
                                                            Handler handler) {
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
  return std::make_unique<ControlServer>(socket_path, fd, std::move(handler));
}

ControlServer::ControlServer(std::string socket_path, int listen_fd, Handler handler)
    : socket_path_(std::move(socket_path)), listen_fd_(listen_fd), handler_(std::move(handler)) {
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

void ControlServer::ReleaseCurrentRequest() {
  RunningRequest* r = t_request;
  if (r == nullptr || r->released) return;
  RestoreProcessState(*r);
  r->released = true;
  r->on_release();
  r->lock->unlock();
}

void ControlServer::ReacquireCurrentRequest() {
  RunningRequest* r = t_request;
  if (r == nullptr || !r->released || r->lock->owns_lock()) return;
  r->lock->lock();
}

ControlServer::~ControlServer() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  {
    // Requests that let the others run must finish before the lock they return to goes.
    std::unique_lock l(released_mu_);
    released_cv_.wait(l, [this] { return released_ == 0; });
  }
  // Wait for a request still running; connection threads touch nothing of ours after it.
  std::lock_guard lock(request_mu_);
  ::close(listen_fd_);
  ::unlink(socket_path_.c_str());
}

void ControlServer::AcceptLoop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    // Requests are short and serialized; a thread per connection keeps a slow client from
    // blocking the acceptor (it then waits on request_mu_).
    std::thread([this, conn] {
      Serve(conn);
      ::close(conn);
    }).detach();
  }
}

void ControlServer::Serve(int conn) {
  // Only root (or the daemon's own user) may drive the daemon.
  ucred cred{};
  socklen_t cred_len = sizeof cred;
  if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0 ||
      (cred.uid != 0 && cred.uid != ::getuid())) {
    return;
  }
  // The first message carries three fds; receive them with the length prefix.
  uint8_t len_bytes[4];
  char control[CMSG_SPACE(3 * sizeof(int))];
  iovec iov{len_bytes, sizeof len_bytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  if (::recvmsg(conn, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL) != 4) return;
  int fds[3] = {-1, -1, -1};
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(3 * sizeof(int))) {
      std::memcpy(fds, CMSG_DATA(c), sizeof fds);
    }
  }
  auto close_fds = [&fds] {
    for (int& f : fds) {
      if (f >= 0) ::close(f);
      f = -1;
    }
  };
  const uint32_t len = DecodeLE32(len_bytes);
  if (fds[0] < 0 || len > kMaxMessage) return close_fds();
  std::string body(len, '\0');
  if (!RecvAll(conn, body.data(), len).ok()) return close_fds();
  ControlRequest request;
  try {
    auto j = nlohmann::json::parse(body);
    request.argv = j.at("argv").get<std::vector<std::string>>();
    request.cwd = j.value("cwd", "/");
  } catch (const std::exception&) {
    return close_fds();
  }
  int exit_code = 1;
  bool released = false;
  {
    std::unique_lock lock(request_mu_);
    std::fflush(stdout);
    std::fflush(stderr);
    RunningRequest running;
    running.lock = &lock;
    for (int i = 0; i < 3; i++) running.saved[i] = ::dup(i);
    for (int i = 0; i < 3; i++) ::dup2(fds[i], i);
    char old_cwd[4096];
    if (::getcwd(old_cwd, sizeof old_cwd) != nullptr) running.old_cwd = old_cwd;
    if (::chdir(request.cwd.c_str()) != 0) {
      // Relative paths would resolve elsewhere; run from / and let them fail visibly.
      if (::chdir("/") != 0) {
      }
    }
    running.on_release = [this] {
      std::lock_guard l(released_mu_);
      released_++;
    };
    t_request = &running;
    exit_code = handler_(request);
    t_request = nullptr;
    released = running.released;
    if (!released) RestoreProcessState(running);
  }
  if (released) {
    std::lock_guard l(released_mu_);
    released_--;
    released_cv_.notify_all();
  }
  close_fds();
  SendMessage(conn, nlohmann::json{{"exit", exit_code}}.dump()).IgnoreError();
}

Result<int> ForwardToDaemon(const std::string& socket_path, const std::vector<std::string>& argv) {
  VS_ASSIGN_OR_RETURN(int fd, Connect(socket_path));
  char cwd[4096];
  nlohmann::json j{{"argv", argv}, {"cwd", ::getcwd(cwd, sizeof cwd) ? cwd : "/"}};
  const std::string body = j.dump();
  uint8_t len_bytes[4];
  EncodeLE32(len_bytes, static_cast<uint32_t>(body.size()));
  int fds[3] = {0, 1, 2};
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
  Status s = ::sendmsg(fd, &msg, MSG_NOSIGNAL) == 4 ? Status::Ok() : ErrnoStatus("send to daemon");
  if (s.ok()) s = SendAll(fd, body.data(), body.size());
  if (!s.ok()) {
    ::close(fd);
    return s;
  }
  auto reply = RecvMessage(fd);
  ::close(fd);
  if (!reply.ok()) return reply.status().WithContext("daemon did not answer");
  try {
    return nlohmann::json::parse(*reply).at("exit").get<int>();
  } catch (const std::exception&) {
    return Status::Corruption("daemon sent a malformed reply");
  }
}

}  // namespace volstack::stack

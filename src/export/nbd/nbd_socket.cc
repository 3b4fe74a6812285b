#include "export/nbd/nbd_socket.h"

#include <arpa/inet.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace volstack::exportfs::nbd {

namespace {
Status TlsError(const char* what, ssize_t code) {
  const int err = code == GNUTLS_E_PREMATURE_TERMINATION ? ECONNRESET : EIO;
  return Status::FromErrno(
      err, std::string("tls ") + what + ": " + gnutls_strerror(static_cast<int>(code)));
}
}  // namespace

Result<size_t> Transport::Recv(void* buf, size_t n) {
  for (;;) {
    const ssize_t r = tls_ == nullptr ? ::recv(fd_, buf, n, 0) : gnutls_record_recv(tls_, buf, n);
    if (r >= 0) return static_cast<size_t>(r);
    if (tls_ == nullptr) {
      if (errno == EINTR) continue;
      return ErrnoStatus("recv");
    }
    if (r == GNUTLS_E_INTERRUPTED) continue;
    return TlsError("recv", r);
  }
}

Status Transport::Send(struct iovec* iov, int count) {
  if (tls_ == nullptr) return WriteFully(fd_, iov, count);
  // Small pieces (a reply header and its short payload) go out as one TLS record.
  size_t total = 0;
  for (int i = 0; i < count; i++) total += iov[i].iov_len;
  uint8_t joined[4096];
  iovec one;
  if (count > 1 && total <= sizeof(joined)) {
    size_t at = 0;
    for (int i = 0; i < count; i++) {
      std::memcpy(joined + at, iov[i].iov_base, iov[i].iov_len);
      at += iov[i].iov_len;
    }
    one = {joined, total};
    iov = &one;
    count = 1;
  }
  for (int i = 0; i < count; i++) {
    auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
    size_t left = iov[i].iov_len;
    while (left > 0) {
      const ssize_t r = gnutls_record_send(tls_, p, left);
      if (r == GNUTLS_E_INTERRUPTED) continue;
      if (r < 0) return TlsError("send", r);
      p += r;
      left -= static_cast<size_t>(r);
    }
  }
  return Status::Ok();
}

Status Transport::ReadFully(std::span<uint8_t> buf) {
  size_t done = 0;
  while (done < buf.size()) {
    VS_ASSIGN_OR_RETURN(const size_t n, Recv(buf.data() + done, buf.size() - done));
    if (n == 0) {
      return Status::FromErrno(ECONNRESET, done == 0 ? "closed" : "peer vanished mid-message");
    }
    done += n;
  }
  return Status::Ok();
}

Status Transport::Discard(uint64_t n) {
  std::vector<uint8_t> sink(std::min<uint64_t>(n, 1 << 20));
  while (n > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, sink.size()));
    VS_RETURN_IF_ERROR(ReadFully(std::span(sink.data(), chunk)));
    n -= chunk;
  }
  return Status::Ok();
}

Status ReadFully(int fd, std::span<uint8_t> buf) {
  size_t done = 0;
  while (done < buf.size()) {
    const ssize_t n = ::recv(fd, buf.data() + done, buf.size() - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) {
      return Status::FromErrno(ECONNRESET, done == 0 ? "closed" : "peer vanished mid-message");
    }
    if (errno == EINTR) continue;
    return ErrnoStatus("recv");
  }
  return Status::Ok();
}

Status Discard(int fd, uint64_t n) {
  std::vector<uint8_t> sink(std::min<uint64_t>(n, 1 << 20));
  while (n > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, sink.size()));
    VS_RETURN_IF_ERROR(ReadFully(fd, std::span(sink.data(), chunk)));
    n -= chunk;
  }
  return Status::Ok();
}

Status SocketReader::Refill(bool started) {
  pos_ = end_ = 0;
  VS_ASSIGN_OR_RETURN(const size_t n, transport_.Recv(buf_.data(), buf_.size()));
  if (n == 0) {
    return Status::FromErrno(ECONNRESET, started ? "peer vanished mid-message" : "closed");
  }
  end_ = n;
  return Status::Ok();
}

Status SocketReader::ReadFully(std::span<uint8_t> out) {
  size_t done = 0;
  while (done < out.size()) {
    if (pos_ == end_) {
      const size_t want = out.size() - done;
      if (want >= buf_.size() / 2) {  // a large payload: straight into its buffer
        Status s = transport_.ReadFully(out.subspan(done));
        if (!s.ok() && done > 0 && s.code() == ECONNRESET) {
          return Status::FromErrno(ECONNRESET, "peer vanished mid-message");
        }
        return s;
      }
      VS_RETURN_IF_ERROR(Refill(done > 0));
    }
    const size_t n = std::min(end_ - pos_, out.size() - done);
    std::memcpy(out.data() + done, buf_.data() + pos_, n);
    pos_ += n;
    done += n;
  }
  return Status::Ok();
}

Status SocketReader::Discard(uint64_t n) {
  const uint64_t buffered = std::min<uint64_t>(n, end_ - pos_);
  pos_ += static_cast<size_t>(buffered);
  n -= buffered;
  return n == 0 ? Status::Ok() : transport_.Discard(n);
}

Status WriteFully(int fd, struct iovec* iov, int count) {
  while (count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("send");
    }
    while (count > 0 && static_cast<size_t>(n) >= iov->iov_len) {
      n -= static_cast<ssize_t>(iov->iov_len);
      iov++;
      count--;
    }
    if (count > 0) {
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + n;
      iov->iov_len -= static_cast<size_t>(n);
    }
  }
  return Status::Ok();
}

Result<int> ListenTcp(const std::string& address, uint16_t* bound_port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return Status::InvalidArgument("nbd: bind address '" + address + "' is not HOST:PORT");
  }
  std::string host = address.substr(0, colon);
  const std::string port_s = address.substr(colon + 1);
  if (host == "localhost") host = "127.0.0.1";
  char* end = nullptr;
  const unsigned long port = std::strtoul(port_s.c_str(), &end, 10);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (port_s.empty() || *end != '\0' || port > 65535 ||
      ::inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1) {
    return Status::InvalidArgument("nbd: bad bind address '" + address + "'");
  }
  sa.sin_port = htons(static_cast<uint16_t>(port));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket");
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(fd, 64) != 0) {
    Status s = ErrnoStatus("nbd: bind " + address);
    ::close(fd);
    return s;
  }
  socklen_t len = sizeof(sa);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  if (bound_port != nullptr) *bound_port = ntohs(sa.sin_port);
  return fd;
}

Result<int> ListenUnix(const std::string& path) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(sa.sun_path)) {
    return Status::InvalidArgument("nbd: socket path '" + path + "' is empty or too long");
  }
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Status::Exists("nbd: " + path + " exists, not a socket");
    ::unlink(path.c_str());  // stale
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket");
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      ::chmod(path.c_str(), 0600) != 0 || ::listen(fd, 64) != 0) {
    Status s = ErrnoStatus("nbd: listen on " + path);
    ::close(fd);
    return s;
  }
  return fd;
}

}  // namespace volstack::exportfs::nbd

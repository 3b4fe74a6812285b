// Blocking socket I/O for the NBD server: whole messages or an error, never a partial one.
// Writes use MSG_NOSIGNAL, so a vanished peer is an EPIPE Status, not a SIGPIPE.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "util/result.h"

struct gnutls_session_int;
typedef struct gnutls_session_int* gnutls_session_t;

namespace volstack::exportfs::nbd {

// Reads exactly buf.size() bytes. A clean EOF before the first byte is ECONNRESET with the
// message "closed"; mid-message it is ECONNRESET too (the peer vanished).
Status ReadFully(int fd, std::span<uint8_t> buf);
// Reads and drops `n` bytes.
Status Discard(int fd, uint64_t n);
// Writes all of iov[0..count). Modifies iov.
Status WriteFully(int fd, struct iovec* iov, int count);

// Transport: one connection's byte stream, plain or (after StartTls) through a GnuTLS
// session. Recv and Send may run at the same time on two threads (GnuTLS allows one sender
// and one receiver on a session once its handshake is done); two receivers or two senders
// must be serialised by the caller.
class Transport {
 public:
  explicit Transport(int fd) : fd_(fd) {}
  int fd() const { return fd_; }
  // From now on every byte goes through `session` (already handshaken, owned by the caller,
  // which keeps it alive as long as this transport).
  void StartTls(gnutls_session_t session) { tls_ = session; }
  bool tls() const { return tls_ != nullptr; }

  // Like recv(2): bytes read (> 0), 0 at a clean end of stream, or an error.
  Result<size_t> Recv(void* buf, size_t n);
  // Writes all of iov[0..count). Modifies iov.
  Status Send(struct iovec* iov, int count);
  Status ReadFully(std::span<uint8_t> buf);
  Status Discard(uint64_t n);

 private:
  const int fd_;
  gnutls_session_t tls_ = nullptr;
};

// SocketReader: ReadFully and Discard through a buffer, so a burst of pipelined requests
// (a client with 32 requests in flight sends them back to back) costs one recv() for many
// requests instead of one or two recv() each. Reads larger than half the buffer bypass it.
// Not thread-safe: the caller serialises (the connection's read lock).
class SocketReader {
 public:
  explicit SocketReader(Transport& transport, size_t capacity = 128 * 1024)
      : transport_(transport), buf_(capacity) {}

  // Same contracts as the free functions.
  Status ReadFully(std::span<uint8_t> out);
  Status Discard(uint64_t n);

 private:
  // Reads at least one byte into the (empty) buffer. `started`: part of the message was read.
  Status Refill(bool started);

  Transport& transport_;
  std::vector<uint8_t> buf_;
  size_t pos_ = 0;  // buf_[pos_, end_) holds bytes received and not yet consumed
  size_t end_ = 0;
};

// Listening sockets. `address` is "HOST:PORT" (HOST an IPv4 address or "localhost"; PORT
// 0 picks one); a Unix socket path replaces a stale socket file and is made 0600.
Result<int> ListenTcp(const std::string& address, uint16_t* bound_port);
Result<int> ListenUnix(const std::string& path);

}  // namespace volstack::exportfs::nbd

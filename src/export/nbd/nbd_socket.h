// Blocking socket I/O for the NBD server: whole messages or an error, never a partial one.
// Writes use MSG_NOSIGNAL, so a vanished peer is an EPIPE Status, not a SIGPIPE.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <string>

#include "util/result.h"

namespace volstack::exportfs::nbd {

// Reads exactly buf.size() bytes. A clean EOF before the first byte is ECONNRESET with the
// message "closed"; mid-message it is ECONNRESET too (the peer vanished).
Status ReadFully(int fd, std::span<uint8_t> buf);
// Reads and drops `n` bytes.
Status Discard(int fd, uint64_t n);
// Writes all of iov[0..count). Modifies iov.
Status WriteFully(int fd, struct iovec* iov, int count);

// Listening sockets. `address` is "HOST:PORT" (HOST an IPv4 address or "localhost"; PORT
// 0 picks one); a Unix socket path replaces a stale socket file and is made 0600.
Result<int> ListenTcp(const std::string& address, uint16_t* bound_port);
Result<int> ListenUnix(const std::string& path);

}  // namespace volstack::exportfs::nbd

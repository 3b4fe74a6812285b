// The NBD server: volstack devices for NBD clients (qemu-img, nbdcopy, nbdinfo, fio).
//
// Theory. The server listens on a Unix socket or a TCP address (127.0.0.1 unless told
// otherwise). An accept thread takes connections; each gets a thread that runs the
// fixed-newstyle handshake (nbd_handshake.cc) and then serves requests
// (nbd_connection.cc). Export name = device name in the registry.
//
// Handshake: NBDMAGIC/IHAVEOPT with FIXED_NEWSTYLE|NO_ZEROES; options EXPORT_NAME, ABORT,
// LIST, INFO, GO (INFO_EXPORT, INFO_BLOCK_SIZE always: minimum = logical block, preferred =
// physical block, maximum = max_payload; INFO_NAME when asked), STRUCTURED_REPLY,
// LIST/SET_META_CONTEXT (base:allocation only), STARTTLS (nbd_tls.h); everything else
// ERR_UNSUP, after which the next option is read as usual. Malformed option bodies get
// ERR_INVALID; a bad magic or unknown client flag ends the connection.
//
// TLS: --tls=off refuses STARTTLS (ERR_POLICY); on offers it; require answers every option
// but STARTTLS and ABORT with ERR_TLS_REQD until TLS is up (EXPORT_NAME, which cannot carry
// an error, closes). After STARTTLS all state negotiated in plaintext is forgotten. A TCP
// listener without credentials is refused at Start unless the mode is an explicit off: a
// port on the network is reachable by every user of the host and beyond, a Unix socket is
// 0600. With TLS, one thread may send while another receives (GnuTLS allows it), which is
// exactly the read-lock/write-lock split of the transmission phase.
//
// Limits, so that one client cannot lock the others out: the handshake has one deadline
// for all of it (handshake_limit_sec from accept, TLS handshake included), enforced by the
// accept loop, which shuts down the socket of a connection still haggling past it (a
// per-read timeout would let a client that drips one option a second stay forever). At
// max_connections a new client gets a refusal on a short-lived thread: the greeting, then
// ERR_SHUTDOWN with "server at its connection limit" to each option (ACK to ABORT), within
// 2 s; at most 16 refusals run at once and beyond that the socket is closed at once, so
// refusing is bounded too. Served clients are never touched by either.
//
// Transmission: every connection runs threads_per_connection threads. Each takes the read
// lock, reads one request (header and WRITE payload) through the connection's receive buffer
// (a client keeping 32 requests in flight sends them back to back: one recv() then serves
// several requests instead of one or two recv() each), releases it, executes the request on
// the device through a ByteRangeIo and sends the reply under the write lock. So requests
// are served out of order, replies never interleave, and there is no queue or hand-off
// between threads. READ replies are one OFFSET_DATA chunk (structured) or a simple reply;
// BLOCK_STATUS is one chunk from the device's allocation query (hole = HOLE|ZERO).
//
// Errors: a Status becomes a wire error only here (WireError): read-only -> EPERM; beyond
// the end -> EINVAL for reads, trims and block status, ENOSPC for writes and zeroes;
// unknown commands or flags, oversized requests -> EINVAL; FAST_ZERO without native zeroing
// -> ENOTSUP. A write larger than the maximum is drained and refused (beyond 64 MiB the
// client is dropped, as the stream cannot be trusted).
//
// Durability: FLUSH is the device's Flush, which covers every completed write from every
// connection, hence CAN_MULTI_CONN. FUA writes are device FUA writes.
//
// Shutdown and failure: a client that vanishes ends its connection (the reader sees EOF,
// in-flight replies fail quietly); the server goes on. Stop() shuts every socket down and
// joins every thread. Finished connections are reaped by the accept loop.
#include "export/nbd/nbd_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "export/nbd/nbd_connection.h"
#include "export/nbd/nbd_protocol.h"
#include "export/nbd/nbd_socket.h"
#include "util/coding.h"

namespace volstack::exportfs::nbd {

namespace {

// Refusals at the connection limit under way at once, and how long one may take: beyond
// either the socket is just closed, so refusing costs the server a bounded effort.
constexpr size_t kMaxRefusals = 16;
constexpr int kRefusalTimeoutMs = 2000;

using Clock = std::chrono::steady_clock;

// Reads exactly n bytes before `deadline`.
bool RecvWithin(int fd, uint8_t* buf, size_t n, Clock::time_point deadline) {
  size_t done = 0;
  while (done < n) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    const ssize_t r = ::recv(fd, buf + done, n - done, MSG_DONTWAIT);
    if (r <= 0) return false;
    done += static_cast<size_t>(r);
  }
  return true;
}

// The fixed-newstyle greeting, then ERR_SHUTDOWN with a message to each option the client
// sends (STARTTLS included: no TLS is spent on a client that cannot be served).
void RefuseClient(int fd, size_t limit) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(kRefusalTimeoutMs);
  timeval tv{kRefusalTimeoutMs / 1000, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  uint8_t hello[18];
  EncodeBE64(hello, kNbdMagic);
  EncodeBE64(hello + 8, kOptMagic);
  EncodeBE16(hello + 16, kFlagFixedNewstyle | kFlagNoZeroes);
  iovec iov{hello, sizeof(hello)};
  uint8_t cflags[4];
  if (!WriteFully(fd, &iov, 1).ok() || !RecvWithin(fd, cflags, sizeof(cflags), deadline)) return;
  const std::string msg =
      "server at its connection limit (" + std::to_string(limit) + " clients); try again later";
  std::vector<uint8_t> data;
  for (int i = 0; i < 4; i++) {
    uint8_t h[kOptionHeaderSize];
    if (!RecvWithin(fd, h, sizeof(h), deadline)) return;
    const OptionHeader oh = DecodeOptionHeader(std::span<const uint8_t, kOptionHeaderSize>(h));
    if (oh.magic != kOptMagic || oh.length > 64 * 1024) return;
    data.resize(oh.length);
    if (!RecvWithin(fd, data.data(), data.size(), deadline)) return;
    if (oh.option == kOptExportName) return;  // no way to answer but closing
    uint8_t rh[kOptionReplyHeaderSize];
    const bool abort = oh.option == kOptAbort;
    EncodeOptionReplyHeader(std::span<uint8_t, kOptionReplyHeaderSize>(rh), oh.option,
                            abort ? kRepAck : kRepErrShutdown,
                            abort ? 0 : static_cast<uint32_t>(msg.size()));
    iovec out[2] = {{rh, sizeof(rh)}, {const_cast<char*>(msg.data()), msg.size()}};
    if (!WriteFully(fd, out, abort ? 1 : 2).ok() || abort) return;
  }
}

}  // namespace

Status ValidateServerOptions(NbdServerOptions& options) {
  if (!options.socket_path.empty() && !options.bind.empty()) {
    return Status::InvalidArgument("nbd: give a socket path or a bind address, not both");
  }
  if (options.max_connections == 0) {
    return Status::InvalidArgument("nbd: --max-connections must be at least 1");
  }
  if (options.handshake_limit_sec == 0) {
    return Status::InvalidArgument("nbd: --handshake-limit must be at least 1 second");
  }
  VS_ASSIGN_OR_RETURN(options.tls, ResolveTlsMode(options.tls, !options.bind.empty(),
                                                  options.tls_psk, options.tls_certificates));
  if (options.tls_verify_peer && options.tls_certificates.empty()) {
    return Status::InvalidArgument(
        "nbd: --tls-verify-peer checks X.509 client certificates: it needs --tls-certificates DIR");
  }
  return Status::Ok();
}

Result<std::unique_ptr<NbdServer>> NbdServer::Start(bdev::DeviceRegistry& exports,
                                                    const NbdServerOptions& options) {
  std::unique_ptr<NbdServer> server(new NbdServer(exports, options));
  VS_RETURN_IF_ERROR(ValidateServerOptions(server->options_));
  if (!options.tls_psk.empty()) {
    VS_ASSIGN_OR_RETURN(server->tls_, TlsCredentials::LoadPsk(options.tls_psk));
  } else if (!options.tls_certificates.empty()) {
    VS_ASSIGN_OR_RETURN(
        server->tls_, TlsCredentials::LoadX509(options.tls_certificates, options.tls_verify_peer));
  }
  if (!options.bind.empty()) {
    uint16_t port = 0;
    VS_ASSIGN_OR_RETURN(server->listen_fd_, ListenTcp(options.bind, &port));
    server->address_ = options.bind.substr(0, options.bind.rfind(':')) + ":" + std::to_string(port);
  } else {
    if (options.socket_path.empty()) {
      return Status::InvalidArgument("nbd: no socket path or bind address");
    }
    VS_ASSIGN_OR_RETURN(server->listen_fd_, ListenUnix(options.socket_path));
    server->address_ = "unix:" + options.socket_path;
  }
  server->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (server->wake_fd_ < 0) return ErrnoStatus("eventfd");
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

NbdServer::~NbdServer() {
  Stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (!options_.socket_path.empty()) ::unlink(options_.socket_path.c_str());
}

void NbdServer::Stop() {
  if (stopping_.exchange(true)) {
    if (accept_thread_.joinable()) accept_thread_.join();
    return;
  }
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  std::lock_guard lock(mu_);
  for (auto& c : clients_) c.conn->Shutdown();
  ReapLocked(/*all=*/true);
}

int NbdServer::EnforceHandshakeDeadlinesLocked(int cap) {
  const auto now = std::chrono::steady_clock::now();
  auto next = now + std::chrono::milliseconds(cap);
  for (auto& c : clients_) {
    if (c.expired || c.done->load() || !c.conn->handshaking()) continue;
    if (c.handshake_deadline <= now) {
      c.expired = true;
      c.conn->Shutdown();  // its thread sees EOF or a failed TLS read and ends
    } else {
      next = std::min(next, c.handshake_deadline);
    }
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
  return static_cast<int>(std::max<int64_t>(ms, 1));
}

void NbdServer::RefuseLocked(int fd) {
  if (refusals_.size() >= kMaxRefusals) {
    ::close(fd);
    return;
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  const size_t limit = options_.max_connections;
  refusals_.push_back(Client{nullptr,
                             std::thread([fd, done, limit] {
                               RefuseClient(fd, limit);
                               ::close(fd);
                               done->store(true);
                             }),
                             done,
                             {}});
}

size_t NbdServer::active_connections() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& c : clients_) n += c.done->load() ? 0 : 1;
  return n;
}

void NbdServer::ReapLocked(bool all) {
  for (auto* list : {&clients_, &refusals_}) {
    for (auto it = list->begin(); it != list->end();) {
      if (all || it->done->load()) {
        if (it->thread.joinable()) it->thread.join();
        it = list->erase(it);
      } else {
        ++it;
      }
    }
  }
}

void NbdServer::AcceptLoop() {
  while (!stopping_) {
    int wait_ms;
    {
      std::lock_guard lock(mu_);
      ReapLocked(false);
      wait_ms = EnforceHandshakeDeadlinesLocked(500);
    }
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int r = ::poll(fds, 2, wait_ms);
    if (r <= 0 || !(fds[0].revents & POLLIN)) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // fails on Unix: fine
    std::lock_guard lock(mu_);
    ReapLocked(false);
    if (stopping_) {
      ::close(fd);
      continue;
    }
    if (clients_.size() >= options_.max_connections) {
      RefuseLocked(fd);
      continue;
    }
    auto conn = std::make_shared<Connection>(fd, exports_, options_, tls_.get());
    auto done = std::make_shared<std::atomic<bool>>(false);
    clients_.push_back(Client{
        conn, std::thread([conn, done] {
          conn->Run();
          done->store(true);
        }),
        done,
        std::chrono::steady_clock::now() + std::chrono::seconds(options_.handshake_limit_sec)});
  }
}

}  // namespace volstack::exportfs::nbd

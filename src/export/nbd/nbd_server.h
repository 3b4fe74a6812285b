// NbdServer: serves the devices of a DeviceRegistry over NBD (fixed newstyle), export name =
// device name. Theory in nbd_server.cc.
//
// Threads: Start() returns a running server (an accept thread plus threads per connection);
// Stop() and the destructor may be called from any thread. The registry must outlive the
// server; devices added later are exported to new connections.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "bdev/device_registry.h"
#include "export/nbd/nbd_tls.h"

namespace volstack::exportfs::nbd {

struct NbdServerOptions {
  std::string socket_path;              // listen on this Unix socket, or
  std::string bind;                     // on "127.0.0.1:PORT" (PORT 0: any free port)
  bool read_only = false;               // export everything read-only
  unsigned threads_per_connection = 8;  // requests in service at once per connection
  uint32_t max_payload = 32u << 20;     // largest READ/WRITE, advertised as max block size
  // Clients served at once. Beyond it a new client is refused (NBD_REP_ERR_SHUTDOWN with a
  // message, or closed) while the others go on being served.
  size_t max_connections = 64;
  // Seconds from accept to the end of option haggling, TLS handshake included; a client
  // that has not started transmission by then is disconnected.
  unsigned handshake_limit_sec = 10;
  // TLS (nbd_tls.h). kDefault resolves per ResolveTlsMode: a TCP listener must either have
  // credentials or say kOff.
  TlsMode tls = TlsMode::kDefault;
  std::string tls_psk;           // psktool key file, or
  std::string tls_certificates;  // directory with server-cert.pem, server-key.pem
  bool tls_verify_peer = false;  // X.509: clients need a certificate ca-cert.pem signs
};

// Checks `options` as Start would (addresses aside) and resolves options.tls. InvalidArgument
// with one message naming the option at fault.
Status ValidateServerOptions(NbdServerOptions& options);

class Connection;

class NbdServer {
 public:
  static Result<std::unique_ptr<NbdServer>> Start(bdev::DeviceRegistry& exports,
                                                  const NbdServerOptions& options);
  ~NbdServer();
  NbdServer(const NbdServer&) = delete;
  NbdServer& operator=(const NbdServer&) = delete;

  // Stops accepting, disconnects every client (in-flight requests finish first) and joins.
  void Stop();

  // "unix:PATH" or "127.0.0.1:PORT" (the real port when 0 was asked).
  const std::string& address() const { return address_; }
  size_t active_connections() const;
  TlsMode tls_mode() const { return options_.tls; }

 private:
  NbdServer(bdev::DeviceRegistry& exports, const NbdServerOptions& options)
      : exports_(exports), options_(options) {}
  void AcceptLoop();
  void ReapLocked(bool all);
  // Disconnects clients whose handshake outlived its limit; returns the ms until the next
  // deadline (at most `cap`).
  int EnforceHandshakeDeadlinesLocked(int cap);
  // At the connection limit: a short-lived thread tells the client so (bounded in number
  // and time), or the socket is closed when too many refusals are under way.
  void RefuseLocked(int fd);

  bdev::DeviceRegistry& exports_;
  NbdServerOptions options_;  // immutable once Start returns (tls resolved)
  std::unique_ptr<TlsCredentials> tls_;
  std::string address_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: wakes the accept loop on Stop()
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};

  struct Client {
    std::shared_ptr<Connection> conn;
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
    std::chrono::steady_clock::time_point handshake_deadline;
    bool expired = false;  // shut down for outliving the handshake limit
  };
  mutable std::mutex mu_;
  std::list<Client> clients_;   // GUARDED_BY(mu_)
  std::list<Client> refusals_;  // GUARDED_BY(mu_): conn unused
};

}  // namespace volstack::exportfs::nbd

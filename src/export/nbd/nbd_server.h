// NbdServer: serves the devices of a DeviceRegistry over NBD (fixed newstyle), export name =
// device name. Theory in nbd_server.cc.
//
// Threads: Start() returns a running server (an accept thread plus threads per connection);
// Stop() and the destructor may be called from any thread. The registry must outlive the
// server; devices added later are exported to new connections.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "bdev/device_registry.h"

namespace volstack::exportfs::nbd {

struct NbdServerOptions {
  std::string socket_path;              // listen on this Unix socket, or
  std::string bind;                     // on "127.0.0.1:PORT" (PORT 0: any free port)
  bool read_only = false;               // export everything read-only
  unsigned threads_per_connection = 8;  // requests in service at once per connection
  uint32_t max_payload = 32u << 20;     // largest READ/WRITE, advertised as max block size
  size_t max_connections = 64;
};

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

 private:
  NbdServer(bdev::DeviceRegistry& exports, const NbdServerOptions& options)
      : exports_(exports), options_(options) {}
  void AcceptLoop();
  void ReapLocked(bool all);

  bdev::DeviceRegistry& exports_;
  const NbdServerOptions options_;
  std::string address_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: wakes the accept loop on Stop()
  std::thread accept_thread_;
  std::atomic<bool> stopping_{false};

  struct Client {
    std::shared_ptr<Connection> conn;
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  mutable std::mutex mu_;
  std::list<Client> clients_;  // GUARDED_BY(mu_)
};

}  // namespace volstack::exportfs::nbd

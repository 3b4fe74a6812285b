// One NBD client connection: the option haggling (nbd_handshake.cc), then the transmission
// phase (nbd_connection.cc).
//
// Threads: Run() is called once, on the connection's own thread; it serves requests on that
// thread and threads_per_connection - 1 more, and returns when the client disconnects or
// Shutdown() is called (from any thread).
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bdev/device_registry.h"
#include "export/byte_range_io.h"
#include "export/nbd/nbd_protocol.h"
#include "export/nbd/nbd_server.h"
#include "export/nbd/nbd_socket.h"
#include "export/nbd/nbd_tls.h"

namespace volstack::exportfs::nbd {

class Connection {
 public:
  // `tls`: the server's credentials (nullptr when options.tls is kOff).
  Connection(int fd, bdev::DeviceRegistry& exports, const NbdServerOptions& options,
             const TlsCredentials* tls)
      : fd_(fd),
        transport_(fd),
        exports_(exports),
        options_(options),
        tls_(tls),
        reader_(transport_) {}
  ~Connection();

  void Run();
  // Unblocks every thread of the connection (shutdown(2)); Run() then returns.
  void Shutdown();
  // True until option haggling ends (the server's handshake deadline applies meanwhile).
  bool handshaking() const { return handshaking_; }

 private:
  void RunPhases();

  // --- handshake (nbd_handshake.cc) ---
  // OK and true: enter transmission with export_; OK and false: the client ended politely.
  Result<bool> Handshake();
  Status HandleInfo(uint32_t option, std::span<const uint8_t> data, bool* go);
  Status HandleMetaContext(uint32_t option, std::span<const uint8_t> data);
  Status HandleExportName(std::span<const uint8_t> data, bool* go);
  Status HandleStartTls(std::span<const uint8_t> data);
  Status SendOptionReply(uint32_t option, uint32_t type, std::span<const uint8_t> data = {});
  Status SendOptionError(uint32_t option, uint32_t type, const std::string& message);
  // The export for `name` ("" = the only one), or nullptr.
  bdev::BlockDevicePtr FindExport(const std::string& name) const;
  uint16_t TransmissionFlags(const bdev::BlockDevice& device) const;
  bool ReadOnly(const bdev::BlockDevice& device) const;

  // --- transmission (nbd_connection.cc) ---
  void ServeRequests();
  // Executes one request and sends its reply. `payload` holds a WRITE's data.
  void Execute(const Request& req, std::vector<uint8_t>& buf);
  Status CheckRequest(const Request& req) const;  // flags, range, size
  void ReplySimple(uint64_t cookie, uint32_t error, std::span<const uint8_t> data = {});
  void ReplyRead(uint64_t cookie, uint64_t offset, std::span<const uint8_t> data);
  void ReplyError(const Request& req, const Status& status);
  void ReplyBlockStatus(const Request& req);
  void Send(struct iovec* iov, int count);

  const int fd_;
  Transport transport_;
  bdev::DeviceRegistry& exports_;
  const NbdServerOptions& options_;
  const TlsCredentials* const tls_;
  std::unique_ptr<TlsSession> tls_session_;  // set once STARTTLS succeeded
  std::atomic<bool> handshaking_{true};

  // Negotiated state (handshake thread only, read-only afterwards).
  bool no_zeroes_ = false;
  bool structured_ = false;
  bool meta_allocation_ = false;
  std::string meta_export_;
  static constexpr uint32_t kAllocationContextId = 1;
  std::shared_ptr<ByteRangeIo> io_;
  bool read_only_ = false;

  std::mutex read_mu_;   // one thread reads a request (header + payload) at a time
  SocketReader reader_;  // GUARDED_BY(read_mu_); transmission phase only
  std::mutex write_mu_;  // one reply on the wire at a time
  std::atomic<bool> closing_{false};
  std::atomic<bool> closing_by_server_{false};  // Shutdown(): no TLS goodbye on a dead socket
};

}  // namespace volstack::exportfs::nbd

// NbdClientDevice: a BlockDevice that is an export of an NBD server elsewhere (libnbd), so a
// vdev, a PV or any stacked device can live on another host. Theory in nbd_client_device.cc.
//
// Threads: every method may be called from many threads at once (the BlockDevice contract);
// requests run on up to `connections` libnbd handles in parallel.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bdev/block_device.h"

struct nbd_handle;

namespace volstack::remote {

// True for the names this device opens: libnbd's URIs nbd://, nbds://, nbd+unix://,
// nbds+unix:// (nbd://HOST[:PORT]/EXPORT, nbd+unix:///EXPORT?socket=PATH).
bool IsNbdUri(const std::string& name);

struct NbdClientOptions {
  bool read_only = false;
  // Connections opened when the server allows several (CAN_MULTI_CONN); else one.
  unsigned connections = 4;
  // Each connection's connect and handshake give up after this (ETIMEDOUT).
  std::chrono::milliseconds connect_timeout{10000};
};

class NbdClientDevice final : public bdev::BlockDevice {
 public:
  // Connects to `uri`. A refused connection, an unknown export, a bad URI or a server that
  // does not finish the handshake within connect_timeout is one error naming the URI;
  // nothing stays open on failure.
  static Result<std::shared_ptr<NbdClientDevice>> Open(const std::string& uri,
                                                       const NbdClientOptions& options = {});
  ~NbdClientDevice() override;

  const std::string& uri() const { return uri_; }
  size_t connections() const { return handles_.size(); }

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override;
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) override;
  Status DoFlush() override;
  Status DoDiscard(uint64_t offset, uint64_t length) override;
  Status DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) override;
  Result<std::vector<bdev::AllocationExtent>> DoQueryAllocation(uint64_t offset,
                                                                uint64_t length) override;

 private:
  struct Handles;  // the connection pool
  NbdClientDevice(std::string uri, const bdev::Geometry& g, std::vector<nbd_handle*> handles,
                  uint64_t max_request, bool can_flush);

  // Takes a free connection for one request and gives it back.
  class Lease {
   public:
    explicit Lease(NbdClientDevice& d);
    ~Lease();
    nbd_handle* get() const { return h_; }

   private:
    NbdClientDevice& d_;
    nbd_handle* h_;
  };
  Status Error(const char* op, uint64_t offset, uint64_t length) const;

  const std::string uri_;
  const std::vector<nbd_handle*> handles_;
  const uint64_t max_request_;  // largest single read/write/zero/trim sent
  const bool can_flush_;
  std::mutex mu_;
  std::condition_variable free_cv_;
  std::vector<nbd_handle*> free_;  // GUARDED_BY(mu_)
};

}  // namespace volstack::remote

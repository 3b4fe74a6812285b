// RbdDevice: a BlockDevice that is an image in a Ceph cluster (librbd's C API), so a vdev, a
// PV or any stacked device can live on Ceph's replicated storage. Theory in rbd_device.cc.
//
// Threads: every method may be called from many threads at once (the BlockDevice contract);
// each request is one asynchronous librbd operation, so as many run in the cluster at once as
// there are callers.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "bdev/block_device.h"

namespace volstack::remote {

// True for names that start with "rbd:".
bool IsRbdName(const std::string& name);

// An RBD device name, qemu's convention:
//   rbd:POOL/IMAGE[@SNAP][:conf=PATH][:id=USER][:KEY=VALUE...]
// conf is the ceph.conf to read (librados's default search when absent), id the client name
// without "client." (librados's default "admin"), and any other KEY=VALUE a Ceph option set
// on the connection (e.g. rados_osd_op_timeout=0). '\' escapes the next character (a ':' or
// '/' in a path). A snapshot opens read-only.
struct RbdName {
  std::string pool, image, snap;
  std::string conf, id;
  std::map<std::string, std::string> options;
};
Result<RbdName> ParseRbdName(const std::string& name);

struct RbdOptions {
  bool read_only = false;
};

// True when this build has librbd; without it Open() always fails with EOPNOTSUPP.
bool RbdSupported();

class RbdDevice final : public bdev::BlockDevice {
 public:
  // Connects (or reuses this process's connection to the same cluster, user and options) and
  // opens the image. An unreachable cluster (after client_mount_timeout, 10 s unless the
  // name sets it), a missing pool or image, or a bad name is one error naming the device;
  // nothing stays open on failure.
  static Result<std::shared_ptr<RbdDevice>> Open(const std::string& name,
                                                 const RbdOptions& options = {});
  ~RbdDevice() override;

  struct Cluster;  // one rados connection, shared by the images opened through it

 protected:
  Status DoRead(uint64_t offset, std::span<uint8_t> buf) override;
  Status DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions opts) override;
  Status DoFlush() override;
  Status DoDiscard(uint64_t offset, uint64_t length) override;
  Status DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) override;

 private:
  // The device's name() is the rbd: name it was opened with.
  RbdDevice(std::string name, const bdev::Geometry& g, std::shared_ptr<Cluster> cluster,
            void* ioctx, void* image);

  // Starts one librbd aio operation through `start` (given the completion) and waits for it;
  // a negative result becomes EIO naming the device, `op` and the range. The operation's
  // return value goes to *result when given.
  template <typename Start>
  Status Run(const char* op, uint64_t offset, uint64_t length, Start start,
             int64_t* result = nullptr);

  const std::shared_ptr<Cluster> cluster_;
  void* const ioctx_;  // rados_ioctx_t
  void* const image_;  // rbd_image_t
};

}  // namespace volstack::remote

// RbdDevice: a BlockDevice on a Ceph RBD image, through librbd's C API.
//
// Theory. The device is a thin translation of BlockDevice calls into librbd asynchronous
// operations, the way qemu's block/rbd.c drives librbd: Read is rbd_aio_read, Write
// rbd_aio_write, Flush rbd_aio_flush, Discard rbd_aio_discard, WriteZeroes
// rbd_aio_write_zeroes (THICK_PROVISION when the range may not become a hole). Each call
// creates one completion whose callback, run on a librbd thread, takes the result, releases
// the completion and hands the result back to the waiting caller. So requests are never
// serialised here: N callers keep N operations in flight in the cluster, and librbd splits
// and orders them per object. FUA is emulated by the base class (write, then flush).
//
// Connections. librados connections are heavy (threads, a monitor session, maps), so a
// process keeps one per distinct (conf, id, options) and every image opened with the same
// settings shares it; the last image closed shuts it down.
//
// Geometry: the image's size at open, 512-byte logical blocks (librbd takes any byte range),
// 4 KiB physical, the object size as the optimal I/O size. Resizing the image underneath is
// not followed.
//
// Errors. librbd answers a failed operation with -errno (a lost or timed-out OSD operation,
// EBLOCKLISTED, a full pool...). Every one reaches the caller as EIO with librbd's reason and
// the device, operation and range in the message: to the layers above, the cluster is one
// disk whose I/O failed, and they decide (a pool marks the vdev faulted). librbd retries a
// lost connection itself; a request fails only when the cluster does not answer within
// rados_osd_op_timeout, which we set to 30 s (Ceph's default is to wait forever, which would
// hang the daemon behind a dead OSD) unless the device name sets it. Connecting waits at most
// client_mount_timeout, 10 s unless the name sets it, so an `up` with the cluster down
// reports the device unavailable instead of hanging for Ceph's 300 s; a failed connect is
// remembered for 30 s, during which opening any image of that cluster fails at once with the
// same reason (later opens, e.g. the daemon's next attempt, connect afresh).
//
// Write cache. librbd's cache (rbd_cache, on by default; in Ceph 16 the "writearound"
// policy) completes a write once it is queued and keeps up to rbd_cache_max_dirty in flight
// to the OSDs; a flush waits for all of them. Its rbd_cache_writethrough_until_flush
// (default true) keeps it write-through until the client's first flush, for guests that
// never flush. Every user of a BlockDevice flushes before it relies on a write (the
// contract: a write is durable once a later Flush returns), so we turn that off, as the
// `rbd` tool does for itself (`rbd bench` included): 4 KiB random writes at QD32 go from
// one OSD round trip each to what the cache accepts (bench/rbd_compare.sh). A write that
// fails after it was acknowledged fails the next flush, which the layers above see.
//
// Simplifications: no image-level exclusive locking beyond librbd's own (two processes may
// open one image read-write; librbd's exclusive-lock feature keeps each write atomic but not
// the pool on top consistent), no allocation query, no resize.
#include "remote/rbd_device.h"

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>

#if VOLSTACK_HAVE_RBD
#include <rados/librados.h>
#include <rbd/librbd.h>
#endif

namespace volstack::remote {

bool IsRbdName(const std::string& name) { return name.rfind("rbd:", 0) == 0; }

#if VOLSTACK_HAVE_RBD
bool RbdSupported() { return true; }
#else
bool RbdSupported() { return false; }
#endif

Result<RbdName> ParseRbdName(const std::string& name) {
  if (!IsRbdName(name)) return Status::InvalidArgument("'" + name + "' is not an rbd: name");
  // Split on unescaped ':' and drop the escapes.
  std::vector<std::string> parts(1);
  std::vector<std::string> raw_first(1);  // the first part with escapes kept, for '/' and '@'
  for (size_t i = 4; i < name.size(); i++) {
    const char c = name[i];
    if (c == '\\' && i + 1 < name.size()) {
      parts.back() += name[++i];
      if (parts.size() == 1) raw_first.back() += std::string("\\") + name[i];
    } else if (c == ':') {
      parts.emplace_back();
    } else {
      parts.back() += c;
      if (parts.size() == 1) raw_first.back() += c;
    }
  }
  RbdName out;
  // POOL/IMAGE[@SNAP], split on unescaped '/' and '@'.
  const std::string& spec = raw_first.front();
  std::string* field = &out.pool;
  bool have_slash = false;
  for (size_t i = 0; i < spec.size(); i++) {
    const char c = spec[i];
    if (c == '\\' && i + 1 < spec.size()) {
      *field += spec[++i];
    } else if (c == '/' && !have_slash) {
      have_slash = true;
      field = &out.image;
    } else if (c == '@' && have_slash && field == &out.image) {
      field = &out.snap;
    } else {
      *field += c;
    }
  }
  if (!have_slash || out.pool.empty() || out.image.empty()) {
    return Status::InvalidArgument("'" + name + "': an RBD name is rbd:POOL/IMAGE[@SNAP]" +
                                   "[:conf=PATH][:id=USER][:KEY=VALUE...]");
  }
  for (size_t i = 1; i < parts.size(); i++) {
    const auto eq = parts[i].find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("'" + name + "': option '" + parts[i] + "' is not KEY=VALUE");
    }
    const std::string key = parts[i].substr(0, eq), value = parts[i].substr(eq + 1);
    if (key == "conf") {
      out.conf = value;
    } else if (key == "id") {
      out.id = value;
    } else {
      out.options[key] = value;
    }
  }
  return out;
}

#if VOLSTACK_HAVE_RBD

namespace {

std::string ErrnoText(int err) { return std::strerror(err < 0 ? -err : err); }

// librados' -errno `ret` as a Status of `code`: its text is added only when `code` is
// another errno, as the Status prints its own code's text already.
Status RadosStatus(int code, const std::string& what, int ret) {
  return Status::FromErrno(code, -ret == code ? what : what + ": " + ErrnoText(ret));
}

// What the caller waits on while its operation runs in librbd. The callback notifies while
// holding the mutex: the waiter may destroy this object as soon as it sees `done`.
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;  // GUARDED_BY(mu)
  int64_t ret = 0;    // GUARDED_BY(mu)
};

void OnComplete(rbd_completion_t c, void* arg) {
  auto* w = static_cast<Waiter*>(arg);
  const int64_t ret = rbd_aio_get_return_value(c);
  rbd_aio_release(c);
  std::lock_guard lock(w->mu);
  w->ret = ret;
  w->done = true;
  w->cv.notify_one();
}

}  // namespace

struct RbdDevice::Cluster {
  rados_t rados = nullptr;
  ~Cluster() {
    if (rados != nullptr) rados_shutdown(rados);
  }
};

namespace {

// The process's rados connections, one per distinct (conf, id, options).
std::mutex clusters_mu;
std::map<std::string, std::weak_ptr<RbdDevice::Cluster>>& Clusters() {
  // GUARDED_BY(clusters_mu); never destroyed: devices may outlive main()
  static auto* clusters = new std::map<std::string, std::weak_ptr<RbdDevice::Cluster>>;
  return *clusters;
}

// Connects that failed recently, per cluster key: every device of a cluster that is down
// would otherwise wait client_mount_timeout again (an `up` opens each vdev more than once).
struct FailedConnect {
  std::chrono::steady_clock::time_point at;
  int code;
  std::string reason;
};
constexpr auto kRetryConnectAfter = std::chrono::seconds(30);
std::map<std::string, FailedConnect>& FailedConnects() {
  static auto* failed = new std::map<std::string, FailedConnect>;  // GUARDED_BY(clusters_mu)
  return *failed;
}

Result<std::shared_ptr<RbdDevice::Cluster>> ConnectCluster(const RbdName& n,
                                                           const std::string& device) {
  std::string key = n.conf + '\0' + n.id;
  for (const auto& [k, v] : n.options) key += '\0' + k + '=' + v;
  std::lock_guard lock(clusters_mu);
  if (auto c = Clusters()[key].lock()) return c;
  auto& failed = FailedConnects();
  if (auto it = failed.find(key); it != failed.end()) {
    if (std::chrono::steady_clock::now() - it->second.at < kRetryConnectAfter) {
      return Status::FromErrno(it->second.code, device + ": " + it->second.reason);
    }
    failed.erase(it);
  }

  rados_t r = nullptr;
  int ret = rados_create(&r, n.id.empty() ? nullptr : n.id.c_str());
  if (ret < 0) return Status::IoError(device + ": rados_create: " + ErrnoText(ret));
  auto cluster = std::make_shared<RbdDevice::Cluster>();
  cluster->rados = r;
  // Bounded waits (see the theory above) and the write cache from the first write (as the
  // rbd tool sets it); options in the name replace them. Values set through rados_conf_set
  // take precedence over the conf file's.
  std::map<std::string, std::string> settings = {{"client_mount_timeout", "10"},
                                                 {"rados_mon_op_timeout", "10"},
                                                 {"rados_osd_op_timeout", "30"},
                                                 {"rbd_cache_writethrough_until_flush", "false"}};
  ret = rados_conf_read_file(r, n.conf.empty() ? nullptr : n.conf.c_str());
  if (ret < 0 && !n.conf.empty()) {
    return Status::IoError(device + ": cannot read " + n.conf + ": " + ErrnoText(ret));
  }
  for (const auto& [k, v] : n.options) settings[k] = v;
  for (const auto& [k, v] : settings) {
    ret = rados_conf_set(r, k.c_str(), v.c_str());
    if (ret < 0) {
      return Status::InvalidArgument(device + ": Ceph option " + k + "=" + v + ": " +
                                     ErrnoText(ret));
    }
  }
  ret = rados_connect(r);
  if (ret < 0) {
    const int code = -ret == ETIMEDOUT ? ETIMEDOUT : EIO;
    const std::string reason = "cannot connect to the Ceph cluster" +
                               (n.conf.empty() ? std::string() : " of " + n.conf) +
                               (-ret == code ? std::string() : ": " + ErrnoText(ret));
    failed[key] = {std::chrono::steady_clock::now(), code, reason};
    return Status::FromErrno(code, device + ": " + reason);
  }
  Clusters()[key] = cluster;
  return cluster;
}

}  // namespace

Result<std::shared_ptr<RbdDevice>> RbdDevice::Open(const std::string& name,
                                                   const RbdOptions& options) {
  VS_ASSIGN_OR_RETURN(RbdName n, ParseRbdName(name));
  VS_ASSIGN_OR_RETURN(auto cluster, ConnectCluster(n, name));
  rados_ioctx_t ioctx = nullptr;
  int ret = rados_ioctx_create(cluster->rados, n.pool.c_str(), &ioctx);
  if (ret < 0) {
    return RadosStatus(-ret == ENOENT ? ENOENT : EIO, name + ": pool '" + n.pool + "'", ret);
  }
  const bool read_only = options.read_only || !n.snap.empty();
  rbd_image_t image = nullptr;
  ret = read_only ? rbd_open_read_only(ioctx, n.image.c_str(), &image,
                                       n.snap.empty() ? nullptr : n.snap.c_str())
                  : rbd_open(ioctx, n.image.c_str(), &image, nullptr);
  if (ret < 0) {
    rados_ioctx_destroy(ioctx);
    return RadosStatus(
        -ret == ENOENT ? ENOENT : EIO,
        name + ": image '" + n.pool + "/" + n.image + (n.snap.empty() ? "" : "@" + n.snap) + "'",
        ret);
  }
  rbd_image_info_t info{};
  ret = rbd_stat(image, &info, sizeof(info));
  if (ret < 0) {
    rbd_close(image);
    rados_ioctx_destroy(ioctx);
    return Status::IoError(name + ": stat: " + ErrnoText(ret));
  }
  bdev::Geometry g;
  g.size_bytes = info.size - info.size % 512;  // a partial last sector is unusable
  g.logical_block_size = 512;
  g.physical_block_size = 4096;
  g.optimal_io_size = info.obj_size <= (1u << 30) ? static_cast<uint32_t>(info.obj_size) : 0;
  g.read_only = read_only;
  g.caps.discard = true;
  g.caps.write_zeroes = true;
  return std::shared_ptr<RbdDevice>(new RbdDevice(name, g, std::move(cluster), ioctx, image));
}

RbdDevice::RbdDevice(std::string name, const bdev::Geometry& g, std::shared_ptr<Cluster> cluster,
                     void* ioctx, void* image)
    : BlockDevice(std::move(name), g), cluster_(std::move(cluster)), ioctx_(ioctx), image_(image) {}

RbdDevice::~RbdDevice() {
  rbd_close(image_);  // waits for librbd's own in-flight work (cache writeback)
  rados_ioctx_destroy(ioctx_);
}

template <typename Start>
Status RbdDevice::Run(const char* op, uint64_t offset, uint64_t length, Start start,
                      int64_t* result_out) {
  Waiter w;
  rbd_completion_t c = nullptr;
  int ret = rbd_aio_create_completion(&w, OnComplete, &c);
  int64_t result = ret;
  if (ret == 0) {
    ret = start(c);
    if (ret < 0) {
      rbd_aio_release(c);
      result = ret;
    } else {
      std::unique_lock lock(w.mu);
      w.cv.wait(lock, [&] { return w.done; });
      result = w.ret;
    }
  }
  if (result_out != nullptr) *result_out = result;
  if (result >= 0) return Status::Ok();
  return Status::IoError(name() + ": " + op + " [" + std::to_string(offset) + ", +" +
                         std::to_string(length) + "): " + ErrnoText(static_cast<int>(result)));
}

Status RbdDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  int64_t n = 0;
  VS_RETURN_IF_ERROR(Run(
      "read", offset, buf.size(),
      [&](rbd_completion_t c) {
        return rbd_aio_read(image_, offset, buf.size(), reinterpret_cast<char*>(buf.data()), c);
      },
      &n));
  if (static_cast<uint64_t>(n) != buf.size()) {
    return Status::IoError(name() + ": short read at " + std::to_string(offset) + ": " +
                           std::to_string(n) + " of " + std::to_string(buf.size()) + " bytes");
  }
  return Status::Ok();
}

Status RbdDevice::DoWrite(uint64_t offset, std::span<const uint8_t> buf, bdev::WriteOptions) {
  return Run("write", offset, buf.size(), [&](rbd_completion_t c) {
    return rbd_aio_write(image_, offset, buf.size(), reinterpret_cast<const char*>(buf.data()), c);
  });
}

Status RbdDevice::DoFlush() {
  return Run("flush", 0, size(), [&](rbd_completion_t c) { return rbd_aio_flush(image_, c); });
}

Status RbdDevice::DoDiscard(uint64_t offset, uint64_t length) {
  return Run("discard", offset, length,
             [&](rbd_completion_t c) { return rbd_aio_discard(image_, offset, length, c); });
}

Status RbdDevice::DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) {
  const int flags = opts.may_unmap ? 0 : RBD_WRITE_ZEROES_FLAG_THICK_PROVISION;
  return Run("write-zeroes", offset, length, [&](rbd_completion_t c) {
    return rbd_aio_write_zeroes(image_, offset, length, c, flags, 0);
  });
}

#else  // !VOLSTACK_HAVE_RBD

struct RbdDevice::Cluster {};

Result<std::shared_ptr<RbdDevice>> RbdDevice::Open(const std::string& name, const RbdOptions&) {
  if (auto n = ParseRbdName(name); !n.ok()) return n.status();
  return Status::NotSupported(name +
                              ": this volstack was built without librbd (install librbd-dev "
                              "and librados-dev and rebuild)");
}
RbdDevice::~RbdDevice() = default;
Status RbdDevice::DoRead(uint64_t, std::span<uint8_t>) { return Status::NotSupported("rbd"); }
Status RbdDevice::DoWrite(uint64_t, std::span<const uint8_t>, bdev::WriteOptions) {
  return Status::NotSupported("rbd");
}
Status RbdDevice::DoFlush() { return Status::NotSupported("rbd"); }
Status RbdDevice::DoDiscard(uint64_t, uint64_t) { return Status::NotSupported("rbd"); }
Status RbdDevice::DoWriteZeroes(uint64_t, uint64_t, bdev::ZeroOptions) {
  return Status::NotSupported("rbd");
}

#endif  // VOLSTACK_HAVE_RBD

}  // namespace volstack::remote

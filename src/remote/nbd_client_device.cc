// NbdClientDevice: a BlockDevice on a remote NBD export, through libnbd.
//
// Theory. The device is a thin translation of BlockDevice calls into NBD commands: Read is
// NBD_CMD_READ, Write WRITE (FUA when asked), Flush FLUSH, Discard TRIM, WriteZeroes
// WRITE_ZEROES (NO_HOLE unless unmapping is allowed), QueryAllocation BLOCK_STATUS in the
// base:allocation context (a hole is STATE_HOLE). The geometry is read once at open from
// what the server advertised: size, minimum block size as the logical block (512 when the
// server says nothing), preferred as physical, read-only, and the capabilities it offers.
// The base class has checked range, alignment and read-only before any request is sent.
//
// Connections. libnbd runs one synchronous command per handle at a time, so the device keeps
// a small pool of handles and each request leases one. Several connections are opened only
// when the server advertises CAN_MULTI_CONN: that flag is the server's promise that a FLUSH
// on any connection covers writes completed on every other, which is what lets Flush() use
// one handle and still honour "every completed write is durable". Without it there is one
// connection and requests are serialised.
//
// Requests larger than the server's maximum block size (32 MiB when it does not say) are
// split; each piece is a complete NBD request, so a failure part-way leaves the range with
// old data, new data or a mix, as the contract allows.
//
// Errors. libnbd reports the server's error as an errno (EIO, ENOSPC, EPERM, ...) or its own
// (a lost connection is ENOTCONN/ESHUTDOWN); each becomes a Status naming the URI, the
// operation and the range. There is no reconnection: a device whose connection broke fails
// every later request, and the layer above (a pool marks the vdev faulted) decides.
//
// Connecting (TCP or Unix connect, TLS, the handshake) runs through libnbd's asynchronous
// API and gives up after NbdClientOptions::connect_timeout (libnbd's synchronous connect
// has no bound: a server that accepts and never answers would block Open, and `volstack
// up` with it, forever).
//
// Simplifications: no TLS options beyond what the URI carries (nbds:// with
// tls-psk-file= or tls-certificates= works as libnbd parses it).
#include "remote/nbd_client_device.h"

#include <libnbd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace volstack::remote {

namespace {

constexpr uint64_t kDefaultMaxRequest = 32ull << 20;

Status LibnbdError(const std::string& what) {
  const int err = nbd_get_errno() != 0 ? nbd_get_errno() : EIO;
  std::string msg = nbd_get_error() ? nbd_get_error() : "unknown error";
  // libnbd ends its message with the errno text, which the Status prints once already.
  const std::string tail = std::string(": ") + std::strerror(err);
  if (msg.size() > tail.size() && msg.ends_with(tail)) msg.resize(msg.size() - tail.size());
  return Status::FromErrno(err, what + ": " + msg);
}

void CloseAll(std::vector<nbd_handle*>& handles) {
  for (auto* h : handles) {
    nbd_shutdown(h, 0);
    nbd_close(h);
  }
  handles.clear();
}

Result<nbd_handle*> Connect(const std::string& uri, std::chrono::milliseconds timeout) {
  nbd_handle* h = nbd_create();
  if (h == nullptr) return LibnbdError("nbd: " + uri);
  auto fail = [&](Status s) {
    nbd_close(h);
    return s;
  };
  // The URI is the administrator's (typed on the command line or recorded from it), so its
  // tls-psk-file= and tls-certificates= may name local files.
  if (nbd_set_uri_allow_local_file(h, true) == -1 ||
      nbd_add_meta_context(h, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1 ||
      nbd_aio_connect_uri(h, uri.c_str()) == -1) {
    return fail(LibnbdError("nbd: cannot connect to " + uri));
  }
  // libnbd's synchronous connect has no timeout: the handshake runs here, step by step,
  // until the deadline.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (nbd_aio_is_connecting(h) == 1) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return fail(Status::FromErrno(
          ETIMEDOUT, "nbd: cannot connect to " + uri + ": the server did not finish the " +
                         "handshake within " + std::to_string(timeout.count()) + " ms"));
    }
    if (nbd_poll(h, static_cast<int>(std::min<int64_t>(left.count(), 1000))) == -1) {
      return fail(LibnbdError("nbd: cannot connect to " + uri));
    }
  }
  if (nbd_aio_is_ready(h) != 1) return fail(LibnbdError("nbd: cannot connect to " + uri));
  return h;
}

}  // namespace

bool IsNbdUri(const std::string& name) {
  for (const char* scheme : {"nbd://", "nbds://", "nbd+unix://", "nbds+unix://"}) {
    if (name.rfind(scheme, 0) == 0) return true;
  }
  return false;
}

Result<std::shared_ptr<NbdClientDevice>> NbdClientDevice::Open(const std::string& uri,
                                                               const NbdClientOptions& options) {
  if (!IsNbdUri(uri)) return Status::InvalidArgument("'" + uri + "' is not an NBD URI");
  std::vector<nbd_handle*> handles;
  VS_ASSIGN_OR_RETURN(nbd_handle * first, Connect(uri, options.connect_timeout));
  handles.push_back(first);
  const int64_t size = nbd_get_size(first);
  if (size < 0) {
    Status s = LibnbdError("nbd: " + uri + ": size");
    CloseAll(handles);
    return s;
  }
  auto block = [&](int which, uint64_t fallback) {
    const int64_t v = nbd_get_block_size(first, which);
    return v > 0 ? static_cast<uint64_t>(v) : fallback;
  };
  bdev::Geometry g;
  g.size_bytes = static_cast<uint64_t>(size);
  g.logical_block_size =
      static_cast<uint32_t>(std::max<uint64_t>(block(LIBNBD_SIZE_MINIMUM, 512), 512));
  if (g.logical_block_size != 512 && g.logical_block_size != 4096) {
    CloseAll(handles);
    return Status::NotSupported("nbd: " + uri + ": minimum block size " +
                                std::to_string(g.logical_block_size) + " (512 or 4096 needed)");
  }
  g.physical_block_size = static_cast<uint32_t>(
      std::clamp<uint64_t>(block(LIBNBD_SIZE_PREFERRED, 4096), g.logical_block_size, 1u << 20));
  if (g.size_bytes % g.logical_block_size != 0) {
    g.size_bytes -= g.size_bytes % g.logical_block_size;  // a partial last block is unusable
  }
  g.read_only = options.read_only || nbd_is_read_only(first) == 1;
  g.caps.fua = nbd_can_fua(first) == 1;
  g.caps.discard = nbd_can_trim(first) == 1;
  g.caps.write_zeroes = nbd_can_zero(first) == 1;
  g.caps.allocation_query = nbd_can_meta_context(first, LIBNBD_CONTEXT_BASE_ALLOCATION) == 1;
  const uint64_t max_request =
      std::max<uint64_t>(
          std::min(block(LIBNBD_SIZE_MAXIMUM, kDefaultMaxRequest), kDefaultMaxRequest),
          g.logical_block_size) /
      g.logical_block_size * g.logical_block_size;
  const bool can_flush = nbd_can_flush(first) == 1;
  if (nbd_can_multi_conn(first) == 1) {
    for (unsigned i = 1; i < options.connections; i++) {
      auto h = Connect(uri, options.connect_timeout);
      if (!h.ok()) {
        CloseAll(handles);
        return h.status();
      }
      handles.push_back(*h);
    }
  }
  return std::shared_ptr<NbdClientDevice>(
      new NbdClientDevice(uri, g, std::move(handles), max_request, can_flush));
}

NbdClientDevice::NbdClientDevice(std::string uri, const bdev::Geometry& g,
                                 std::vector<nbd_handle*> handles, uint64_t max_request,
                                 bool can_flush)
    : BlockDevice("nbd:" + uri, g),
      uri_(std::move(uri)),
      handles_(std::move(handles)),
      max_request_(max_request),
      can_flush_(can_flush),
      free_(handles_) {}

NbdClientDevice::~NbdClientDevice() {
  std::vector<nbd_handle*> all = handles_;
  CloseAll(all);
}

NbdClientDevice::Lease::Lease(NbdClientDevice& d) : d_(d) {
  std::unique_lock lock(d.mu_);
  d.free_cv_.wait(lock, [&] { return !d.free_.empty(); });
  h_ = d.free_.back();
  d.free_.pop_back();
}

NbdClientDevice::Lease::~Lease() {
  {
    std::lock_guard lock(d_.mu_);
    d_.free_.push_back(h_);
  }
  d_.free_cv_.notify_one();
}

Status NbdClientDevice::Error(const char* op, uint64_t offset, uint64_t length) const {
  return LibnbdError("nbd: " + uri_ + ": " + op + " " + std::to_string(length) + " bytes at " +
                     std::to_string(offset));
}

Status NbdClientDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  Lease h(*this);
  for (uint64_t done = 0; done < buf.size();) {
    const uint64_t n = std::min<uint64_t>(buf.size() - done, max_request_);
    if (nbd_pread(h.get(), buf.data() + done, n, offset + done, 0) == -1) {
      return Error("read", offset + done, n);
    }
    done += n;
  }
  return Status::Ok();
}

Status NbdClientDevice::DoWrite(uint64_t offset, std::span<const uint8_t> buf,
                                bdev::WriteOptions opts) {
  Lease h(*this);
  // The base class emulates FUA (write + flush) when the server cannot do it.
  const uint32_t flags = opts.fua ? LIBNBD_CMD_FLAG_FUA : 0;
  for (uint64_t done = 0; done < buf.size();) {
    const uint64_t n = std::min<uint64_t>(buf.size() - done, max_request_);
    if (nbd_pwrite(h.get(), buf.data() + done, n, offset + done, flags) == -1) {
      return Error("write", offset + done, n);
    }
    done += n;
  }
  return Status::Ok();
}

Status NbdClientDevice::DoFlush() {
  if (!can_flush_) return Status::Ok();  // the server has nothing volatile to flush
  Lease h(*this);
  if (nbd_flush(h.get(), 0) == -1) return Error("flush", 0, 0);
  return Status::Ok();
}

Status NbdClientDevice::DoDiscard(uint64_t offset, uint64_t length) {
  Lease h(*this);
  for (uint64_t done = 0; done < length;) {
    const uint64_t n = std::min(length - done, max_request_);
    if (nbd_trim(h.get(), n, offset + done, 0) == -1) return Error("trim", offset + done, n);
    done += n;
  }
  return Status::Ok();
}

Status NbdClientDevice::DoWriteZeroes(uint64_t offset, uint64_t length, bdev::ZeroOptions opts) {
  Lease h(*this);
  uint32_t flags = opts.may_unmap ? 0 : LIBNBD_CMD_FLAG_NO_HOLE;
  if (opts.fua && geometry().caps.fua) flags |= LIBNBD_CMD_FLAG_FUA;
  for (uint64_t done = 0; done < length;) {
    const uint64_t n = std::min(length - done, max_request_);
    if (nbd_zero(h.get(), n, offset + done, flags) == -1) return Error("zero", offset + done, n);
    done += n;
  }
  if (opts.fua && !geometry().caps.fua && can_flush_ && nbd_flush(h.get(), 0) == -1) {
    return Error("flush", offset, length);
  }
  return Status::Ok();
}

Result<std::vector<bdev::AllocationExtent>> NbdClientDevice::DoQueryAllocation(uint64_t offset,
                                                                               uint64_t length) {
  struct Collect {
    uint64_t pos;
    uint64_t end;
    std::vector<bdev::AllocationExtent>* out;
  };
  std::vector<bdev::AllocationExtent> out;
  Lease h(*this);
  const uint64_t end = offset + length;
  for (uint64_t pos = offset; pos < end;) {
    Collect c{pos, end, &out};
    nbd_extent_callback cb{
        [](void* user, const char* context, uint64_t at, uint32_t* entries, size_t n,
           int* error) -> int {
          auto* c = static_cast<Collect*>(user);
          if (std::string_view(context) != LIBNBD_CONTEXT_BASE_ALLOCATION) return 0;
          uint64_t p = at;
          for (size_t i = 0; i + 1 < n && p < c->end; i += 2) {
            const uint64_t len = std::min<uint64_t>(entries[i], c->end - p);
            if (len == 0) break;
            c->out->push_back({p, len, (entries[i + 1] & LIBNBD_STATE_HOLE) == 0});
            p += len;
          }
          c->pos = p;
          return 0;
        },
        &c, nullptr};
    const uint64_t n = std::min(end - pos, max_request_);
    if (nbd_block_status(h.get(), n, pos, cb, 0) == -1) return Error("block status", pos, n);
    if (c.pos <= pos) {
      return Status::IoError("nbd: " + uri_ + ": block status made no progress at " +
                             std::to_string(pos));
    }
    pos = c.pos;
  }
  return out;
}

}  // namespace volstack::remote

// The classic FUSE transport: read(2) a request from /dev/fuse, serve it, writev(2) the
// reply (devfs_transport.h).
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "export/devfs_transport.h"

namespace volstack::exportfs {

namespace {

// A page-aligned buffer (a READ reply lands in it straight from an O_DIRECT file device).
struct AlignedBuffer {
  explicit AlignedBuffer(size_t n) : size(n) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, n) == 0) data = static_cast<uint8_t*>(p);
  }
  ~AlignedBuffer() { std::free(data); }
  uint8_t* data = nullptr;
  size_t size;
};

Result<int> CloneFd(int session_fd) {
  const int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("devfs: open /dev/fuse");
  uint32_t master = static_cast<uint32_t>(session_fd);
  if (::ioctl(fd, FUSE_DEV_IOC_CLONE, &master) != 0) {
    const Status s = ErrnoStatus("devfs: FUSE_DEV_IOC_CLONE");
    ::close(fd);
    return s;
  }
  return fd;
}

}  // namespace

DevfsClassicLoop::~DevfsClassicLoop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
}

Status DevfsClassicLoop::AddThreads(unsigned count, bool clone_fd) {
  std::lock_guard lock(mu_);
  for (unsigned i = 0; i < count; i++) {
    int fd = session_fd_;
    const bool own = clone_fd && !threads_.empty();
    if (own) {
      auto cloned = CloneFd(session_fd_);
      if (!cloned.ok()) return cloned.status();
      fd = *cloned;
    }
    threads_.emplace_back([this, fd, own] { Serve(fd, own); });
  }
  return Status::Ok();
}

void DevfsClassicLoop::Serve(int fd, bool own_fd) {
  const size_t payload = fs_.max_payload();
  // The kernel wants room for the largest WRITE with its headers in every read.
  AlignedBuffer in(payload + 4096);
  AlignedBuffer out(payload);
  if (in.data == nullptr || out.data == nullptr) {
    std::fprintf(stderr, "volstack: devfs: out of memory for a request buffer\n");
    if (own_fd) ::close(fd);
    return;
  }
  while (true) {
    const ssize_t n = ::read(fd, in.data, in.size);
    if (n < 0) {
      const int err = errno;
      // ENOENT: the request was interrupted before we got it.
      if (err == EINTR || err == EAGAIN || err == ENOENT) continue;
      if (err != ENODEV && err != ECONNABORTED) {
        std::fprintf(stderr, "volstack: devfs: reading /dev/fuse: %s\n", std::strerror(err));
      }
      break;  // the connection is gone
    }
    const auto* hdr = reinterpret_cast<const fuse_in_header*>(in.data);
    if (static_cast<size_t>(n) < sizeof(fuse_in_header) || hdr->len != static_cast<size_t>(n)) {
      std::fprintf(stderr, "volstack: devfs: short or malformed FUSE request (%zd bytes)\n", n);
      continue;
    }
    FuseRequest req;
    req.in = hdr;
    const size_t rest = static_cast<size_t>(n) - sizeof(fuse_in_header);
    req.arg = in.data + sizeof(fuse_in_header);
    req.arg_len = std::min(Devfs::Impl::ArgSize(hdr->opcode), rest);
    req.data = req.arg + req.arg_len;
    req.data_len = rest - req.arg_len;
    const FuseReply reply = fs_.Dispatch(req, std::span<uint8_t>(out.data, out.size));
    if (reply.none) continue;
    fuse_out_header oh{};
    oh.unique = hdr->unique;
    oh.error = -reply.error;
    const size_t size = reply.error == 0 ? reply.size : 0;
    oh.len = static_cast<uint32_t>(sizeof(oh) + size);
    iovec iov[2] = {{&oh, sizeof(oh)}, {out.data, size}};
    if (::writev(fd, iov, size > 0 ? 2 : 1) < 0) {
      // ENOENT: the request was interrupted or aborted meanwhile; nobody waits for it.
      if (reply.opened != 0) Devfs::Impl::DropHandle(reply.opened);
    }
    if (reply.init) fs_.InitReplied();
  }
  if (own_fd) ::close(fd);
}

}  // namespace volstack::exportfs

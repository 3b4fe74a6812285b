// devfs: every active device as a regular file, so the kernel (a loop device, mkfs, qemu-img)
// can use it.
//
// Theory. devfs speaks the FUSE protocol itself (libfuse only mounts and unmounts) and
// serves a DevfsTree that mirrors a DeviceRegistry: the registry's listener adds and removes
// nodes and tells the kernel to drop dentries it may hold (notify_inval_entry on add, for a
// negative dentry; notify_delete on removal). File I/O maps 1:1 onto the device through a
// ByteRangeIo:
//
//   READ            -> Read (clipped at the end; unaligned ranges through a bounce buffer)
//   WRITE           -> Write (unaligned ranges by read-modify-write; ENOSPC past the end)
//   FSYNC           -> Flush, shared and skipped when clean (global: covers every open file)
//   FALLOCATE       -> PUNCH_HOLE: WriteZeroes(may_unmap); ZERO_RANGE: WriteZeroes(keep);
//                      plain allocation inside the size: nothing to do
//   LSEEK DATA/HOLE -> QueryAllocation
//   FLUSH (close)   -> nothing: close() does not promise durability
//
// A file's size is the device's size, st_blksize its physical block size (losetup's default
// sector size). Files cannot be created, renamed, truncated or resized.
//
// Data path and caches. The device is the cache: the kernel's writeback cache is off, and
// by default every open is FOPEN_DIRECT_IO, so no page cache sits between the kernel and the
// device and a device written through NBD at the same time stays coherent. A loop device
// with direct I/O on submits asynchronous direct I/O; the kernel turns it into background
// FUSE requests, up to max_background in flight (raised from the kernel's 12, which would
// cap the loop's queue depth). Requests reach the handlers (devfs_ops.cc) by one of two
// transports (devfs_transport.h): classic threads that read /dev/fuse, one cloned fd each,
// or FUSE over io_uring, a queue per CPU whose threads take requests from ring entries and
// return the reply with the fetch of the next one. Either way the thread that takes a
// request answers it itself: no hand-off between threads on the I/O path.
//
// Transport choice: INIT is always read from /dev/fuse by the first classic thread. Its
// reply takes FUSE_OVER_IO_URING when the kernel offers it (the module's enable_uring) and
// the options allow it; the kernel then holds new requests until every queue has an entry,
// so Start() registers the ring before it returns, and if that fails makes the kernel drop
// the ring (a REGISTER it must refuse) so the connection falls back to /dev/fuse.
//
// Lifecycle. Mount() mounts, starts the INIT thread, waits for INIT, starts the transport and
// waits until a stat of the mount point is answered. Unmount() is a plain umount(2):
// EBUSY while files are open (a bound loop device), so a clean unmount never breaks a user.
// The destructor, if still mounted, aborts the FUSE connection (umount MNT_FORCE) and
// detaches lazily, so a loop device left bound sees I/O errors rather than a hang.
//
// Profiling: with VOLSTACK_DEVFS_STATS set, every request is counted by kind, READ/WRITE sizes
// are bucketed and handler times summed (devfs_stats.h); the table is written at teardown.
//
// Sizes: the registry says nothing when a device's size changes (lvextend of an active LV,
// a volume's volsize), so a watcher thread compares every file's device size with the last
// one seen, every resize_poll_seconds, and tells the kernel to drop the cached attributes of
// a file whose size moved (notify_inval_inode): the new size shows at the next stat, not
// after the attribute timeout. A bound loop device still needs `losetup -c`.
//
// FSYNC: each device node has a DevfsFlusher (devfs_flush.h): concurrent FSYNCs share one
// device flush, and an FSYNC with nothing written since a flush that covered it is answered
// at once. Writes and zeroings are noted before they are answered. A loop device waits in
// every flush with its whole queue (one worker), so FSYNC latency is what dbench on a loop
// over devfs feels most; on a file device written through the host page cache most of an
// fdatasync is writing back what the writes left dirty, so a write-behind thread starts that
// writeback right after the writes (devfs_writeback.h) and the fdatasync waits for I/O
// already in flight (docs/exports.md, "Flush latency").
//
// Locking: the tree has its own mutex (namespace operations only); the I/O path takes no
// devfs lock (ByteRangeIo takes a shared lock). notify_mu_ orders registry notifications
// against teardown so a notification never reaches a destroyed session.
#include "export/devfs.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "export/devfs_impl.h"
#include "export/devfs_transport.h"

namespace volstack::exportfs {

std::string DefaultDevfsDir(const std::string& state_dir) {
  std::string dir = state_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir == "/var/lib/volstack") return "/run/volstack/dev";
  return dir + "/dev";
}

int FuseErrno(const Status& status) {
  if (status.ok()) return 0;
  if (status.code() == EUCLEAN) return EIO;
  return status.code();
}

Result<std::unique_ptr<Devfs>> Devfs::Mount(const std::string& dir, bdev::DeviceRegistry& registry,
                                            const DevfsOptions& options) {
  auto impl = std::make_unique<Impl>(dir, registry, options);
  VS_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Devfs>(new Devfs(std::move(impl)));
}

Devfs::Devfs(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Devfs::~Devfs() = default;
Status Devfs::Unmount() { return impl_->Unmount(); }
const std::string& Devfs::dir() const { return impl_->dir_; }
FuseTransport Devfs::transport() const { return impl_->transport_; }
const std::string& Devfs::transport_reason() const { return impl_->transport_reason_; }

const char* FuseTransportName(FuseTransport transport) {
  switch (transport) {
    case FuseTransport::kAuto:
      return "auto";
    case FuseTransport::kUring:
      return "uring";
    case FuseTransport::kClassic:
      return "classic";
  }
  return "?";
}

Result<FuseTransport> ParseFuseTransport(const std::string& name) {
  if (name == "auto") return FuseTransport::kAuto;
  if (name == "uring") return FuseTransport::kUring;
  if (name == "classic") return FuseTransport::kClassic;
  return Status::InvalidArgument("unknown FUSE transport '" + name +
                                 "' (expected auto, uring or classic)");
}

Result<FuseTransport> FuseTransportFromEnvironment() {
  const char* env = std::getenv("VOLSTACK_FUSE_TRANSPORT");
  if (env == nullptr || *env == 0) return FuseTransport::kAuto;
  auto t = ParseFuseTransport(env);
  if (!t.ok()) return t.status().WithContext("VOLSTACK_FUSE_TRANSPORT");
  return t;
}
size_t Devfs::node_count() const { return impl_->tree_.node_count(); }

Status Devfs::Impl::Start() {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return Status::FromErrno(ec.value(), "devfs: mkdir " + dir_);

  wanted_ = options_.transport;
  if (wanted_ == FuseTransport::kAuto) {
    auto env = FuseTransportFromEnvironment();
    if (!env.ok()) return env.status().WithContext("devfs");
    wanted_ = *env;
  }
  if (wanted_ != FuseTransport::kClassic) {
    const Status probe = DevfsUringLoop::Probe();
    uring_probe_ok_ = probe.ok();
    if (!probe.ok()) {
      if (wanted_ == FuseTransport::kUring) return probe.WithContext("devfs: FUSE over io_uring");
      transport_reason_ = probe.message();
    }
  } else {
    transport_reason_ = "classic transport requested";
  }

  // libfuse only mounts (and later unmounts): devfs reads and answers the requests itself.
  std::string opts = "fsname=volstack,subtype=volstack,default_permissions";
  opts += ",max_read=" + std::to_string(options_.max_write);
  if (options_.allow_other) opts += ",allow_other";
  std::vector<std::string> argv_s = {"volstack-devfs", "-o", opts};
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  static const fuse_lowlevel_ops kNoOps{};
  session_ = fuse_session_new(&args, &kNoOps, sizeof(kNoOps), this);
  if (session_ == nullptr) return Status::IoError("devfs: cannot create the FUSE session");

  // Mirror the registry: subscribe first, then add what is there, so nothing is missed.
  listener_id_ = registry_.Subscribe([this](bdev::DeviceRegistry::Change c, const std::string& n,
                                            const bdev::BlockDevicePtr& d) { OnChange(c, n, d); });
  for (const auto& [name, device] : registry_.List()) {
    tree_.Add(name, device).IgnoreError();  // EEXIST: the listener was first
  }

  if (fuse_session_mount(session_, dir_.c_str()) != 0) {
    return Status::IoError("devfs: cannot mount FUSE on " + dir_);
  }
  mounted_ = true;
  fd_ = fuse_session_fd(session_);
  {
    std::lock_guard lock(notify_mu_);
    live_ = true;
  }
  if (options_.write_behind) write_behind_ = std::make_unique<DevfsWriteBehind>();
  // One classic thread answers INIT; the transport it agreed on then starts.
  classic_ = std::make_unique<DevfsClassicLoop>(*this, fd_);
  VS_RETURN_IF_ERROR(classic_->AddThreads(1, false));
  {
    std::unique_lock lock(init_mu_);
    if (!init_cv_.wait_for(lock, std::chrono::seconds(30), [this] { return init_done_; })) {
      return Status::FromErrno(ETIMEDOUT, "devfs: the kernel sent no FUSE INIT in 30 s");
    }
  }
  VS_RETURN_IF_ERROR(StartTransport());
  // The first stat is answered only after INIT (and, with the ring, once every queue has
  // its entries): from here on the mount works.
  struct stat st;
  if (::stat(dir_.c_str(), &st) != 0) return ErrnoStatus("devfs: stat " + dir_);
  if (options_.resize_poll_seconds > 0) watch_thread_ = std::thread([this] { WatchSizes(); });
  return Status::Ok();
}

Status Devfs::Impl::StartTransport() {
  if (uring_negotiated_) {
    uring_ = std::make_unique<DevfsUringLoop>(
        *this, fd_, max_payload(), options_.uring_threads_per_queue, options_.max_threads,
        options_.uring_pin_threads, options_.uring_refuse_first_entry_for_test);
    const Status s = uring_->Start();
    if (s.ok()) {
      transport_ = FuseTransport::kUring;
      transport_reason_.clear();
      // FORGET and INTERRUPT still come through /dev/fuse: the INIT thread serves them.
      return Status::Ok();
    }
    // The kernel fell back to /dev/fuse (DevfsUringLoop::Start saw to it).
    if (wanted_ == FuseTransport::kUring) return s.WithContext("devfs: FUSE over io_uring");
    transport_reason_ = s.message();
  } else if (wanted_ == FuseTransport::kUring) {
    return Status::NotSupported(
        "devfs: FUSE over io_uring: the kernel did not offer it at INIT (needs Linux 6.14+ "
        "and /sys/module/fuse/parameters/enable_uring set to Y)");
  } else if (transport_reason_.empty()) {
    transport_reason_ = "the kernel did not offer FUSE over io_uring at INIT";
  }
  transport_ = FuseTransport::kClassic;
  return classic_->AddThreads(std::max(options_.max_threads, 1u) - 1, options_.clone_fd);
}

void Devfs::Impl::InitReplied() {
  std::lock_guard lock(init_mu_);
  init_done_ = true;
  init_cv_.notify_all();
}

size_t Devfs::Impl::max_payload() const {
  // What the kernel sizes a ring entry's payload by: max(FUSE_MIN_READ_BUFFER, max_write,
  // max_pages pages); devfs's INIT reply makes max_pages cover max_write.
  const size_t pages = std::max<size_t>(options_.max_write / 4096, 1) * 4096;
  return std::max<size_t>({8192, options_.max_write, pages});
}

void Devfs::Impl::NotifyLocked(int32_t code, const void* arg, size_t arg_len,
                               const std::string& name) {
  fuse_out_header oh{};
  oh.error = code;  // a notification: unique 0, the code in error
  const char nul = 0;
  iovec iov[4] = {{&oh, sizeof(oh)},
                  {const_cast<void*>(arg), arg_len},
                  {const_cast<char*>(name.data()), name.size()},
                  {const_cast<char*>(&nul), name.empty() ? 0u : 1u}};
  oh.len = static_cast<uint32_t>(sizeof(oh) + arg_len + name.size() + (name.empty() ? 0 : 1));
  ::writev(fd_, iov, 4);
}

void Devfs::Impl::WatchSizes() {
  const auto period = std::chrono::duration<double>(options_.resize_poll_seconds);
  std::unique_lock lock(watch_mu_);
  while (!watch_cv_.wait_for(lock, period, [this] { return watch_stop_; })) {
    lock.unlock();
    NotifyResized();
    lock.lock();
  }
}

void Devfs::Impl::NotifyResized() {
  const std::vector<uint64_t> inos = tree_.TakeResized();
  if (inos.empty()) return;
  std::lock_guard lock(notify_mu_);
  if (!live_) return;
  // A negative offset drops only the attributes: the next stat asks for the new size (and a
  // smaller size truncates what the page cache holds beyond it). ENOENT: the kernel holds
  // no inode for the file, so it has nothing stale.
  for (const uint64_t ino : inos) {
    fuse_notify_inval_inode_out arg{};
    arg.ino = ino;
    arg.off = -1;
    NotifyLocked(FUSE_NOTIFY_INVAL_INODE, &arg, sizeof(arg), "");
  }
}

void Devfs::Impl::OnChange(bdev::DeviceRegistry::Change change, const std::string& name,
                           const bdev::BlockDevicePtr& device) {
  std::vector<DevfsTree::Entry> entries;
  if (change == bdev::DeviceRegistry::Change::kAdded) {
    auto added = tree_.Add(name, device);
    if (added.ok() && added->has_value()) entries.push_back(**added);
  } else {
    auto removed = tree_.Remove(name);
    if (removed.ok()) entries = std::move(*removed);
  }
  std::lock_guard lock(notify_mu_);
  if (!live_) return;
  for (const auto& e : entries) {
    // Errors (ENOENT: the kernel held no dentry) are expected and harmless.
    if (change == bdev::DeviceRegistry::Change::kAdded) {
      fuse_notify_inval_entry_out arg{};
      arg.parent = e.parent;
      arg.namelen = static_cast<uint32_t>(e.name.size());
      NotifyLocked(FUSE_NOTIFY_INVAL_ENTRY, &arg, sizeof(arg), e.name);
    } else {
      fuse_notify_delete_out arg{};
      arg.parent = e.parent;
      arg.child = e.ino;
      arg.namelen = static_cast<uint32_t>(e.name.size());
      NotifyLocked(FUSE_NOTIFY_DELETE, &arg, sizeof(arg), e.name);
    }
  }
}

Status Devfs::Impl::Unmount() {
  if (!mounted_) return Status::Ok();
  if (::umount2(dir_.c_str(), 0) != 0) {
    const int err = errno;
    if (err == EBUSY) {
      return Status::Busy("devfs: " + dir_ +
                          " is busy (a file is open or bound to a loop "
                          "device; detach it first)");
    }
    return Status::FromErrno(err, "devfs: umount " + dir_);
  }
  mounted_ = false;
  Join();
  return Status::Ok();
}

void Devfs::Impl::ForceStop() {
  if (mounted_) {
    // A plain unmount first: the serving threads then read ENODEV and end. Only when files
    // are open does MNT_FORCE abort the FUSE connection (fuse_umount_begin), so open files
    // see errors instead of hanging (the threads read ECONNABORTED, ring entries complete
    // with ENOTCONN), and MNT_DETACH then takes the mount away.
    if (::umount2(dir_.c_str(), 0) != 0 && ::umount2(dir_.c_str(), MNT_FORCE) != 0) {
      ::umount2(dir_.c_str(), MNT_DETACH);
    }
    mounted_ = false;
  }
  Join();
}

void Devfs::Impl::Join() {
  if (watch_thread_.joinable()) {
    {
      std::lock_guard lock(watch_mu_);
      watch_stop_ = true;
    }
    watch_cv_.notify_all();
    watch_thread_.join();
  }
  {
    std::lock_guard lock(notify_mu_);
    live_ = false;
  }
  if (listener_id_ != 0) {
    registry_.Unsubscribe(listener_id_);
    listener_id_ = 0;
  }
  // The connection is gone (unmounted or aborted): the transports' threads see it and end.
  uring_.reset();
  classic_.reset();
  write_behind_.reset();  // no request thread can kick it any more
  if (session_ != nullptr) {
    fuse_session_unmount(session_);  // the mount is gone: only closes the fd
    fuse_session_destroy(session_);
    session_ = nullptr;
    if (stats_ != nullptr) stats_->Dump();
  }
}

Devfs::Impl::Impl(std::string dir, bdev::DeviceRegistry& registry, const DevfsOptions& options)
    : dir_(std::move(dir)), registry_(registry), options_(options) {}
Devfs::Impl::~Impl() { ForceStop(); }

}  // namespace volstack::exportfs

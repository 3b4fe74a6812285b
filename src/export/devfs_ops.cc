// The FUSE request handlers of devfs (the mapping is described in devfs.cc), INIT included:
// devfs speaks the FUSE protocol itself, so one set of handlers serves both transports.
// Each handler runs on a transport thread, reads its whole request before it writes the
// reply into the out buffer (which may be the request's own payload buffer), answers exactly
// once and never throws.
#include <dirent.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>

#include "export/devfs_impl.h"
#include "export/fuse_uring_abi.h"

namespace volstack::exportfs {

namespace {

// Oldest protocol devfs speaks (7.31: FUSE_MAX_PAGES) and newest it knows (7.42: FUSE over
// io_uring). The kernel answers requests in the minor version agreed at INIT.
constexpr uint32_t kMinMinor = 31;
constexpr uint32_t kMaxMinor = 42;

DevfsHandle* Handle(uint64_t fh) { return reinterpret_cast<DevfsHandle*>(fh); }

template <typename T>
const T* Arg(const FuseRequest& req) {
  return req.arg_len >= sizeof(T) ? reinterpret_cast<const T*>(req.arg) : nullptr;
}

FuseReply Error(int error) { return FuseReply{.error = error}; }

template <typename T>
FuseReply Put(std::span<uint8_t> out, const T& value) {
  std::memcpy(out.data(), &value, sizeof(T));
  return FuseReply{.size = sizeof(T)};
}

FuseReply FromStatus(const Status& status) { return Error(FuseErrno(status)); }

// Answers a zeroing; a successful one is a write the next FSYNC must cover.
FuseReply Zeroed(DevfsFile& file, const Status& status) {
  if (status.ok()) file.flusher.NoteWrite();
  return FromStatus(status);
}

void SplitSeconds(double seconds, uint64_t* sec, uint32_t* nsec) {
  seconds = std::max(seconds, 0.0);
  *sec = static_cast<uint64_t>(seconds);
  *nsec = static_cast<uint32_t>((seconds - static_cast<double>(*sec)) * 1e9);
}

fuse_attr ToAttr(const struct stat& st) {
  fuse_attr a{};
  a.ino = st.st_ino;
  a.size = static_cast<uint64_t>(st.st_size);
  a.blocks = static_cast<uint64_t>(st.st_blocks);
  a.atime = static_cast<uint64_t>(st.st_atim.tv_sec);
  a.mtime = static_cast<uint64_t>(st.st_mtim.tv_sec);
  a.ctime = static_cast<uint64_t>(st.st_ctim.tv_sec);
  a.atimensec = static_cast<uint32_t>(st.st_atim.tv_nsec);
  a.mtimensec = static_cast<uint32_t>(st.st_mtim.tv_nsec);
  a.ctimensec = static_cast<uint32_t>(st.st_ctim.tv_nsec);
  a.mode = st.st_mode;
  a.nlink = static_cast<uint32_t>(st.st_nlink);
  a.uid = st.st_uid;
  a.gid = st.st_gid;
  a.rdev = static_cast<uint32_t>(st.st_rdev);
  a.blksize = static_cast<uint32_t>(st.st_blksize);
  return a;
}

FuseReply AttrReply(std::span<uint8_t> out, const Devfs::Impl& fs, const struct stat& st) {
  fuse_attr_out o{};
  SplitSeconds(fs.options_.attr_timeout, &o.attr_valid, &o.attr_valid_nsec);
  o.attr = ToAttr(st);
  return Put(out, o);
}

FuseReply Init(Devfs::Impl& fs, const FuseRequest& req, std::span<uint8_t> out) {
  const auto* in = Arg<fuse_init_in>(req);
  // The kernel sends the short 7.x INIT (16 bytes) only to old servers: accept it.
  if (req.arg_len < offsetof(fuse_init_in, flags2)) return Error(EINVAL);
  const uint32_t major = in != nullptr ? in->major : reinterpret_cast<const uint32_t*>(req.arg)[0];
  fuse_init_out o{};
  o.major = FUSE_KERNEL_VERSION;
  o.minor = kMaxMinor;
  FuseReply reply;
  reply.init = true;
  if (major != FUSE_KERNEL_VERSION) {
    // A newer major: answer with ours and the kernel retries with it (protocol rule).
    if (major > FUSE_KERNEL_VERSION) {
      reply.size = sizeof(uint32_t) * 2;
      std::memcpy(out.data(), &o, reply.size);
      return reply;
    }
    reply.error = EPROTO;
    return reply;
  }
  const auto* in_fields = reinterpret_cast<const uint32_t*>(req.arg);
  const uint32_t minor = in_fields[1];
  const uint32_t max_readahead = in_fields[2];
  uint64_t offered = in_fields[3];
  if (minor < kMinMinor) {
    reply.error = EPROTO;
    return reply;
  }
  if ((offered & FUSE_INIT_EXT) && in != nullptr) offered |= uint64_t{in->flags2} << 32;

  const DevfsOptions& opts = fs.options_;
  uint64_t want = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_ATOMIC_O_TRUNC | FUSE_ASYNC_DIO |
                  FUSE_PARALLEL_DIROPS | FUSE_MAX_PAGES | FUSE_INIT_EXT |
                  // Device contents change behind the kernel's back (NBD, the daemon): never
                  // trust cached data across an attribute change.
                  FUSE_AUTO_INVAL_DATA;
  // Not asked for: the writeback cache (the device is the cache), locks, splice.
  if (fs.wanted_ != FuseTransport::kClassic && fs.uring_probe_ok_ &&
      (offered & abi::kFuseOverIoUring)) {
    want |= abi::kFuseOverIoUring;
    fs.uring_negotiated_ = true;
  }
  want &= offered;
  o.minor = std::min(minor, kMaxMinor);
  o.max_readahead = std::min<uint32_t>(max_readahead, 1u << 20);
  o.flags = static_cast<uint32_t>(want);
  o.flags2 = static_cast<uint32_t>(want >> 32);
  o.max_background = static_cast<uint16_t>(std::min(opts.max_background, 65535u));
  o.congestion_threshold =
      static_cast<uint16_t>(std::min({opts.congestion_threshold, opts.max_background, 65535u}));
  o.max_write = opts.max_write;
  o.time_gran = 1;
  o.max_pages = static_cast<uint16_t>(std::max<uint32_t>(opts.max_write / 4096, 1));
  reply.size = sizeof(o);
  std::memcpy(out.data(), &o, sizeof(o));
  return reply;
}

FuseReply Lookup(Devfs::Impl& fs, const FuseRequest& req, std::span<uint8_t> out) {
  DevfsStats::Scope scope(fs.stats_.get(), DevfsOp::kLookup);
  const auto* name = reinterpret_cast<const char*>(req.data);
  if (req.data_len == 0 || name[req.data_len - 1] != '\0') return Error(EINVAL);
  auto st = fs.tree_.Lookup(req.in->nodeid, std::string(name));
  if (!st) return Error(ENOENT);
  fuse_entry_out e{};
  e.nodeid = st->st_ino;
  e.generation = 1;
  SplitSeconds(fs.options_.attr_timeout, &e.entry_valid, &e.entry_valid_nsec);
  SplitSeconds(fs.options_.attr_timeout, &e.attr_valid, &e.attr_valid_nsec);
  e.attr = ToAttr(*st);
  return Put(out, e);
}

FuseReply GetAttr(Devfs::Impl& fs, const FuseRequest& req, std::span<uint8_t> out) {
  DevfsStats::Scope scope(fs.stats_.get(), DevfsOp::kGetAttr);
  auto st = fs.tree_.GetAttr(req.in->nodeid);
  if (!st) return Error(ENOENT);
  return AttrReply(out, fs, *st);
}

// Devices have a fixed size and no owner or mode to change: a truncate to the current size
// (O_TRUNC on a file that "already is" the device) and time updates succeed, anything else is
// refused.
FuseReply SetAttr(Devfs::Impl& fs, const FuseRequest& req, std::span<uint8_t> out) {
  DevfsStats::Scope scope(fs.stats_.get(), DevfsOp::kSetAttr);
  const auto* in = Arg<fuse_setattr_in>(req);
  if (in == nullptr) return Error(EINVAL);
  auto st = fs.tree_.GetAttr(req.in->nodeid);
  if (!st) return Error(ENOENT);
  if ((in->valid & FATTR_SIZE) && in->size != static_cast<uint64_t>(st->st_size)) {
    return Error(S_ISDIR(st->st_mode) ? EISDIR : EPERM);
  }
  if (in->valid & (FATTR_MODE | FATTR_UID | FATTR_GID)) return Error(EPERM);
  return AttrReply(out, fs, *st);
}

FuseReply Open(Devfs::Impl& fs, const FuseRequest& req, std::span<uint8_t> out) {
  DevfsStats::Scope scope(fs.stats_.get(), DevfsOp::kOpen);
  const auto* in = Arg<fuse_open_in>(req);
  if (in == nullptr) return Error(EINVAL);
  const uint64_t ino = req.in->nodeid;
  auto file = fs.tree_.Open(ino);
  if (file == nullptr) {
    const auto st = fs.tree_.GetAttr(ino);
    return Error(st && S_ISDIR(st->st_mode) ? EISDIR : ENOENT);
  }
  const int acc = static_cast<int>(in->flags) & O_ACCMODE;
  const bool writable = acc == O_WRONLY || acc == O_RDWR;
  if (writable && file->io.device()->read_only()) return Error(EROFS);
  auto* handle = new (std::nothrow) DevfsHandle{std::move(file), writable};
  if (handle == nullptr) return Error(ENOMEM);
  fuse_open_out o{};
  o.fh = reinterpret_cast<uint64_t>(handle);
  const bool direct = fs.options_.direct_io || (in->flags & O_DIRECT);
  // Direct writes need no inode lock here: ByteRangeIo orders overlapping ones itself, and
  // a loop device's concurrent writes then reach devfs in parallel.
  o.open_flags = direct ? FOPEN_DIRECT_IO | abi::kFopenParallelDirectWrites : FOPEN_KEEP_CACHE;
  o.open_flags |= FOPEN_NOFLUSH;  // close() promises nothing: no FLUSH round trip
  FuseReply reply = Put(out, o);
  reply.opened = o.fh;
  return reply;
}

FuseReply Release(Devfs::Impl& fs, const FuseRequest& req) {
  DevfsStats::Scope scope(fs.stats_.get(), DevfsOp::kRelease);
  const auto* in = Arg<fuse_release_in>(req);
  if (in == nullptr) return Error(EINVAL);
  delete Handle(in->fh);
  return Error(0);
}

FuseReply Read(Devfs::Impl& fs, const FuseRequest& req, std::span<uint8_t> out) {
  const auto* in = Arg<fuse_read_in>(req);
  if (in == nullptr) return Error(EINVAL);
  DevfsStats::Scope scope(fs.stats_.get(), DevfsOp::kRead, in->size);
  if (in->size > out.size()) return Error(EINVAL);
  if (static_cast<int64_t>(in->offset) < 0) return Error(EINVAL);
  // `out` is page-aligned (a file device opened O_DIRECT reads straight into it).
  auto n = Handle(in->fh)->file->io.Read(in->offset, out.first(in->size));
  if (!n.ok()) return FromStatus(n.status());
  return FuseReply{.size = *n};
}

FuseReply Write(Devfs::Impl& fs, const FuseRequest& req, std::span<uint8_t> out) {
  const auto* in = Arg<fuse_write_in>(req);
  if (in == nullptr) return Error(EINVAL);
  DevfsStats::Scope scope(fs.stats_.get(), DevfsOp::kWrite, in->size);
  DevfsHandle* h = Handle(in->fh);
  if (!h->writable) return Error(EBADF);
  if (static_cast<int64_t>(in->offset) < 0 || in->size > req.data_len) return Error(EINVAL);
  Status s = h->file->io.Write(in->offset, std::span(req.data, in->size));
  if (!s.ok()) return FromStatus(s);
  h->file->flusher.NoteWrite();  // before the reply: an FSYNC after it must cover this write
  // Write-behind (devfs_writeback.h). A hint only: the FSYNC's fdatasync still writes back
  // and waits for whatever is dirty.
  if (fs.write_behind_ != nullptr && h->file->page_cache_fd >= 0) {
    if (fs.options_.write_behind_inline) {
      ::sync_file_range(h->file->page_cache_fd, static_cast<off_t>(in->offset),
                        static_cast<off_t>(in->size), SYNC_FILE_RANGE_WRITE);
    } else {
      fs.write_behind_->Kick(h->file);
    }
  }
  fuse_write_out o{};
  o.size = in->size;
  return Put(out, o);
}

// The kernel sends FSYNC for fsync(2) and fdatasync(2) on the file, and a loop device sends
// one per flush request (vfs_fsync, datasync 0). The flusher answers it with a device flush
// shared by concurrent FSYNCs, or at once when nothing was written since a flush that
// covered it (devfs_flush.h). datasync makes no difference: a device has no metadata apart
// from its data.
FuseReply Fsync(Devfs::Impl& fs, const FuseRequest& req) {
  const auto* in = Arg<fuse_fsync_in>(req);
  if (in == nullptr) return Error(EINVAL);
  DevfsStats* stats = fs.stats_.get();
  DevfsStats::Scope scope(stats, DevfsOp::kFsync);
  if (stats != nullptr) stats->BeginSync();
  DevfsFlusher::How how = DevfsFlusher::How::kFlushed;
  DevfsFile& file = *Handle(in->fh)->file;
  const Status s = fs.options_.coalesce_fsync ? file.flusher.Sync(&how) : file.io.Flush();
  if (stats != nullptr) stats->EndSync((in->fsync_flags & 1) != 0, how);
  return FromStatus(s);
}

FuseReply Fallocate(Devfs::Impl& fs, const FuseRequest& req) {
  DevfsStats::Scope scope(fs.stats_.get(), DevfsOp::kFallocate);
  const auto* in = Arg<fuse_fallocate_in>(req);
  if (in == nullptr) return Error(EINVAL);
  DevfsHandle* h = Handle(in->fh);
  const auto off = static_cast<int64_t>(in->offset);
  const auto len = static_cast<int64_t>(in->length);
  if (off < 0 || len <= 0) return Error(EINVAL);
  if (!h->writable) return Error(EBADF);
  const uint32_t mode = in->mode;
  const uint64_t offset = in->offset;
  const uint64_t length = in->length;
  ByteRangeIo& io = h->file->io;
  const uint64_t size = io.size();
  if (mode & FALLOC_FL_PUNCH_HOLE) {
    if (!(mode & FALLOC_FL_KEEP_SIZE) || (mode & ~(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))) {
      return Error(EOPNOTSUPP);
    }
    // A hole reads as zeroes: that is WriteZeroes allowed to unmap, not a bare discard
    // (which may leave old data). Beyond the end there is nothing to punch.
    if (offset >= size) return Error(0);
    return Zeroed(*h->file, io.WriteZeroes(offset, std::min(length, size - offset), true));
  }
  if (mode & FALLOC_FL_ZERO_RANGE) {
    if (mode & ~(FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE)) return Error(EOPNOTSUPP);
    return Zeroed(*h->file, io.WriteZeroes(offset, length, false));
  }
  if ((mode & ~FALLOC_FL_KEEP_SIZE) != 0) return Error(EOPNOTSUPP);
  // Preallocation: the device already has all its space; growing it is not possible.
  return Error(offset + length <= size || (mode & FALLOC_FL_KEEP_SIZE) ? 0 : EFBIG);
}

FuseReply Lseek(Devfs::Impl& fs, const FuseRequest& req, std::span<uint8_t> out) {
  DevfsStats::Scope scope(fs.stats_.get(), DevfsOp::kLseek);
  const auto* in = Arg<fuse_lseek_in>(req);
  if (in == nullptr) return Error(EINVAL);
  ByteRangeIo& io = Handle(in->fh)->file->io;
  const uint64_t size = io.size();
  const int whence = static_cast<int>(in->whence);
  if (whence != SEEK_DATA && whence != SEEK_HOLE) return Error(EINVAL);  // the kernel does the rest
  if (static_cast<int64_t>(in->offset) < 0 || in->offset >= size) return Error(ENXIO);
  auto answer = [&](uint64_t offset) {
    fuse_lseek_out o{};
    o.offset = offset;
    return Put(out, o);
  };
  // Walk the allocation map in windows, so a huge sparse device costs bounded memory.
  constexpr uint64_t kWindow = 1ull << 30;
  const uint64_t pos = in->offset;
  const uint64_t lbs = io.device()->logical_block_size();
  uint64_t start = pos - pos % lbs;
  while (start < size) {
    const uint64_t len = std::min(kWindow, size - start);
    auto map = io.device()->QueryAllocation(start, len);
    if (!map.ok()) return FromStatus(map.status());
    for (const auto& e : *map) {
      if (e.offset + e.length <= pos) continue;
      if (e.allocated == (whence == SEEK_DATA)) return answer(std::max(e.offset, pos));
    }
    start += len;
  }
  // No data after the offset: ENXIO. No hole: the end of the file is a hole.
  return whence == SEEK_DATA ? Error(ENXIO) : answer(size);
}

FuseReply OpenDir(Devfs::Impl& fs, const FuseRequest& req, std::span<uint8_t> out) {
  auto st = fs.tree_.GetAttr(req.in->nodeid);
  if (!st) return Error(ENOENT);
  if (!S_ISDIR(st->st_mode)) return Error(ENOTDIR);
  return Put(out, fuse_open_out{});
}

FuseReply ReadDir(Devfs::Impl& fs, const FuseRequest& req, std::span<uint8_t> out) {
  const auto* in = Arg<fuse_read_in>(req);
  if (in == nullptr) return Error(EINVAL);
  auto entries = fs.tree_.ReadDir(req.in->nodeid);
  if (!entries) return Error(ENOENT);
  const size_t size = std::min<size_t>(in->size, out.size());
  size_t used = 0;
  for (size_t i = static_cast<size_t>(std::max<int64_t>(static_cast<int64_t>(in->offset), 0));
       i < entries->size(); i++) {
    const auto& e = (*entries)[i];
    const size_t need = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + e.name.size());
    if (need > size - used) break;
    auto* d = reinterpret_cast<fuse_dirent*>(out.data() + used);
    std::memset(d, 0, need);
    d->ino = e.ino;
    d->off = i + 1;
    d->namelen = static_cast<uint32_t>(e.name.size());
    d->type = e.is_dir ? DT_DIR : DT_REG;
    std::memcpy(d->name, e.name.data(), e.name.size());
    used += need;
  }
  return FuseReply{.size = used};
}

FuseReply StatFs(Devfs::Impl& fs, std::span<uint8_t> out) {
  fuse_statfs_out o{};
  o.st.bsize = 4096;
  o.st.frsize = 4096;
  o.st.namelen = 255;
  o.st.files = fs.tree_.node_count();
  return Put(out, o);
}

FuseReply BatchForget(Devfs::Impl& fs, const FuseRequest& req) {
  const auto* in = Arg<fuse_batch_forget_in>(req);
  if (in == nullptr) return FuseReply{.none = true};
  const size_t count = std::min<size_t>(in->count, req.data_len / sizeof(fuse_forget_one));
  for (size_t i = 0; i < count; i++) {
    fuse_forget_one one;
    std::memcpy(&one, req.data + i * sizeof(one), sizeof(one));
    fs.tree_.Forget(one.nodeid, one.nlookup);
  }
  return FuseReply{.none = true};
}

}  // namespace

size_t Devfs::Impl::ArgSize(uint32_t opcode) {
  switch (opcode) {
    case FUSE_INIT:
      return sizeof(fuse_init_in);
    case FUSE_FORGET:
      return sizeof(fuse_forget_in);
    case FUSE_BATCH_FORGET:
      return sizeof(fuse_batch_forget_in);
    case FUSE_GETATTR:
      return sizeof(fuse_getattr_in);
    case FUSE_SETATTR:
      return sizeof(fuse_setattr_in);
    case FUSE_OPEN:
    case FUSE_OPENDIR:
      return sizeof(fuse_open_in);
    case FUSE_READ:
    case FUSE_READDIR:
      return sizeof(fuse_read_in);
    case FUSE_WRITE:
      return sizeof(fuse_write_in);
    case FUSE_RELEASE:
    case FUSE_RELEASEDIR:
      return sizeof(fuse_release_in);
    case FUSE_FSYNC:
      return sizeof(fuse_fsync_in);
    case FUSE_FLUSH:
      return sizeof(fuse_flush_in);
    case FUSE_FALLOCATE:
      return sizeof(fuse_fallocate_in);
    case FUSE_LSEEK:
      return sizeof(fuse_lseek_in);
    case FUSE_INTERRUPT:
      return sizeof(fuse_interrupt_in);
    default:
      return 0;  // LOOKUP (the name is all), STATFS, DESTROY, and what devfs refuses
  }
}

void Devfs::Impl::DropHandle(uint64_t fh) { delete Handle(fh); }

FuseReply Devfs::Impl::Dispatch(const FuseRequest& req, std::span<uint8_t> out) {
  try {
    switch (req.in->opcode) {
      case FUSE_INIT:
        return Init(*this, req, out);
      case FUSE_LOOKUP:
        return Lookup(*this, req, out);
      case FUSE_FORGET: {
        if (const auto* in = Arg<fuse_forget_in>(req)) tree_.Forget(req.in->nodeid, in->nlookup);
        return FuseReply{.none = true};
      }
      case FUSE_BATCH_FORGET:
        return BatchForget(*this, req);
      case FUSE_GETATTR:
        return GetAttr(*this, req, out);
      case FUSE_SETATTR:
        return SetAttr(*this, req, out);
      case FUSE_OPEN:
        return Open(*this, req, out);
      case FUSE_RELEASE:
        return Release(*this, req);
      case FUSE_READ:
        return Read(*this, req, out);
      case FUSE_WRITE:
        return Write(*this, req, out);
      case FUSE_FLUSH: {
        DevfsStats::Scope scope(stats_.get(), DevfsOp::kFlush);
        return Error(0);
      }
      case FUSE_FSYNC:
        return Fsync(*this, req);
      case FUSE_FALLOCATE:
        return Fallocate(*this, req);
      case FUSE_LSEEK:
        return Lseek(*this, req, out);
      case FUSE_OPENDIR:
        return OpenDir(*this, req, out);
      case FUSE_READDIR:
        return ReadDir(*this, req, out);
      case FUSE_RELEASEDIR:
        return Error(0);
      case FUSE_STATFS:
        return StatFs(*this, out);
      case FUSE_DESTROY:
        return Error(0);
      // Handlers are not interruptible: the request finishes and is answered as usual.
      case FUSE_INTERRUPT:
        return FuseReply{.none = true};
      default:
        return Error(ENOSYS);
    }
  } catch (...) {
    return Error(EIO);
  }
}

}  // namespace volstack::exportfs

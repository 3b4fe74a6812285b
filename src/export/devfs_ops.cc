// The FUSE low-level request handlers of devfs (the mapping is described in devfs.cc). Each
// handler runs on a libfuse worker thread, answers exactly once and never throws.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "export/devfs_impl.h"

namespace volstack::exportfs {

namespace {

Devfs::Impl* Fs(fuse_req_t req) { return static_cast<Devfs::Impl*>(fuse_req_userdata(req)); }
DevfsHandle* Handle(fuse_file_info* fi) { return reinterpret_cast<DevfsHandle*>(fi->fh); }

// A page-aligned buffer per worker thread for READ replies (so an O_DIRECT file device can
// read into it without a bounce). Grows to the largest read seen (max_read, 1 MiB).
struct ReadBuffer {
  uint8_t* data = nullptr;
  size_t size = 0;
  ~ReadBuffer() { std::free(data); }
  uint8_t* Get(size_t n) {
    if (n > size) {
      std::free(data);
      data = nullptr;
      size = 0;
      void* p = nullptr;
      if (posix_memalign(&p, 4096, n) != 0) return nullptr;
      data = static_cast<uint8_t*>(p);
      size = n;
    }
    return data;
  }
};
thread_local ReadBuffer t_read_buffer;

void ReplyStatus(fuse_req_t req, const Status& status) { fuse_reply_err(req, FuseErrno(status)); }

// Answers a zeroing; a successful one is a write the next FSYNC must cover.
void ReplyZeroes(fuse_req_t req, DevfsFile& file, const Status& status) {
  if (status.ok()) file.flusher.NoteWrite();
  ReplyStatus(req, status);
}

void ReplyEntry(fuse_req_t req, const Devfs::Impl& fs, const struct stat& st) {
  fuse_entry_param e{};
  e.ino = st.st_ino;
  e.generation = 1;
  e.attr = st;
  e.attr_timeout = fs.options_.attr_timeout;
  e.entry_timeout = fs.options_.attr_timeout;
  fuse_reply_entry(req, &e);
}

void Init(void* userdata, fuse_conn_info* conn) {
  auto* fs = static_cast<Devfs::Impl*>(userdata);
  const DevfsOptions& o = fs->options_;
  conn->max_write = o.max_write;
  conn->max_read = o.max_write;
  conn->max_readahead = std::min<unsigned>(conn->max_readahead, 1u << 20);
  conn->max_background = o.max_background;
  conn->congestion_threshold = std::min(o.congestion_threshold, o.max_background);
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;  // the device is the cache
  conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
  if (conn->capable & FUSE_CAP_ASYNC_DIO) conn->want |= FUSE_CAP_ASYNC_DIO;
  if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  // Device contents change behind the kernel's back (NBD, the daemon): never trust cached
  // data across an attribute change.
  if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA) conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
  const unsigned splice = FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
  if (o.splice) {
    conn->want |= conn->capable & splice;
  } else {
    conn->want &= ~splice;
  }
}

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  DevfsStats::Scope scope(Fs(req)->stats_.get(), DevfsOp::kLookup);
  auto* fs = Fs(req);
  auto st = fs->tree_.Lookup(parent, name);
  if (!st) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  ReplyEntry(req, *fs, *st);
}

void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  Fs(req)->tree_.Forget(ino, nlookup);
  fuse_reply_none(req);
}

void ForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  auto* fs = Fs(req);
  for (size_t i = 0; i < count; i++) fs->tree_.Forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  DevfsStats::Scope scope(Fs(req)->stats_.get(), DevfsOp::kGetAttr);
  auto* fs = Fs(req);
  auto st = fs->tree_.GetAttr(ino);
  if (!st) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  fuse_reply_attr(req, &*st, fs->options_.attr_timeout);
}

// Devices have a fixed size and no owner or mode to change: a truncate to the current size
// (O_TRUNC on a file that "already is" the device) and time updates succeed, anything else is
// refused.
void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info*) {
  DevfsStats::Scope scope(Fs(req)->stats_.get(), DevfsOp::kSetAttr);
  auto* fs = Fs(req);
  auto st = fs->tree_.GetAttr(ino);
  if (!st) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  if ((to_set & FUSE_SET_ATTR_SIZE) && attr->st_size != st->st_size) {
    fuse_reply_err(req, S_ISDIR(st->st_mode) ? EISDIR : EPERM);
    return;
  }
  if (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
    fuse_reply_err(req, EPERM);
    return;
  }
  fuse_reply_attr(req, &*st, fs->options_.attr_timeout);
}

void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  DevfsStats::Scope scope(Fs(req)->stats_.get(), DevfsOp::kOpen);
  auto* fs = Fs(req);
  auto file = fs->tree_.Open(ino);
  if (file == nullptr) {
    const auto st = fs->tree_.GetAttr(ino);
    fuse_reply_err(req, st && S_ISDIR(st->st_mode) ? EISDIR : ENOENT);
    return;
  }
  const int acc = fi->flags & O_ACCMODE;
  const bool writable = acc == O_WRONLY || acc == O_RDWR;
  if (writable && file->io.device()->read_only()) {
    fuse_reply_err(req, EROFS);
    return;
  }
  auto* handle = new (std::nothrow) DevfsHandle{std::move(file), writable};
  if (handle == nullptr) {
    fuse_reply_err(req, ENOMEM);
    return;
  }
  fi->fh = reinterpret_cast<uint64_t>(handle);
  fi->direct_io = fs->options_.direct_io || (fi->flags & O_DIRECT) ? 1 : 0;
  fi->keep_cache = fi->direct_io ? 0 : 1;
  fi->noflush = 1;  // close() promises nothing: no FLUSH round trip
  if (fuse_reply_open(req, fi) != 0) delete handle;  // interrupted: no RELEASE will come
}

void Release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  DevfsStats::Scope scope(Fs(req)->stats_.get(), DevfsOp::kRelease);
  delete Handle(fi);
  fuse_reply_err(req, 0);
}

void Read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) {
  DevfsStats::Scope scope(Fs(req)->stats_.get(), DevfsOp::kRead, size);
  ByteRangeIo& io = Handle(fi)->file->io;
  if (off < 0) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  uint8_t* buf = t_read_buffer.Get(std::max<size_t>(size, 4096));
  if (buf == nullptr) {
    fuse_reply_err(req, ENOMEM);
    return;
  }
  auto n = io.Read(static_cast<uint64_t>(off), std::span<uint8_t>(buf, size));
  if (!n.ok()) {
    ReplyStatus(req, n.status());
    return;
  }
  fuse_reply_buf(req, reinterpret_cast<const char*>(buf), *n);
}

void Write(fuse_req_t req, fuse_ino_t, const char* data, size_t size, off_t off,
           fuse_file_info* fi) {
  Devfs::Impl* fs = Fs(req);  // req is gone once answered
  DevfsStats::Scope scope(fs->stats_.get(), DevfsOp::kWrite, size);
  DevfsHandle* h = Handle(fi);
  if (!h->writable) {
    fuse_reply_err(req, EBADF);
    return;
  }
  if (off < 0) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  Status s = h->file->io.Write(static_cast<uint64_t>(off),
                               std::span(reinterpret_cast<const uint8_t*>(data), size));
  if (!s.ok()) {
    ReplyStatus(req, s);
    return;
  }
  h->file->flusher.NoteWrite();  // before the reply: an FSYNC after it must cover this write
  fuse_reply_write(req, size);
  // Write-behind (devfs_writeback.h), after the reply. A hint only: the FSYNC's fdatasync
  // still writes back and waits for whatever is dirty.
  if (fs->write_behind_ != nullptr && h->file->page_cache_fd >= 0) {
    if (fs->options_.write_behind_inline) {
      ::sync_file_range(h->file->page_cache_fd, off, static_cast<off_t>(size),
                        SYNC_FILE_RANGE_WRITE);
    } else {
      fs->write_behind_->Kick(h->file);
    }
  }
}

void Flush(fuse_req_t req, fuse_ino_t, fuse_file_info*) {
  DevfsStats::Scope scope(Fs(req)->stats_.get(), DevfsOp::kFlush);
  fuse_reply_err(req, 0);
}

// The kernel sends FSYNC for fsync(2) and fdatasync(2) on the file, and a loop device sends
// one per flush request (vfs_fsync, datasync 0). The flusher answers it with a device flush
// shared by concurrent FSYNCs, or at once when nothing was written since a flush that
// covered it (devfs_flush.h). datasync makes no difference: a device has no metadata apart
// from its data.
void Fsync(fuse_req_t req, fuse_ino_t, int datasync, fuse_file_info* fi) {
  DevfsStats* stats = Fs(req)->stats_.get();
  DevfsStats::Scope scope(stats, DevfsOp::kFsync);
  if (stats != nullptr) stats->BeginSync();
  DevfsFlusher::How how = DevfsFlusher::How::kFlushed;
  DevfsFile& file = *Handle(fi)->file;
  const Status s = Fs(req)->options_.coalesce_fsync ? file.flusher.Sync(&how) : file.io.Flush();
  if (stats != nullptr) stats->EndSync(datasync != 0, how);
  ReplyStatus(req, s);
}

void Fallocate(fuse_req_t req, fuse_ino_t, int mode, off_t off, off_t len, fuse_file_info* fi) {
  DevfsStats::Scope scope(Fs(req)->stats_.get(), DevfsOp::kFallocate);
  DevfsHandle* h = Handle(fi);
  if (off < 0 || len <= 0) {
    fuse_reply_err(req, EINVAL);
    return;
  }
  if (!h->writable) {
    fuse_reply_err(req, EBADF);
    return;
  }
  const auto offset = static_cast<uint64_t>(off);
  const auto length = static_cast<uint64_t>(len);
  ByteRangeIo& io = h->file->io;
  const uint64_t size = io.size();
  if (mode & FALLOC_FL_PUNCH_HOLE) {
    if (!(mode & FALLOC_FL_KEEP_SIZE) || (mode & ~(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))) {
      fuse_reply_err(req, EOPNOTSUPP);
      return;
    }
    // A hole reads as zeroes: that is WriteZeroes allowed to unmap, not a bare discard
    // (which may leave old data). Beyond the end there is nothing to punch.
    if (offset >= size) {
      fuse_reply_err(req, 0);
      return;
    }
    ReplyZeroes(req, *h->file, io.WriteZeroes(offset, std::min(length, size - offset), true));
    return;
  }
  if (mode & FALLOC_FL_ZERO_RANGE) {
    if (mode & ~(FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE)) {
      fuse_reply_err(req, EOPNOTSUPP);
      return;
    }
    ReplyZeroes(req, *h->file, io.WriteZeroes(offset, length, false));
    return;
  }
  if ((mode & ~FALLOC_FL_KEEP_SIZE) != 0) {
    fuse_reply_err(req, EOPNOTSUPP);
    return;
  }
  // Preallocation: the device already has all its space; growing it is not possible.
  fuse_reply_err(req, offset + length <= size || (mode & FALLOC_FL_KEEP_SIZE) ? 0 : EFBIG);
}

void Lseek(fuse_req_t req, fuse_ino_t, off_t off, int whence, fuse_file_info* fi) {
  DevfsStats::Scope scope(Fs(req)->stats_.get(), DevfsOp::kLseek);
  ByteRangeIo& io = Handle(fi)->file->io;
  const uint64_t size = io.size();
  if (whence != SEEK_DATA && whence != SEEK_HOLE) {
    fuse_reply_err(req, EINVAL);  // the kernel handles SET/CUR/END itself
    return;
  }
  if (off < 0 || static_cast<uint64_t>(off) >= size) {
    fuse_reply_err(req, ENXIO);
    return;
  }
  // Walk the allocation map in windows, so a huge sparse device costs bounded memory.
  constexpr uint64_t kWindow = 1ull << 30;
  uint64_t pos = static_cast<uint64_t>(off);
  const uint64_t lbs = io.device()->logical_block_size();
  uint64_t start = pos - pos % lbs;
  while (start < size) {
    const uint64_t len = std::min(kWindow, size - start);
    auto map = io.device()->QueryAllocation(start, len);
    if (!map.ok()) {
      ReplyStatus(req, map.status());
      return;
    }
    for (const auto& e : *map) {
      if (e.offset + e.length <= pos) continue;
      if (e.allocated == (whence == SEEK_DATA)) {
        fuse_reply_lseek(req, static_cast<off_t>(std::max(e.offset, pos)));
        return;
      }
    }
    start += len;
  }
  // No data after `off`: ENXIO. No hole: the end of the file is a hole.
  if (whence == SEEK_DATA) {
    fuse_reply_err(req, ENXIO);
  } else {
    fuse_reply_lseek(req, static_cast<off_t>(size));
  }
}

void OpenDir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  auto st = Fs(req)->tree_.GetAttr(ino);
  if (!st) {
    fuse_reply_err(req, ENOENT);
  } else if (!S_ISDIR(st->st_mode)) {
    fuse_reply_err(req, ENOTDIR);
  } else {
    fuse_reply_open(req, fi);
  }
}

void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  auto entries = Fs(req)->tree_.ReadDir(ino);
  if (!entries) {
    fuse_reply_err(req, ENOENT);
    return;
  }
  std::unique_ptr<char[]> buf(new (std::nothrow) char[size]);
  if (!buf) {
    fuse_reply_err(req, ENOMEM);
    return;
  }
  size_t used = 0;
  for (size_t i = static_cast<size_t>(std::max<off_t>(off, 0)); i < entries->size(); i++) {
    const auto& e = (*entries)[i];
    struct stat st {};
    st.st_ino = e.ino;
    st.st_mode = e.is_dir ? S_IFDIR : S_IFREG;
    const size_t need = fuse_add_direntry(req, buf.get() + used, size - used, e.name.c_str(), &st,
                                          static_cast<off_t>(i + 1));
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.get(), used);
}

void ReleaseDir(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

void StatFs(fuse_req_t req, fuse_ino_t) {
  struct statvfs sv {};
  sv.f_bsize = 4096;
  sv.f_frsize = 4096;
  sv.f_namemax = 255;
  sv.f_files = Fs(req)->tree_.node_count();
  fuse_reply_statfs(req, &sv);
}

fuse_lowlevel_ops MakeOps() {
  fuse_lowlevel_ops ops{};
  ops.init = Init;
  ops.lookup = Lookup;
  ops.forget = Forget;
  ops.forget_multi = ForgetMulti;
  ops.getattr = GetAttr;
  ops.setattr = SetAttr;
  ops.open = Open;
  ops.release = Release;
  ops.read = Read;
  ops.write = Write;
  ops.flush = Flush;
  ops.fsync = Fsync;
  ops.fallocate = Fallocate;
  ops.lseek = Lseek;
  ops.opendir = OpenDir;
  ops.readdir = ReadDir;
  ops.releasedir = ReleaseDir;
  ops.statfs = StatFs;
  return ops;
}

}  // namespace

const fuse_lowlevel_ops& Devfs::Impl::Ops() {
  static const fuse_lowlevel_ops ops = MakeOps();
  return ops;
}

}  // namespace volstack::exportfs

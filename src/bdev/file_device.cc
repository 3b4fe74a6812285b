#include "bdev/file_device.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace volstack::bdev {

namespace {

constexpr size_t kDirectAlign = 4096;

struct AlignedBuffer {
  explicit AlignedBuffer(size_t n) : size(n) {
    data = static_cast<uint8_t*>(
        std::aligned_alloc(kDirectAlign, (n + kDirectAlign - 1) / kDirectAlign * kDirectAlign));
  }
  ~AlignedBuffer() { std::free(data); }
  uint8_t* data;
  size_t size;
};

bool IsAligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kDirectAlign == 0; }

}  // namespace

Result<std::shared_ptr<FileDevice>> FileDevice::Open(const std::string& path,
                                                     const FileDeviceOptions& options) {
  int flags = (options.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
  if (options.direct_io) flags |= O_DIRECT;
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) return ErrnoStatus("open " + path);
  auto fail = [fd](Status s) {
    ::close(fd);
    return s;
  };
  if (options.exclusive_lock && ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    return fail(err == EWOULDBLOCK ? Status::Busy(path + " is in use by another process")
                                   : ErrnoStatus("lock " + path, err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) return fail(ErrnoStatus("stat " + path));
  Geometry g;
  g.read_only = options.read_only;
  g.caps.fua = true;
  g.caps.discard = true;
  g.caps.write_zeroes = true;
  const bool is_block = S_ISBLK(st.st_mode);
  if (is_block) {
    uint64_t bytes = 0;
    int lbs = 512;
    unsigned int pbs = 4096;
    if (::ioctl(fd, BLKGETSIZE64, &bytes) != 0) return fail(ErrnoStatus("BLKGETSIZE64 " + path));
    if (::ioctl(fd, BLKSSZGET, &lbs) != 0) return fail(ErrnoStatus("BLKSSZGET " + path));
    if (::ioctl(fd, BLKPBSZGET, &pbs) != 0) pbs = static_cast<unsigned int>(lbs);
    g.size_bytes = bytes;
    g.logical_block_size =
        options.logical_block_size ? options.logical_block_size : static_cast<uint32_t>(lbs);
    g.physical_block_size = options.physical_block_size ? options.physical_block_size : pbs;
  } else if (S_ISREG(st.st_mode)) {
    g.logical_block_size = options.logical_block_size ? options.logical_block_size : 512;
    // A file system may accept O_DIRECT at open and still refuse requests finer than its own
    // unit (4K-sector disks): then this device could not serve its block size, so it is
    // EINVAL here, which callers take as "open it buffered".
    struct statx sx {};
    if (options.direct_io && ::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
        (sx.stx_mask & STATX_DIOALIGN) &&
        (sx.stx_dio_offset_align == 0 || sx.stx_dio_offset_align > g.logical_block_size ||
         sx.stx_dio_mem_align > kDirectAlign)) {
      return fail(Status::InvalidArgument(
          sx.stx_dio_offset_align == 0
              ? path + ": its file system does not do direct I/O"
              : path + ": direct I/O needs " + std::to_string(sx.stx_dio_offset_align) +
                    "-byte aligned requests, coarser than its " +
                    std::to_string(g.logical_block_size) + "-byte blocks"));
    }
    g.physical_block_size = options.physical_block_size ? options.physical_block_size : 4096;
    g.size_bytes = static_cast<uint64_t>(st.st_size) / g.logical_block_size * g.logical_block_size;
    g.caps.allocation_query = true;
  } else {
    return fail(Status::InvalidArgument(path + " is neither a regular file nor a block device"));
  }
  if (g.logical_block_size < 512 || (g.logical_block_size & (g.logical_block_size - 1)) != 0) {
    return fail(Status::InvalidArgument(path + ": logical block size " +
                                        std::to_string(g.logical_block_size) +
                                        " is not a power of two >= 512"));
  }
  g.physical_block_size = std::max(g.physical_block_size, g.logical_block_size);
  return std::make_shared<FileDevice>(path, fd, is_block, options.direct_io, g);
}

Result<std::shared_ptr<FileDevice>> FileDevice::Create(const std::string& path, uint64_t size,
                                                       const FileDeviceOptions& options) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("create " + path);
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    Status s = ErrnoStatus("truncate " + path);
    ::close(fd);
    return s;
  }
  ::close(fd);
  return Open(path, options);
}

FileDevice::FileDevice(std::string path, int fd, bool is_block_device, bool direct_io,
                       const Geometry& geometry)
    : BlockDevice("file:" + path, geometry),
      path_(std::move(path)),
      fd_(fd),
      is_block_device_(is_block_device),
      direct_io_(direct_io) {}

FileDevice::~FileDevice() { ::close(fd_); }

Status FileDevice::ReadFully(uint64_t offset, uint8_t* data, size_t length) {
  while (length > 0) {
    const ssize_t n = ::pread(fd_, data, length, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(path_ + ": read at " + std::to_string(offset));
    }
    if (n == 0) {
      // A file shrunk underneath us: the missing tail reads as zeroes, as a hole would.
      std::memset(data, 0, length);
      return Status::Ok();
    }
    data += n;
    offset += static_cast<uint64_t>(n);
    length -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status FileDevice::PwriteV(const iovec* iov, int count, uint64_t offset, bool dsync,
                           ssize_t* written) {
  auto write = [&] {
    do {
      *written = ::pwritev2(fd_, iov, count, static_cast<off_t>(offset), dsync ? RWF_DSYNC : 0);
    } while (*written < 0 && errno == EINTR);
    return *written >= 0 ? Status::Ok()
                         : ErrnoStatus(path_ + ": write at " + std::to_string(offset));
  };
  // A RWF_DSYNC write syncs as fdatasync does, and may take or report a failed write-back.
  return dsync ? sync_latch_.Run(write, path_) : write();
}

Status FileDevice::WriteFully(uint64_t offset, const uint8_t* data, size_t length, bool dsync) {
  while (length > 0) {
    iovec iov = {const_cast<uint8_t*>(data), length};
    ssize_t n;
    VS_RETURN_IF_ERROR(PwriteV(&iov, 1, offset, dsync, &n));
    if (n == 0) {  // a zero-length write would loop forever; the kernel should never do it
      return Status::IoError(path_ + ": write at " + std::to_string(offset) + " made no progress");
    }
    data += n;
    offset += static_cast<uint64_t>(n);
    length -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status FileDevice::DoRead(uint64_t offset, std::span<uint8_t> buf) {
  if (!direct_io_ || IsAligned(buf.data())) [[likely]] {
    // Nearly every read completes in one call: keep that path free of the loop's calls.
    if (::pread(fd_, buf.data(), buf.size(), static_cast<off_t>(offset)) ==
        static_cast<ssize_t>(buf.size())) [[likely]] {
      return Status::Ok();
    }
    return ReadFully(offset, buf.data(), buf.size());
  }
  AlignedBuffer bounce(buf.size());
  if (bounce.data == nullptr) return Status::FromErrno(ENOMEM, path_ + ": bounce buffer");
  VS_RETURN_IF_ERROR(ReadFully(offset, bounce.data, buf.size()));
  std::memcpy(buf.data(), bounce.data, buf.size());
  return Status::Ok();
}

Status FileDevice::DoWrite(uint64_t offset, std::span<const uint8_t> buf, WriteOptions opts) {
  if (!direct_io_ || IsAligned(buf.data())) [[likely]] {
    if (!opts.fua && ::pwrite(fd_, buf.data(), buf.size(), static_cast<off_t>(offset)) ==
                         static_cast<ssize_t>(buf.size())) [[likely]] {
      return Status::Ok();
    }
    return WriteFully(offset, buf.data(), buf.size(), opts.fua);
  }
  AlignedBuffer bounce(buf.size());
  if (bounce.data == nullptr) return Status::FromErrno(ENOMEM, path_ + ": bounce buffer");
  std::memcpy(bounce.data, buf.data(), buf.size());
  return WriteFully(offset, bounce.data, buf.size(), opts.fua);
}

Status FileDevice::DoWriteV(uint64_t offset, std::span<const std::span<const uint8_t>> pieces,
                            WriteOptions opts) {
  if (direct_io_) {
    for (const auto& p : pieces) {
      if (!IsAligned(p.data()) || p.size() % logical_block_size() != 0) {
        // Gathered into one aligned buffer and written at once: piece by piece would be a
        // synchronous device write per piece.
        size_t total = 0;
        for (const auto& q : pieces) total += q.size();
        AlignedBuffer bounce(total);
        if (bounce.data == nullptr) return Status::FromErrno(ENOMEM, path_ + ": bounce buffer");
        size_t at = 0;
        for (const auto& q : pieces) {
          if (!q.empty()) std::memcpy(bounce.data + at, q.data(), q.size());
          at += q.size();
        }
        return WriteFully(offset, bounce.data, total, opts.fua);
      }
    }
  }
  // One pwritev2 per IOV_MAX pieces; a short write resumes inside the piece it stopped in.
  std::vector<iovec> iov;
  iov.reserve(std::min<size_t>(pieces.size(), IOV_MAX));
  size_t next = 0;  // first piece not yet in iov
  while (next < pieces.size() || !iov.empty()) {
    while (iov.size() < IOV_MAX && next < pieces.size()) {
      const auto& p = pieces[next++];
      if (!p.empty()) iov.push_back({const_cast<uint8_t*>(p.data()), p.size()});
    }
    if (iov.empty()) break;
    ssize_t n;
    VS_RETURN_IF_ERROR(PwriteV(iov.data(), static_cast<int>(iov.size()), offset, opts.fua, &n));
    if (n == 0) {
      return Status::IoError(path_ + ": write at " + std::to_string(offset) + " made no progress");
    }
    offset += static_cast<uint64_t>(n);
    // Drop what was written: whole iovecs, then a prefix of the one it stopped in.
    size_t left = static_cast<size_t>(n), done = 0;
    while (done < iov.size() && left >= iov[done].iov_len) left -= iov[done++].iov_len;
    iov.erase(iov.begin(), iov.begin() + static_cast<ptrdiff_t>(done));
    if (left > 0) {
      iov.front().iov_base = static_cast<uint8_t*>(iov.front().iov_base) + left;
      iov.front().iov_len -= left;
    }
  }
  return Status::Ok();
}

Status FileDevice::DoFlush() {
  if (read_only()) return Status::Ok();
  return sync_latch_.Run(
      [&] { return ::fdatasync(fd_) == 0 ? Status::Ok() : ErrnoStatus(path_ + ": fdatasync"); },
      path_);
}

void FileDevice::DoStartWriteback(uint64_t offset, uint64_t length) {
  // With O_DIRECT nothing waits in the page cache. A failure here only means the next
  // fdatasync does all the work, as it would have without the hint.
  if (direct_io_ || read_only()) return;
  ::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(length),
                    SYNC_FILE_RANGE_WRITE);
}

Status FileDevice::DoDiscard(uint64_t offset, uint64_t length) {
  if (is_block_device_) {
    uint64_t range[2] = {offset, length};
    if (::ioctl(fd_, BLKDISCARD, range) != 0) return ErrnoStatus(path_ + ": BLKDISCARD");
    return Status::Ok();
  }
  if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                  static_cast<off_t>(length)) != 0) {
    return ErrnoStatus(path_ + ": punch hole");
  }
  return Status::Ok();
}

Status FileDevice::DoWriteZeroes(uint64_t offset, uint64_t length, ZeroOptions opts) {
  if (is_block_device_) {
    uint64_t range[2] = {offset, length};
    if (::ioctl(fd_, BLKZEROOUT, range) != 0) return ErrnoStatus(path_ + ": BLKZEROOUT");
  } else {
    const int mode = opts.may_unmap ? (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE)
                                    : (FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE);
    if (::fallocate(fd_, mode, static_cast<off_t>(offset), static_cast<off_t>(length)) != 0) {
      if (errno != EOPNOTSUPP) return ErrnoStatus(path_ + ": zero range");
      // The filesystem cannot zero natively: write zeroes through the base emulation.
      return BlockDevice::DoWriteZeroes(offset, length, opts);
    }
  }
  return opts.fua ? DoFlush() : Status::Ok();
}

Result<std::vector<AllocationExtent>> FileDevice::DoQueryAllocation(uint64_t offset,
                                                                    uint64_t length) {
  std::vector<AllocationExtent> out;
  const uint64_t end = offset + length;
  uint64_t pos = offset;
  while (pos < end) {
    const off_t data = ::lseek(fd_, static_cast<off_t>(pos), SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) {  // no data from here to EOF
        out.push_back({pos, end - pos, false});
        break;
      }
      return ErrnoStatus(path_ + ": SEEK_DATA");
    }
    const uint64_t data_start = std::min<uint64_t>(static_cast<uint64_t>(data), end);
    if (data_start > pos) out.push_back({pos, data_start - pos, false});
    if (data_start >= end) break;
    const off_t hole = ::lseek(fd_, data, SEEK_HOLE);
    if (hole < 0) return ErrnoStatus(path_ + ": SEEK_HOLE");
    const uint64_t data_end = std::min<uint64_t>(static_cast<uint64_t>(hole), end);
    out.push_back({data_start, data_end - data_start, true});
    pos = data_end;
  }
  return out;
}

}  // namespace volstack::bdev

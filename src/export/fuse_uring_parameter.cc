#include "export/fuse_uring_parameter.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <thread>

namespace volstack::exportfs {

namespace {

Status Write(const std::string& value) {
  std::ofstream out(FuseUringParameter::kPath);
  out << value << std::flush;
  if (!out) return Status::IoError(std::string("cannot write ") + FuseUringParameter::kPath);
  return Status::Ok();
}

}  // namespace

bool FuseUringParameter::Available() { return ::access(kPath, W_OK) == 0; }

Result<std::unique_ptr<FuseUringParameter>> FuseUringParameter::Set(bool on, int wait_seconds) {
  if (::access(kPath, F_OK) != 0) {
    return Status::NotSupported(std::string("this kernel has no FUSE over io_uring (") + kPath +
                                ")");
  }
  const int fd = ::open(kLockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(std::string("open ") + kLockFile);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_seconds);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      const Status s = ErrnoStatus(std::string("flock ") + kLockFile);
      ::close(fd);
      return s;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::close(fd);
      return Status::FromErrno(
          ETIMEDOUT, std::string(kLockFile) + " held for " + std::to_string(wait_seconds) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::ifstream in(kPath);
  std::string old;
  if (!(in >> old)) {
    ::close(fd);
    return Status::IoError(std::string("cannot read ") + kPath);
  }
  auto p = std::unique_ptr<FuseUringParameter>(new FuseUringParameter(fd, old));
  VS_RETURN_IF_ERROR(Write(on ? "Y" : "N"));  // the destructor restores and unlocks
  return p;
}

FuseUringParameter::~FuseUringParameter() {
  Write(old_).IgnoreError();
  ::close(lock_fd_);  // releases the flock
}

}  // namespace volstack::exportfs

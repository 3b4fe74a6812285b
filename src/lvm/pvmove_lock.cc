// MoverLock (pvmove_lock.h): an flock on a per-VG file holding the mover's PID.
#include "lvm/pvmove_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "util/file_util.h"
#include "util/state_file.h"

namespace volstack::lvm {

namespace {

Result<int> OpenLockFile(const std::string& dir, const std::string& vg) {
  VS_RETURN_IF_ERROR(PrepareStateDir(dir));
  return OpenStateFile(MoverLock::Path(dir, vg), O_RDWR);
}

// The PID written in the lock file, or 0.
pid_t HolderPid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;
  return static_cast<pid_t>(std::strtol(buf, nullptr, 10));
}

Status Busy(const std::string& vg, int fd) {
  const pid_t pid = HolderPid(fd);
  return Status::Busy("a pvmove of volume group " + vg + " is running" +
                      (pid > 0 ? " in process " + std::to_string(pid) : ""));
}

}  // namespace

std::string MoverLock::Path(const std::string& dir, const std::string& vg) {
  return dir + "/pvmove." + vg + ".lock";
}

bool MoverLock::WritePid(int fd, pid_t pid) {
  char text[24];
  size_t i = sizeof text;
  text[--i] = '\n';
  do {
    text[--i] = static_cast<char>('0' + pid % 10);
    pid /= 10;
  } while (pid > 0);
  const size_t n = sizeof text - i;
  return ::pwrite(fd, text + i, n, 0) == static_cast<ssize_t>(n) &&
         ::ftruncate(fd, static_cast<off_t>(n)) == 0;
}

Status MoverLock::WriteOwnPid() {
  if (!WritePid(fd_, ::getpid())) return ErrnoStatus("write the pvmove lock");
  return Status::Ok();
}

Result<std::unique_ptr<MoverLock>> MoverLock::Take(const std::string& dir, const std::string& vg) {
  VS_ASSIGN_OR_RETURN(int fd, OpenLockFile(dir, vg));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    Status s = errno == EWOULDBLOCK ? Busy(vg, fd) : ErrnoStatus("flock");
    ::close(fd);
    return s;
  }
  std::unique_ptr<MoverLock> lock(new MoverLock(fd));
  VS_RETURN_IF_ERROR(lock->WriteOwnPid());
  return lock;
}

Result<std::unique_ptr<MoverLock>> MoverLock::TakeFromMover(const std::string& dir,
                                                            const std::string& vg, int timeout_ms) {
  VS_ASSIGN_OR_RETURN(int fd, OpenLockFile(dir, vg));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool asked = false;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {
      Status s = ErrnoStatus("flock");
      ::close(fd);
      return s;
    }
    if (!asked) {
      const pid_t pid = HolderPid(fd);
      if (pid > 0 && pid != ::getpid()) ::kill(pid, SIGTERM);
      asked = true;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      Status s = Busy(vg, fd);
      ::close(fd);
      return Status::FromErrno(ETIMEDOUT, s.message() + " and did not stop");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::unique_ptr<MoverLock> lock(new MoverLock(fd));
  VS_RETURN_IF_ERROR(lock->WriteOwnPid());
  return lock;
}

Result<std::unique_ptr<MoverLock>> MoverLock::Adopt(const std::string& dir, const std::string& vg,
                                                    int fd) {
  struct stat a {
  }, b{};
  const std::string path = Path(dir, vg);
  if (::fstat(fd, &a) != 0 || ::stat(path.c_str(), &b) != 0 || a.st_dev != b.st_dev ||
      a.st_ino != b.st_ino) {
    return Status::InvalidArgument("inherited descriptor " + std::to_string(fd) + " is not " +
                                   path);
  }
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  // The inherited description already holds the lock; taking it again on it is a no-op that
  // confirms it.
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) return Busy(vg, fd);
  std::unique_ptr<MoverLock> lock(new MoverLock(fd));
  VS_RETURN_IF_ERROR(lock->WriteOwnPid());
  return lock;
}

std::vector<std::pair<std::string, pid_t>> MoverLock::Holders(const std::string& dir) {
  std::vector<std::pair<std::string, pid_t>> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::string prefix = "pvmove.", suffix = ".lock";
    if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
      const pid_t pid = HolderPid(fd);
      if (pid != ::getpid()) {
        out.emplace_back(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()),
                         pid);
      }
    }
    ::close(fd);
  }
  return out;
}

MoverLock::~MoverLock() {
  // The file stays (unlinking a lock file races with a process opening it); its PID goes.
  if (!keep_pid_ && ::ftruncate(fd_, 0) != 0) {
  }
  ::close(fd_);
}

}  // namespace volstack::lvm

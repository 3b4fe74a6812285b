#include "util/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <random>

namespace volstack {

namespace {
std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status WriteAll(int fd, const std::string& data, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write " + what);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}
}  // namespace

Status MakeDirectories(const std::string& path, unsigned mode) {
  if (path.empty()) return Status::Ok();
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    return S_ISDIR(st.st_mode) ? Status::Ok()
                               : Status::FromErrno(ENOTDIR, path + " is not a directory");
  }
  const std::string parent = DirName(path);
  if (parent != path) VS_RETURN_IF_ERROR(MakeDirectories(parent, mode));
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + path);
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string dir = DirName(path);
  VS_RETURN_IF_ERROR(MakeDirectories(dir));
  // A unique name, created O_EXCL|O_NOFOLLOW: never an existing file or a planted symlink
  // (a fixed name let another writer, or an attacker, choose what is written to).
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; attempt++) {
    tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++) + "." +
          std::to_string(rd());
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && (errno != EEXIST || attempt >= 16)) return ErrnoStatus("create " + tmp);
  }
  Status s = WriteAll(fd, contents, tmp);
  if (s.ok() && ::fsync(fd) != 0) s = ErrnoStatus("fsync " + tmp);
  ::close(fd);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = ErrnoStatus("rename to " + path);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return ErrnoStatus("open " + dir);
  const bool synced = ::fsync(dfd) == 0;
  ::close(dfd);
  return synced ? Status::Ok() : ErrnoStatus("fsync " + dir);
}

Result<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + path);
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      Status s = ErrnoStatus("read " + path);
      ::close(fd);
      return s;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace volstack

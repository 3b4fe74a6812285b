#include "util/state_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <mutex>

#include "util/file_util.h"

namespace volstack {

namespace {

std::string Parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string Absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

// One path: owned by root or us, and writable by no one else unless `sticky_ok` and the
// sticky bit is set.
Status CheckOne(const std::string& path, const struct stat& st, bool sticky_ok) {
  const uid_t me = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != me) {
    return Status::FromErrno(EPERM, "state dir refused: " + path + " is owned by uid " +
                                        std::to_string(st.st_uid) + ", not root or uid " +
                                        std::to_string(me));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !(sticky_ok && (st.st_mode & S_ISVTX) != 0)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::FromErrno(EPERM, "state dir refused: " + path + " (mode " + mode +
                                        ") is writable by group or others");
  }
  return Status::Ok();
}

// Per state dir: a recursive mutex orders this process's threads (flock does not, for one
// open file), the fd holds the flock while `depth` > 0.
struct DirLockState {
  std::recursive_mutex mu;
  int fd = -1;    // GUARDED_BY(mu)
  int depth = 0;  // GUARDED_BY(mu)
};

DirLockState& LockStateFor(const std::string& dir) {
  static std::mutex* registry_mu = new std::mutex;
  static auto* registry = new std::map<std::string, std::unique_ptr<DirLockState>>;
  std::lock_guard l(*registry_mu);
  auto& s = (*registry)[dir];
  if (!s) s = std::make_unique<DirLockState>();
  return *s;
}

}  // namespace

Status CheckStateDir(const std::string& dir_in) {
  if (dir_in.empty()) return Status::InvalidArgument("state dir refused: empty path");
  const std::string dir = Absolute(dir_in);
  struct stat st;
  bool first = true;
  for (std::string p = dir;; p = Parent(p)) {
    if (::stat(p.c_str(), &st) != 0) {
      if (errno != ENOENT) return ErrnoStatus("state dir refused: " + p);
      first = false;  // the first existing ancestor will hold it: judged as the dir itself
    } else {
      if (first && !S_ISDIR(st.st_mode)) {
        return Status::FromErrno(ENOTDIR, "state dir refused: " + p + " is not a directory");
      }
      VS_RETURN_IF_ERROR(CheckOne(p, st, /*sticky_ok=*/p != dir));
      first = false;
    }
    if (p == "/" || p == ".") break;
  }
  return Status::Ok();
}

Status PrepareStateDir(const std::string& dir) {
  VS_RETURN_IF_ERROR(CheckStateDir(dir));
  VS_RETURN_IF_ERROR(MakeDirectories(dir, 0700));
  // Checked again: someone may have made it between the two (under a sticky /tmp).
  return CheckStateDir(dir);
}

Result<StateDirLock> StateDirLock::Take(const std::string& dir) {
  VS_RETURN_IF_ERROR(PrepareStateDir(dir));
  const std::string key = Absolute(dir);
  DirLockState& s = LockStateFor(key);
  s.mu.lock();
  if (s.depth == 0) {
    auto fd = OpenStateFile(key + "/lock", O_RDWR);
    if (!fd.ok()) {
      s.mu.unlock();
      return fd.status();
    }
    while (::flock(*fd, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      Status st = ErrnoStatus("lock " + key + "/lock");
      ::close(*fd);
      s.mu.unlock();
      return st;
    }
    s.fd = *fd;
  }
  s.depth++;
  return StateDirLock(key);
}

StateDirLock::~StateDirLock() {
  if (dir_.empty()) return;
  DirLockState& s = LockStateFor(dir_);
  if (--s.depth == 0) {
    ::close(s.fd);  // drops the flock
    s.fd = -1;
  }
  s.mu.unlock();
}

Status UpdateStateFile(const std::string& dir, const std::string& path,
                       const StateFileModifier& modify) {
  VS_ASSIGN_OR_RETURN(auto lock, StateDirLock::Take(dir));
  std::optional<std::string> old;
  if (auto text = ReadWholeFile(path); text.ok()) {
    old = std::move(*text);
  } else if (!text.status().IsNotFound()) {
    return text.status();
  }
  VS_ASSIGN_OR_RETURN(auto updated, modify(old));
  if (!updated || updated == old) return Status::Ok();
  return WriteFileAtomically(path, *updated);
}

Status ReplaceStateFile(const std::string& dir, const std::string& path,
                        const std::string& contents) {
  return UpdateStateFile(dir, path, [&](const std::optional<std::string>&) {
    return Result<std::optional<std::string>>(contents);
  });
}

Result<int> OpenStateFile(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == ELOOP) {
      return Status::FromErrno(ELOOP, path +
                                          " is a symlink: refused (state files are never "
                                          "followed through links)");
    }
    return ErrnoStatus("open " + path);
  }
  return fd;
}

}  // namespace volstack

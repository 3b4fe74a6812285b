// The state directory's files (zpool.cache, lvm/devices, lvm/active, loops.json, nbd.json,
// the pid and log files): how every writer changes them, in one place.
//
// Root writes these files, so a directory someone else can write to would let them swap a
// file (or plant a symlink) and make root clobber any file, or point root's commands at
// devices of their choosing. CheckStateDir refuses such a directory as sshd's StrictModes
// does: the directory and every ancestor must be owned by root or the caller and writable
// by no one else; an ancestor may be writable by others only with the sticky bit (/tmp),
// which keeps them from renaming what is not theirs.
//
// Changes are read-modify-writes under one lock per state dir (flock on <dir>/lock), so
// concurrent commands never lose each other's updates, and land atomically: a temporary
// file with a unique name created O_CREAT|O_EXCL|O_NOFOLLOW (never an existing file or a
// symlink), fsync, rename over the file, fsync of the directory.
//
// Threads: the lock is reentrant within a thread and excludes other threads and processes.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "util/result.h"

namespace volstack {

// OK when `dir` and its existing ancestors are safe to hold root's state (see above). A
// missing `dir` is fine when its nearest existing ancestor is (it will be created 0700).
// EPERM with a message naming the offending path otherwise.
Status CheckStateDir(const std::string& dir);

// Creates `dir` (0700) if missing and checks it as CheckStateDir.
Status PrepareStateDir(const std::string& dir);

// Holds the state dir's lock while alive.
class StateDirLock {
 public:
  // Prepares `dir` and blocks until the lock is held.
  static Result<StateDirLock> Take(const std::string& dir);
  StateDirLock(StateDirLock&& other) noexcept : dir_(std::move(other.dir_)) { other.dir_.clear(); }
  StateDirLock& operator=(StateDirLock&&) = delete;
  StateDirLock(const StateDirLock&) = delete;
  ~StateDirLock();

 private:
  explicit StateDirLock(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;  // empty once moved from
};

// Read-modify-write of `path`, a file inside the state dir `dir`, under its lock. `modify`
// gets the current contents (nullopt when the file does not exist) and returns the new
// contents, or nullopt to leave the file as it is. Its error is returned and nothing is
// written.
using StateFileModifier =
    std::function<Result<std::optional<std::string>>(const std::optional<std::string>& old)>;
Status UpdateStateFile(const std::string& dir, const std::string& path,
                       const StateFileModifier& modify);

// Replaces `path` (inside `dir`) with `contents` under the lock.
Status ReplaceStateFile(const std::string& dir, const std::string& path,
                        const std::string& contents);

// Opens (creating, 0600) a file in the state dir that is written in place (a log, a pid file
// held under flock): O_NOFOLLOW, so a symlink is refused rather than followed. Returns the
// fd (O_CLOEXEC), which the caller closes.
Result<int> OpenStateFile(const std::string& path, int flags);

}  // namespace volstack

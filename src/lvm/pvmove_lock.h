// MoverLock: one pvmove mover per VG across processes.
//
// RunMove's own table (pvmove.h) keeps two movers of one VG apart inside a process; this lock
// does it between processes: a foreground `volstack pvmove`, a background one (`-b` without
// a daemon) and the daemon's job. It is an flock(2) on "<dir>/pvmove.<vg>.lock", which holds
// the holder's PID as text, so `pvmove --abort` in another process can ask the mover to stop
// (SIGTERM: the mover stops at the next region, the move stays resumable) and wait for it.
// The lock belongs to the open file description, so a background child that inherits the
// descriptor (Adopt) holds it without a gap from the parent's checks to the end of the move.
//
// Threads: a MoverLock is used by one thread; the functions are safe from any thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "util/result.h"

namespace volstack::lvm {

class MoverLock {
 public:
  // Takes the lock of `vg` without waiting: EBUSY ("... running in process N") if another
  // holder has it. `dir` is created if missing.
  static Result<std::unique_ptr<MoverLock>> Take(const std::string& dir, const std::string& vg);
  // Takes it, first asking a holder in another process to stop (SIGTERM) and waiting up to
  // `timeout_ms` for it to let go: ETIMEDOUT otherwise.
  static Result<std::unique_ptr<MoverLock>> TakeFromMover(const std::string& dir,
                                                          const std::string& vg, int timeout_ms);
  // Adopts an inherited descriptor of the lock file of `vg` (a background child), after
  // checking it is that file; writes this process's PID into it.
  static Result<std::unique_ptr<MoverLock>> Adopt(const std::string& dir, const std::string& vg,
                                                  int fd);
  // The VGs whose lock another process holds, with its PID (0 if unknown).
  static std::vector<std::pair<std::string, pid_t>> Holders(const std::string& dir);
  ~MoverLock();
  MoverLock(const MoverLock&) = delete;
  MoverLock& operator=(const MoverLock&) = delete;

  int fd() const { return fd_; }
  // Closing leaves the PID in the file (a parent handing the lock to a background child,
  // which wrote its own).
  void KeepPidOnClose() { keep_pid_ = true; }
  static std::string Path(const std::string& dir, const std::string& vg);
  // Writes `pid` as the holder's into the lock file open at `fd`: over the old PID, then cut
  // to length, so a reader never finds the file empty and its first line is always a whole
  // PID (a background mover rewrites the PID its parent wrote for it while `pvmove` may
  // already be asking who holds the lock). Async-signal-safe (a parent calls it between
  // fork and exec); false with errno set on failure.
  static bool WritePid(int fd, pid_t pid);

 private:
  explicit MoverLock(int fd) : fd_(fd) {}
  Status WriteOwnPid();
  int fd_;
  bool keep_pid_ = false;
};

}  // namespace volstack::lvm

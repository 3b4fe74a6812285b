// The state directory: what `volstack up` restores after a restart. It is refused unless
// only root (or the caller) can write it; the files that record the stack (zpool.cache to
// nbd.json below) are changed under its lock, replaced atomically (util/state_file.h) and
// validated on read; the rest are the lock, logs and the running daemon's files. They are
// named here so the layout is visible in one place, with the code that reads and writes each
// (the pool engine never sees the state dir; lvm's pvmove lock is given the directory). The
// stack (stack.h) reads them all at `up`; the verbs that change them call the same functions:
//
//   lock                flock'd by every writer of the files below (util/state_file.h)
//   zpool.cache         pools to import and where their vdevs are (stack/pool_cache.h)
//   lvm/devices         devices to scan for PVs (stack/lvm_state.h)
//   lvm/active          VGs/LVs to activate (stack/lvm_state.h)
//   loops.json          kernel loop bindings to restore (export/loop_bindings.h; restored by
//                       stack/stack.cc)
//   nbd.json            NBD exports to restore (stack/nbd_state.h; written by
//                       stack/nbd_listeners.cc)
//   pvmove.<vg>.lock    a running pvmove's lock (lvm/pvmove_lock.h)
//   pvmove.<vg>.log     a background pvmove's output (cli/lvm_pvmove_verb.cc)
//   daemon.sock         the daemon's control socket; daemon.pid its PID; daemon.log its
//                       output (StateDir below, stack/daemon.cc, cli/stack_verbs.cc)
//   dev/                the devfs mount when the state dir is not the default one
#pragma once

#include <string>

namespace volstack::stack {

inline constexpr const char* kDefaultStateDir = "/var/lib/volstack";
inline constexpr const char* kDefaultDevfsDir = "/run/volstack/dev";

struct StateDir {
  std::string root;

  std::string socket_path() const { return root + "/daemon.sock"; }
  std::string pid_path() const { return root + "/daemon.pid"; }
  std::string log_path() const { return root + "/daemon.log"; }
  std::string nbd_path() const { return root + "/nbd.json"; }
  // The devfs mount point: the system default for the default state dir, else inside it, so
  // test stacks never collide.
  std::string devfs_dir() const {
    return root == kDefaultStateDir ? kDefaultDevfsDir : root + "/dev";
  }
};

}  // namespace volstack::stack

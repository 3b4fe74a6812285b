// The state directory: what `volstack up` restores after a restart. It is refused unless
// only root (or the caller) can write it; every file in it is changed under its lock, replaced
// atomically (util/state_file.h) and validated on read; each subsystem owns its own file,
// named here so the layout is visible in one place:
//
//   lock            flock'd by every writer of the files below
//   zpool.cache     pools to import and where their vdevs are (pool)
//   lvm/devices     devices to scan for PVs (lvm)
//   lvm/active      VGs/LVs to activate (lvm)
//   loops.json      kernel loop bindings to restore (export)
//   nbd.json        NBD exports to restore (export)
//   daemon.sock     the daemon's control socket; daemon.pid its PID, daemon.log its output
//   dev/            the devfs mount when the state dir is not the default one
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

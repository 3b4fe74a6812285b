// Who uses a volstack device (a pool volume, an LV), so the verbs that destroy devices refuse
// while something holds one — as zfs answers "dataset is busy" and lvm2 "in use" — and
// `volstack status` can say what uses what.
//
// A device is in use when:
//   - a kernel loop device is bound to its devfs file (sysfs), whatever mounts it;
//   - a process holds its devfs file open (/proc/*/fd, as fuser finds it);
//   - a live NBD listener of the daemon exports it;
//   - a loop binding or an NBD export of it is recorded for `up` (loops.json, nbd.json);
//   - a pool has it as a vdev (zpool.cache);
//   - it is a PV of a VG with active LVs (lvm/active, and a read-only scan of PV labels,
//     done only when some LV is active).
// What is only "registered" (a device in the daemon's registry, a file in devfs nobody holds)
// is not a use: destroying it unregisters it.
//
// Threads: a snapshot is built and used by one thread (a command).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "export/loop_device.h"

namespace volstack::stack {
class NbdListeners;
}  // namespace volstack::stack

namespace volstack::cli {

// One line of /proc/self/mountinfo.
struct MountEntry {
  std::string source;       // "/dev/loop3"
  std::string mount_point;  // "/mnt/x"
  std::string fstype;       // "xfs"
};
std::vector<MountEntry> ReadMounts();

class DeviceUsage {
 public:
  // Reads the kernel's and the state dir's view once.
  static DeviceUsage Snapshot(const Context& ctx);

  // Every use of `name`, as phrases ("bound to /dev/loop3, mounted on /mnt"); empty if free.
  std::vector<std::string> UsesOf(const std::string& name) const;

  // Kernel state, for `status`: the loops bound to `name`'s devfs file and their mounts.
  std::vector<exportfs::LoopInfo> LoopsOf(const std::string& name) const;
  std::vector<MountEntry> MountsOf(const std::string& source) const;
  // The VG whose PV `name` is, or "" (filled by the PV scan; empty when nothing is active).
  std::string VgOfPv(const std::string& name) const;

 private:
  std::string devfs_dir_;
  std::vector<exportfs::LoopInfo> loops_;
  std::vector<MountEntry> mounts_;
  std::map<std::string, std::vector<std::string>> open_by_;  // devfs path -> "pid N (comm)"
  // device -> (loop device or NBD address, phrase) of the exports recorded for `up`
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> recorded_;
  std::map<std::string, std::string> vdev_of_;  // device -> pool
  std::map<std::string, std::string> pv_of_;    // device -> VG
  std::map<std::string, bool> vg_active_;       // VG -> has active LVs
  const stack::NbdListeners* nbd_ = nullptr;    // the stack's live listeners
};

// EBUSY "<name>: <its uses>" for the first of `names` in use; Ok when none is.
Status CheckNotInUse(const Context& ctx, const std::vector<std::string>& names);

}  // namespace volstack::cli

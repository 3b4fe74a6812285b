// The steps stacks are built from. Each does one thing with a real tool or the volstack CLI
// and registers its undo in run.teardown before returning success.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/stack_builder.h"

namespace volstack::bench {

// A sparse file of `size` bytes at run.dir/name; undo: remove it.
Result<std::string> CreateSparseFile(StackRun& run, const std::string& name, uint64_t size);

// A directory run.dir/name; undo: rmdir it (only if empty: never deletes through a mount).
Result<std::string> MakeRunDirectory(StackRun& run, const std::string& name);

// util-linux: `losetup -f --show --direct-io=on -b SECTOR FILE`; undo: `losetup -d`. Returns
// /dev/loopN.
Result<std::string> AttachLoop(StackRun& run, const std::string& file, uint32_t sector_size);

// `volstack losetup --devfs DIR -f --show [--sector-size N] NAME`: a loop device bound to
// devfs file DIR/NAME (sector size 0: volstack's default, the device's physical block size);
// undo: `volstack losetup -d`. Returns /dev/loopN.
Result<std::string> VolstackLosetup(StackRun& run, const std::string& devfs_dir,
                                    const std::string& name, uint32_t sector_size);

// Starts `volstack devfs --foreground --devfs DIR OPTION... NAME...` and waits until every
// NAME's file appears under DIR; the server's PID joins run.serving_pids. Undo: SIGTERM by
// PID (then SIGKILL), and a lazy unmount if the mount outlived it. Returns DIR.
Result<std::string> StartDevfs(StackRun& run, const std::string& dir_name,
                               const std::vector<std::string>& names,
                               const std::vector<std::string>& options = {});

// `volstack zpool create POOL FILE` on a new sparse file of `file_size`.
Status CreatePool(StackRun& run, const std::string& pool, uint64_t file_size);
// `volstack zfs create -V SIZE NAME`.
// `options`: more `zfs create` arguments ("-o", "compression=lz4").
Status CreateVolume(StackRun& run, const std::string& name, uint64_t size,
                    const std::vector<std::string>& options = {});
// `volstack pvcreate DEV`, `volstack vgcreate VG DEV`, `volstack lvcreate -L SIZE -n LV VG`:
// an LV of `lv_size` bytes named VG/LV on one PV.
Status CreateLogicalVolume(StackRun& run, const std::string& pv, const std::string& vg,
                           const std::string& lv, uint64_t lv_size);

// mkfs.xfs -f -q DEV.
Status MakeXfs(StackRun& run, const std::string& device);
// mount -t xfs DEV run.dir/NAME; undo: umount (retried, then lazy). Returns the mount point.
Result<std::string> MountXfs(StackRun& run, const std::string& device, const std::string& name);

// Whether `path` is a mount point now (from /proc/self/mountinfo).
bool IsMountPoint(const std::string& path);
// The logical sector size of a block device (BLKSSZGET); 0 when unknown.
uint32_t LogicalSectorSize(const std::string& device);

}  // namespace volstack::bench

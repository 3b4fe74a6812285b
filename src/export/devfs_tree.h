// DevfsTree: the namespace devfs shows, kept apart from FUSE so it can be tested alone.
//
// Every device "a/b/c" is a file node `c` under directory nodes `a` and `a/b`, which exist as
// long as some device lives below them. Nodes get inode numbers that are never reused (the
// root is 1), so a stale kernel handle can never reach a different device.
//
// Lookup counts follow the FUSE rule: every entry handed to the kernel (lookup, readdirplus)
// adds one, FORGET subtracts. A removed node leaves the tree at once but stays in the inode
// table until the kernel forgets it; then it is freed. Open files hold their own reference
// to the device's ByteRangeIo, so I/O on an open file of a removed device still reaches it.
//
// Threads: all methods are safe from any thread (one mutex; only namespace operations take
// it, never I/O).
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bdev/block_device.h"
#include "export/byte_range_io.h"
#include "export/devfs_flush.h"

namespace volstack::exportfs {

// What an open devfs file works on: the device's byte-range I/O and the flusher that answers
// its FSYNCs. One per device node, shared by every open handle of it.
struct DevfsFile {
  explicit DevfsFile(bdev::BlockDevicePtr device);
  ByteRangeIo io;
  DevfsFlusher flusher;
  // For write-behind (DevfsOptions::write_behind): the fd of a FileDevice that writes
  // through the host page cache (not O_DIRECT), else -1. Valid while `io` holds the device.
  int page_cache_fd = -1;
  std::atomic<bool> writeback_queued{false};  // DevfsWriteBehind: waiting for its thread
};

class DevfsTree {
 public:
  static constexpr uint64_t kRootIno = 1;

  // A kernel dentry that must be invalidated after a change: `name` in directory `parent`.
  struct Entry {
    uint64_t parent = 0;
    std::string name;
    uint64_t ino = 0;  // the child's inode (0 when it did not exist)
  };
  struct DirEntry {
    std::string name;
    uint64_t ino = 0;
    bool is_dir = false;
  };

  DevfsTree();

  // Adds device `path` (creating directories). Returns the topmost new entry (the dentry
  // the kernel may have cached as negative), or nullopt if nothing changed (the path was
  // already a device, or it collides with a directory or a file on the way: EEXIST).
  Result<std::optional<Entry>> Add(const std::string& path, bdev::BlockDevicePtr device);
  // Removes device `path` and directories left empty. Returns the removed entries, deepest
  // first. ENOENT if it is not a device here.
  Result<std::vector<Entry>> Remove(const std::string& path);

  // Looks `name` up in `parent`, counting one kernel reference on success.
  std::optional<struct stat> Lookup(uint64_t parent, const std::string& name);
  void Forget(uint64_t ino, uint64_t nlookup);
  std::optional<struct stat> GetAttr(uint64_t ino) const;
  // Children of a directory ("." and ".." included); nullopt if `ino` is not a live one.
  std::optional<std::vector<DirEntry>> ReadDir(uint64_t ino) const;
  // The I/O object of a file node; nullptr for directories and unknown inodes.
  std::shared_ptr<DevfsFile> Open(uint64_t ino) const;
  // Files (linked, of live devices) whose device size differs from the size this call last
  // saw (or the size at Add), so the kernel can be told to drop their cached attributes. The
  // sizes seen are updated.
  std::vector<uint64_t> TakeResized();

  // For tests and the daemon's status: inodes held (live or waiting for FORGET).
  size_t node_count() const;

 private:
  struct Node {
    uint64_t ino = 0;
    uint64_t parent = 0;
    std::string name;
    bool is_dir = false;
    bool linked = true;                        // still in the tree
    uint64_t nlookup = 0;                      // kernel references
    std::map<std::string, uint64_t> children;  // directories only
    std::shared_ptr<DevfsFile> file;           // files only
    uint64_t seen_size = 0;                    // files: device size at the last TakeResized
    struct timespec mtime {};
  };

  struct stat StatLocked(const Node& node) const;
  void MaybeFreeLocked(uint64_t ino);

  mutable std::mutex mu_;
  std::map<uint64_t, Node> nodes_;    // GUARDED_BY(mu_)
  uint64_t next_ino_ = kRootIno + 1;  // GUARDED_BY(mu_)
};

}  // namespace volstack::exportfs

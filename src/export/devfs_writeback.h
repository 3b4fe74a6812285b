// DevfsWriteBehind: starts the host's writeback of page-cache-backed device files soon after
// devfs writes to them, on a thread of its own, so that an FSYNC's fdatasync finds the data
// already on its way to the disk instead of starting all of it (devfs.cc, "FSYNC").
//
// A write calls Kick(file). The first Kick of a file queues it; the thread takes it, clears
// its flag and calls sync_file_range(SYNC_FILE_RANGE_WRITE) on the whole file: the kernel
// starts writing every dirty page it finds and waits for none. Writes made meanwhile kick the
// file again, so under a stream of writes each pass picks up what the previous one missed,
// and the I/O is submitted in file order, batched, off the FUSE threads. It is a hint only:
// durability still comes from the device flush that answers FSYNC.
//
// Threads: Kick from any thread; the destructor stops the thread (files still queued are
// dropped: nothing is lost, the kernel writes them back anyway).
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "export/devfs_tree.h"

namespace volstack::exportfs {

class DevfsWriteBehind {
 public:
  DevfsWriteBehind();
  ~DevfsWriteBehind();
  DevfsWriteBehind(const DevfsWriteBehind&) = delete;
  DevfsWriteBehind& operator=(const DevfsWriteBehind&) = delete;

  // `file` was written (its page_cache_fd must be >= 0).
  void Kick(const std::shared_ptr<DevfsFile>& file);
  // Passes made (tests).
  uint64_t passes() const;

 private:
  void Run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<DevfsFile>> queue_;  // GUARDED_BY(mu_)
  bool stop_ = false;                             // GUARDED_BY(mu_)
  uint64_t passes_ = 0;                           // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace volstack::exportfs

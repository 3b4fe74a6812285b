// Devfs: a FUSE filesystem with one regular file per active device of a DeviceRegistry
// (device "trunk/funk" is <mount>/trunk/funk). Theory and the request mapping are in
// devfs.cc.
//
// Threads: Mount() starts the FUSE session on threads of its own and returns once the
// kernel has completed the handshake (a stat of the mount point succeeds). Unmount() and
// the destructor may be called from any thread except a FUSE request thread. The registry
// must outlive the Devfs; devices added to or removed from it show up at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bdev/device_registry.h"
#include "util/result.h"

namespace volstack::exportfs {

// How FUSE requests reach devfs. kClassic: threads read /dev/fuse and write the replies back
// (two syscalls per request, any kernel). kUring: FUSE over io_uring (Linux 6.14+ with the
// fuse module's enable_uring parameter on): a queue per CPU, each request arrives in a ring
// entry and its reply goes back with the next fetch in one io_uring_enter. kAuto: the ring
// when the kernel offers it, else classic.
enum class FuseTransport : uint8_t { kAuto, kUring, kClassic };
const char* FuseTransportName(FuseTransport transport);  // "auto", "uring", "classic"
Result<FuseTransport> ParseFuseTransport(const std::string& name);
// The transport named by VOLSTACK_FUSE_TRANSPORT (auto when unset); an invalid value is an
// error.
Result<FuseTransport> FuseTransportFromEnvironment();

struct DevfsOptions {
  // kAuto takes VOLSTACK_FUSE_TRANSPORT when it is set. kUring fails the mount when the
  // kernel cannot do it; kAuto then falls back to kClassic.
  FuseTransport transport = FuseTransport::kAuto;
  // io_uring: threads per queue (one ring entry each, so this many requests of one CPU are
  // served at once). 0: max_threads spread over the queues (at least one each), so the ring
  // serves as many requests at once as the classic transport, and a machine with many CPUs
  // does not get a thread and a max_write payload buffer per CPU times eight.
  unsigned uring_threads_per_queue = 0;
  // io_uring: pin each queue's threads to the queue's CPU. Off: a request issued on a busy
  // CPU is then served wherever the scheduler finds room (on a loaded machine a pinned
  // thread waits for its CPU while the other one idles).
  bool uring_pin_threads = false;
  // Tests: queue 0's first entry offers a payload buffer smaller than the kernel requires,
  // so the kernel refuses it (the path that must fall back instead of leaving the kernel
  // waiting for a ring that never completes).
  bool uring_refuse_first_entry_for_test = false;
  // FOPEN_DIRECT_IO on every open: no page cache between the kernel and the device (the
  // device is the cache, and the same device may also be written through NBD). Off: the
  // kernel page cache is used, except for opens with O_DIRECT.
  bool direct_io = true;
  // Classic transport: threads serving requests, each with a /dev/fuse fd of its own when
  // clone_fd. With the ring, one classic thread remains (FORGET and INTERRUPT never go
  // through the ring).
  unsigned max_threads = 16;
  bool clone_fd = true;
  // The kernel's limit of asynchronous requests in flight (async direct I/O from a loop
  // device, readahead). The kernel default, 12, caps a loop device's queue depth.
  unsigned max_background = 256;
  unsigned congestion_threshold = 192;
  // Largest WRITE (and READ) the kernel sends; at most 1 MiB.
  uint32_t max_write = 1u << 20;
  // Other users may open files (subject to the files' modes, which are root-only).
  bool allow_other = true;
  // FSYNC through the flusher (devfs_flush.h): concurrent FSYNCs share a device flush and
  // an FSYNC with nothing written since a covering flush is answered at once. Off: every
  // FSYNC is one device flush (for comparison).
  bool coalesce_fsync = true;
  // Write-behind: after answering a WRITE to a device that is a file written through the
  // host page cache, have a thread start writing the file's dirty pages back
  // (sync_file_range WRITE, no waiting; devfs_writeback.h), so that the next FSYNC's
  // fdatasync finds them on their way instead of starting them all. Off by default: on an
  // idle machine it cost fio 4 KiB random I/O on the loop 44.0k -> 27.7k IOPS and dbench
  // 0.96 -> 0.87 of the plain loop (docs/exports.md, "Flush latency"); it helped only loaded.
  bool write_behind = false;
  // Comparison: start the write-back of each write's own range inline, on the FUSE thread,
  // instead of on the write-behind thread.
  bool write_behind_inline = false;
  // Seconds the kernel may cache names and attributes.
  double attr_timeout = 1.0;
  // How often devfs looks for devices whose size changed (lvextend, a volume's volsize) to
  // tell the kernel to drop the file's cached attributes at once; 0 = never (the kernel then
  // sees the new size after attr_timeout).
  double resize_poll_seconds = 0.05;
};

class Devfs {
 public:
  // Mounts devfs on `dir` (created if missing) serving `registry`.
  static Result<std::unique_ptr<Devfs>> Mount(const std::string& dir,
                                              bdev::DeviceRegistry& registry,
                                              const DevfsOptions& options = {});
  // Unmounts (lazily and by aborting the connection if files are still open) and stops.
  ~Devfs();
  Devfs(const Devfs&) = delete;
  Devfs& operator=(const Devfs&) = delete;

  // Clean unmount: EBUSY (and still mounted and serving) while a file is open, e.g. bound
  // to a loop device. After success the destructor has nothing left to do.
  Status Unmount();

  const std::string& dir() const;
  // The transport serving requests (kUring or kClassic) and, for classic under kAuto, why
  // the ring is not used.
  FuseTransport transport() const;
  const std::string& transport_reason() const;
  // Inodes held (tests: they fall back to the root once the kernel forgets removed ones).
  size_t node_count() const;

  class Impl;

 private:
  explicit Devfs(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The default mount point: /run/volstack/dev for the default state dir, <state_dir>/dev for
// any other, so test stacks never collide.
std::string DefaultDevfsDir(const std::string& state_dir);

}  // namespace volstack::exportfs

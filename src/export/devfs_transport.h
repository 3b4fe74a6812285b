// The two ways FUSE requests reach devfs's handlers (Devfs::Impl::Dispatch). Both are owned
// by Devfs::Impl; see devfs.cc for when each runs.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "export/devfs_impl.h"
#include "util/result.h"

namespace volstack::exportfs {

// Classic: threads that read(2) a request from /dev/fuse, serve it and writev(2) the reply
// (devfs_classic.cc). A thread ends when its read finds the connection gone (ENODEV after
// the unmount, ECONNABORTED after an abort).
class DevfsClassicLoop {
 public:
  DevfsClassicLoop(Devfs::Impl& fs, int session_fd) : fs_(fs), session_fd_(session_fd) {}
  // Joins the threads: the connection must be gone (unmounted or aborted).
  ~DevfsClassicLoop();
  DevfsClassicLoop(const DevfsClassicLoop&) = delete;
  DevfsClassicLoop& operator=(const DevfsClassicLoop&) = delete;

  // Starts `count` more threads; with clone_fd each reads a /dev/fuse fd of its own
  // (FUSE_DEV_IOC_CLONE), so replies go back on the fd whose queue the request came from
  // and threads do not contend on one queue. The first thread always reads the session fd.
  Status AddThreads(unsigned count, bool clone_fd);

 private:
  void Serve(int fd, bool own_fd);

  Devfs::Impl& fs_;
  const int session_fd_;
  std::mutex mu_;
  std::vector<std::thread> threads_;  // GUARDED_BY(mu_)
};

// FUSE over io_uring (devfs_uring.c): one queue per possible CPU (the kernel puts a request
// on the queue of the CPU that issued it and uses the ring only once every queue has an
// entry), each served by threads_per_queue threads (pinned to that CPU if asked). A thread owns a
// ring (128-byte SQEs, one issuer) with one entry: a header buffer and a payload buffer it
// registers with FUSE_IO_URING_CMD_REGISTER; each request arrives as that command's
// completion, and its reply goes back with FUSE_IO_URING_CMD_COMMIT_AND_FETCH, which also
// waits for the next request, in one io_uring_enter.
class DevfsUringLoop {
 public:
  // Whether this process can set up such a ring (io_uring may be disabled by sysctl or
  // seccomp, or too old for 128-byte SQEs): Ok or why not.
  static Status Probe();
  // CPUs the kernel makes queues for: num_possible_cpus().
  static Result<unsigned> PossibleCpus();

  // threads_per_queue 0: `total_threads` spread over the queues, at least one each.
  DevfsUringLoop(Devfs::Impl& fs, int session_fd, size_t payload_size, unsigned threads_per_queue,
                 unsigned total_threads, bool pin, bool refuse_first_entry = false)
      : fs_(fs),
        session_fd_(session_fd),
        payload_size_(payload_size),
        threads_per_queue_(threads_per_queue),
        total_threads_(total_threads),
        pin_(pin),
        refuse_first_entry_(refuse_first_entry) {}
  // Stops and joins the threads. Their entries end with the connection (the kernel completes
  // them with ENOTCONN); a thread also gives up within a second once told to stop.
  ~DevfsUringLoop();
  DevfsUringLoop(const DevfsUringLoop&) = delete;
  DevfsUringLoop& operator=(const DevfsUringLoop&) = delete;

  // After the INIT reply that took FUSE_OVER_IO_URING: starts every queue's threads and
  // waits until each has registered its entry. On failure the kernel is made to fall back to
  // /dev/fuse (a REGISTER it must refuse resets its io_uring state; otherwise requests would
  // wait forever for a ring that is never complete) and the error says why.
  Status Start();

 private:
  struct Thread {
    uint16_t qid = 0;
    int phase = 0;        // registration phase (DevfsUringLoop::Start)
    bool refuse = false;  // offer a payload buffer the kernel refuses (tests)
    std::thread thread;
  };
  void Serve(Thread& t);
  // Reports a thread's registration in `phase`: Ok or the error.
  void Report(int phase, Status status);
  // Waits until Start() opens `phase`; false when Start() gave up on the ring.
  bool WaitTurn(int phase);
  // Sends a REGISTER the kernel refuses (no such queue), so it stops waiting for the ring.
  void ForceFallback();

  Devfs::Impl& fs_;
  const int session_fd_;
  const size_t payload_size_;
  const unsigned threads_per_queue_;
  const unsigned total_threads_;
  const bool pin_;
  const bool refuse_first_entry_;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Thread>> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  int open_phase_ = -1;      // GUARDED_BY(mu_)
  bool abort_ = false;       // GUARDED_BY(mu_)
  size_t reported_[3] = {};  // GUARDED_BY(mu_)
  Status first_error_[3];    // GUARDED_BY(mu_)
};

}  // namespace volstack::exportfs

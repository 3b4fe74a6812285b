// Background work a live stack owns (a pvmove now; scrub, resilver, send/receive later), and
// the serialization that requests and jobs share.
//
// Requests run one at a time holding the serialization (the daemon wraps its handler in a
// Scope), and so do `up` and `down`. A job runs on a thread of its own and takes the
// serialization (Serialized) around work that reads or changes what requests change: LVM
// metadata, the list of pools. Reentrant on a thread that holds it already. Lock order: the
// control server's request lock, then this one.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "util/status.h"

namespace volstack::stack {

class Jobs {
 public:
  Jobs() = default;
  ~Jobs() { StopAll(); }
  Jobs(const Jobs&) = delete;
  Jobs& operator=(const Jobs&) = delete;

  // `run` runs on a thread of its own; StopAll calls `stop` and joins it. EBUSY once the
  // stack is stopping.
  Status Start(std::function<void()> run, std::function<void()> stop);
  // Stops every job (calls its `stop`, joins it) and refuses new ones. Called inside a
  // request, it lets jobs take the serialization while it waits for them.
  void StopAll();
  // Takes jobs again after StopAll (an `up` after a `down` of the same stack).
  void Reopen();

  // Runs `fn` holding the serialization.
  Status Serialized(const std::function<Status()>& fn);
  // For a request that waits for a job (the pvmove follower): lets jobs and other requests
  // take the serialization, and takes it back. No-ops on a thread that does not hold it.
  // Release after ControlServer::ReleaseCurrentRequest, reacquire after
  // ControlServer::ReacquireCurrentRequest (the lock order).
  static void ReleaseSerialization();
  static void ReacquireSerialization();

  // Holds the serialization for a scope on this thread (unless it already does).
  class Scope {
   public:
    explicit Scope(Jobs& jobs);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    std::optional<std::unique_lock<std::mutex>> lock_;
  };

 private:
  struct Job {
    std::thread thread;
    std::function<void()> stop;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex serial_mu_;  // the serialization
  std::mutex mu_;
  std::vector<Job> jobs_;  // GUARDED_BY(mu_)
  bool closed_ = false;    // GUARDED_BY(mu_)
};

}  // namespace volstack::stack

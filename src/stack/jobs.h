// Background work a live stack owns (pvmove, scrub; resilver, send/receive later), and the
// serialization that requests and jobs share.
//
// A job has a Record: its kind and target (what `volstack jobs` lists), its progress and its
// end, which a request can wait for (pvmove and `volstack jobs -w` follow one this way). A job
// runs on a thread with no request (util/request_io.h), so what it prints goes to the daemon's
// log, never to a client; what a client sees of it is its Record.
//
// Requests run one at a time holding the serialization (the daemon wraps its handler in a
// Scope), and so do `up` and `down`. A job runs on a thread of its own and takes the
// serialization (Serialized) around work that reads or changes what requests change: LVM
// metadata, the list of pools. Reentrant on a thread that holds it already. Lock order: the
// control server's request lock, then this one.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "util/result.h"
#include "util/status.h"

namespace volstack::stack {

// What one job is and where it has got to; shared by the job and those who watch it.
class JobRecord {
 public:
  JobRecord(uint64_t id, std::string kind, std::string target)
      : id_(id), kind_(std::move(kind)), target_(std::move(target)) {}

  uint64_t id() const { return id_; }
  const std::string& kind() const { return kind_; }
  const std::string& target() const { return target_; }

  // The job's side.
  void SetProgress(std::string text);
  void Finish(Status status);

  struct Snapshot {
    uint64_t id = 0;
    std::string kind, target;
    std::string state;  // running, done, failed, stopped
    std::string progress;
    Status status;  // once ended
  };
  Snapshot Get() const;
  bool done() const;
  // Waits until the job has ended or `timeout` passed; true when it has ended.
  bool WaitFor(std::chrono::milliseconds timeout) const;
  // Marks the job as asked to stop (its state reads "stopped" if it then ends with an error).
  void MarkStopping() { stopping_ = true; }

 private:
  const uint64_t id_;
  const std::string kind_, target_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::string progress_;  // GUARDED_BY(mu_)
  bool done_ = false;     // GUARDED_BY(mu_)
  Status status_;         // GUARDED_BY(mu_)
};

class Jobs {
 public:
  Jobs() = default;
  ~Jobs() { StopAll(); }
  Jobs(const Jobs&) = delete;
  Jobs& operator=(const Jobs&) = delete;

  // `run` runs on a thread of its own; StopAll calls `stop` and joins it. EBUSY once the
  // stack is stopping.
  Status Start(std::function<void()> run, std::function<void()> stop);
  // The same for a job that is listed: `run` reports through the record and returns how the
  // job ended (the record is finished with it). Returns the record.
  Result<std::shared_ptr<JobRecord>> Start(std::string kind, std::string target,
                                           std::function<Status(JobRecord&)> run,
                                           std::function<void()> stop);
  // The listed jobs, running and recently ended (the last kKeepEnded), by id.
  std::vector<JobRecord::Snapshot> List() const;
  // The listed job `id`, or null.
  std::shared_ptr<JobRecord> Find(uint64_t id) const;
  // Asks listed job `id` to stop (its `stop`); ENOENT when no such job runs.
  Status Stop(uint64_t id);
  static constexpr size_t kKeepEnded = 16;
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
  Status StartJob(std::function<void()> run, std::function<void()> stop,
                  std::shared_ptr<JobRecord> record);

  struct Job {
    std::thread thread;
    std::function<void()> stop;
    std::shared_ptr<std::atomic<bool>> done;
    std::shared_ptr<JobRecord> record;  // null for an unlisted job
  };
  std::mutex serial_mu_;  // the serialization
  mutable std::mutex mu_;
  std::vector<Job> jobs_;                            // GUARDED_BY(mu_)
  std::vector<std::shared_ptr<JobRecord>> records_;  // GUARDED_BY(mu_); listed, by id
  uint64_t next_id_ = 1;                             // GUARDED_BY(mu_)
  bool closed_ = false;                              // GUARDED_BY(mu_)
};

}  // namespace volstack::stack

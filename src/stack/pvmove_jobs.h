// The pvmoves a live stack runs as jobs (jobs.h), one per VG: started by `volstack pvmove`
// run in the daemon, and by `up` for every VG whose metadata holds an interrupted move. A
// client follows a job's progress (cli/lvm_pvmove_verb.cc) while the daemon serves others.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "lvm/pvmove.h"
#include "util/status.h"

namespace volstack::stack {

class Stack;

struct MoveJob {
  std::atomic<bool> stop{false};  // asked to stop, possibly before RunMove started
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;           // GUARDED_BY(mu)
  Status status;               // GUARDED_BY(mu)
  lvm::MoveProgress progress;  // GUARDED_BY(mu); the latest
  bool have_progress = false;  // GUARDED_BY(mu)
};

class PvmoveJobs {
 public:
  explicit PvmoveJobs(Stack& stack) : stack_(stack) {}

  // The running job of `vg`, or a new one (which takes the VG's mover lock itself).
  Result<std::shared_ptr<MoveJob>> Ensure(const std::string& vg);
  // Stops the job of `vg`, if one runs, and waits for it, letting jobs and other requests
  // run meanwhile (the job may need the serialization to stop).
  void Stop(const std::string& vg);
  // Starts a job for every VG whose metadata holds an interrupted pvmove (at `up`).
  Status ResumeInterrupted();

 private:
  Stack& stack_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<MoveJob>> jobs_;  // GUARDED_BY(mu_); by VG
};

}  // namespace volstack::stack

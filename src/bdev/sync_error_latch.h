// SyncErrorLatch: the verdict on a device's durability calls (flushes, FUA writes). Once
// one fails, every later one fails with that first error, without running; and a call
// that succeeds returns success only once every call that overlapped it has ended, and
// only if none of them failed.
//
// Why. Linux reports a file's failed write-back to one fdatasync (or RWF_DSYNC write) on
// the descriptor, whichever checks first, and then forgets it: the pages it could not
// write are lost, and a later fdatasync succeeds. So with two callers flushing one file (a
// pool's intent log and its commits, an early flush and a commit), one could take the
// other's failure and leave it a success over lost writes. Remembering the first failure
// covers callers that come after it. A call that overlapped the failing one needs more:
// the failing call may take the error inside the kernel before this one checks, yet
// return to user space after this one did. Waiting for every call that started before
// this one ended (only those can have taken an error that was this one's to report) closes
// that window. Calls that do not overlap never wait.
//
// Threads: Run may be called from any number of threads at once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>

#include "util/status.h"

namespace volstack::bdev {

class SyncErrorLatch {
 public:
  // Runs `call` (which makes writes durable) and returns its verdict as above; `what`
  // names the device in the error an earlier failure turns later calls into.
  Status Run(const std::function<Status()>& call, const std::string& what);

 private:
  std::mutex mu_;
  std::condition_variable ended_;
  uint64_t next_ticket_ = 0;    // GUARDED_BY(mu_): calls started, in order
  std::set<uint64_t> running_;  // GUARDED_BY(mu_): tickets of the calls not yet ended
  Status first_error_;          // GUARDED_BY(mu_)
};

}  // namespace volstack::bdev

// Cancellation by Ctrl-C for the bench: SIGINT and SIGTERM set a flag and nothing else, so
// the bench's loops notice it between steps (and while waiting on a child, within 100 ms),
// stop the running dbench and tear the stack down in order. A second signal does the same:
// teardown is never skipped, because a stray loop device or mount is worse than a wait.
//
// Threads: the flag is a lock-free atomic, safe to read from any thread.
#pragma once

#include "util/status.h"

namespace volstack::bench {

// Installs the handlers; the destructor restores the previous ones.
class ScopedCancelOnSignal {
 public:
  ScopedCancelOnSignal();
  ~ScopedCancelOnSignal();
  ScopedCancelOnSignal(const ScopedCancelOnSignal&) = delete;
  ScopedCancelOnSignal& operator=(const ScopedCancelOnSignal&) = delete;
};

// True once a SIGINT/SIGTERM arrived (or RequestCancel() was called).
bool CancelRequested();
void RequestCancel();
// For tests: clears the flag.
void ResetCancel();

// ECANCELED "interrupted" when cancelled, else OK.
Status CheckCancelled();

}  // namespace volstack::bench

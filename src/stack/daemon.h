// The daemon: the one process that holds a stack live (stack.h) while anything is exported —
// imported pools, active LVs, the devfs mount, NBD listeners, loop bindings — and runs the
// CLI's requests against it.
//
// Lifecycle: Run() takes the state dir's lock (one daemon per state dir), opens its Stack,
// brings it up (Stack::Up), binds the control socket, then serves requests until
// SIGTERM/SIGINT or a request that asks it to stop (Stack::RequestStop, from `down`), and
// finally takes the stack down (Stack::Down(force)): flush, detach what it bound, unmount
// devfs, export pools. A kill -9 skips the last step; the on-disk formats make that safe (the
// pool replays to its last txg, LVM metadata commits are atomic) and the next `up` recovers.
//
// Requests run one at a time (ControlServer serializes them, and each holds the stack's
// serialization, jobs.h); device I/O from devfs and NBD runs concurrently on their own
// threads and never takes the request lock. Long work (a pvmove) runs as a job of the stack,
// stopped before shutdown.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "stack/control_socket.h"
#include "stack/stack.h"
#include "stack/state_dir.h"

namespace volstack::stack {

class Daemon {
 public:
  struct Hooks {
    // Runs one request against the live stack, on the request's thread with the client's
    // streams installed (util/request_io.h); returns the command's exit code, or a Status the
    // client prints (a verb the daemon does not run). Supplied by the layer that knows the
    // verbs (the CLI).
    std::function<Result<int>(Stack& stack, const ControlRequest& request)> handle_request;
  };

  // Runs the daemon in this process until it is told to stop. `ready` (may be null) is
  // called once the socket answers and the stack is up, with the status of Up(). `options`
  // are the stack's (tests give a fake kernel).
  static Status Run(const StateDir& state, Hooks hooks, std::function<void(Status)> ready,
                    Stack::Options options = {});
};

}  // namespace volstack::stack

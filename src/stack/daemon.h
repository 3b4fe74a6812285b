// The daemon: the one process that owns every open device of a stack while anything is
// exported — imported pools, active LVs, the devfs mount, NBD listeners, loop bindings — and
// runs the CLI's requests against them.
//
// Lifecycle: Run() takes the state dir's lock (one daemon per state dir), binds the control
// socket, assembles the stack from the state dir (Hooks::up, which the CLI supplies:
// cli::AssembleUp in cli/assembly.cc), then serves requests until
// SIGTERM/SIGINT or a `down` request, and finally takes the stack down cleanly (flush, detach
// what it bound, unmount devfs, export pools). A kill -9 skips the last step; the on-disk
// formats make that safe (the pool replays to its last txg, LVM metadata commits are
// atomic) and the next `up` recovers.
//
// Requests run one at a time (ControlServer serializes them); device I/O from devfs and NBD
// runs concurrently on their own threads and never takes the request lock. Long work (a
// pvmove) runs as a job on a thread the daemon owns (StartJob), stopped before shutdown.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bdev/device_registry.h"
#include "stack/control_socket.h"
#include "stack/state_dir.h"

namespace volstack::stack {

class Daemon {
 public:
  // Steps the daemon runs at start and stop, supplied by the layer that knows the verbs (the
  // CLI): bringing a stack up is the same code whether the daemon or a CLI process runs it.
  struct Hooks {
    ControlServer::Handler handle_request;
    std::function<Status(Daemon&)> up;    // assemble from the state dir
    std::function<Status(Daemon&)> down;  // flush and release everything
  };

  // The daemon running in this process, or nullptr (in a CLI process).
  static Daemon* Current();

  // Runs the daemon in this process until it is told to stop. `ready` (may be null) is
  // called once the socket answers and the stack is up, with the status of `up`.
  static Status Run(const StateDir& state, Hooks hooks, std::function<void(Status)> ready);

  const StateDir& state() const { return state_; }
  bdev::DeviceRegistry& registry() { return registry_; }

  // Ends Run() once the current request has answered.
  void RequestStop();

  // Background work the daemon owns (a pvmove): `run` runs on a thread of its own; when the
  // daemon stops, `stop` is called and the thread joined before the stack goes down. EBUSY
  // once the daemon is stopping.
  Status StartJob(std::function<void()> run, std::function<void()> stop);
  // Stops every job (calls its `stop`, joins it) and refuses new ones. Called inside a
  // request, it lets jobs take the serialization while it waits for them.
  void StopJobs();

  // The daemon's serialization: requests run holding it (Run wraps the handler), and so do
  // `up` and `down`. A job runs `fn` under it (Serialized) around work that reads or changes
  // what requests change: LVM metadata, the list of pools. Reentrant on a thread that holds
  // it already. Lock order: the control server's request lock, then this one.
  Status Serialized(const std::function<Status()>& fn);
  // For a request that waits for a job (the pvmove follower): lets jobs and other requests
  // take the serialization, and takes it back. No-ops on a thread that does not hold it.
  // Release after ControlServer::ReleaseCurrentRequest, reacquire after
  // ControlServer::ReacquireCurrentRequest (the lock order).
  static void ReleaseSerialization();
  static void ReacquireSerialization();

 private:
  Daemon(StateDir state, Hooks hooks) : state_(std::move(state)), hooks_(std::move(hooks)) {}

  const StateDir state_;
  const Hooks hooks_;
  bdev::DeviceRegistry registry_;
  std::atomic<bool> stop_requested_{false};
  std::mutex serial_mu_;  // the serialization (see Serialized)

  struct Job {
    std::thread thread;
    std::function<void()> stop;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex jobs_mu_;
  std::vector<Job> jobs_;     // GUARDED_BY(jobs_mu_)
  bool jobs_closed_ = false;  // GUARDED_BY(jobs_mu_)
};

}  // namespace volstack::stack

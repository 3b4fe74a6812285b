#include "stack/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "util/file_util.h"
#include "util/state_file.h"

namespace volstack::stack {

namespace {
std::atomic<Daemon*> g_current{nullptr};
std::atomic<bool> g_signalled{false};

void OnSignal(int) { g_signalled = true; }

// The serialization lock this thread holds (or held and released for a while), if any.
thread_local std::unique_lock<std::mutex>* t_serial = nullptr;

// Holds the daemon's serialization for a scope on this thread (unless it already does).
class SerialScope {
 public:
  explicit SerialScope(std::mutex& mu) {
    if (t_serial != nullptr) return;  // reentrant
    lock_.emplace(mu);
    t_serial = &*lock_;
  }
  ~SerialScope() {
    if (lock_) t_serial = nullptr;
  }
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  std::optional<std::unique_lock<std::mutex>> lock_;
};
}  // namespace

Status Daemon::Serialized(const std::function<Status()>& fn) {
  SerialScope scope(serial_mu_);
  const bool relock = !t_serial->owns_lock();  // a thread that released it for a while
  if (relock) t_serial->lock();
  Status s = fn();
  if (relock) t_serial->unlock();
  return s;
}

void Daemon::ReleaseSerialization() {
  if (t_serial != nullptr && t_serial->owns_lock()) t_serial->unlock();
}

void Daemon::ReacquireSerialization() {
  if (t_serial != nullptr && !t_serial->owns_lock()) t_serial->lock();
}

Daemon* Daemon::Current() { return g_current.load(); }

void Daemon::RequestStop() { stop_requested_ = true; }

Status Daemon::StartJob(std::function<void()> run, std::function<void()> stop) {
  std::lock_guard lock(jobs_mu_);
  if (jobs_closed_) return Status::Busy("the daemon is stopping");
  // Reap jobs that have finished.
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  Job job;
  job.stop = std::move(stop);
  job.done = done;
  job.thread = std::thread([run = std::move(run), done] {
    run();
    done->store(true);
  });
  jobs_.push_back(std::move(job));
  return Status::Ok();
}

void Daemon::StopJobs() {
  std::vector<Job> jobs;
  {
    std::lock_guard lock(jobs_mu_);
    jobs_closed_ = true;
    jobs.swap(jobs_);
  }
  for (auto& j : jobs) {
    if (j.stop) j.stop();
  }
  // A job may be waiting for the serialization a request calling this holds.
  const bool held = t_serial != nullptr && t_serial->owns_lock();
  if (held) t_serial->unlock();
  for (auto& j : jobs) j.thread.join();
  if (held) t_serial->lock();
}

Status Daemon::Run(const StateDir& state, Hooks hooks, std::function<void(Status)> ready) {
  VS_RETURN_IF_ERROR(PrepareStateDir(state.root));
  // One daemon per state dir: the pid file is locked for the daemon's lifetime.
  VS_ASSIGN_OR_RETURN(const int pid_fd, OpenStateFile(state.pid_path(), O_RDWR));
  if (::flock(pid_fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(pid_fd);
    return Status::Busy("a daemon is already running for " + state.root);
  }
  const std::string pid_text = std::to_string(::getpid()) + "\n";
  if (::ftruncate(pid_fd, 0) != 0 || ::pwrite(pid_fd, pid_text.data(), pid_text.size(), 0) < 0) {
    ::close(pid_fd);
    return ErrnoStatus("write " + state.pid_path());
  }

  Daemon daemon(state, std::move(hooks));
  g_current = &daemon;
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  Status up = Status::Ok();
  if (daemon.hooks_.up) {
    SerialScope serial(daemon.serial_mu_);
    up = daemon.hooks_.up(daemon);
  }
  // Requests run one at a time under the control server's lock, and under the daemon's
  // serialization, which jobs share (see Serialized).
  auto handler = [&daemon](const ControlRequest& request) {
    SerialScope serial(daemon.serial_mu_);
    return daemon.hooks_.handle_request(request);
  };
  auto server = ControlServer::Start(state.socket_path(), handler);
  if (!server.ok()) {
    if (daemon.hooks_.down) {
      SerialScope serial(daemon.serial_mu_);
      daemon.hooks_.down(daemon).IgnoreError();
    }
    g_current = nullptr;
    ::unlink(state.pid_path().c_str());
    ::close(pid_fd);
    return server.status();
  }
  if (ready) ready(up);
  while (!g_signalled && !daemon.stop_requested_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Background jobs stop first (their followers answer their clients), then requests.
  daemon.StopJobs();
  // Stop taking requests before tearing down what they would use.
  server.value().reset();
  Status down = Status::Ok();
  if (daemon.hooks_.down) {
    SerialScope serial(daemon.serial_mu_);
    down = daemon.hooks_.down(daemon);
  }
  g_current = nullptr;
  ::unlink(state.pid_path().c_str());
  ::close(pid_fd);
  return down;
}

}  // namespace volstack::stack

#include "stack/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "util/file_util.h"

namespace volstack::stack {

namespace {
std::atomic<Daemon*> g_current{nullptr};
std::atomic<bool> g_signalled{false};

void OnSignal(int) { g_signalled = true; }
}  // namespace

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
  for (auto& j : jobs) j.thread.join();
}

Status Daemon::Run(const StateDir& state, Hooks hooks, std::function<void(Status)> ready) {
  VS_RETURN_IF_ERROR(MakeDirectories(state.root));
  // One daemon per state dir: the pid file is locked for the daemon's lifetime.
  const int pid_fd = ::open(state.pid_path().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (pid_fd < 0) return ErrnoStatus("open " + state.pid_path());
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

  Status up = daemon.hooks_.up ? daemon.hooks_.up(daemon) : Status::Ok();
  auto server = ControlServer::Start(state.socket_path(), daemon.hooks_.handle_request);
  if (!server.ok()) {
    if (daemon.hooks_.down) daemon.hooks_.down(daemon).IgnoreError();
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
  Status down = daemon.hooks_.down ? daemon.hooks_.down(daemon) : Status::Ok();
  g_current = nullptr;
  ::unlink(state.pid_path().c_str());
  ::close(pid_fd);
  return down;
}

}  // namespace volstack::stack

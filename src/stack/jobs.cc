#include "stack/jobs.h"

namespace volstack::stack {

namespace {
// The serialization lock this thread holds (or held and released for a while), if any.
thread_local std::unique_lock<std::mutex>* t_serial = nullptr;
}  // namespace

Jobs::Scope::Scope(Jobs& jobs) {
  if (t_serial != nullptr) return;  // reentrant
  lock_.emplace(jobs.serial_mu_);
  t_serial = &*lock_;
}

Jobs::Scope::~Scope() {
  if (lock_) t_serial = nullptr;
}

Status Jobs::Serialized(const std::function<Status()>& fn) {
  Scope scope(*this);
  const bool relock = !t_serial->owns_lock();  // a thread that released it for a while
  if (relock) t_serial->lock();
  Status s = fn();
  if (relock) t_serial->unlock();
  return s;
}

void Jobs::ReleaseSerialization() {
  if (t_serial != nullptr && t_serial->owns_lock()) t_serial->unlock();
}

void Jobs::ReacquireSerialization() {
  if (t_serial != nullptr && !t_serial->owns_lock()) t_serial->lock();
}

Status Jobs::Start(std::function<void()> run, std::function<void()> stop) {
  std::lock_guard lock(mu_);
  if (closed_) return Status::Busy("the daemon is stopping");
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

void Jobs::Reopen() {
  std::lock_guard lock(mu_);
  closed_ = false;
}

void Jobs::StopAll() {
  std::vector<Job> jobs;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
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

}  // namespace volstack::stack

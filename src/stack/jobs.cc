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

void JobRecord::SetProgress(std::string text) {
  std::lock_guard l(mu_);
  progress_ = std::move(text);
}

void JobRecord::Finish(Status status) {
  std::lock_guard l(mu_);
  done_ = true;
  status_ = std::move(status);
  cv_.notify_all();
}

JobRecord::Snapshot JobRecord::Get() const {
  std::lock_guard l(mu_);
  Snapshot s;
  s.id = id_;
  s.kind = kind_;
  s.target = target_;
  s.progress = progress_;
  s.status = status_;
  s.state = !done_                                     ? "running"
            : status_.ok()                             ? "done"
            : stopping_ || status_.code() == ECANCELED ? "stopped"
                                                       : "failed";
  return s;
}

bool JobRecord::done() const {
  std::lock_guard l(mu_);
  return done_;
}

bool JobRecord::WaitFor(std::chrono::milliseconds timeout) const {
  std::unique_lock l(mu_);
  return cv_.wait_for(l, timeout, [this] { return done_; });
}

Result<std::shared_ptr<JobRecord>> Jobs::Start(std::string kind, std::string target,
                                               std::function<Status(JobRecord&)> run,
                                               std::function<void()> stop) {
  std::shared_ptr<JobRecord> record;
  {
    std::lock_guard lock(mu_);
    if (closed_) return Status::Busy("the daemon is stopping");
    record = std::make_shared<JobRecord>(next_id_++, std::move(kind), std::move(target));
    records_.push_back(record);
    // Ended jobs are kept for a while, so a client that asks after the end still learns it.
    size_t ended = 0;
    for (const auto& r : records_) ended += r->done() ? 1 : 0;
    for (auto it = records_.begin(); ended > kKeepEnded && it != records_.end();) {
      if ((*it)->done()) {
        it = records_.erase(it);
        ended--;
      } else {
        ++it;
      }
    }
  }
  Status started = StartJob([record, run = std::move(run)] { record->Finish(run(*record)); },
                            [record, stop = std::move(stop)] {
                              record->MarkStopping();
                              if (stop) stop();
                            },
                            record);
  if (!started.ok()) {
    record->Finish(started);
    return started;
  }
  return record;
}

std::vector<JobRecord::Snapshot> Jobs::List() const {
  std::lock_guard lock(mu_);
  std::vector<JobRecord::Snapshot> out;
  for (const auto& r : records_) out.push_back(r->Get());
  return out;
}

std::shared_ptr<JobRecord> Jobs::Find(uint64_t id) const {
  std::lock_guard lock(mu_);
  for (const auto& r : records_) {
    if (r->id() == id) return r;
  }
  return nullptr;
}

Status Jobs::Stop(uint64_t id) {
  std::function<void()> stop;
  {
    std::lock_guard lock(mu_);
    for (const auto& j : jobs_) {
      if (j.record && j.record->id() == id && !j.done->load()) stop = j.stop;
    }
  }
  if (!stop) return Status::NotFound("no running job " + std::to_string(id));
  stop();
  return Status::Ok();
}

Status Jobs::Start(std::function<void()> run, std::function<void()> stop) {
  return StartJob(std::move(run), std::move(stop), nullptr);
}

Status Jobs::StartJob(std::function<void()> run, std::function<void()> stop,
                      std::shared_ptr<JobRecord> record) {
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
  job.record = std::move(record);
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

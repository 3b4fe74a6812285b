#include "stack/pvmove_jobs.h"

#include <chrono>
#include <cstdio>

#include "lvm/pvmove_lock.h"
#include "stack/stack.h"
#include "util/request_io.h"

namespace volstack::stack {

Result<std::shared_ptr<MoveJob>> PvmoveJobs::Ensure(const std::string& vg) {
  std::lock_guard lock(mu_);
  if (auto it = jobs_.find(vg); it != jobs_.end()) {
    std::lock_guard l(it->second->mu);
    if (!it->second->done) return it->second;
  }
  auto job = std::make_shared<MoveJob>();
  Stack* s = &stack_;
  auto record = stack_.jobs().Start(
      "pvmove", vg,
      [job, vg, s](JobRecord& record) -> Status {
        // The session's scan reads LVM metadata and the stack's pool list, and its end
        // releases devices: all under the serialization, as the move's commits are.
        std::unique_ptr<lvm::Lvm> session;
        std::unique_ptr<lvm::MoverLock> lock;
        Status st;
        auto taken = lvm::MoverLock::Take(s->state().root, vg);
        if (!taken.ok()) {
          st = taken.status();
        } else {
          lock = std::move(*taken);
          s->jobs()
              .Serialized([&] {
                session = s->OpenLvm(false);
                return Status::Ok();
              })
              .IgnoreError();
          lvm::MoveOptions o;
          o.progress = [job, s, &record](const lvm::MoveProgress& p) {
            if (job->stop) lvm::StopMove(p.vg, &s->activations());
            char pct[32];
            std::snprintf(pct, sizeof pct, "%.2f%%",
                          p.total_bytes ? 100.0 * static_cast<double>(p.done_bytes) /
                                              static_cast<double>(p.total_bytes)
                                        : 100.0);
            record.SetProgress(std::string(pct) + " of " + p.source);
            std::lock_guard l(job->mu);
            job->progress = p;
            job->have_progress = true;
          };
          o.serialize = [s](const std::function<Status()>& step) {
            return s->jobs().Serialized(step);
          };
          st = job->stop ? Status::FromErrno(ECANCELED, "pvmove stopped")
                         : lvm::RunMove(*session, vg, o);
          s->jobs()
              .Serialized([&] {
                session.reset();
                return Status::Ok();
              })
              .IgnoreError();
        }
        if (!st.ok()) {
          std::fprintf(Err(), "volstack: pvmove of VG %s: %s\n", vg.c_str(), st.ToString().c_str());
        }
        lock.reset();
        std::lock_guard l(job->mu);
        job->done = true;
        job->status = st;
        job->cv.notify_all();
        return st;
      },
      [job, vg, s] {
        job->stop = true;
        lvm::StopMove(vg, &s->activations());
      });
  if (!record.ok()) return record.status();
  jobs_[vg] = job;
  return job;
}

void PvmoveJobs::Stop(const std::string& vg) {
  std::shared_ptr<MoveJob> job;
  {
    std::lock_guard lock(mu_);
    if (auto it = jobs_.find(vg); it != jobs_.end()) job = it->second;
  }
  if (!job) return;
  job->stop = true;
  Jobs::ReleaseSerialization();
  for (;;) {
    lvm::StopMove(vg, &stack_.activations());  // again: the job may have reached RunMove since
    std::unique_lock l(job->mu);
    if (job->cv.wait_for(l, std::chrono::milliseconds(50), [&] { return job->done; })) break;
  }
  Jobs::ReacquireSerialization();
}

Status PvmoveJobs::ResumeInterrupted() {
  auto session = stack_.OpenLvm(false);
  Status result;
  for (const auto& h : session->vgs()) {
    if (!lvm::FindPvmoveLv(h.vg)) continue;
    const std::string& vg = h.vg.name;
    std::fprintf(Err(), "volstack: resuming the interrupted pvmove in VG %s\n", vg.c_str());
    auto job = Ensure(vg);
    if (!job.ok()) result = job.status();
  }
  return result;
}

}  // namespace volstack::stack

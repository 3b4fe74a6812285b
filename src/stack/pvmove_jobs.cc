#include "stack/pvmove_jobs.h"

#include <chrono>
#include <cstdio>

#include "lvm/pvmove_lock.h"
#include "stack/stack.h"

namespace volstack::stack {

Result<std::shared_ptr<MoveJob>> PvmoveJobs::Ensure(const std::string& vg) {
  std::lock_guard lock(mu_);
  if (auto it = jobs_.find(vg); it != jobs_.end()) {
    std::lock_guard l(it->second->mu);
    if (!it->second->done) return it->second;
  }
  auto job = std::make_shared<MoveJob>();
  Stack* s = &stack_;
  VS_RETURN_IF_ERROR(stack_.jobs().Start(
      [job, vg, s] {
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
          o.progress = [job, s](const lvm::MoveProgress& p) {
            if (job->stop) lvm::StopMove(p.vg, &s->activations());
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
          std::fprintf(stderr, "volstack: pvmove of VG %s: %s\n", vg.c_str(),
                       st.ToString().c_str());
        }
        lock.reset();
        std::lock_guard l(job->mu);
        job->done = true;
        job->status = st;
        job->cv.notify_all();
      },
      [job, vg, s] {
        job->stop = true;
        lvm::StopMove(vg, &s->activations());
      }));
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
    std::fprintf(stderr, "volstack: resuming the interrupted pvmove in VG %s\n", vg.c_str());
    auto job = Ensure(vg);
    if (!job.ok()) result = job.status();
  }
  return result;
}

}  // namespace volstack::stack

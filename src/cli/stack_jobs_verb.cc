// volstack jobs [-w|-s] [ID...]: the background jobs of the daemon's stack (stack/jobs.h):
// listed with their progress, waited for, or stopped. Without a daemon there are none.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cli/verbs.h"
#include "stack/control_socket.h"
#include "stack/stack.h"
#include "util/request_io.h"

namespace volstack::cli {

namespace {

struct JobsArgs {
  bool wait = false;
  bool stop = false;
  std::vector<std::string> ids;
};

Result<uint64_t> ParseId(const std::string& text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v == 0) {
    return Status::InvalidArgument("jobs: '" + text + "' is not a job id");
  }
  return static_cast<uint64_t>(v);
}

void PrintTable(const std::vector<stack::JobRecord::Snapshot>& jobs) {
  if (jobs.empty()) return;
  std::fprintf(Out(), "%-4s %-8s %-16s %-8s %s\n", "ID", "KIND", "TARGET", "STATE", "PROGRESS");
  for (const auto& j : jobs) {
    std::string progress = j.progress;
    if (j.state == "failed" || j.state == "stopped") progress = j.status.message();
    std::fprintf(Out(), "%-4llu %-8s %-16s %-8s %s\n", static_cast<unsigned long long>(j.id),
                 j.kind.c_str(), j.target.c_str(), j.state.c_str(), progress.c_str());
  }
}

// Waits for `record` to end, letting other requests and the jobs run meanwhile.
Status Wait(const stack::JobRecord& record) {
  std::fflush(Out());
  stack::ControlServer::ReleaseCurrentRequest();
  stack::Jobs::ReleaseSerialization();
  while (!record.WaitFor(std::chrono::milliseconds(200))) {
  }
  stack::ControlServer::ReacquireCurrentRequest();
  stack::Jobs::ReacquireSerialization();
  return record.Get().status;
}

int Jobs(const Context& ctx, const JobsArgs& a) {
  if (a.wait && a.stop) return ReportUsage("jobs: -w and -s are exclusive");
  if ((a.wait || a.stop) && a.ids.empty()) return ReportUsage("jobs: -w and -s take job ids");
  std::vector<uint64_t> ids;
  for (const auto& text : a.ids) {
    auto id = ParseId(text);
    if (!id.ok()) return ReportUsage(id.status().message());
    ids.push_back(*id);
  }
  stack::Stack& s = ctx.stack();
  if (!s.live()) {
    // Jobs run in the daemon; with none, no id names a job.
    if (!ids.empty()) return ReportFailure(Status::NotFound("no daemon is running, so no job"));
    return kExitOk;
  }
  int rc = kExitOk;
  if (!a.wait && !a.stop) {
    auto all = s.jobs().List();
    if (!ids.empty()) {
      std::erase_if(
          all, [&](const auto& j) { return std::find(ids.begin(), ids.end(), j.id) == ids.end(); });
    }
    PrintTable(all);
    return kExitOk;
  }
  for (uint64_t id : ids) {
    auto record = s.jobs().Find(id);
    if (!record) {
      rc = ReportFailure(Status::NotFound("no job " + std::to_string(id)));
      continue;
    }
    if (a.stop) {
      if (Status st = s.jobs().Stop(id); !st.ok()) rc = ReportFailure(st);
      continue;
    }
    Status st = Wait(*record);
    const auto snap = record->Get();
    std::fprintf(Out(), "job %llu (%s %s): %s\n", static_cast<unsigned long long>(id),
                 snap.kind.c_str(), snap.target.c_str(), snap.state.c_str());
    if (!st.ok()) rc = ReportFailure(st);
  }
  return rc;
}

}  // namespace

void RegisterJobsVerb(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<JobsArgs>();
  auto* verb = AddVerb(app, ctx, "jobs", "List, wait for or stop the daemon's background jobs",
                       [&ctx, a] { return Jobs(ctx, *a); });
  verb->add_flag("-w,--wait", a->wait, "Wait until the jobs have ended");
  verb->add_flag("-s,--stop", a->stop, "Stop the jobs (a pvmove stays resumable)");
  verb->add_option("id", a->ids, "Job ids (all when none is given)");
}

}  // namespace volstack::cli

// volstack jobs [-w|-s] [ID...]: the background jobs of the daemon's stack (stack/jobs.h):
// listed with their progress, waited for (printing the progress as it changes), or stopped.
// Without a daemon there are none. A typed reply (stack/requests.h): this file formats it.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/verbs.h"
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

void PrintTable(const nlohmann::json& jobs) {
  if (jobs.empty()) return;
  std::fprintf(Out(), "%-4s %-8s %-16s %-8s %s\n", "ID", "KIND", "TARGET", "STATE", "PROGRESS");
  for (const auto& j : jobs) {
    std::fprintf(Out(), "%-4llu %-8s %-16s %-8s %s\n",
                 static_cast<unsigned long long>(j["id"].get<uint64_t>()),
                 j["kind"].get<std::string>().c_str(), j["target"].get<std::string>().c_str(),
                 j["state"].get<std::string>().c_str(), j["progress"].get<std::string>().c_str());
  }
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
  // A waited-for job's progress, as it changes, as pvmove follows its move.
  auto progress = [](const std::string& line) {
    std::fprintf(Out(), "  %s\n", line.c_str());
    std::fflush(Out());
  };
  auto reply = ctx.Call({"jobs", {{"wait", a.wait}, {"stop", a.stop}, {"ids", ids}}}, progress);
  if (!reply.ok()) return ReportFailure(reply.status());
  if (reply->data.contains("jobs")) PrintTable(reply->data["jobs"]);
  if (reply->data.contains("results")) {
    for (const auto& r : reply->data["results"]) {
      if (r.contains("job")) {
        const auto& j = r["job"];
        std::fprintf(Out(), "job %llu (%s %s): %s\n",
                     static_cast<unsigned long long>(j["id"].get<uint64_t>()),
                     j["kind"].get<std::string>().c_str(), j["target"].get<std::string>().c_str(),
                     j["state"].get<std::string>().c_str());
      }
      if (r.contains("error")) {
        std::fprintf(Err(), "volstack: %s\n", r["error"].get<std::string>().c_str());
      }
    }
  }
  for (const auto& e : reply->errors) std::fprintf(Err(), "volstack: %s\n", e.c_str());
  return reply->code;
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

// pvmove: lvm2's `pvmove [--abort] [-n LV] [--atomic] [-i SECONDS] [-b] SOURCE[:PE-RANGES]
// [DEST[:PE-RANGES]...]`, and `pvmove` with no PV, which resumes interrupted moves. The
// engine is lvm/pvmove.h; this file resolves names, prints progress as lvm2 does
// ("  /dev/x: Moved: 42.00%", every -i seconds; a live line with rate and time left on a
// terminal) and, in the daemon, runs the move as a job the client follows (lvm_pvmove.h).
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "cli/lvm_common.h"
#include "cli/lvm_pvmove.h"
#include "lvm/pvmove.h"
#include "stack/control_socket.h"

namespace volstack::cli {

namespace {

using Clock = std::chrono::steady_clock;
using lvmcli::Fail;
using lvmcli::kLvmFailed;
using lvmcli::kLvmInvalid;
using lvmcli::kLvmOk;

struct PvmoveArgs {
  bool abort = false;
  bool atomic = false;
  bool background = false;
  std::string name;
  int interval = -1;  // -i; -1: not given
  std::vector<std::string> positional;
};

// Prints progress lines to `fd` (the client's stdout, also when the daemon runs the move).
class ProgressPrinter {
 public:
  ProgressPrinter(int fd, int interval) : fd_(fd), tty_(::isatty(fd) == 1), interval_(interval) {}

  void Update(const lvm::MoveProgress& p) {
    const auto now = Clock::now();
    if (!started_) {
      started_ = true;
      start_ = now;
      start_bytes_ = p.done_bytes;
      last_ = now - std::chrono::hours(1);
    }
    if (p.finished) return Final(p);
    if (interval_ > 0 && now - last_ >= std::chrono::seconds(interval_)) {
      Line(p, false);
      last_ = now;
    } else if (interval_ < 0 && tty_ && now - last_ >= std::chrono::milliseconds(250)) {
      Line(p, true);
      last_ = now;
    }
  }
  void Final(const lvm::MoveProgress& p) {
    if (live_) ::dprintf(fd_, "\r%60s\r", "");
    live_ = false;
    lvm::MoveProgress done = p;
    done.done_bytes = done.total_bytes;
    Line(done, false);
  }
  void Interrupted() {
    if (live_) ::dprintf(fd_, "\n");
    live_ = false;
  }

 private:
  void Line(const lvm::MoveProgress& p, bool live) {
    const double pct = p.total_bytes ? 100.0 * static_cast<double>(p.done_bytes) /
                                           static_cast<double>(p.total_bytes)
                                     : 100.0;
    if (!live) {
      ::dprintf(fd_, "  %s: Moved: %.2f%%\n", p.source.c_str(), pct);
      return;
    }
    const double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    const double rate = secs > 0.1 ? static_cast<double>(p.done_bytes - start_bytes_) / secs : 0;
    std::string left = "--:--";
    if (rate > 0) {
      const auto s =
          static_cast<uint64_t>(static_cast<double>(p.total_bytes - p.done_bytes) / rate);
      char b[32];
      std::snprintf(b, sizeof b, "%lu:%02lu", static_cast<unsigned long>(s / 60),
                    static_cast<unsigned long>(s % 60));
      left = b;
    }
    ::dprintf(fd_, "\r  %s: Moved: %.2f%%  %.1f MiB/s  %s left   ", p.source.c_str(), pct,
              rate / (1 << 20), left.c_str());
    live_ = true;
  }

  const int fd_;
  const bool tty_;
  const int interval_;
  bool started_ = false, live_ = false;
  Clock::time_point start_, last_;
  uint64_t start_bytes_ = 0;
};

// Moves run by the daemon, one per VG.
struct MoveJob {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;           // GUARDED_BY(mu)
  Status status;               // GUARDED_BY(mu)
  lvm::MoveProgress progress;  // GUARDED_BY(mu); the latest
  bool have_progress = false;  // GUARDED_BY(mu)
};

std::mutex g_jobs_mu;
std::map<std::string, std::shared_ptr<MoveJob>> g_jobs;  // GUARDED_BY(g_jobs_mu); by VG

// The running job of `vg`, or a new one.
Result<std::shared_ptr<MoveJob>> EnsureJob(stack::Daemon& daemon, const Context& ctx,
                                           const std::string& vg) {
  std::lock_guard lock(g_jobs_mu);
  if (auto it = g_jobs.find(vg); it != g_jobs.end()) {
    std::lock_guard l(it->second->mu);
    if (!it->second->done) return it->second;
  }
  auto job = std::make_shared<MoveJob>();
  Context job_ctx;
  job_ctx.global = ctx.global;
  VS_RETURN_IF_ERROR(daemon.StartJob(
      [job, job_ctx, vg] {
        auto session = lvmcli::OpenSession(job_ctx, false);
        lvm::MoveOptions o;
        o.progress = [job](const lvm::MoveProgress& p) {
          std::lock_guard l(job->mu);
          job->progress = p;
          job->have_progress = true;
        };
        Status s = lvm::RunMove(*session, vg, o);
        if (!s.ok()) {
          std::fprintf(stderr, "volstack: pvmove of VG %s: %s\n", vg.c_str(), s.ToString().c_str());
        }
        std::lock_guard l(job->mu);
        job->done = true;
        job->status = s;
        job->cv.notify_all();
      },
      [vg] { lvm::StopMove(vg); }));
  g_jobs[vg] = job;
  return job;
}

// Runs (offline) or follows (daemon) the move in progress in `vg` to its end.
int RunOrFollow(const Context& ctx, lvm::Lvm& session, const std::string& vg, const PvmoveArgs& a) {
  auto* daemon = stack::Daemon::Current();
  if (daemon == nullptr) {
    std::fflush(stdout);
    ProgressPrinter printer(1, a.interval);
    lvm::MoveOptions o;
    // Tests stop a move part way, as a crash would, to see the in-progress metadata.
    const char* stop_env = std::getenv("VOLSTACK_PVMOVE_STOP_AFTER_BYTES");
    const uint64_t stop_after = stop_env ? std::strtoull(stop_env, nullptr, 10) : 0;
    o.progress = [&](const lvm::MoveProgress& p) {
      printer.Update(p);
      if (stop_after && p.done_bytes >= stop_after && !p.finished) lvm::StopMove(vg);
    };
    Status s = lvm::RunMove(session, vg, o);
    if (!s.ok()) {
      printer.Interrupted();
      return Fail(s.ToString() + " (run pvmove again to resume it, or pvmove --abort)");
    }
    return kLvmOk;
  }
  auto job = EnsureJob(*daemon, ctx, vg);
  if (!job.ok()) return Fail(job.status());
  if (a.background) return kLvmOk;
  // Follow the job without holding up the daemon's other requests.
  std::fflush(stdout);
  std::fflush(stderr);
  const int out = ::dup(1);
  const int err = ::dup(2);
  stack::ControlServer::ReleaseCurrentRequest();
  ProgressPrinter printer(out, a.interval);
  Status result;
  lvm::MoveProgress last;
  bool have = false;
  for (;;) {
    std::unique_lock l((*job)->mu);
    (*job)->cv.wait_for(l, std::chrono::milliseconds(200), [&] { return (*job)->done; });
    last = (*job)->progress;
    have = (*job)->have_progress;
    if ((*job)->done) {
      result = (*job)->status;
      break;
    }
    l.unlock();
    if (have) printer.Update(last);
  }
  int rc = kLvmOk;
  if (result.ok()) {
    if (have) printer.Final(last);
  } else {
    printer.Interrupted();
    ::dprintf(err, "  %s (run pvmove again to resume it, or pvmove --abort)\n",
              result.ToString().c_str());
    rc = kLvmFailed;
  }
  ::close(out);
  ::close(err);
  stack::ControlServer::ReacquireCurrentRequest();
  return rc;
}

// "NAME[:RANGES]" -> the PV's index in its VG.
struct PvArg {
  std::string name;
  std::vector<lvm::PeRange> ranges;
};

Result<PvArg> ParsePvArg(const std::string& text) {
  PvArg a;
  const size_t colon = text.find(':');
  a.name = lvmcli::NormalizeDeviceName(text.substr(0, colon));
  if (colon != std::string::npos) {
    VS_ASSIGN_OR_RETURN(a.ranges, lvm::ParsePeRanges(text.substr(colon + 1)));
  }
  return a;
}

std::vector<std::string> VgsWithMoves(lvm::Lvm& session) {
  std::vector<std::string> out;
  for (const auto& h : session.vgs()) {
    if (lvm::FindPvmoveLv(h.vg)) out.push_back(h.vg.name);
  }
  return out;
}

int Pvmove(const Context& ctx, const PvmoveArgs& a) {
  if (a.interval < -1) return Fail("Invalid interval " + std::to_string(a.interval), kLvmInvalid);
  std::vector<PvArg> pvs;
  for (const auto& p : a.positional) {
    auto parsed = ParsePvArg(p);
    if (!parsed.ok()) return Fail(parsed.status(), kLvmInvalid);
    pvs.push_back(std::move(*parsed));
  }
  std::vector<std::string> names;
  for (const auto& p : pvs) names.push_back(p.name);
  auto session = lvmcli::OpenSession(ctx, false, names);
  lvmcli::WarnScan(*session);
  // No PV: resume (or abort) every move in progress.
  if (pvs.empty()) {
    if (!a.name.empty() || a.atomic) {
      return Fail("Please specify a source physical volume.", kLvmInvalid);
    }
    int rc = kLvmOk;
    for (const auto& vg : VgsWithMoves(*session)) {
      if (a.abort) {
        Status s = lvm::AbortMove(*session, vg);
        if (!s.ok()) rc = Fail(s);
      } else {
        const int r = RunOrFollow(ctx, *session, vg, a);
        if (r != kLvmOk) rc = r;
      }
    }
    return rc;
  }
  lvm::Pv* src = session->FindPv(pvs[0].name);
  if (!src) return Fail("Failed to find physical volume \"" + pvs[0].name + "\".");
  lvm::VgHandle* h = session->VgOfPv(src);
  if (!h) return Fail("Physical volume " + pvs[0].name + " not in a volume group.");
  const std::string vg = h->vg.name;
  if (h->partial()) return Fail("Cannot move extents in VG " + vg + " while PVs are missing.");
  if (a.abort) {
    Status s = lvm::AbortMove(*session, vg);
    return s.ok() ? kLvmOk : Fail(s);
  }
  if (const lvm::LogicalVolume* pm = lvm::FindPvmoveLv(h->vg)) {
    const auto& leg = pm->segments.front().areas.front();
    if (!leg.is_pv() || h->pvs[leg.pv] != src) {
      return Fail("A pvmove is already in progress in volume group " + vg + " (" + pm->name +
                  "); run pvmove without arguments to resume it, or pvmove --abort.");
    }
    lvmcli::Say("Detected pvmove in progress for " + pvs[0].name);
    if (pvs.size() > 1 || !a.name.empty()) {
      std::fprintf(stderr, "  Ignoring remaining command line arguments\n");
    }
    return RunOrFollow(ctx, *session, vg, a);
  }
  lvm::MovePlan plan;
  plan.source.pv = h->vg.FindPvById(src->uuid());
  plan.source.ranges = pvs[0].ranges;
  plan.atomic = a.atomic;
  plan.lv_name = a.name.empty()                               ? ""
                 : lvmcli::SplitLvName(a.name).second.empty() ? a.name
                                                              : lvmcli::SplitLvName(a.name).second;
  // Segments of at most 512 MiB: a crash re-copies at most that much.
  plan.max_segment_extents =
      static_cast<uint32_t>(std::max<uint64_t>(1, (uint64_t{512} << 20) / h->vg.extent_bytes()));
  for (size_t i = 1; i < pvs.size(); i++) {
    lvm::Pv* d = session->FindPv(pvs[i].name);
    const int idx = d ? h->vg.FindPvById(d->uuid()) : -1;
    if (idx < 0) {
      return Fail("Physical Volume \"" + pvs[i].name + "\" not found in Volume Group \"" + vg +
                  "\".");
    }
    plan.dests.push_back({idx, pvs[i].ranges});
  }
  lvm::VolumeGroup next = h->vg;
  auto name = lvm::PlanMove(next, plan);
  if (!name.ok()) {
    return Fail(name.status(), name.status().code() == EINVAL ? kLvmInvalid : kLvmFailed);
  }
  std::vector<std::string> argv = a.positional;
  Status s = session->Commit(next, lvmcli::Description("pvmove", argv));
  if (!s.ok()) return Fail(s);
  return RunOrFollow(ctx, *session, vg, a);
}

}  // namespace

void RegisterPvmoveVerb(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<PvmoveArgs>();
  CLI::App* verb = AddVerb(app, ctx, "pvmove", "Move extents from one physical volume to others",
                           [&ctx, a] { return Pvmove(ctx, *a); });
  verb->add_flag("--abort", a->abort, "Abort the move in progress");
  verb->add_flag("--atomic", a->atomic, "All or nothing: an abort puts everything back");
  verb->add_flag("-b,--background", a->background, "With a daemon: do not wait for the move");
  verb->add_option("-n,--name", a->name, "Move only the extents of this LV");
  verb->add_option("-i,--interval", a->interval, "Report progress every SECONDS (0: never)");
  verb->add_option("--alloc")->description("Accepted for compatibility");
  verb->add_flag("-y,--yes")->description("Accepted for compatibility");
  verb->add_option("pv", a->positional, "SOURCE_PV[:PE-RANGES] [DEST_PV[:PE-RANGES]...]");
}

Status ResumeInterruptedMoves(stack::Daemon& daemon) {
  Context ctx;
  ctx.global.state_dir = daemon.state().root;
  auto session = lvmcli::OpenSession(ctx, false);
  Status result;
  for (const auto& vg : VgsWithMoves(*session)) {
    std::fprintf(stderr, "volstack: resuming the interrupted pvmove in VG %s\n", vg.c_str());
    auto job = EnsureJob(daemon, ctx, vg);
    if (!job.ok()) result = job.status();
  }
  return result;
}

}  // namespace volstack::cli

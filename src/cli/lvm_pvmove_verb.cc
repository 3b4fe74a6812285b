// pvmove: lvm2's `pvmove [--abort] [-n LV] [--atomic] [-i SECONDS] [-b] SOURCE[:PE-RANGES]
// [DEST[:PE-RANGES]...]`, and `pvmove` with no PV, which resumes interrupted moves. The
// engine is lvm/pvmove.h; this file resolves names, prints progress as lvm2 does
// ("  /dev/x: Moved: 42.00%", every -i seconds; a live line with rate and time left on a
// terminal) and, in the daemon, runs the move as a job the client follows (lvm_pvmove.h).
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "cli/lvm_common.h"
#include "cli/lvm_pvmove.h"
#include "lvm/pvmove.h"
#include "lvm/pvmove_lock.h"
#include "remote/remote_device.h"
#include "stack/control_socket.h"
#include "stack/pvmove_jobs.h"
#include "stack/stack.h"
#include "util/request_io.h"
#include "util/state_file.h"

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
  ProgressPrinter(int fd, int interval)
      : fd_(fd), tty_(CurrentIo().stdout_tty), interval_(interval) {}

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

// SIGTERM/SIGINT while a move runs in this process without a daemon: stop at the next
// region, resumable (how `pvmove --abort` in another process stops this one).
std::atomic<bool> g_stop_signal{false};
void OnStopSignal(int) { g_stop_signal = true; }

// A move to run in a background process once this one has let go of its devices (-b
// without a daemon): the source PV to name, and the VG's mover lock, handed to the child.
struct Background {
  std::string source;
  std::string vg;
  std::unique_ptr<lvm::MoverLock> lock;
};

// The mover lock of `vg` for a move run in this process: a background child adopts the one
// its parent handed down (the environment names it); anyone else takes it, which fails
// (EBUSY) while another process moves the VG.
Result<std::unique_ptr<lvm::MoverLock>> TakeMoverLock(const Context& ctx, const std::string& vg) {
  const char* fd = std::getenv("VOLSTACK_PVMOVE_LOCK_FD");
  const char* lock_vg = std::getenv("VOLSTACK_PVMOVE_LOCK_VG");
  if (fd != nullptr && lock_vg != nullptr && vg == lock_vg) {
    const int n = std::atoi(fd);
    ::unsetenv("VOLSTACK_PVMOVE_LOCK_FD");
    ::unsetenv("VOLSTACK_PVMOVE_LOCK_VG");
    return lvm::MoverLock::Adopt(ctx.global.state_dir, vg, n);
  }
  return lvm::MoverLock::Take(ctx.global.state_dir, vg);
}

// Waits for the daemon's move job to end, printing its progress to the request's stdout, while
// other requests and the job run.
int FollowJob(stack::MoveJob& job, int interval) {
  std::fflush(Out());
  std::fflush(Err());
  stack::ControlServer::ReleaseCurrentRequest();
  stack::Jobs::ReleaseSerialization();
  ProgressPrinter printer(CurrentIo().out_fd, interval);
  Status result;
  lvm::MoveProgress last;
  bool have = false;
  for (;;) {
    std::unique_lock l(job.mu);
    job.cv.wait_for(l, std::chrono::milliseconds(200), [&] { return job.done; });
    last = job.progress;
    have = job.have_progress;
    if (job.done) {
      result = job.status;
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
    std::fprintf(Err(), "  %s (run pvmove again to resume it, or pvmove --abort)\n",
                 result.ToString().c_str());
    rc = kLvmFailed;
  }
  stack::ControlServer::ReacquireCurrentRequest();
  stack::Jobs::ReacquireSerialization();
  return rc;
}

// Runs (offline) or follows (daemon) the move in progress in `vg` to its end. With -b and
// no daemon, only takes the VG's mover lock and queues the move for a background process.
int RunOrFollow(const Context& ctx, lvm::Lvm& session, const std::string& vg, const PvmoveArgs& a,
                std::vector<Background>* background) {
  if (!ctx.stack().live()) {
    auto lock = TakeMoverLock(ctx, vg);
    if (!lock.ok()) return Fail(lock.status());
    if (a.background) {
      const lvm::VgHandle* h = session.FindVg(vg);
      const lvm::LogicalVolume* pm = h ? lvm::FindPvmoveLv(h->vg) : nullptr;
      if (pm == nullptr) return kLvmOk;
      const auto& leg = pm->segments.front().areas.front();
      if (!leg.is_pv() || !h->pvs[leg.pv]) return Fail("Cannot find the source PV of " + pm->name);
      background->push_back({h->pvs[leg.pv]->name(), vg, std::move(*lock)});
      return kLvmOk;
    }
    std::fflush(Out());
    ProgressPrinter printer(CurrentIo().out_fd, a.interval);
    lvm::MoveOptions o;
    // Tests stop a move part way, as a crash would, to see the in-progress metadata.
    const char* stop_env = std::getenv("VOLSTACK_PVMOVE_STOP_AFTER_BYTES");
    const uint64_t stop_after = stop_env ? std::strtoull(stop_env, nullptr, 10) : 0;
    // And slow it down, to catch it running (a background move, an abort from elsewhere).
    const char* delay_env = std::getenv("VOLSTACK_PVMOVE_REGION_DELAY_MS");
    const int delay_ms = delay_env ? std::atoi(delay_env) : 0;
    o.progress = [&](const lvm::MoveProgress& p) {
      printer.Update(p);
      if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      if (stop_after && p.done_bytes >= stop_after && !p.finished)
        lvm::StopMove(vg, &session.activations());
      if (g_stop_signal) lvm::StopMove(vg, &session.activations());
    };
    struct sigaction sa {
    }, old_term{}, old_int{};
    sa.sa_handler = OnStopSignal;
    g_stop_signal = false;
    ::sigaction(SIGTERM, &sa, &old_term);
    ::sigaction(SIGINT, &sa, &old_int);
    Status s = lvm::RunMove(session, vg, o);
    ::sigaction(SIGTERM, &old_term, nullptr);
    ::sigaction(SIGINT, &old_int, nullptr);
    if (!s.ok()) {
      printer.Interrupted();
      return Fail(s.ToString() + " (run pvmove again to resume it, or pvmove --abort)");
    }
    return kLvmOk;
  }
  auto job = ctx.stack().pvmoves().Ensure(vg);
  if (!job.ok()) return Fail(job.status());
  if (a.background) return kLvmOk;
  // Follow the job without holding up the daemon's other requests; the progress goes to this
  // request's client only.
  return FollowJob(**job, a.interval);
}

// Reverts the move in `vg`: a mover of it in this daemon or in another process is stopped
// first (it stays resumable until the abort commits), then the abort runs holding the VG's
// mover lock, so no mover copies into extents the abort frees.
Status AbortVgMove(const Context& ctx, lvm::Lvm& session, const std::string& vg) {
  if (ctx.stack().live()) ctx.stack().pvmoves().Stop(vg);
  VS_ASSIGN_OR_RETURN(auto lock, lvm::MoverLock::TakeFromMover(ctx.global.state_dir, vg, 60000));
  return lvm::AbortMove(session, vg);
}

// -b without a daemon: runs `volstack pvmove SOURCE` detached (a new session, reparented to
// init), which resumes the move committed here. It inherits the VG's mover lock, so nothing
// can start another mover or abort without stopping it first; its output goes to
// <state_dir>/pvmove.<vg>.log. Returns once it is started.
Status SpawnBackground(const Context& ctx, Background& b) {
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return ErrnoStatus("readlink /proc/self/exe");
  exe[n] = 0;
  std::vector<std::string> args = {exe, "--state-dir", ctx.global.state_dir, "pvmove", b.source};
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; e++) {
    const std::string v = *e;
    if (v.rfind("VOLSTACK_PVMOVE_LOCK_", 0) != 0) env.push_back(v);
  }
  const int lock_fd = b.lock->fd();
  env.push_back("VOLSTACK_PVMOVE_LOCK_FD=" + std::to_string(lock_fd));
  env.push_back("VOLSTACK_PVMOVE_LOCK_VG=" + b.vg);
  std::vector<char*> argv, envp;
  for (auto& x : args) argv.push_back(x.data());
  argv.push_back(nullptr);
  for (auto& x : env) envp.push_back(x.data());
  envp.push_back(nullptr);
  const std::string log_path = ctx.global.state_dir + "/pvmove." + b.vg + ".log";
  VS_ASSIGN_OR_RETURN(const int log, OpenStateFile(log_path, O_WRONLY | O_TRUNC));
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::fflush(Out());
  std::fflush(Err());
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Only async-signal-safe calls until exec.
    ::setsid();
    const pid_t mover = ::fork();
    if (mover != 0) {
      if (mover > 0) lvm::MoverLock::WritePid(lock_fd, mover);
      ::_exit(mover > 0 ? 0 : 1);
    }
    ::dup2(null, 0);
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::fcntl(lock_fd, F_SETFD, 0);  // the lock goes through exec
    ::execve(exe, argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(log);
  if (null >= 0) ::close(null);
  if (pid < 0) return ErrnoStatus("fork");
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::IoError("could not start the background pvmove");
  }
  b.lock->KeepPidOnClose();  // the mover's PID is in it now
  b.lock.reset();
  return Status::Ok();
}

// "NAME[:RANGES]" -> the PV's index in its VG.
struct PvArg {
  std::string name;
  std::vector<lvm::PeRange> ranges;
};

Result<PvArg> ParsePvArg(const std::string& text) {
  PvArg a;
  const size_t colon =
      remote::IsRemoteDeviceName(text) ? remote::RemoteNameEnd(text) : text.find(':');
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

int PvmoveHere(const Context& ctx, const PvmoveArgs& a, std::vector<Background>* background) {
  if (a.interval < -1) return Fail("Invalid interval " + std::to_string(a.interval), kLvmInvalid);
  std::vector<PvArg> pvs;
  for (const auto& p : a.positional) {
    auto parsed = ParsePvArg(p);
    if (!parsed.ok()) return Fail(parsed.status(), kLvmInvalid);
    pvs.push_back(std::move(*parsed));
  }
  // A mover in another process (a background move) holds its PVs open exclusively, so the
  // scan below could not even see its VG: stop it first for an abort (every such mover, as
  // its VG cannot be told before the scan); refuse a resume while it runs.
  if (!ctx.stack().live()) {
    for (const auto& [vg, pid] : lvm::MoverLock::Holders(ctx.global.state_dir)) {
      if (a.abort) {
        auto stopped = lvm::MoverLock::TakeFromMover(ctx.global.state_dir, vg, 60000);
        if (!stopped.ok()) return Fail(stopped.status());
      } else if (pvs.empty()) {
        return Fail("A pvmove of volume group " + vg + " is running in process " +
                    std::to_string(pid) + "; it resumes every interrupted move of its VG.");
      }
    }
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
        Status s = AbortVgMove(ctx, *session, vg);
        if (!s.ok()) rc = Fail(s);
      } else {
        const int r = RunOrFollow(ctx, *session, vg, a, background);
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
    Status s = AbortVgMove(ctx, *session, vg);
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
      std::fprintf(Err(), "  Ignoring remaining command line arguments\n");
    }
    return RunOrFollow(ctx, *session, vg, a, background);
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
  return RunOrFollow(ctx, *session, vg, a, background);
}

int Pvmove(const Context& ctx, const PvmoveArgs& a) {
  std::vector<Background> background;
  int rc = PvmoveHere(ctx, a, &background);
  // The session is closed: the background movers open the PVs (and pools) themselves.
  for (auto& b : background) {
    if (Status s = SpawnBackground(ctx, b); !s.ok()) rc = Fail(s);
  }
  return rc;
}

}  // namespace

void RegisterPvmoveVerb(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<PvmoveArgs>();
  CLI::App* verb = AddVerb(app, ctx, "pvmove", "Move extents from one physical volume to others",
                           [&ctx, a] { return Pvmove(ctx, *a); });
  verb->add_flag("--abort", a->abort, "Abort the move in progress");
  verb->add_flag("--atomic", a->atomic, "All or nothing: an abort puts everything back");
  verb->add_flag("-b,--background", a->background,
                 "Return at once; the move goes on in the daemon or a background process");
  verb->add_option("-n,--name", a->name, "Move only the extents of this LV");
  verb->add_option("-i,--interval", a->interval, "Report progress every SECONDS (0: never)");
  verb->add_option("--alloc")->description("Accepted for compatibility");
  verb->add_flag("-y,--yes")->description("Accepted for compatibility");
  verb->add_option("pv", a->positional, "SOURCE_PV[:PE-RANGES] [DEST_PV[:PE-RANGES]...]");
}

}  // namespace volstack::cli

// zpool's redundancy verbs: scrub, offline, online, clear, attach, detach, replace; the
// mirror keyword of zpool create; and the config/scan/errors part of zpool status as
// zpool(8) prints them.
//
// Scrub runs in the process that has the pool open: in the daemon (the command is
// forwarded there when one runs) it is a job of the stack that `volstack jobs` lists and
// `zpool status` shows; without a daemon the command imports the pool, so it waits for the
// end (as `zpool scrub -w`), since the pool closes when the command exits.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>

#include "cli/device_names.h"
#include "cli/pool_common.h"
#include "cli/pool_redundancy.h"
#include "pool/vdev.h"
#include "stack/requests.h"
#include "stack/scrub_jobs.h"
#include "stack/stack.h"
#include "util/request_io.h"
#include "util/size.h"

namespace volstack::cli::poolcli {

bool IsVdevKeyword(const std::string& word) {
  return word == "mirror" || word == "raidz" || word == "raidz1" || word == "raidz2";
}

Result<std::vector<pool::VdevSpec>> GroupVdevs(const std::vector<std::string>& args,
                                               const std::vector<bdev::BlockDevicePtr>& devs,
                                               const std::vector<std::string>& names) {
  std::vector<pool::VdevSpec> specs;
  size_t next = 0;
  bool in_mirror = false;
  for (const auto& a : args) {
    if (IsVdevKeyword(a)) {
      pool::VdevSpec spec;
      spec.mirror = a == "mirror";
      spec.raidz = a == "raidz2" ? 2 : spec.mirror ? 0 : 1;
      specs.push_back(spec);
      in_mirror = true;
      continue;
    }
    if (next >= devs.size()) return Status::InvalidArgument("internal: vdev list mismatch");
    if (!in_mirror) specs.push_back(pool::VdevSpec{false, {}, {}});
    specs.back().devices.push_back(devs[next]);
    specs.back().paths.push_back(names[next]);
    next++;
  }
  for (const auto& s : specs) {
    if (s.mirror && s.devices.size() < 2) {
      return Status::InvalidArgument(
          "invalid vdev specification: mirror requires at least 2 devices");
    }
    if (s.raidz > 0 && s.devices.size() < s.raidz + 1) {
      return Status::InvalidArgument("invalid vdev specification: raidz" + std::to_string(s.raidz) +
                                     " requires at least " + std::to_string(s.raidz + 1) +
                                     " devices");
    }
  }
  if (specs.empty()) return Status::InvalidArgument("invalid vdev specification: no devices");
  return specs;
}

namespace {

// A size as zpool status prints it (1.50M, 12.3G, 0B).
std::string Nice(uint64_t n) {
  if (n == 0) return "0B";
  return FormatSizeShort(n);
}

// A count as zpool prints it (zfs_nicenum): exact below 1024, else 1.50K, 12.3M, 456G.
std::string Count(uint64_t n) {
  if (n < 1024) return std::to_string(n);
  const char* units = "KMGTPE";
  int i = 0;
  double v = static_cast<double>(n) / 1024;
  while (v >= 1024 && i < 5) {
    v /= 1024;
    i++;
  }
  char buf[32];
  for (int prec = 2; prec >= 0; prec--) {
    std::snprintf(buf, sizeof buf, "%.*f%c", prec, v, units[i]);
    if (std::strlen(buf) <= 5) break;
  }
  return buf;
}

std::string When(uint64_t t) {
  const time_t tt = static_cast<time_t>(t);
  struct tm tm;
  localtime_r(&tt, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%a %b %e %H:%M:%S %Y", &tm);
  return buf;
}

std::string Hms(uint64_t s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02llu:%02llu:%02llu", static_cast<unsigned long long>(s / 3600),
                static_cast<unsigned long long>(s / 60 % 60),
                static_cast<unsigned long long>(s % 60));
  return buf;
}

void PrintScan(const pool::ScanInfo& s) {
  if (s.func.empty()) {
    std::fprintf(Out(), "  scan: none requested\n");
    return;
  }
  const bool scrub = s.func == "scrub";
  if (s.state == "finished") {
    std::fprintf(Out(), "  scan: %s %s in %s with %llu errors on %s\n",
                 scrub ? "scrub repaired" : "resilvered", Nice(s.repaired).c_str(),
                 Hms(s.end_time - s.start_time).c_str(), static_cast<unsigned long long>(s.errors),
                 When(s.end_time).c_str());
    return;
  }
  if (s.state == "canceled") {
    std::fprintf(Out(), "  scan: %s canceled on %s\n", s.func.c_str(), When(s.end_time).c_str());
    return;
  }
  const uint64_t now = static_cast<uint64_t>(std::time(nullptr));
  const uint64_t secs = std::max<uint64_t>(1, now - s.start_time);
  const uint64_t rate = s.examined / secs, irate = s.issued / secs;
  const uint64_t total = std::max(s.to_examine, s.examined);
  const double pct =
      total ? 100.0 * static_cast<double>(s.examined) / static_cast<double>(total) : 0;
  if (s.state == "paused") {
    std::fprintf(Out(), "  scan: scrub paused since %s\n", When(s.start_time).c_str());
  } else {
    std::fprintf(Out(), "  scan: %s in progress since %s\n", s.func.c_str(),
                 When(s.start_time).c_str());
  }
  std::fprintf(Out(), "\t%s / %s scanned at %s/s, %s / %s issued at %s/s\n",
               Nice(s.examined).c_str(), Nice(total).c_str(), Nice(rate).c_str(),
               Nice(s.issued).c_str(), Nice(total).c_str(), Nice(irate).c_str());
  const std::string to_go = rate > 0 && total > s.examined
                                ? Hms((total - s.examined) / rate) + " to go"
                                : "no estimated completion time";
  std::fprintf(Out(), "\t%s %s, %.2f%% done, %s\n", Nice(s.repaired).c_str(),
               scrub ? "repaired" : "resilvered", pct, to_go.c_str());
}

void Row(size_t width, int indent, const std::string& name, const std::string& state, uint64_t r,
         uint64_t w, uint64_t c, const std::string& note = "") {
  std::fprintf(Out(), "\t%*s%-*s  %-8s %5s %5s %5s%s\n", indent, "",
               static_cast<int>(width - indent), name.c_str(), state.c_str(), Count(r).c_str(),
               Count(w).c_str(), Count(c).c_str(), note.c_str());
}

}  // namespace

void PrintPoolStatus(const pool::PoolInfo& info, bool verbose) {
  std::fprintf(Out(), " state: %s\n", info.health.c_str());
  if (info.health == "DEGRADED") {
    std::fprintf(Out(),
                 "status: One or more devices could not be used or were taken offline. Sufficient "
                 "replicas exist\n\tfor the pool to continue functioning in a degraded state.\n"
                 "action: Replace the device using 'zpool replace', or bring it back with 'zpool "
                 "online'.\n");
  } else if (info.vdevs.size() > 0) {
    uint64_t cksum = 0;
    for (const auto& v : info.vdevs) cksum += v.checksum_errors;
    if (cksum > 0) {
      std::fprintf(
          Out(),
          "status: One or more devices has experienced an unrecoverable error.  An\n\tattempt "
          "was made to correct the error.  Applications are unaffected.\n"
          "action: Determine if the device needs to be replaced, and clear the errors\n\tusing "
          "'zpool clear' or replace the device with 'zpool replace'.\n");
    }
  }
  PrintScan(info.scan);
  std::fprintf(Out(), "config:\n\n");
  size_t w = std::max<size_t>(info.name.size(), 4);
  for (const auto& v : info.vdevs) {
    w = std::max(w, (v.children.empty() ? v.name.size() : v.type.size() + 2) + 2);
    for (const auto& c : v.children) w = std::max(w, c.name.size() + 4);
  }
  std::fprintf(Out(), "\t%-*s  %-8s %5s %5s %5s\n", static_cast<int>(w), "NAME", "STATE", "READ",
               "WRITE", "CKSUM");
  uint64_t total[3] = {0, 0, 0};
  for (const auto& v : info.vdevs) {
    total[0] += v.read_errors;
    total[1] += v.write_errors;
    total[2] += v.checksum_errors;
  }
  Row(w, 0, info.name, info.health, total[0], total[1], total[2]);
  for (size_t i = 0; i < info.vdevs.size(); i++) {
    const auto& v = info.vdevs[i];
    if (!v.children.empty()) {
      Row(w, 2, v.type + "-" + std::to_string(i), v.state, v.read_errors, v.write_errors,
          v.checksum_errors);
      for (const auto& c : v.children) {
        Row(w, 4, c.name, c.state, c.read_errors, c.write_errors, c.checksum_errors,
            c.resilvering ? "  (resilvering)" : "");
      }
    } else {
      Row(w, 2, v.name, v.state, v.read_errors, v.write_errors, v.checksum_errors,
          v.resilvering ? "  (resilvering)" : "");
    }
  }
  if (info.data_errors.empty()) {
    std::fprintf(Out(), "\nerrors: No known data errors\n");
    return;
  }
  std::fprintf(Out(), "\nerrors: %zu data errors, use '-v' for a list\n", info.data_errors.size());
  if (verbose) {
    std::fprintf(Out(),
                 "\nerrors: Permanent errors have been detected in the following files:\n\n");
    for (const auto& e : info.data_errors) std::fprintf(Out(), "        %s\n", e.c_str());
  }
}

namespace {

// The pool, opened writable (the daemon's when one runs), or the failure printed.
Result<std::shared_ptr<pool::Pool>> Open(Context& ctx, const std::string& name) {
  return OpenPool(ctx, name, /*read_only=*/false);
}

// In the daemon the scrub is a job of the stack (stack/scrub_jobs.h): listed by `volstack
// jobs`, waited for with -w, canceled with -s. Without a daemon the pool closes when the
// command exits, so the command waits for the end and prints it.
int Scrub(Context& ctx, const std::string& name, bool stop, bool pause, bool wait) {
  if (stop && pause) return ReportUsage("zpool scrub: -s and -p are exclusive");
  auto p = Open(ctx, name);
  if (!p.ok()) return ReportFailure(p.status());
  if (stop || pause) {
    Status st = stop ? (*p)->CancelScrub() : (*p)->PauseScrub();
    return st.ok() ? kExitOk : ReportFailure(st.WithContext("cannot scrub " + name));
  }
  stack::Stack& s = ctx.stack();
  if (s.live()) {
    auto job = stack::StartScrubJob(s.jobs(), *p);
    if (!job.ok()) return ReportFailure(job.status().WithContext("cannot scrub " + name));
    if (!wait) return kExitOk;
    std::fflush(Out());
    // The job's progress as it changes, as `volstack jobs -w` prints it.
    const Status st = stack::FollowJob(**job, [](const std::string& line) {
      std::fprintf(Out(), "  %s\n", line.c_str());
      std::fflush(Out());
    });
    return st.ok() ? kExitOk : ReportFailure(st.WithContext("cannot scrub " + name));
  }
  Status st = (*p)->Scrub();
  if (!st.ok()) return ReportFailure(st.WithContext("cannot scrub " + name));
  st = (*p)->WaitScan();
  if (!st.ok()) return ReportFailure(st.WithContext("cannot scrub " + name));
  PrintScan((*p)->Info().scan);
  return kExitOk;
}

int LeafVerb(Context& ctx, const std::string& verb, const std::string& name,
             const std::vector<std::string>& devices) {
  auto p = Open(ctx, name);
  if (!p.ok()) return ReportFailure(p.status());
  if (verb == "clear") {
    Status st = (*p)->Clear();
    return st.ok() ? kExitOk : ReportFailure(st.WithContext("cannot clear errors for " + name));
  }
  if (devices.empty()) return ReportUsage("zpool " + verb + ": missing device name");
  for (const auto& d : devices) {
    const std::string dev = NormalizeVdevName(d);
    Status st = verb == "offline"  ? (*p)->Offline(dev)
                : verb == "online" ? (*p)->Online(dev)
                                   : (*p)->Detach(dev);
    if (!st.ok()) return ReportFailure(st.WithContext("cannot " + verb + " " + d));
    if (verb == "detach") {
      st = UpdateCache(ctx, [&](std::vector<CachedPool>& pools) {
        for (auto& c : pools) {
          if (c.name == name) std::erase(c.vdevs, dev);
        }
        return Status::Ok();
      });
      if (!st.ok()) return ReportFailure(st);
    }
  }
  return kExitOk;
}

// attach POOL EXISTING NEW / replace POOL OLD NEW: resilvers before it returns, then
// records the new device in the cache (and forgets the old one on replace).
int AddDevice(Context& ctx, bool replace, bool force, const std::string& name,
              const std::string& existing, const std::string& added) {
  const std::string old_dev = NormalizeVdevName(existing), new_dev = NormalizeVdevName(added);
  auto p = Open(ctx, name);
  if (!p.ok()) return ReportFailure(p.status());
  auto d = OpenDeviceByName(ctx, added, false);
  if (!d.ok()) return ReportFailure(d.status().WithContext("cannot open " + added));
  if (!force) {
    if (auto label = pool::Vdev::ReadLabelConfig(**d);
        label.ok() && label->state != pool::PoolState::kDestroyed) {
      return ReportFailure(
          Status::Busy(added + " is part of pool '" + label->name + "' (use -f to overwrite)"));
    }
  }
  Status st = replace ? (*p)->Replace(old_dev, *d, new_dev) : (*p)->Attach(old_dev, *d, new_dev);
  if (!st.ok()) {
    return ReportFailure(st.WithContext("cannot " + std::string(replace ? "replace " : "attach ") +
                                        added + (replace ? " for " : " to ") + existing));
  }
  st = UpdateCache(ctx, [&](std::vector<CachedPool>& pools) {
    for (auto& c : pools) {
      if (c.name != name) continue;
      if (replace) std::erase(c.vdevs, old_dev);
      c.vdevs.push_back(new_dev);
    }
    return Status::Ok();
  });
  return st.ok() ? kExitOk : ReportFailure(st);
}

}  // namespace

void RegisterZpoolRedundancyVerbs(CLI::App& zpool, Context& ctx) {
  {
    struct Args {
      std::string name;
      bool stop = false, pause = false, wait = false;
    };
    auto a = std::make_shared<Args>();
    auto* c = AddVerb(zpool, ctx, "scrub", "Verify every block and repair bad copies",
                      [&ctx, a] { return Scrub(ctx, a->name, a->stop, a->pause, a->wait); });
    c->add_flag("-s", a->stop, "Stop the scrub");
    c->add_flag("-p", a->pause, "Pause the scrub (zpool scrub resumes it)");
    c->add_flag("-w", a->wait, "Wait until the scrub has ended");
    c->add_option("pool", a->name, "Pool")->required();
  }
  for (const char* verb : {"offline", "online", "clear", "detach"}) {
    auto name = std::make_shared<std::string>();
    auto devs = std::make_shared<std::vector<std::string>>();
    const std::string v = verb;
    auto* c = AddVerb(zpool, ctx, verb,
                      v == "clear"     ? "Clear error counters, bring faulted devices back"
                      : v == "offline" ? "Take a mirror's device offline"
                      : v == "online"  ? "Bring a device back online (resilvers it)"
                                       : "Detach a device from a mirror",
                      [&ctx, v, name, devs] { return LeafVerb(ctx, v, *name, *devs); });
    c->add_option("pool", *name, "Pool")->required();
    c->add_option("devices", *devs, "Devices");
  }
  for (bool replace : {false, true}) {
    struct Args {
      std::string name, existing, added;
      bool force = false;
    };
    auto a = std::make_shared<Args>();
    auto* c =
        AddVerb(zpool, ctx, replace ? "replace" : "attach",
                replace ? "Replace a device with a new one (resilvers it)"
                        : "Attach a device to a vdev, making or widening a mirror (resilvers it)",
                [&ctx, a, replace] {
                  return AddDevice(ctx, replace, a->force, a->name, a->existing, a->added);
                });
    c->add_flag("-f", a->force, "Use the new device even if it carries a pool label");
    c->add_option("pool", a->name, "Pool")->required();
    c->add_option("device", a->existing, "Existing device")->required();
    c->add_option("new_device", a->added, "New device")->required();
  }
  RegisterZpoolAddVerb(zpool, ctx);
}

}  // namespace volstack::cli::poolcli

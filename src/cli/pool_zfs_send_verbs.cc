// zfs send and zfs receive|recv: a volume snapshot as a stream on stdout, and back from
// stdin. The engine (and its theory) is src/pool/send.cc and receive.cc; the stream format
// docs/format/send.md. Exit codes as zfs: 2 for a usage error, 1 for a failure; a failed
// receive leaves the target as it was.
//
// In the daemon, stdin and stdout are the client's own (stack/control_socket.h), so a
// send from a volume in use (bound, served, an active PV) reads its snapshot beside the
// live writes; a receive into a volume in use is refused, as zfs rollback is.
//
// A stream flows for as long as the other end takes (a slow pipe, a network), so while it
// does a send lets other requests and jobs run (the request lock and the jobs'
// serialization released, as a request waiting for a job does): what it reads cannot go
// meanwhile, since pool::Send holds the snapshots it sends open (their destroy and the
// pool's export are refused as busy) and this request holds the Pool object.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/device_usage.h"
#include "cli/pool_common.h"
#include "cli/verbs.h"
#include "pool/send.h"
#include "stack/control_socket.h"
#include "stack/jobs.h"
#include "stack/stack.h"
#include "util/request_io.h"

namespace volstack::cli {

namespace {

std::string PoolPart(const std::string& name) {
  return name.substr(0, std::min(name.find('/'), name.find('@')));
}

Status WriteAllFd(int fd, std::span<const uint8_t> data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "cannot write the stream to standard output");
    data = data.subspan(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// For a scope: other requests and jobs run (no-op outside the daemon).
class RequestLockReleased {
 public:
  RequestLockReleased() {
    stack::ControlServer::ReleaseCurrentRequest();
    stack::Jobs::ReleaseSerialization();
  }
  ~RequestLockReleased() {
    stack::ControlServer::ReacquireCurrentRequest();
    stack::Jobs::ReacquireSerialization();
  }
  RequestLockReleased(const RequestLockReleased&) = delete;
  RequestLockReleased& operator=(const RequestLockReleased&) = delete;
};

struct SendArgs {
  int verbose = 0;  // -v given this many times (-v -v or -vv: zfs's BLOCKS column)
  bool parsable = false, dry_run = false, compressed = false, large = false;
  std::string incr, intermediates, token;
  std::string snapshot;
};

// "send from @a to pool/vol@b" (zfs's short form when both are of one volume).
std::string FromName(const std::string& from, const std::string& to) {
  const std::string vol = to.substr(0, to.find('@'));
  return from.rfind(vol + "@", 0) == 0 ? from.substr(vol.size()) : from;
}

// zfs's estimate lines (-v: "full send of ... estimated size is ...", -P: tab-separated),
// on stderr: stdout is the stream.
void PrintEstimate(const pool::SendStats& est, bool parsable) {
  for (const auto& part : est.parts) {
    if (parsable) {
      if (part.from.empty()) {
        std::fprintf(Err(), "full\t%s\t%llu\n", part.to.c_str(),
                     static_cast<unsigned long long>(part.stream_bytes));
      } else {
        std::fprintf(Err(), "incremental\t%s\t%s\t%llu\n", part.from.c_str(), part.to.c_str(),
                     static_cast<unsigned long long>(part.stream_bytes));
      }
    } else if (part.from.empty()) {
      std::fprintf(Err(), "full send of %s estimated size is %s\n", part.to.c_str(),
                   poolcli::Bytes(part.stream_bytes, false).c_str());
    } else {
      std::fprintf(Err(), "send from %s to %s estimated size is %s\n",
                   FromName(part.from, part.to).c_str(), part.to.c_str(),
                   poolcli::Bytes(part.stream_bytes, false).c_str());
    }
  }
  if (parsable) {
    std::fprintf(Err(), "size\t%llu\n", static_cast<unsigned long long>(est.stream_bytes));
  } else {
    std::fprintf(Err(), "total estimated size is %s\n",
                 poolcli::Bytes(est.stream_bytes, false).c_str());
  }
}

nlohmann::json EstimateJson(const std::string& snapshot, const pool::SendStats& est) {
  nlohmann::json j{{"snapshot", snapshot},
                   {"size", est.stream_bytes},
                   {"data", est.data_bytes},
                   {"read", est.bytes_read}};
  j["parts"] = nlohmann::json::array();
  for (const auto& part : est.parts) {
    j["parts"].push_back({{"from", part.from}, {"to", part.to}, {"size", part.stream_bytes}});
  }
  return j;
}

// -v's progress, as zfs 2.1 prints it once a second while a snapshot is sent: a header per
// snapshot ("TIME        SENT   SNAPSHOT pool/vol@b"), then "HH:MM:SS   SIZE   pool/vol@b"
// (-P: "HH:MM:SS<tab>bytes<tab>pool/vol@b", no header); with --json one object a line.
// -v -v adds the data blocks sent so far: "TIME        SENT      BLOCKS    SNAPSHOT
// pool/vol@b" over "HH:MM:SS   SIZE    BLOCKS    pool/vol@b" (-P: bytes<tab>blocks).
class ProgressPrinter {
 public:
  ProgressPrinter(bool parsable, bool json, bool blocks)
      : parsable_(parsable), json_(json), blocks_(blocks) {}

  void Update(const pool::SendProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    if (p.snapshot != current_) {
      current_ = p.snapshot;
      header_ = false;
      last_ = now;  // zfs's first line comes a second into each snapshot
      return;
    }
    if (now - last_ < std::chrono::seconds(1)) return;
    last_ = now;
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    char when[16];
    std::strftime(when, sizeof when, "%H:%M:%S", &tm);
    const auto bytes = static_cast<unsigned long long>(p.part_bytes);
    const auto blocks = static_cast<unsigned long long>(p.part_blocks);
    if (json_) {
      nlohmann::json j{{"time", when}, {"sent", p.part_bytes}, {"snapshot", p.snapshot}};
      if (blocks_) j["blocks"] = p.part_blocks;
      std::fprintf(Err(), "%s\n", j.dump().c_str());
    } else if (parsable_ && blocks_) {
      std::fprintf(Err(), "%s\t%llu\t%llu\t%s\n", when, bytes, blocks, p.snapshot.c_str());
    } else if (parsable_) {
      std::fprintf(Err(), "%s\t%llu\t%s\n", when, bytes, p.snapshot.c_str());
    } else {
      if (!header_) {
        std::fprintf(Err(), "TIME        SENT   %sSNAPSHOT %s\n", blocks_ ? "   BLOCKS    " : "",
                     p.snapshot.c_str());
        header_ = true;
      }
      const std::string size = poolcli::Bytes(p.part_bytes, false);
      if (blocks_) {
        std::fprintf(Err(), "%s   %5s    %8llu    %s\n", when, size.c_str(), blocks,
                     p.snapshot.c_str());
      } else {
        std::fprintf(Err(), "%s   %5s   %s\n", when, size.c_str(), p.snapshot.c_str());
      }
    }
  }

 private:
  const bool parsable_, json_, blocks_;
  std::string current_;
  bool header_ = false;
  std::chrono::steady_clock::time_point last_;
};

int ZfsSend(Context& ctx, const SendArgs& in) {
  SendArgs a = in;
  pool::SendOptions o;
  if (!a.token.empty()) {
    // -t: the snapshots, origin, offset and -c come from the receiver's token.
    if (!a.snapshot.empty() || !a.incr.empty() || !a.intermediates.empty()) {
      return ReportUsage("zfs send: -t takes no snapshot and no -i or -I");
    }
    auto t = pool::SendOptionsFromToken(a.token);
    if (!t.ok()) return ReportUsage("zfs send: " + t.status().message());
    o = *t;
    a.snapshot = o.snapshot;
  }
  if (!a.incr.empty() && !a.intermediates.empty()) {
    return ReportUsage("zfs send: -i and -I are exclusive");
  }
  if (Status st = pool::ValidateSnapshotName(a.snapshot); !st.ok()) {
    return ReportUsage("zfs send: " + st.message());
  }
  if (!a.dry_run && CurrentIo().stdout_tty) {
    return ReportUsage(
        "zfs send: the stream cannot be written to a terminal: redirect "
        "standard output");
  }
  if (a.token.empty()) {
    o.snapshot = a.snapshot;
    o.from = a.incr.empty() ? a.intermediates : a.incr;
    o.intermediates = !a.intermediates.empty();
    o.compressed = a.compressed;
  }
  // -L: blocks larger than 128K. A volume's blocks are 128K at most (volblocksize), so
  // every stream already carries them whole: accepted and changes nothing, as zfs's -L on
  // a pool without large blocks.
  (void)a.large;
  auto p = poolcli::OpenPool(ctx, PoolPart(a.snapshot), false);
  if (!p.ok()) return ReportFailure(p.status());
  const bool json = ctx.global.json;
  const bool report = a.verbose > 0 || a.parsable || a.dry_run;
  pool::SendStats est;
  if (report) {
    // The estimate is a dry run: the metadata walk, no data read, and exact.
    pool::SendOptions dry = o;
    dry.dry_run = true;
    auto e = pool::Send(**p, dry, {});
    if (!e.ok()) return ReportFailure(e.status());
    est = *e;
    if (json) {
      // -n: the estimate is the output (stdout); otherwise stdout is the stream.
      std::fprintf(a.dry_run ? Out() : Err(), "%s\n", EstimateJson(a.snapshot, est).dump().c_str());
    } else {
      PrintEstimate(est, a.parsable);
    }
    if (a.dry_run) return kExitOk;
  }
  std::fflush(Out());
  const auto start = std::chrono::steady_clock::now();
  ProgressPrinter progress(a.parsable, json, a.verbose >= 2);
  std::optional<RequestLockReleased> unlocked(std::in_place);
  auto sent = pool::Send(
      **p, o,
      [out_fd = CurrentIo().out_fd](std::span<const uint8_t> rec) {
        return WriteAllFd(out_fd, rec);
      },
      [&](const pool::SendProgress& pr) {
        if (a.verbose > 0) progress.Update(pr);
      });
  unlocked.reset();
  if (!sent.ok()) return ReportFailure(sent.status());
  if (json) {
    // For scripts, on stderr (stdout is the stream): what was sent, read and how long.
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    nlohmann::json j = EstimateJson(a.snapshot, *sent);
    j["seconds"] = secs;
    std::fprintf(Err(), "%s\n", j.dump().c_str());
  }
  return kExitOk;
}

struct RecvArgs {
  bool force = false, unmounted = false, verbose = false, resumable = false, abort = false;
  std::vector<std::string> opts;
  std::string target;
};

int ZfsReceive(Context& ctx, const RecvArgs& a) {
  const std::string volume = a.target.substr(0, a.target.find('@'));
  if (Status st = pool::ValidateDatasetName(volume); !st.ok()) {
    if (st.code() == EINVAL) return ReportUsage("zfs receive: " + st.message());
    return ReportFailure(st);
  }
  if (a.abort) {
    auto p = poolcli::OpenPool(ctx, PoolPart(a.target), false);
    if (!p.ok()) return ReportFailure(p.status());
    if (Status st = pool::AbortReceive(**p, volume); !st.ok()) return ReportFailure(st);
    return kExitOk;
  }
  if (a.target.find('@') != std::string::npos) {
    if (Status st = pool::ValidateSnapshotName(a.target); !st.ok()) {
      return ReportUsage("zfs receive: " + st.message());
    }
  }
  pool::ReceiveOptions o;
  o.target = a.target;
  o.force = a.force;
  o.resumable = a.resumable;
  for (const auto& s : a.opts) {
    auto kv = poolcli::SplitProp(s);
    if (!kv.ok()) return ReportUsage("zfs receive: " + kv.status().message());
    if (!o.props.emplace(kv->first, kv->second).second) {
      return ReportUsage("zfs receive: property '" + kv->first + "' specified multiple times");
    }
  }
  if (CurrentIo().stdin_tty) {
    return ReportUsage(
        "zfs receive: the stream cannot be read from a terminal: redirect "
        "standard input");
  }
  auto p = poolcli::OpenPool(ctx, PoolPart(a.target), false);
  if (!p.ok()) return ReportFailure(p.status());
  if ((*p)->GetDataset(volume).ok()) {
    // The same rules as zfs rollback: bound to a loop, open, served, an active PV: refused.
    if (Status busy = CheckNotInUse(ctx, {volume}); !busy.ok()) {
      std::fprintf(Err(), "volstack: cannot receive into '%s': dataset is busy (%s)\n",
                   volume.c_str(), busy.message().c_str());
      return kExitFailure;
    }
    ctx.stack().Release({volume});
    // -F may destroy snapshots: the daemon's own hold on an idle snapshot device goes; one in
    // use stays held, and the receive is refused if it would have to destroy it.
    if (a.force) {
      for (const auto& snap : (*p)->SnapshotNames(volume)) {
        if (CheckNotInUse(ctx, {snap}).ok()) ctx.stack().Release({snap});
      }
    }
  }
  pool::StreamReader reader([in_fd = CurrentIo().in_fd](uint8_t* dst, size_t n) -> Result<size_t> {
    for (;;) {
      const ssize_t r = ::read(in_fd, dst, n);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Status::FromErrno(errno, "cannot read the stream from standard input");
      return static_cast<size_t>(r);
    }
  });
  const auto start = std::chrono::steady_clock::now();
  // -v: zfs 2.1's two lines, on stdout as zfs prints them (a receive's stdout is free, but
  // with --json it is the summary's).
  std::FILE* const vout = ctx.global.json ? Err() : Out();
  auto r = pool::Receive(**p, o, reader, [&](const pool::StreamBegin& b) {
    if (!a.verbose) return;
    std::fprintf(vout, "receiving %s stream of %s into %s%s\n",
                 b.incremental() ? "incremental" : "full", b.toname.c_str(), volume.c_str(),
                 b.toname.substr(b.toname.find('@')).c_str());
    std::fflush(vout);
  });
  if (!r.ok()) return ReportFailure(r.status());
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (ctx.global.json) {
    nlohmann::json j{{"snapshots", r->snapshots}, {"size", r->stream_bytes}, {"seconds", secs}};
    std::fprintf(Out(), "%s\n", j.dump().c_str());
  } else if (a.verbose) {
    const uint64_t whole = std::max<uint64_t>(1, static_cast<uint64_t>(secs));
    std::fprintf(Out(), "received %s stream in %llu seconds (%s/sec)\n",
                 poolcli::Bytes(r->stream_bytes, false).c_str(),
                 static_cast<unsigned long long>(whole),
                 poolcli::Bytes(r->stream_bytes / whole, false).c_str());
  }
  return kExitOk;
}

}  // namespace

void RegisterZfsSendVerbs(CLI::App& zfs, Context& ctx) {
  {
    auto a = std::make_shared<SendArgs>();
    auto* c = AddVerb(zfs, ctx, "send", "Write a snapshot as a stream to standard output",
                      [&ctx, a] { return ZfsSend(ctx, *a); });
    c->add_flag("-v", a->verbose,
                "Print the estimate and progress (zfs's format) on stderr; twice: with blocks");
    c->add_flag("-P", a->parsable, "Print the estimate as tab-separated lines on stderr");
    c->add_flag("-n", a->dry_run, "Dry run: print the estimate, send nothing");
    c->add_option("-i", a->incr, "Incremental from this snapshot (@a or pool/vol@a)");
    c->add_option("-I", a->intermediates, "Incremental, with every snapshot in between");
    c->add_option("-t", a->token, "Resume: the receive_resume_token of a partial receive -s");
    c->add_flag("-c,--compressed", a->compressed,
                "Compressed blocks travel as stored (receive keeps them compressed)");
    c->add_flag("-L,--large-block", a->large,
                "Large blocks (accepted; volume blocks are at most 128K, always sent whole)");
    c->add_option("snapshot", a->snapshot, "pool/vol@snap");
  }
  {
    auto a = std::make_shared<RecvArgs>();
    auto* c = AddVerb(zfs, ctx, "receive", "Create a snapshot from a stream on standard input",
                      [&ctx, a] { return ZfsReceive(ctx, *a); });
    c->alias("recv");
    c->add_flag("-F", a->force, "Roll the target back to the stream's origin first");
    c->add_flag("-u", a->unmounted, "Do not mount (volumes are never mounted)");
    c->add_flag("-v", a->verbose, "Print what is received on stderr");
    c->add_flag("-s", a->resumable,
                "Resumable: a broken stream leaves its partial state (receive_resume_token)");
    c->add_flag("-A", a->abort, "Abort a partial receive -s into the target");
    c->add_option("-o", a->opts, "property=value")->allow_extra_args(false);
    c->add_option("target", a->target, "pool/vol or pool/vol@snap")->required();
  }
}

}  // namespace volstack::cli

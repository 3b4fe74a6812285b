#include "stack/requests.h"

#include <algorithm>
#include <chrono>

#include "stack/control_socket.h"
#include "stack/stack.h"

namespace volstack::stack {

namespace {

using nlohmann::json;

// A device's exports as status shows them: its devfs file (live), loop devices (bound, then
// recorded and not bound, with their mounts), recorded NBD exports (serving or not).
json ExportsOf(const StackGraph& g, const std::string& name, bool active) {
  json e = json::object();
  e["devfs"] = active && !g.devfs_dir.empty() ? json(g.devfs_dir + "/" + name) : json(nullptr);
  json loops = json::array();
  for (const auto* l : g.LoopsOf(name)) {
    json mounts = json::array();
    for (const auto* m : g.MountsOf(l->device)) {
      if (l->bound) mounts.push_back({{"mount_point", m->mount_point}, {"fstype", m->fstype}});
    }
    loops.push_back({{"device", l->device},
                     {"bound", l->bound},
                     {"sector_size", l->sector_size},
                     {"read_only", l->read_only},
                     {"mounts", mounts}});
  }
  e["loops"] = loops;
  json listeners = json::array();
  for (const auto* n : g.NbdOf(name)) {
    if (!n->recorded) continue;
    listeners.push_back({{"address", n->address},
                         {"export", n->export_name},
                         {"serving", n->serving},
                         {"connections", n->connections}});
  }
  e["nbd"] = listeners;
  return e;
}

json StatusTree(Stack& stack, const StackGraph& g) {
  const auto is_active = [&](const std::string& name) {
    return g.daemon && stack.registry().Find(name) != nullptr;
  };
  json tree;
  tree["state_dir"] = stack.state().root;
  tree["daemon"] = g.daemon;
  tree["devfs"] = g.devfs_dir.empty() ? json(nullptr) : json(g.devfs_dir);
  tree["fuse_transport"] = g.fuse_transport.empty() ? json(nullptr) : json(g.fuse_transport);
  json pools = json::array();
  for (const auto& p : g.pools) {
    json j{{"name", p.name}, {"vdevs", p.vdevs}, {"volumes", json::array()}, {"health", p.health}};
    if (!p.reason.empty()) j["reason"] = p.reason;
    if (p.size) j["size"] = *p.size;
    if (p.allocated) j["allocated"] = *p.allocated;
    for (const auto* v : g.VolumesOf(p.name)) {
      json snapshots = json::array();
      for (const auto* s : g.SnapshotsOf(v->name)) {
        json sj{{"name", s->name},
                {"used", s->used},
                {"referenced", s->referenced},
                {"written", s->written},
                {"device", s->device}};
        if (s->device) sj["exports"] = ExportsOf(g, s->name, is_active(s->name));
        snapshots.push_back(std::move(sj));
      }
      j["volumes"].push_back({{"name", v->name},
                              {"size", v->size},
                              {"volblocksize", v->volblocksize},
                              {"active", v->active},
                              {"pv_of", g.VgOfPv(v->name)},
                              {"used_by", g.UsesOf(v->name)},
                              {"exports", ExportsOf(g, v->name, v->active)},
                              {"snapshots", snapshots}});
    }
    pools.push_back(std::move(j));
  }
  tree["pools"] = pools;
  json vgs = json::array();
  for (const auto& v : g.vgs) {
    json j{{"name", v.name},      {"extent_size", v.extent_size}, {"size", v.size},
           {"free", v.free},      {"partial", v.partial},         {"pvs", json::array()},
           {"lvs", json::array()}};
    for (const auto* pv : g.PvsOf(v.name)) {
      j["pvs"].push_back({{"name", pv->name}, {"missing", pv->missing}, {"size", pv->size}});
    }
    for (const auto* lv : g.LvsOf(v.name)) {
      j["lvs"].push_back({{"name", lv->name},
                          {"size", lv->size},
                          {"active", lv->active},
                          {"active_at_up", lv->active_at_up},
                          {"used_by", g.UsesOf(lv->name)},
                          {"exports", ExportsOf(g, lv->name, lv->active)}});
    }
    vgs.push_back(std::move(j));
  }
  tree["vgs"] = vgs;
  return tree;
}

Reply HandleStatus(Stack& stack) {
  const StackGraph g = stack.Graph(GraphDepth::kFull);
  Reply reply;
  for (const auto& p : g.problems) reply.errors.push_back(p.ToString());
  reply.data["tree"] = StatusTree(stack, g);
  // For the first line of the text; not part of `status --json`.
  reply.data["fuse_transport_reason"] = g.fuse_transport_reason;
  return reply;
}

json JobJson(const JobRecord::Snapshot& j) {
  std::string progress = j.progress;
  if (j.state == "failed" || j.state == "stopped") progress = j.status.message();
  return {{"id", j.id},
          {"kind", j.kind},
          {"target", j.target},
          {"state", j.state},
          {"progress", progress}};
}

}  // namespace

// Progress is passed on when it changed, at most once per kProgressInterval.
constexpr auto kProgressInterval = std::chrono::seconds(1);

Status FollowJob(const JobRecord& record, const ProgressFn& progress) {
  ControlServer::ReleaseCurrentRequest();
  Jobs::ReleaseSerialization();
  std::string last;
  auto next = std::chrono::steady_clock::now();
  while (!record.WaitFor(std::chrono::milliseconds(100))) {
    if (!progress || std::chrono::steady_clock::now() < next) continue;
    const auto snap = record.Get();
    if (snap.progress != last && !snap.progress.empty()) {
      last = snap.progress;
      next = std::chrono::steady_clock::now() + kProgressInterval;
      progress("job " + std::to_string(snap.id) + " (" + snap.kind + " " + snap.target +
               "): " + last);
    }
  }
  ControlServer::ReacquireCurrentRequest();
  Jobs::ReacquireSerialization();
  return record.Get().status;
}

namespace {

Result<Reply> HandleJobs(Stack& stack, const json& args, const ProgressFn& progress) {
  const bool wait = args.value("wait", false);
  const bool stop = args.value("stop", false);
  std::vector<uint64_t> ids;
  if (args.contains("ids")) {
    if (!args["ids"].is_array()) return Status::InvalidArgument("jobs: ids is not an array");
    for (const auto& id : args["ids"]) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0) {
        return Status::InvalidArgument("jobs: an id is not a job number");
      }
      ids.push_back(id.get<uint64_t>());
    }
  }
  Reply reply;
  if (!stack.live()) {
    // Jobs run in the daemon; with none, no id names a job.
    if (!ids.empty()) {
      reply.code = 1;
      reply.errors.push_back(Status::NotFound("no daemon is running, so no job").ToString());
    }
    reply.data["jobs"] = json::array();
    return reply;
  }
  if (!wait && !stop) {
    json jobs = json::array();
    for (const auto& j : stack.jobs().List()) {
      if (ids.empty() || std::find(ids.begin(), ids.end(), j.id) != ids.end()) {
        jobs.push_back(JobJson(j));
      }
    }
    reply.data["jobs"] = jobs;
    return reply;
  }
  // One result per id, in order: {"id", "error"} for one that failed, else what it ended as.
  json results = json::array();
  for (uint64_t id : ids) {
    json r{{"id", id}};
    auto record = stack.jobs().Find(id);
    if (!record) {
      r["error"] = Status::NotFound("no job " + std::to_string(id)).ToString();
    } else if (stop) {
      if (Status st = stack.jobs().Stop(id); !st.ok()) r["error"] = st.ToString();
    } else {
      Status st = FollowJob(*record, progress);
      r["job"] = JobJson(record->Get());
      if (!st.ok()) r["error"] = st.ToString();
    }
    if (r.contains("error")) reply.code = 1;
    results.push_back(std::move(r));
  }
  reply.data["results"] = results;
  return reply;
}

}  // namespace

bool HasTypedReply(const std::string& verb) { return verb == "status" || verb == "jobs"; }

Result<Reply> Handle(Stack& stack, const Request& request, const ProgressFn& progress) {
  if (request.verb == "status") return HandleStatus(stack);
  if (request.verb == "jobs") return HandleJobs(stack, request.args, progress);
  return Status::InvalidArgument("no typed request '" + request.verb + "'");
}

}  // namespace volstack::stack

// Stack::Graph (graph.h): one read of the live stack, the state dir and the kernel.
#include "stack/graph.h"

#include <algorithm>
#include <set>

#include "export/loop_bindings.h"
#include "stack/lvm_state.h"
#include "stack/nbd_listeners.h"
#include "stack/nbd_state.h"
#include "stack/stack.h"

namespace volstack::stack {

namespace {

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

std::string NbdId(const std::string& address, const std::string& export_name) {
  return address + " " + export_name;
}

std::string MountId(const MountEntry& m) { return m.source + " on " + m.mount_point; }

}  // namespace

const char* NodeKindName(NodeKind kind) {
  switch (kind) {
    case NodeKind::kPool:
      return "pool";
    case NodeKind::kVdev:
      return "vdev";
    case NodeKind::kVolume:
      return "volume";
    case NodeKind::kSnapshot:
      return "snapshot";
    case NodeKind::kVg:
      return "vg";
    case NodeKind::kPv:
      return "pv";
    case NodeKind::kLv:
      return "lv";
    case NodeKind::kDevice:
      return "device";
    case NodeKind::kDevfs:
      return "devfs";
    case NodeKind::kLoop:
      return "loop";
    case NodeKind::kMount:
      return "mount";
    case NodeKind::kNbd:
      return "nbd";
    case NodeKind::kProcess:
      return "process";
  }
  return "?";
}

std::vector<NodeRef> StackGraph::From(const NodeRef& node, EdgeKind kind) const {
  std::vector<NodeRef> out;
  for (const auto& e : edges) {
    if (e.kind == kind && e.from == node) out.push_back(e.to);
  }
  return out;
}

std::vector<NodeRef> StackGraph::To(const NodeRef& node, EdgeKind kind) const {
  std::vector<NodeRef> out;
  for (const auto& e : edges) {
    if (e.kind == kind && e.to == node) out.push_back(e.from);
  }
  return out;
}

std::vector<const StackGraph::Loop*> StackGraph::LoopsOf(const std::string& name) const {
  std::vector<const Loop*> out;
  for (const auto& to : From({NodeKind::kDevice, name}, EdgeKind::kExportedAs)) {
    if (to.kind != NodeKind::kLoop) continue;
    for (const auto& l : loops) {
      if (l.device == to.id && l.name == name) out.push_back(&l);
    }
  }
  return out;
}

std::vector<const MountEntry*> StackGraph::MountsOf(const std::string& loop_device) const {
  std::vector<const MountEntry*> out;
  for (const auto& from : To({NodeKind::kLoop, loop_device}, EdgeKind::kBuiltOn)) {
    for (const auto& m : mounts) {
      if (MountId(m) == from.id) out.push_back(&m);
    }
  }
  return out;
}

std::vector<const StackGraph::Nbd*> StackGraph::NbdOf(const std::string& name) const {
  std::vector<const Nbd*> out;
  for (const auto& n : nbd) {
    if (n.device == name) out.push_back(&n);
  }
  return out;
}

std::vector<const StackGraph::Volume*> StackGraph::VolumesOf(const std::string& pool) const {
  std::vector<const Volume*> out;
  for (const auto& v : volumes) {
    if (v.pool == pool) out.push_back(&v);
  }
  return out;
}

std::vector<const StackGraph::Snapshot*> StackGraph::SnapshotsOf(const std::string& volume) const {
  std::vector<const Snapshot*> out;
  for (const auto& s : snapshots) {
    if (s.volume == volume) out.push_back(&s);
  }
  return out;
}

std::vector<const StackGraph::Pv*> StackGraph::PvsOf(const std::string& vg) const {
  std::vector<const Pv*> out;
  for (const auto& p : pvs) {
    if (p.vg == vg) out.push_back(&p);
  }
  return out;
}

std::vector<const StackGraph::Lv*> StackGraph::LvsOf(const std::string& vg) const {
  std::vector<const Lv*> out;
  for (const auto& l : lvs) {
    if (l.vg == vg) out.push_back(&l);
  }
  return out;
}

std::string StackGraph::VgOfPv(const std::string& name) const {
  if (!pv_scan) return "";
  const auto vgs_on = To({NodeKind::kPv, name}, EdgeKind::kBuiltOn);
  return vgs_on.empty() ? "" : vgs_on.back().id;
}

std::vector<std::string> StackGraph::UsesOf(const std::string& name) const {
  std::vector<std::string> uses;
  std::set<std::string> live;  // loop devices and NBD addresses in use now
  for (const Loop* l : LoopsOf(name)) {
    if (!l->bound) continue;
    live.insert(l->device);
    std::string use = "bound to " + l->device;
    for (const MountEntry* m : MountsOf(l->device)) use += ", mounted on " + m->mount_point;
    uses.push_back(use);
  }
  for (const auto& file : From({NodeKind::kDevice, name}, EdgeKind::kExportedAs)) {
    if (file.kind != NodeKind::kDevfs) continue;
    std::vector<std::string> who;
    for (const auto& p : From(file, EdgeKind::kOpenedBy)) who.push_back(p.id);
    if (!who.empty()) uses.push_back("open by " + Join(who, ", "));
  }
  std::vector<const Nbd*> served = NbdOf(name);
  std::stable_sort(served.begin(), served.end(),
                   [](const Nbd* a, const Nbd* b) { return a->address < b->address; });
  for (const Nbd* n : served) {
    if (!n->live) continue;
    live.insert(n->address);
    uses.push_back("served over NBD on " + n->address);
  }
  for (const Loop* l : LoopsOf(name)) {
    if (l->bound || live.count(l->device)) continue;  // a live one is said already
    uses.push_back("recorded for `up` as bound to " + l->device + " (`volstack losetup -d " +
                   l->device + "` first)");
  }
  for (const Nbd* n : NbdOf(name)) {
    if (!n->recorded || live.count(n->address)) continue;
    uses.push_back("recorded for `up` as served over NBD on " + n->address +
                   " (`volstack nbd stop " + n->address + "` first)");
  }
  if (const auto pools_on = To({NodeKind::kVdev, name}, EdgeKind::kBuiltOn); !pools_on.empty()) {
    uses.push_back("a vdev of pool " + pools_on.back().id);
  }
  if (pv_scan) {
    const auto vgs_on = To({NodeKind::kPv, name}, EdgeKind::kBuiltOn);
    if (!vgs_on.empty() &&
        std::find(active_vgs.begin(), active_vgs.end(), vgs_on.back().id) != active_vgs.end()) {
      uses.push_back("a PV of VG " + vgs_on.back().id + ", which has active LVs");
    }
  }
  return uses;
}

Status StackGraph::CheckNotInUse(const std::vector<std::string>& names) const {
  for (const auto& name : names) {
    const auto uses = UsesOf(name);
    if (!uses.empty()) return Status::Busy(name + " is " + Join(uses, "; "));
  }
  return Status::Ok();
}

StackGraph Stack::Graph(GraphDepth depth) {
  StackGraph g;
  auto edge = [&g](NodeKind fk, const std::string& from, EdgeKind kind, NodeKind tk,
                   const std::string& to) {
    g.edges.push_back({{fk, from}, kind, {tk, to}});
  };
  g.daemon = live();
  if (live()) {
    g.devfs_dir = devfs_dir();
    g.fuse_transport = devfs_transport();
    g.fuse_transport_reason = devfs_transport_reason();
  }
  const auto is_active = [this](const std::string& name) {
    return live() && registry_.Find(name) != nullptr;
  };

  // The kernel: loop devices bound to files of this stack's devfs (mounted or not: a loop
  // outlives a daemon), what mounts them, who holds the files open.
  const std::string devfs_prefix = state_.devfs_dir() + "/";
  for (const auto& l : kernel_->ListLoops()) {
    if (l.backing_file.rfind(devfs_prefix, 0) != 0) continue;
    const std::string name = l.backing_file.substr(devfs_prefix.size());
    g.loops.push_back({l.device, name, true, l.sector_size, l.read_only});
    edge(NodeKind::kDevice, name, EdgeKind::kExportedAs, NodeKind::kLoop, l.device);
  }
  for (auto& m : kernel_->ReadMounts()) {
    bool from_loop = false;
    for (const auto& l : g.loops) from_loop = from_loop || l.device == m.source;
    if (!from_loop) continue;
    edge(NodeKind::kMount, MountId(m), EdgeKind::kBuiltOn, NodeKind::kLoop, m.source);
    g.mounts.push_back(std::move(m));
  }
  for (const auto& [path, who] : kernel_->OpenFilesUnder(devfs_prefix)) {
    const std::string name = path.substr(devfs_prefix.size());
    for (const auto& w : who) {
      edge(NodeKind::kDevfs, name, EdgeKind::kOpenedBy, NodeKind::kProcess, w);
    }
  }

  // The records: loop bindings and NBD exports kept for `up`.
  if (auto recorded = exportfs::LoadLoopBindings(state_.root); !recorded.ok()) {
    g.problems.push_back(recorded.status());
  } else {
    for (const auto& b : *recorded) {
      bool bound = false;
      for (const auto& l : g.loops)
        bound = bound || (l.bound && l.device == b.device && l.name == b.name);
      if (bound) continue;
      g.loops.push_back({b.device, b.name, false, b.sector_size, b.read_only});
      edge(NodeKind::kDevice, b.name, EdgeKind::kExportedAs, NodeKind::kLoop, b.device);
    }
  }
  // Loops in kernel order, then the recorded ones: the order status prints them in.
  std::stable_partition(g.loops.begin(), g.loops.end(), [](const auto& l) { return l.bound; });
  if (auto listeners = nbd_->List(); !listeners.ok()) {
    g.problems.push_back(listeners.status());
  } else {
    for (const auto& l : *listeners) {
      for (const auto& x : l.record.exports) {
        const bool missing =
            std::find(l.unserved.begin(), l.unserved.end(), x.name) != l.unserved.end();
        g.nbd.push_back({l.record.address(), x.name, x.device, true, false, l.serving && !missing,
                         l.connections});
      }
    }
  }
  for (const auto& x : nbd_->LiveExports()) {
    auto it = std::find_if(g.nbd.begin(), g.nbd.end(), [&](const auto& n) {
      return n.address == x.address && n.export_name == x.export_name;
    });
    if (it == g.nbd.end()) {
      g.nbd.push_back({x.address, x.export_name, x.device, false, true, false, 0});
    } else {
      it->live = true;
    }
  }
  for (const auto& n : g.nbd) {
    edge(NodeKind::kDevice, n.device, EdgeKind::kExportedAs, NodeKind::kNbd,
         NbdId(n.address, n.export_name));
  }

  // An activation record this volstack cannot read (a newer format) counts every VG as active:
  // refusing a destroy is safe, allowing one is not.
  auto active = ReadListFile(LvmActivePath(state_.root));
  if (!active.ok()) g.problems.push_back(active.status());
  std::set<std::string> at_up;
  if (active.ok()) {
    for (const auto& lv : *active) {
      at_up.insert(lv);
      const std::string vg = SplitLvName(lv).first;
      if (std::find(g.active_vgs.begin(), g.active_vgs.end(), vg) == g.active_vgs.end()) {
        g.active_vgs.push_back(vg);
      }
    }
  }
  g.pv_scan = !active.ok() || !active->empty();

  // Pools, their vdevs and (kFull) volumes and snapshots.
  auto cached = ReadPoolCache(state_.root);
  if (!cached.ok()) g.problems.push_back(cached.status());
  for (const auto& entry : cached.ok() ? *cached : std::vector<CachedPool>{}) {
    StackGraph::Pool p{entry.name, entry.vdevs, "", "", {}, {}};
    for (const auto& v : entry.vdevs) {
      edge(NodeKind::kPool, entry.name, EdgeKind::kBuiltOn, NodeKind::kVdev, v);
    }
    if (depth == GraphDepth::kUses) {
      g.pools.push_back(std::move(p));
      continue;
    }
    // The daemon's own pool; without a daemon, a read-only import.
    std::shared_ptr<pool::Pool> open;
    if (live()) {
      open = FindLivePool(entry.name);
      if (!open) {
        auto it = unavailable_.find(entry.name);
        p.health = "UNAVAIL";
        p.reason = it != unavailable_.end() ? it->second.message() : "not imported";
      }
    } else if (auto opened = OpenPool(entry.name, /*read_only=*/true); !opened.ok()) {
      p.health = "UNAVAIL";
      p.reason = opened.status().message();
    } else {
      open = *opened;
    }
    if (open) {
      const auto info = open->Info();
      p.health = info.health;
      p.size = info.size;
      p.allocated = info.allocated;
      for (const auto& d : open->ListDatasets()) {
        if (d.type != "volume") continue;
        g.volumes.push_back({d.name, entry.name, d.volsize, d.volblocksize, is_active(d.name)});
        edge(NodeKind::kVolume, d.name, EdgeKind::kBuiltOn, NodeKind::kPool, entry.name);
        auto snapdev = d.props.find("snapdev");
        const bool devices = snapdev != d.props.end() && snapdev->second == "visible";
        for (const auto& s : open->ListSnapshots(d.name)) {
          g.snapshots.push_back({s.name, d.name, s.used, s.referenced, s.written, devices});
          edge(NodeKind::kSnapshot, s.name, EdgeKind::kBuiltOn, NodeKind::kVolume, d.name);
        }
      }
    }
    g.pools.push_back(std::move(p));
  }

  // VGs, their PVs and LVs: every VG for kFull; for kUses, the PVs only when an LV is active.
  if (depth == GraphDepth::kFull || g.pv_scan) {
    auto session = OpenLvm(/*read_only=*/true);
    for (const auto& h : session->vgs()) {
      if (!active.ok()) g.active_vgs.push_back(h.vg.name);
      g.vgs.push_back({h.vg.name, h.vg.extent_bytes(), h.vg.total_extents() * h.vg.extent_bytes(),
                       (h.vg.total_extents() - h.vg.allocated_extents()) * h.vg.extent_bytes(),
                       h.partial()});
      for (size_t i = 0; i < h.vg.pvs.size(); i++) {
        const lvm::Pv* pv = i < h.pvs.size() ? h.pvs[i] : nullptr;
        const std::string name = pv ? pv->name() : h.vg.pvs[i].device;
        g.pvs.push_back(
            {name, h.vg.name, pv == nullptr, uint64_t{h.vg.pvs[i].pe_count} * h.vg.extent_bytes()});
        if (pv != nullptr) edge(NodeKind::kVg, h.vg.name, EdgeKind::kBuiltOn, NodeKind::kPv, name);
      }
      if (depth != GraphDepth::kFull) continue;
      for (const auto& lv : h.vg.lvs) {
        if (!lv.visible()) continue;
        const std::string name = h.vg.name + "/" + lv.name;
        g.lvs.push_back({name, h.vg.name, uint64_t{lv.le_count()} * h.vg.extent_bytes(),
                         is_active(name), at_up.count(name) > 0});
        edge(NodeKind::kLv, name, EdgeKind::kBuiltOn, NodeKind::kVg, h.vg.name);
      }
    }
  }

  // Devfs files: a live device's file, and any file a process holds.
  if (!g.devfs_dir.empty()) {
    for (const auto& v : g.volumes) {
      if (v.active)
        edge(NodeKind::kDevice, v.name, EdgeKind::kExportedAs, NodeKind::kDevfs, v.name);
    }
    for (const auto& s : g.snapshots) {
      if (s.device && is_active(s.name)) {
        edge(NodeKind::kDevice, s.name, EdgeKind::kExportedAs, NodeKind::kDevfs, s.name);
      }
    }
    for (const auto& l : g.lvs) {
      if (l.active)
        edge(NodeKind::kDevice, l.name, EdgeKind::kExportedAs, NodeKind::kDevfs, l.name);
    }
  }
  for (const auto& e : std::vector<Edge>(g.edges)) {
    if (e.kind != EdgeKind::kOpenedBy || !g.To(e.from, EdgeKind::kExportedAs).empty()) continue;
    edge(NodeKind::kDevice, e.from.id, EdgeKind::kExportedAs, NodeKind::kDevfs, e.from.id);
  }
  return g;
}

}  // namespace volstack::stack

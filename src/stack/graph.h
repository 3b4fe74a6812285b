// StackGraph: the stack as typed nodes and edges, read once from the live stack, the state dir
// and the kernel (Stack::Graph). `volstack status` prints it, the busy checks ask it who uses a
// device (UsesOf), and the bench reads it; none of them assembles the graph on its own.
//
// Nodes, by kind, each with what status shows of it:
//   pool       a pool of zpool.cache: health, size, or why it is unavailable
//   vdev       a device a pool is built on (any device name: a file, a volume, a remote URI)
//   volume     a pool volume; snapshot  a volume's snapshot (a device with snapdev=visible)
//   vg, pv, lv an LVM volume group, its physical volumes (device names) and visible LVs
//   devfs      a device's file in the daemon's devfs mount
//   loop       a kernel loop device bound to a devfs file (live), or recorded in loops.json
//              and not bound (restored at up)
//   mount      a filesystem mounted from a loop device
//   nbd        an NBD export of a device, recorded in nbd.json and/or served live
//   process    a process holding a devfs file open
// Edges, from the node that depends to the one it depends on:
//   kBuiltOn     pool -> vdev, volume -> pool, snapshot -> volume, vg -> pv, lv -> vg,
//                mount -> loop
//   kExportedAs  device -> devfs, device -> loop, device -> nbd
//   kOpenedBy    devfs -> process
// Nodes are kept in the order status prints them (pools as in zpool.cache, volumes and
// snapshots as the pool lists them, VGs and LVs as the scan finds them, exports in kernel
// then record order), so a walk of the graph is a walk of the output.
//
// Depth. A busy check needs only the uses (kUses): the kernel's loops, mounts and open files,
// the records, the pool cache's vdevs and, when an LV is active, a read-only PV scan. Status
// needs everything (kFull): every cached pool opened (read-only without a daemon), its
// volumes and snapshots, a full LVM scan.
//
// Threads: a graph is a value; built on the stack's request thread (stack.h), read anywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stack/kernel.h"
#include "util/status.h"

namespace volstack::stack {

enum class NodeKind {
  kPool,
  kVdev,
  kVolume,
  kSnapshot,
  kVg,
  kPv,
  kLv,
  kDevice,  // a stack device by name, whatever it is (volume, snapshot, LV): exports start here
  kDevfs,
  kLoop,
  kMount,
  kNbd,
  kProcess
};
enum class EdgeKind { kBuiltOn, kExportedAs, kOpenedBy };
const char* NodeKindName(NodeKind kind);

struct NodeRef {
  NodeKind kind;
  std::string id;
  bool operator==(const NodeRef&) const = default;
};
struct Edge {
  NodeRef from;
  EdgeKind kind;
  NodeRef to;
};

struct StackGraph {
  struct Pool {
    std::string name;
    std::vector<std::string> vdevs;
    std::string health;                       // "UNAVAIL" when not open
    std::string reason;                       // why not open ("" when open)
    std::optional<uint64_t> size, allocated;  // when open
  };
  struct Volume {
    std::string name, pool;
    uint64_t size = 0, volblocksize = 0;
    bool active = false;  // registered in the live stack
  };
  struct Snapshot {
    std::string name, volume;
    uint64_t used = 0, referenced = 0, written = 0;
    bool device = false;  // snapdev=visible: exported like any device
  };
  struct Vg {
    std::string name;
    uint64_t extent_size = 0, size = 0, free = 0;
    bool partial = false;
  };
  struct Pv {
    std::string name, vg;  // name: the device, or the recorded one when missing
    bool missing = false;
    uint64_t size = 0;
  };
  struct Lv {
    std::string name, vg;  // name "vg/lv"
    uint64_t size = 0;
    bool active = false;        // registered in the live stack
    bool active_at_up = false;  // in lvm/active
  };
  struct Loop {
    std::string device;  // /dev/loopN
    std::string name;    // the stack device whose devfs file it is bound to
    bool bound = false;  // false: recorded in loops.json only
    uint32_t sector_size = 0;
    bool read_only = false;
  };
  struct Nbd {
    std::string address, export_name, device;
    bool recorded = false;  // in nbd.json
    bool live = false;      // a listener of this daemon has it in its exports
    bool serving = false;   // live, and its device is open
    size_t connections = 0;
  };

  // What the graph was read from.
  bool daemon = false;
  std::string devfs_dir;  // the live mount ("" without a daemon)
  std::string fuse_transport, fuse_transport_reason;
  // The records that could not be read, in the order they were read (loops.json, nbd.json,
  // lvm/active, zpool.cache); the rest of the graph is read regardless.
  std::vector<Status> problems;

  std::vector<Pool> pools;
  std::vector<Volume> volumes;
  std::vector<Snapshot> snapshots;
  std::vector<Vg> vgs;
  std::vector<Pv> pvs;
  std::vector<Lv> lvs;
  std::vector<Loop> loops;
  std::vector<MountEntry> mounts;
  std::vector<Nbd> nbd;
  std::vector<Edge> edges;

  // Whether the PV scan of the uses ran (some LV is recorded active, or lvm/active is
  // unreadable): only then is a volume said to be a PV of its VG.
  bool pv_scan = false;
  // VGs with active LVs (every scanned VG when lvm/active is unreadable).
  std::vector<std::string> active_vgs;

  // The edges into / out of `node` of `kind`, in order.
  std::vector<NodeRef> From(const NodeRef& node, EdgeKind kind) const;
  std::vector<NodeRef> To(const NodeRef& node, EdgeKind kind) const;

  // Every use of device `name`, as phrases ("bound to /dev/loop3, mounted on /mnt"), empty
  // if free: loop devices bound to its devfs file and their mounts, processes holding the
  // file, live NBD listeners, loop bindings and NBD exports recorded for `up`, the pool it is
  // a vdev of, the VG with active LVs it is a PV of. Being registered (a file in devfs nobody
  // holds) is not a use.
  std::vector<std::string> UsesOf(const std::string& name) const;
  // EBUSY "<name> is <its uses>" for the first of `names` in use; Ok when none is.
  Status CheckNotInUse(const std::vector<std::string>& names) const;

  // The VG device `name` is a PV of ("" unless the PV scan ran).
  std::string VgOfPv(const std::string& name) const;
  std::vector<const Loop*> LoopsOf(const std::string& name) const;
  std::vector<const MountEntry*> MountsOf(const std::string& loop_device) const;
  std::vector<const Nbd*> NbdOf(const std::string& name) const;
  std::vector<const Volume*> VolumesOf(const std::string& pool) const;
  std::vector<const Snapshot*> SnapshotsOf(const std::string& volume) const;
  std::vector<const Pv*> PvsOf(const std::string& vg) const;
  std::vector<const Lv*> LvsOf(const std::string& vg) const;
};

enum class GraphDepth { kUses, kFull };

}  // namespace volstack::stack

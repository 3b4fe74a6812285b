// What this machine and this volstack build offer the bench, probed once: root, loop devices,
// dbench and its loadfile, mkfs.xfs, and which volstack verbs exist (a verb still reserved
// answers "not implemented yet"). Stack builders read it to say "unavailable: <reason>".
//
// Threads: immutable after Probe().
#pragma once

#include <set>
#include <string>

#include "util/status.h"

namespace volstack::bench {

inline constexpr const char* kDefaultLoadfile = "/usr/share/dbench/client.txt";

struct Environment {
  std::string volstack;  // the volstack binary the stacks are built with
  bool root = false;
  bool loop_devices = false;  // /dev/loop-control
  bool fuse = false;          // /dev/fuse
  bool dbench = false;
  bool mkfs_xfs = false;
  bool losetup = false;
  bool fio = false;
  std::string loadfile;         // dbench's loadfile, when it exists
  std::string dbench_version;   // "dbench version 4.00"
  std::set<std::string> verbs;  // implemented volstack verbs among those the stacks use

  // Probes everything. `volstack` is the binary to drive (normally /proc/self/exe).
  static Environment Probe(const std::string& volstack);

  // OK when dbench can run on kernel stacks here; otherwise the one-line reason.
  Status DbenchUsable() const;
  // OK when fio can run on kernel stacks here; otherwise the one-line reason.
  Status FioUsable() const;
  // OK when every verb is implemented; otherwise "volstack <verb> is not implemented yet".
  Status NeedVerbs(std::initializer_list<const char*> verbs) const;
  bool HasVerb(const std::string& verb) const { return verbs.count(verb) > 0; }
};

// The verbs the stacks use, probed by Environment::Probe.
inline constexpr const char* kProbedVerbs[] = {"zpool",    "zfs",   "pvcreate", "vgcreate",
                                               "lvcreate", "devfs", "losetup"};

}  // namespace volstack::bench

// What this machine offers the bench, probed once: root, loop devices, FUSE, dbench and its
// loadfile, mkfs.xfs, losetup, fio. Stack builders read it to say "unavailable: <reason>".
//
// Threads: immutable after Probe().
#pragma once

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
  std::string loadfile;        // dbench's loadfile, when it exists
  std::string dbench_version;  // "dbench version 4.00"

  // Probes everything. `volstack` is the binary to drive (normally /proc/self/exe).
  static Environment Probe(const std::string& volstack);

  // OK when dbench can run on kernel stacks here; otherwise the one-line reason.
  Status DbenchUsable() const;
  // OK when fio can run on kernel stacks here; otherwise the one-line reason.
  Status FioUsable() const;
};

}  // namespace volstack::bench

// The loop bindings volstack made, recorded in <state_dir>/loops.json so `volstack up` can
// restore them after a restart (the kernel keeps no record: loop setups do not survive a
// reboot).
//
//   {"loops": [{"device": "/dev/loop3", "name": "trunk/funk",
//               "file": "/run/volstack/dev/trunk/funk", "sector_size": 4096,
//               "direct_io": true, "read_only": false}]}
//
// The file is replaced atomically (write a temporary, fsync, rename, fsync the directory).
// Threads: no shared state; concurrent writers of one state dir race (last rename wins), so
// callers serialise (the CLI holds the state dir; the daemon owns it).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "util/result.h"

namespace volstack::exportfs {

struct LoopBinding {
  std::string device;  // /dev/loopN
  std::string name;    // the volstack device name
  std::string file;    // the devfs file it is bound to
  uint32_t sector_size = 512;
  bool direct_io = false;
  bool read_only = false;

  bool operator==(const LoopBinding&) const = default;
};

std::string LoopBindingsPath(const std::string& state_dir);
// An absent file is no bindings; a file that does not parse is Corruption.
Result<std::vector<LoopBinding>> LoadLoopBindings(const std::string& state_dir);
// Read-modify-write under the state dir's lock (util/state_file.h); an error from `modify`
// leaves the file as it was.
Status UpdateLoopBindings(const std::string& state_dir,
                          const std::function<Status(std::vector<LoopBinding>& loops)>& modify);

}  // namespace volstack::exportfs

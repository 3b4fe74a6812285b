// Teardown: the undo steps of a stack build, run in reverse order of registration.
//
// Each build step registers its undo right after it succeeds (a file created → remove it; a
// loop attached → detach it; a devfs started → stop it by PID; a mount → unmount it), so
// whatever point a build or run fails or is interrupted at, Run() undoes exactly what was
// done: umount, losetup -d, stop the FUSE server, remove files. Steps run even after a
// Ctrl-C (teardown is never cancelled) and even when an earlier undo failed; failures are
// collected and reported, not fatal.
//
// Threads: one thread.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "util/status.h"

namespace volstack::bench {

class Teardown {
 public:
  Teardown() = default;
  ~Teardown();  // runs what is left, ignoring errors (a safety net; call Run())
  Teardown(const Teardown&) = delete;
  Teardown& operator=(const Teardown&) = delete;

  // `what` names the step for messages ("umount /tmp/x/mnt").
  void Add(std::string what, std::function<Status()> undo);

  // Undoes every registered step, last first, and forgets them. Returns the first failure,
  // with the number of failed steps in its message; later steps still ran.
  Status Run();

  size_t size() const { return steps_.size(); }

 private:
  struct Step {
    std::string what;
    std::function<Status()> undo;
  };
  std::vector<Step> steps_;
};

}  // namespace volstack::bench

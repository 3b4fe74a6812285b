#include "bench/teardown.h"

#include <utility>

namespace volstack::bench {

Teardown::~Teardown() { Run().IgnoreError(); }

void Teardown::Add(std::string what, std::function<Status()> undo) {
  steps_.push_back(Step{std::move(what), std::move(undo)});
}

Status Teardown::Run() {
  Status first;
  int failures = 0;
  while (!steps_.empty()) {
    Step step = std::move(steps_.back());
    steps_.pop_back();
    Status s = step.undo();
    if (!s.ok()) {
      if (failures++ == 0) first = s.WithContext("teardown: " + step.what);
    }
  }
  if (failures > 1) {
    return first.WithContext(std::to_string(failures) + " teardown steps failed, first");
  }
  return first;
}

}  // namespace volstack::bench

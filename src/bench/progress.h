// Progress on a terminal: one status line on stderr, rewritten in place ("\r" + erase), saying
// which stack, which repeat and how long is left. Quiet when stderr is not a terminal, so
// logs and CI output hold only the results.
//
// Threads: one thread.
#pragma once

#include <chrono>
#include <string>

namespace volstack::bench {

class Progress {
 public:
  // Enabled when stderr is a terminal (or when `force`).
  explicit Progress(bool force = false);
  ~Progress();

  bool enabled() const { return enabled_; }
  // Replaces the status line; rate-limited to a few updates a second unless `now`.
  void Update(const std::string& line, bool now = false);
  // Erases the status line (before printing anything else on the terminal).
  void Clear();

 private:
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_;
};

// "1:05" / "12 s".
std::string FormatDuration(double seconds);

}  // namespace volstack::bench

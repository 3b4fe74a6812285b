#include "bench/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace volstack::bench {

Progress::Progress(bool force) : enabled_(force || isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() { Clear(); }

void Progress::Update(const std::string& line, bool now) {
  if (!enabled_) return;
  auto t = std::chrono::steady_clock::now();
  if (!now && shown_ && t - last_ < std::chrono::milliseconds(250)) return;
  last_ = t;
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void Progress::Clear() {
  if (!enabled_ || !shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

std::string FormatDuration(double seconds) {
  if (seconds < 0) seconds = 0;
  int s = static_cast<int>(std::lround(seconds));
  if (s < 60) return fmt::format("{} s", s);
  if (s < 3600) return fmt::format("{}:{:02}", s / 60, s % 60);
  return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
}

}  // namespace volstack::bench

#include "bench/stats.h"

#include <algorithm>
#include <cmath>

namespace volstack::bench {

std::optional<Summary> Summarize(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  Summary s;
  s.n = static_cast<int>(values.size());
  s.min = values.front();
  s.max = values.back();
  size_t mid = values.size() / 2;
  s.median = values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
  return s;
}

std::optional<double> Ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || !(*b > 0)) return std::nullopt;
  return *a / *b;
}

std::optional<double> Percentile(const std::vector<double>& sorted_values, double p) {
  if (sorted_values.empty()) return std::nullopt;
  double rank = std::ceil(p / 100.0 * static_cast<double>(sorted_values.size()));
  size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return sorted_values[std::min(index, sorted_values.size() - 1)];
}

}  // namespace volstack::bench

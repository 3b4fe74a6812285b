// Summaries of repeated measurements: the bench reports the median of its repeats (robust to
// one disturbed run on a shared machine) with the min and max beside it, and ratios between
// stacks computed from those medians.
#pragma once

#include <optional>
#include <vector>

namespace volstack::bench {

struct Summary {
  double median = 0;
  double min = 0;
  double max = 0;
  int n = 0;
};

// nullopt for no values. The median of an even count is the mean of the middle two.
std::optional<Summary> Summarize(std::vector<double> values);

// a / b; nullopt when either is missing or b is not positive (no meaningful ratio).
std::optional<double> Ratio(std::optional<double> a, std::optional<double> b);

// The p-th percentile (0..100) by nearest rank of sorted `values`; nullopt when empty.
std::optional<double> Percentile(const std::vector<double>& sorted_values, double p);

}  // namespace volstack::bench

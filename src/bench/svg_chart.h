// A small hand-written SVG bar chart: panels of horizontal bars, one row per stack, one bar
// per series, each bar with an optional min/max whisker and its value printed at its end.
// Self-contained text (no scripts, no external fonts), so it renders in a browser, on GitHub
// and in an image viewer alike.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace volstack::bench {

struct BarValue {
  double value = 0;
  std::optional<double> low;  // whisker from low to high
  std::optional<double> high;
};

struct BarRow {
  std::string label;
  std::string note;                             // shown instead of bars when values are all empty
  std::vector<std::optional<BarValue>> values;  // one per series; nullopt: no bar
};

struct BarPanel {
  std::string title;
  std::string unit;                 // printed after each value
  std::vector<std::string> series;  // legend; one entry means no legend
  std::vector<BarRow> rows;
};

std::string RenderBarChart(const std::string& title, const std::string& subtitle,
                           const std::vector<BarPanel>& panels);

// Escapes &, <, >, " for SVG text and attributes.
std::string XmlEscape(const std::string& text);

}  // namespace volstack::bench

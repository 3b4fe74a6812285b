#include "bench/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace volstack::bench {

namespace {

constexpr int kWidth = 900;
constexpr int kLabelWidth = 260;
constexpr int kPlotWidth = 500;
constexpr int kBarHeight = 16;
constexpr int kBarGap = 3;
constexpr int kRowGap = 10;
constexpr const char* kColors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                   "#76b7b2", "#edc948", "#b07aa1", "#9c755f"};

std::string Value(double v) {
  if (v >= 100) return fmt::format("{:.0f}", v);
  if (v >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

// At most `n` characters (UTF-8 aware enough for our ASCII messages), with an ellipsis.
std::string Shorten(const std::string& s, size_t n) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

// A "nice" axis maximum at or above v: 1, 2 or 5 times a power of ten.
double NiceMax(double v) {
  if (!(v > 0)) return 1;
  double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

}  // namespace

std::string XmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string RenderBarChart(const std::string& title, const std::string& subtitle,
                           const std::vector<BarPanel>& panels) {
  std::string body;
  int y = 76;
  for (const auto& panel : panels) {
    const int nseries = std::max<int>(1, static_cast<int>(panel.series.size()));
    double max = 0;
    for (const auto& row : panel.rows) {
      for (const auto& v : row.values) {
        if (v) max = std::max({max, v->value, v->high.value_or(0)});
      }
    }
    max = NiceMax(max);
    body += fmt::format("<text x=\"12\" y=\"{}\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
                        y + 4, XmlEscape(panel.title));
    if (panel.series.size() > 1) {
      int lx = kLabelWidth;
      for (size_t i = 0; i < panel.series.size(); ++i) {
        body += fmt::format(
            "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
            "<text x=\"{}\" y=\"{}\" font-size=\"12\">{}</text>\n",
            lx, y + 14, kColors[i % 8], lx + 16, y + 24, XmlEscape(panel.series[i]));
        lx += 30 + 7 * static_cast<int>(panel.series[i].size());
      }
      y += 20;
    }
    y += 18;
    const int top = y;
    for (const auto& row : panel.rows) {
      const int row_height = nseries * (kBarHeight + kBarGap);
      body +=
          fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"13\" text-anchor=\"end\">{}</text>\n",
                      kLabelWidth - 8, y + row_height / 2 + 4, XmlEscape(row.label));
      bool any = false;
      for (size_t i = 0; i < row.values.size(); ++i) {
        const auto& v = row.values[i];
        if (!v) continue;
        any = true;
        int by = y + static_cast<int>(i) * (kBarHeight + kBarGap);
        double w = v->value / max * kPlotWidth;
        body +=
            fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n",
                        kLabelWidth, by, w, kBarHeight, kColors[i % 8]);
        double text_at = w;
        if (v->low && v->high) {
          double x1 = kLabelWidth + *v->low / max * kPlotWidth;
          double x2 = kLabelWidth + *v->high / max * kPlotWidth;
          int cy = by + kBarHeight / 2;
          body += fmt::format(
              "<path d=\"M{:.1f} {}H{:.1f}M{:.1f} {}V{}M{:.1f} {}V{}\" stroke=\"#222\" "
              "stroke-width=\"1.5\" fill=\"none\"/>\n",
              x1, cy, x2, x1, cy - 5, cy + 5, x2, cy - 5, cy + 5);
          text_at = std::max(text_at, x2 - kLabelWidth);
        }
        body += fmt::format("<text x=\"{:.1f}\" y=\"{}\" font-size=\"12\">{} {}</text>\n",
                            kLabelWidth + text_at + 6, by + kBarHeight - 3, Value(v->value),
                            XmlEscape(panel.unit));
      }
      if (!any) {
        body += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#888\">{}</text>\n",
                            kLabelWidth + 4, y + 13, XmlEscape(Shorten(row.note, 90)));
      }
      y += row_height + kRowGap;
    }
    // The axis: a baseline with ticks at 0, max/2 and max.
    body += fmt::format("<path d=\"M{} {}V{}\" stroke=\"#444\" stroke-width=\"1\"/>\n", kLabelWidth,
                        top - 4, y);
    for (int t = 0; t <= 4; ++t) {
      double x = kLabelWidth + kPlotWidth * t / 4.0;
      body += fmt::format(
          "<path d=\"M{:.1f} {}V{}\" stroke=\"#ccc\" stroke-width=\"1\"/>"
          "<text x=\"{:.1f}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\" "
          "fill=\"#555\">{}</text>\n",
          x, y - 2, y + 3, x, y + 15, Value(max * t / 4.0));
    }
    y += 40;
  }
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"12\" y=\"24\" font-size=\"18\" font-weight=\"bold\">{}</text>\n"
      "<text x=\"12\" y=\"42\" font-size=\"12\" fill=\"#555\">{}</text>\n",
      kWidth, y, kWidth, y, XmlEscape(title), XmlEscape(subtitle));
  svg += body;
  svg += "</svg>\n";
  return svg;
}

}  // namespace volstack::bench

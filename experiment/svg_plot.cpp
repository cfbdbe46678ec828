// SVG line chart (see svg_plot.hpp).
#include "experiment/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/units.hpp"

namespace tierpack::experiment {
namespace {

// "Nice" tick step for a range (1, 2 or 5 x 10^k), about 5 ticks.
double tick_step(double range) {
  if (range <= 0) return 1;
  const double raw = range / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

std::string num(double v) {
  char b[32];
  if (std::fabs(v) >= 100 || v == std::floor(v)) std::snprintf(b, sizeof b, "%.0f", v);
  else if (std::fabs(v) >= 1) std::snprintf(b, sizeof b, "%.2g", v);
  else std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

}  // namespace

std::string render_svg(const SvgChart& c) {
  // Colour-blind-safe palette (Okabe-Ito), cycled.
  static const char* colours[] = {"#000000", "#E69F00", "#56B4E9", "#009E73", "#CC79A7", "#0072B2", "#D55E00", "#999999", "#F0E442"};
  const double W = 760, H = 420, L = 70, R = 200, T = 40, B = 50;
  double x0 = 1e300, x1 = -1e300, y1 = c.y_min;
  for (const auto& s : c.series)
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y1 = std::max(y1, y);
    }
  if (x0 > x1) x0 = 0, x1 = 1;
  if (x0 == x1) x0 -= 0.5, x1 += 0.5;
  const double ys = tick_step(y1 - c.y_min);
  y1 = c.y_min + std::ceil((y1 - c.y_min) / ys) * ys;
  if (y1 <= c.y_min) y1 = c.y_min + 1;
  const double pw = W - L - R, ph = H - T - B;
  auto px = [&](double x) { double f = (x - x0) / (x1 - x0); if (c.x_reversed) f = 1 - f; return L + f * pw; };
  auto py = [&](double y) { return T + ph - (y - c.y_min) / (y1 - c.y_min) * ph; };

  std::string o;
  char b[512];
  std::snprintf(b, sizeof b,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                W, H, W, H);
  o += b;
  std::snprintf(b, sizeof b, "<text x=\"%.0f\" y=\"22\" font-size=\"15\" font-weight=\"bold\">%s</text>\n", L, html_escape(c.title).c_str());
  o += b;
  // Axes, grid and ticks.
  for (double y = c.y_min; y <= y1 + ys / 1000; y += ys) {
    std::snprintf(b, sizeof b,
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%.1f\" "
                  "text-anchor=\"end\">%s</text>\n",
                  L, py(y), L + pw, py(y), L - 6, py(y) + 4, num(y).c_str());
    o += b;
  }
  std::vector<double> xs;
  for (const auto& s : c.series)
    for (auto [x, y] : s.points) xs.push_back(x);
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  for (double x : xs) {
    std::snprintf(b, sizeof b,
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/><text x=\"%.1f\" y=\"%.1f\" "
                  "text-anchor=\"middle\">%s</text>\n",
                  px(x), T, px(x), T + ph, px(x), T + ph + 16, num(x).c_str());
    o += b;
  }
  std::snprintf(b, sizeof b,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n"
                "<text transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\">%s</text>\n",
                L, T, pw, ph, L + pw / 2, H - 12, html_escape(c.x_label).c_str(), T + ph / 2, html_escape(c.y_label).c_str());
  o += b;
  // Lines and the legend.
  for (std::size_t i = 0; i < c.series.size(); ++i) {
    const auto& s = c.series[i];
    const char* colour = colours[i % (sizeof colours / sizeof *colours)];
    auto pts = s.points;
    std::sort(pts.begin(), pts.end());
    std::string path;
    for (auto [x, y] : pts) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      std::snprintf(b, sizeof b, "%.1f,%.1f ", px(x), py(y));
      path += b;
    }
    if (!path.empty()) {
      std::snprintf(b, sizeof b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", colour,
                    s.dashed ? " stroke-dasharray=\"6 4\"" : "");
      o += b;
      o += path + "\"/>\n";
      for (auto [x, y] : pts) {
        if (!std::isfinite(x) || !std::isfinite(y)) continue;
        std::snprintf(b, sizeof b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%s: %s</title></circle>\n", px(x), py(y),
                      colour, html_escape(s.name).c_str(), num(y).c_str());
        o += b;
      }
    }
    const double ly = T + 10 + 18 * static_cast<double>(i);
    std::snprintf(b, sizeof b,
                  "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>"
                  "<text x=\"%.1f\" y=\"%.1f\">%s%s</text>\n",
                  L + pw + 12, ly, L + pw + 36, ly, colour, s.dashed ? " stroke-dasharray=\"6 4\"" : "", L + pw + 42, ly + 4,
                  html_escape(s.name).c_str(), path.empty() ? " (n/a)" : "");
    o += b;
  }
  o += "</svg>\n";
  return o;
}

}  // namespace tierpack::experiment

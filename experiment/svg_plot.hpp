// A small SVG line chart, written by our own code (no plotting library, no network): one line per
// series over a shared numeric x axis, axis ticks, a legend. Used for the experiment's plots.
#pragma once

#include <string>
#include <vector>

namespace tierpack::experiment {

struct SvgSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  ///< (x, y); drawn in x order
  bool dashed = false;
};

struct SvgChart {
  std::string title;
  std::string x_label, y_label;
  std::vector<SvgSeries> series;
  bool x_reversed = true;  ///< budgets: 100% on the left, shrinking to the right
  double y_min = 0;        ///< the axis starts here (0 unless set)
};

/// The chart as a complete SVG document. Series without points are listed in the legend only.
std::string render_svg(const SvgChart& chart);

}  // namespace tierpack::experiment

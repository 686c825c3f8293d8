// A small hand-written SVG line chart: axes with ticks, optional log-scale
// x, one polyline (with point markers) per series, labelled horizontal
// reference lines and a legend to the right of the plot. Enough for a
// benchmark's "throughput against size" picture, with no dependency.
#ifndef FOLIO_BENCH_SVG_PLOT_H_
#define FOLIO_BENCH_SVG_PLOT_H_

#include <string>
#include <utility>
#include <vector>

namespace folio::bench {

struct PlotSeries {
  std::string label;
  std::string color = "#1f77b4";                  // any SVG colour
  std::string dash;                               // SVG stroke-dasharray, "" = solid
  double width = 2.0;                             // stroke width in px
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in x order
};

struct PlotHLine {
  double y = 0.0;
  std::string label;
  std::string color = "#d62728";
  std::string dash = "8 4";
};

struct LinePlot {
  std::string title;
  std::string subtitle;  // a smaller second line, "" = none
  std::string x_label;
  std::string y_label;
  bool log_x = false;  // ticks at powers of two (the x values must be > 0)
  double width = 1100.0, height = 620.0;
  std::vector<PlotSeries> series;
  std::vector<PlotHLine> hlines;
};

// The complete SVG document. The y range is [0, max y of every point and
// line] padded by 8%; the x range spans the points.
std::string RenderSvg(const LinePlot& plot);

// Round "nice" tick values (1, 2, 5 times a power of ten) from 0 up to the
// first one >= max, about target_count steps.
std::vector<double> NiceTicks(double max, int target_count);

// Escapes &, <, >, " for SVG text and attributes.
std::string XmlEscape(const std::string& text);

}  // namespace folio::bench

#endif  // FOLIO_BENCH_SVG_PLOT_H_

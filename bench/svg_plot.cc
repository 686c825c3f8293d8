#include "bench/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace folio::bench {
namespace {

// Margins around the plot area, in px; the right one holds the legend.
constexpr double kLeft = 80.0, kTop = 66.0, kBottom = 60.0, kRight = 330.0;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string TickLabel(double v) {
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%g", v);
  }
  return buf;
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

std::vector<double> NiceTicks(double max, int target_count) {
  if (!(max > 0.0) || !std::isfinite(max) || target_count < 1) return {0.0};
  const double raw = max / target_count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10.0 * magnitude;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  }
  // Up to the first multiple of step at or above max, so the ticks cover it.
  const auto steps = static_cast<int>(std::ceil(max / step * (1.0 - 1e-12)));
  std::vector<double> ticks;
  for (int i = 0; i <= steps; ++i) ticks.push_back(i * step);
  return ticks;
}

std::string RenderSvg(const LinePlot& plot) {
  double x_min = std::numeric_limits<double>::infinity();
  double x_max = -x_min;
  double y_max = 0.0;
  for (const PlotSeries& s : plot.series) {
    for (const auto& [x, y] : s.points) {
      if (plot.log_x && !(x > 0.0)) continue;
      x_min = std::min(x_min, x);
      x_max = std::max(x_max, x);
      y_max = std::max(y_max, y);
    }
  }
  for (const PlotHLine& h : plot.hlines) y_max = std::max(y_max, h.y);
  if (!std::isfinite(x_min)) x_min = x_max = 1.0;
  const std::vector<double> y_ticks = NiceTicks(y_max * 1.08, 8);
  const double y_top = std::max(y_ticks.back(), 1e-12);

  const double pw = plot.width - kLeft - kRight, ph = plot.height - kTop - kBottom;
  auto tx = [&](double x) { return plot.log_x ? std::log2(x) : x; };
  const double lo = tx(x_min), hi = tx(x_max) > tx(x_min) ? tx(x_max) : tx(x_min) + 1.0;
  // Half a step of padding so the first and last points sit inside the axes.
  const double pad = (hi - lo) * 0.04;
  auto px = [&](double x) { return kLeft + (tx(x) - lo + pad) / (hi - lo + 2 * pad) * pw; };
  auto py = [&](double y) { return kTop + ph - y / y_top * ph; };

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Num(plot.width) << "\" height=\""
    << Num(plot.height) << "\" viewBox=\"0 0 " << Num(plot.width) << " " << Num(plot.height)
    << "\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"13\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"20\" y=\"26\" font-size=\"16\" font-weight=\"bold\">" << XmlEscape(plot.title)
    << "</text>\n";
  if (!plot.subtitle.empty()) {
    o << "<text x=\"20\" y=\"48\" fill=\"#444\">" << XmlEscape(plot.subtitle) << "</text>\n";
  }

  // Grid and y ticks.
  for (double t : y_ticks) {
    o << "<line x1=\"" << Num(kLeft) << "\" y1=\"" << Num(py(t)) << "\" x2=\"" << Num(kLeft + pw)
      << "\" y2=\"" << Num(py(t)) << "\" stroke=\"#e0e0e0\"/>\n"
      << "<text x=\"" << Num(kLeft - 8) << "\" y=\"" << Num(py(t) + 4) << "\" text-anchor=\"end\">"
      << TickLabel(t) << "</text>\n";
  }
  // x ticks: powers of two on a log axis, else nice ticks over [0, x_max].
  std::vector<double> x_ticks;
  if (plot.log_x) {
    for (double e = std::ceil(lo - 1e-9); e <= hi + 1e-9; e += 1.0) x_ticks.push_back(std::exp2(e));
    if (x_ticks.size() > 12) {  // keep every other one on wide ranges
      std::vector<double> thinned;
      for (size_t i = 0; i < x_ticks.size(); i += 2) thinned.push_back(x_ticks[i]);
      x_ticks = thinned;
    }
  } else {
    x_ticks = NiceTicks(x_max, 8);
  }
  for (double t : x_ticks) {
    o << "<line x1=\"" << Num(px(t)) << "\" y1=\"" << Num(kTop) << "\" x2=\"" << Num(px(t))
      << "\" y2=\"" << Num(kTop + ph) << "\" stroke=\"#f0f0f0\"/>\n"
      << "<text x=\"" << Num(px(t)) << "\" y=\"" << Num(kTop + ph + 20)
      << "\" text-anchor=\"middle\">" << TickLabel(t) << "</text>\n";
  }
  // Axes and their labels.
  o << "<rect x=\"" << Num(kLeft) << "\" y=\"" << Num(kTop) << "\" width=\"" << Num(pw)
    << "\" height=\"" << Num(ph) << "\" fill=\"none\" stroke=\"#333\"/>\n"
    << "<text x=\"" << Num(kLeft + pw / 2) << "\" y=\"" << Num(plot.height - 15)
    << "\" text-anchor=\"middle\">" << XmlEscape(plot.x_label) << "</text>\n"
    << "<text x=\"20\" y=\"" << Num(kTop + ph / 2) << "\" text-anchor=\"middle\" "
    << "transform=\"rotate(-90 20 " << Num(kTop + ph / 2) << ")\">" << XmlEscape(plot.y_label)
    << "</text>\n";

  for (const PlotHLine& h : plot.hlines) {
    o << "<line x1=\"" << Num(kLeft) << "\" y1=\"" << Num(py(h.y)) << "\" x2=\"" << Num(kLeft + pw)
      << "\" y2=\"" << Num(py(h.y)) << "\" stroke=\"" << h.color
      << "\" stroke-width=\"2\" stroke-dasharray=\"" << h.dash << "\"/>\n"
      << "<text x=\"" << Num(kLeft + 6) << "\" y=\"" << Num(py(h.y) - 6) << "\" fill=\"" << h.color
      << "\">" << XmlEscape(h.label) << "</text>\n";
  }

  for (const PlotSeries& s : plot.series) {
    std::vector<std::pair<double, double>> pts;
    for (const auto& p : s.points) {
      if (!plot.log_x || p.first > 0.0) pts.push_back(p);
    }
    std::sort(pts.begin(), pts.end());
    o << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"" << Num(s.width)
      << "\"";
    if (!s.dash.empty()) o << " stroke-dasharray=\"" << s.dash << "\"";
    o << " points=\"";
    for (const auto& [x, y] : pts) o << Num(px(x)) << "," << Num(py(y)) << " ";
    o << "\"/>\n";
    for (const auto& [x, y] : pts) {
      o << "<circle cx=\"" << Num(px(x)) << "\" cy=\"" << Num(py(y)) << "\" r=\""
        << Num(s.width + 1.5) << "\" fill=\"" << s.color << "\"/>\n";
    }
  }

  // Legend: one row per series, then the reference lines.
  const double lx = kLeft + pw + 20;
  double ly = kTop + 10;
  auto legend_row = [&](const std::string& label, const std::string& color, const std::string& dash,
                        double width) {
    o << "<line x1=\"" << Num(lx) << "\" y1=\"" << Num(ly) << "\" x2=\"" << Num(lx + 36)
      << "\" y2=\"" << Num(ly) << "\" stroke=\"" << color << "\" stroke-width=\"" << Num(width)
      << "\"";
    if (!dash.empty()) o << " stroke-dasharray=\"" << dash << "\"";
    o << "/>\n<text x=\"" << Num(lx + 44) << "\" y=\"" << Num(ly + 4) << "\">" << XmlEscape(label)
      << "</text>\n";
    ly += 22;
  };
  for (const PlotSeries& s : plot.series) legend_row(s.label, s.color, s.dash, s.width);
  for (const PlotHLine& h : plot.hlines) legend_row(h.label, h.color, h.dash, 2.0);
  o << "</svg>\n";
  return o.str();
}

}  // namespace folio::bench

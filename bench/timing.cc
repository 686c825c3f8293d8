#include "bench/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace folio::bench {
namespace {

double MicrosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

double NowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(values.size() - 1);
  const auto below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(below);
  return values[below] + (values[above] - values[below]) * frac;
}

void Summarize(Timing& t) {
  t.repeats = t.samples_us.size();
  t.median_us = Quantile(t.samples_us, 0.5);
  t.p10_us = Quantile(t.samples_us, 0.1);
  t.p90_us = Quantile(t.samples_us, 0.9);
  t.min_us =
      t.samples_us.empty() ? 0.0 : *std::min_element(t.samples_us.begin(), t.samples_us.end());
}

Timing TimeCalls(const std::function<void()>& fn, const TimingOptions& options) {
  return TimeInterleaved({fn}, options)[0];
}

std::vector<Timing> TimeInterleaved(const std::vector<std::function<void()>>& fns,
                                    const TimingOptions& options) {
  const size_t n = fns.size();
  std::vector<Timing> t(n);
  double round_us = 0.0;
  for (size_t i = 0; i < n; ++i) {
    fns[i]();  // warm-up
    const auto start = std::chrono::steady_clock::now();
    fns[i]();
    const double one_call_us = std::max(MicrosSince(start), 0.001);
    t[i].calls_per_sample =
        std::clamp<uint64_t>(static_cast<uint64_t>(std::ceil(options.min_sample_us / one_call_us)),
                             1, options.max_calls_per_sample);
    round_us += one_call_us * static_cast<double>(t[i].calls_per_sample);
  }
  const auto affordable = static_cast<uint64_t>(options.budget_us / std::max(round_us, 1e-3));
  const uint64_t repeats = std::max(options.min_repeats, std::min(options.repeats, affordable));

  for (uint64_t r = 0; r < repeats; ++r) {
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (r + k) % n;
      const auto start = std::chrono::steady_clock::now();
      for (uint64_t c = 0; c < t[i].calls_per_sample; ++c) fns[i]();
      t[i].samples_us.push_back(MicrosSince(start) / static_cast<double>(t[i].calls_per_sample));
    }
  }
  for (Timing& ti : t) Summarize(ti);
  return t;
}

}  // namespace folio::bench

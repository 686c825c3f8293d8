// Wall-clock timing of a repeated call: warm-up, calibration of how many
// calls one sample holds, then the samples, summarised by percentiles.
#ifndef FOLIO_BENCH_TIMING_H_
#define FOLIO_BENCH_TIMING_H_

#include <cstdint>
#include <functional>
#include <vector>

namespace folio::bench {

struct TimingOptions {
  uint64_t repeats = 15;          // samples wanted
  uint64_t min_repeats = 5;       // never fewer, whatever the budget
  double min_sample_us = 1000.0;  // a shorter call is repeated within a sample
  double budget_us = 8e6;         // samples beyond this total are dropped
  uint64_t max_calls_per_sample = 100000;
};

struct Timing {
  double median_us = 0.0;  // per call
  double p10_us = 0.0;
  double p90_us = 0.0;
  double min_us = 0.0;
  uint64_t repeats = 0;            // samples taken
  uint64_t calls_per_sample = 0;   // each sample's time is divided by this
  std::vector<double> samples_us;  // per call, in the order taken
};

// Microseconds on the steady clock (an arbitrary origin), for spans.
double NowUs();

// The q-quantile (q in [0, 1]) of `values`, interpolating linearly between
// closest ranks (numpy's default); 0 for an empty input.
double Quantile(std::vector<double> values, double q);

// Sets t's median, p10, p90, min and repeats from t.samples_us.
void Summarize(Timing& t);

// Calls fn once untimed (warm-up: first touch, caches, thread wake-up), once
// more timed to choose calls_per_sample so that a sample lasts at least
// min_sample_us, then takes the samples with std::chrono::steady_clock.
Timing TimeCalls(const std::function<void()>& fn, const TimingOptions& options);

// Times several functions that are to be compared, in rounds: round r takes
// one sample of each, starting at function r % n, so that a slow spell of a
// shared machine lands on all of them alike rather than on whichever ran
// then. Each function is warmed up and calibrated as in TimeCalls; the
// budget covers a whole round. Result i belongs to fns[i].
std::vector<Timing> TimeInterleaved(const std::vector<std::function<void()>>& fns,
                                    const TimingOptions& options);

}  // namespace folio::bench

#endif  // FOLIO_BENCH_TIMING_H_

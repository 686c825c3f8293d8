// Server metrics in the Prometheus text exposition format (version 0.0.4).
//
// The engine thread records latencies and finishes; the HTTP threads count
// refusals; /metrics renders everything plus a snapshot of the engine's
// gauges. Thread-safe.
#ifndef FOLIO_SERVER_METRICS_H_
#define FOLIO_SERVER_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "folio/serving/engine_thread.h"

namespace folio::server {

// A cumulative histogram with fixed upper bounds (le), as Prometheus has.
// Not thread-safe on its own.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  uint64_t count() const { return count_; }
  // "# HELP", "# TYPE" and the _bucket / _sum / _count lines.
  void Render(std::string_view name, std::string_view help, std::string& out) const;

 private:
  std::vector<double> bounds_;    // increasing upper bounds, +Inf implied
  std::vector<uint64_t> counts_;  // [bounds_.size() + 1], per bucket (not cumulative)
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

// The engine thread reports into it (serving::EngineObserver).
class Metrics : public serving::EngineObserver {
 public:
  Metrics();
  void ObserveTimeToFirstToken(double seconds);
  void ObserveInterTokenLatency(double seconds);
  void ObserveRequestLatency(double seconds);
  void CountTokens(uint64_t prompt, uint64_t generated);
  // finish reason: stop, length, abort, error.
  void CountFinished(std::string_view reason);
  // An HTTP answer by status code (every endpoint but /metrics and /health).
  void CountResponse(int http_status);
  // serving::EngineObserver: prompt and generated tokens, time to first
  // token, inter-token latency, finishes and request latency.
  void RequestAccepted(uint64_t prompt_tokens) override;
  void TokensGenerated(uint64_t count, double since, bool first) override;
  void RequestFinished(std::string_view reason, double latency) override;

  // Everything, with the engine's gauges and counters from `engine`.
  std::string Render(const serving::EngineCounters& engine) const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_, itl_, e2e_;
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  std::map<std::string, uint64_t, std::less<>> finished_;
  std::map<int, uint64_t> responses_;
};

}  // namespace folio::server

#endif  // FOLIO_SERVER_METRICS_H_

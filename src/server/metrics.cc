#include "folio/server/metrics.h"

#include <cstdio>

#include "folio/core/check.h"

namespace folio::server {
namespace {

std::string Num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

void Gauge(std::string& out, std::string_view name, std::string_view type, std::string_view help,
           double value) {
  out += "# HELP " + std::string(name) + " " + std::string(help) + "\n";
  out += "# TYPE " + std::string(name) + " " + std::string(type) + "\n";
  out += std::string(name) + " " + Num(value) + "\n";
}

// Latency buckets from 100 us to 60 s: a tiny built-in model answers in
// microseconds, a real one on the CPU in seconds.
std::vector<double> LatencyBounds() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  for (size_t i = 1; i < bounds_.size(); ++i) FOLIO_CHECK(bounds_[i - 1] < bounds_[i]);
}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(std::string_view name, std::string_view help, std::string& out) const {
  const std::string n(name);
  out += "# HELP " + n + " " + std::string(help) + "\n";
  out += "# TYPE " + n + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += n + "_bucket{le=\"" + Num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += n + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += n + "_sum " + Num(sum_) + "\n";
  out += n + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics() : ttft_(LatencyBounds()), itl_(LatencyBounds()), e2e_(LatencyBounds()) {}

void Metrics::ObserveTimeToFirstToken(double seconds) {
  std::lock_guard lock(mu_);
  ttft_.Observe(seconds);
}
void Metrics::ObserveInterTokenLatency(double seconds) {
  std::lock_guard lock(mu_);
  itl_.Observe(seconds);
}
void Metrics::ObserveRequestLatency(double seconds) {
  std::lock_guard lock(mu_);
  e2e_.Observe(seconds);
}
void Metrics::CountTokens(uint64_t prompt, uint64_t generated) {
  std::lock_guard lock(mu_);
  prompt_tokens_ += prompt;
  generation_tokens_ += generated;
}
void Metrics::CountFinished(std::string_view reason) {
  std::lock_guard lock(mu_);
  auto it = finished_.find(reason);
  if (it == finished_.end()) it = finished_.emplace(std::string(reason), 0).first;
  ++it->second;
}
void Metrics::CountResponse(int http_status) {
  std::lock_guard lock(mu_);
  ++responses_[http_status];
}

void Metrics::RequestAccepted(uint64_t prompt_tokens) { CountTokens(prompt_tokens, 0); }

void Metrics::TokensGenerated(uint64_t count, double since, bool first) {
  if (first) {
    ObserveTimeToFirstToken(since);
  } else {
    ObserveInterTokenLatency(since);
  }
  CountTokens(0, count);
}

void Metrics::RequestFinished(std::string_view reason, double latency) {
  CountFinished(reason);
  ObserveRequestLatency(latency);
}

std::string Metrics::Render(const serving::EngineCounters& e) const {
  std::string out;
  const auto d = [](uint64_t x) { return static_cast<double>(x); };
  Gauge(out, "folio_requests_running", "gauge", "Requests the engine is running.", d(e.running));
  Gauge(out, "folio_requests_waiting", "gauge",
        "Requests accepted and not yet running (handover queue + engine queue).",
        d(e.waiting + e.queued));
  Gauge(out, "folio_kv_pages_total", "gauge", "Pages in the KV pool.", d(e.pages_total));
  Gauge(out, "folio_kv_pages_used", "gauge", "Pages referenced by requests or the prefix cache.",
        d(e.pages_used));
  Gauge(out, "folio_kv_pages_free", "gauge", "Pages on the free list.", d(e.pages_free));
  Gauge(out, "folio_kv_page_bytes", "gauge",
        "Bytes of one page: K and V of one layer group's layers (every layer without sliding "
        "windows), scales included.",
        d(e.page_bytes));
  Gauge(out, "folio_kv_pages_cached", "gauge",
        "Pages held only by the prefix cache (reusable, evictable).", d(e.pages_cached));
  Gauge(out, "folio_kv_pages_held_by_requests", "gauge",
        "Pages some request references (used - cached); 0 when idle.",
        d(e.pages_used - e.pages_cached));
  Gauge(out, "folio_prefix_cache_query_tokens_total", "counter",
        "Prompt tokens looked up in the prefix cache.", d(e.stats.prefix_query_tokens));
  Gauge(out, "folio_prefix_cache_hit_tokens_total", "counter",
        "Prompt tokens served from the prefix cache.", d(e.stats.prefix_hit_tokens));
  Gauge(out, "folio_prefix_cache_hit_rate", "gauge",
        "prefix_cache_hit_tokens / prefix_cache_query_tokens since start.",
        e.stats.prefix_hit_rate());
  Gauge(out, "folio_preemptions_total", "counter", "Sequences preempted for lack of pages.",
        d(e.stats.preemptions));
  Gauge(out, "folio_engine_steps_total", "counter", "Engine steps run.", d(e.stats.steps));
  Gauge(out, "folio_spec_verifications_total", "counter",
        "Speculative drafts verified (one per request and step with a draft).",
        d(e.stats.draft_verifications));
  Gauge(out, "folio_spec_draft_tokens_total", "counter", "Draft tokens proposed and verified.",
        d(e.stats.draft_tokens));
  Gauge(out, "folio_spec_accepted_tokens_total", "counter", "Draft tokens accepted.",
        d(e.stats.draft_accepted_tokens));
  out += "# HELP folio_spec_acceptance_rate Accepted / drafted at each draft position.\n";
  out += "# TYPE folio_spec_acceptance_rate gauge\n";
  for (size_t i = 0; i < e.stats.drafted_at.size() && e.stats.drafted_at[i] != 0; ++i) {
    out += "folio_spec_acceptance_rate{position=\"" + std::to_string(i) + "\"} " +
           std::to_string(d(e.stats.accepted_at[i]) / d(e.stats.drafted_at[i])) + "\n";
  }
  std::lock_guard lock(mu_);
  Gauge(out, "folio_prompt_tokens_total", "counter",
        "Prompt tokens of requests the engine accepted.", d(prompt_tokens_));
  Gauge(out, "folio_generation_tokens_total", "counter", "Tokens generated.",
        d(generation_tokens_));
  out += "# HELP folio_requests_finished_total Requests finished, by reason.\n";
  out += "# TYPE folio_requests_finished_total counter\n";
  for (const char* reason : {"stop", "length", "abort", "error"}) {
    auto it = finished_.find(reason);
    out += std::string("folio_requests_finished_total{reason=\"") + reason + "\"} " +
           std::to_string(it == finished_.end() ? 0 : it->second) + "\n";
  }
  out += "# HELP folio_http_responses_total API responses, by HTTP status.\n";
  out += "# TYPE folio_http_responses_total counter\n";
  for (const auto& [status, count] : responses_) {
    out += "folio_http_responses_total{status=\"" + std::to_string(status) + "\"} " +
           std::to_string(count) + "\n";
  }
  ttft_.Render("folio_time_to_first_token_seconds", "From arrival to the first generated token.",
               out);
  itl_.Render("folio_inter_token_latency_seconds", "Between consecutive tokens of a request.", out);
  e2e_.Render("folio_request_latency_seconds", "From arrival to the last token.", out);
  return out;
}

}  // namespace folio::server

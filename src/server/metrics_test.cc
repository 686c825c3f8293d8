#include "folio/server/metrics.h"

#include <gtest/gtest.h>

namespace folio::server {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(Histogram, BucketsAreCumulativeWithInf) {
  Histogram h({0.1, 1.0});
  h.Observe(0.05);
  h.Observe(0.1);  // le is inclusive
  h.Observe(0.5);
  h.Observe(7.0);
  std::string out;
  h.Render("x_seconds", "help", out);
  EXPECT_TRUE(Has(out, "# TYPE x_seconds histogram")) << out;
  EXPECT_TRUE(Has(out, "x_seconds_bucket{le=\"0.1\"} 2")) << out;
  EXPECT_TRUE(Has(out, "x_seconds_bucket{le=\"1\"} 3")) << out;
  EXPECT_TRUE(Has(out, "x_seconds_bucket{le=\"+Inf\"} 4")) << out;
  EXPECT_TRUE(Has(out, "x_seconds_sum 7.65")) << out;
  EXPECT_TRUE(Has(out, "x_seconds_count 4")) << out;
}

TEST(Metrics, RendersGaugesCountersAndHistograms) {
  Metrics m;
  m.CountTokens(10, 3);
  m.CountFinished("stop");
  m.CountResponse(429);
  m.ObserveTimeToFirstToken(0.002);
  serving::EngineCounters s;
  s.running = 2;
  s.waiting = 1;
  s.queued = 3;
  s.pages_total = 16;
  s.pages_used = 5;
  s.pages_free = 11;
  s.pages_cached = 4;
  s.page_bytes = 4096;
  s.stats.prefix_query_tokens = 8;
  s.stats.prefix_hit_tokens = 2;
  s.stats.preemptions = 1;
  const std::string out = m.Render(s);
  EXPECT_TRUE(Has(out, "folio_requests_running 2"));
  EXPECT_TRUE(Has(out, "folio_requests_waiting 4"));
  EXPECT_TRUE(Has(out, "folio_kv_pages_used 5"));
  EXPECT_TRUE(Has(out, "folio_kv_pages_free 11"));
  EXPECT_TRUE(Has(out, "folio_kv_pages_cached 4"));
  EXPECT_TRUE(Has(out, "folio_kv_page_bytes 4096"));
  EXPECT_TRUE(Has(out, "folio_kv_pages_held_by_requests 1"));
  EXPECT_TRUE(Has(out, "folio_prefix_cache_hit_rate 0.25"));
  EXPECT_TRUE(Has(out, "folio_preemptions_total 1"));
  EXPECT_TRUE(Has(out, "folio_prompt_tokens_total 10"));
  EXPECT_TRUE(Has(out, "folio_generation_tokens_total 3"));
  EXPECT_TRUE(Has(out, "folio_requests_finished_total{reason=\"stop\"} 1"));
  EXPECT_TRUE(Has(out, "folio_requests_finished_total{reason=\"abort\"} 0"));
  EXPECT_TRUE(Has(out, "folio_http_responses_total{status=\"429\"} 1"));
  EXPECT_TRUE(Has(out, "folio_time_to_first_token_seconds_count 1"));
  EXPECT_TRUE(Has(out, "folio_inter_token_latency_seconds_count 0"));
}

TEST(Metrics, EngineThreadReportsLandInTheirSeries) {
  Metrics m;
  serving::EngineObserver& o = m;
  o.RequestAccepted(7);
  o.TokensGenerated(1, 0.01, /*first=*/true);
  o.TokensGenerated(2, 0.002, /*first=*/false);
  o.RequestFinished("length", 0.03);
  const std::string out = m.Render({});
  EXPECT_TRUE(Has(out, "folio_prompt_tokens_total 7"));
  EXPECT_TRUE(Has(out, "folio_generation_tokens_total 3"));
  EXPECT_TRUE(Has(out, "folio_time_to_first_token_seconds_count 1"));
  EXPECT_TRUE(Has(out, "folio_inter_token_latency_seconds_count 1"));
  EXPECT_TRUE(Has(out, "folio_request_latency_seconds_count 1"));
  EXPECT_TRUE(Has(out, "folio_requests_finished_total{reason=\"length\"} 1"));
}

}  // namespace
}  // namespace folio::server

// The benchmark's own pieces: statistics, the sysfs parser, the SVG helper
// and the fixture's gather (paged and dense layouts must hold the same K/V).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "bench/attention_bench.h"
#include "bench/attention_fixture.h"
#include "bench/decode_bench.h"
#include "bench/grammar_bench.h"
#include "bench/kv_transfer_bench.h"
#include "bench/machine_info.h"
#include "bench/memory_bandwidth.h"
#include "bench/parallel_bench.h"
#include "bench/serve_bench.h"
#include "bench/speculative_bench.h"
#include "bench/svg_plot.h"
#include "bench/timing.h"
#include "folio/core/splitmix64.h"
#include "folio/core/status.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/model/decoder.h"
#include "folio/model/model.h"
#include "folio/ops/weight_type.h"

namespace folio::bench {
namespace {

TEST(Quantile, InterpolatesBetweenClosestRanks) {
  EXPECT_EQ(Quantile({}, 0.5), 0.0);
  EXPECT_EQ(Quantile({4.0, 1.0, 3.0, 2.0}, 0.5), 2.5);
  EXPECT_EQ(Quantile({5.0, 1.0, 3.0}, 0.5), 3.0);
  EXPECT_NEAR(Quantile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0.1), 2.0, 1e-12);
  EXPECT_NEAR(Quantile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0.9), 10.0, 1e-12);
}

TEST(Summarize, SetsTheStatisticsFromTheSamples) {
  Timing t;
  t.samples_us = {5.0, 1.0, 3.0, 2.0, 4.0};
  Summarize(t);
  EXPECT_EQ(t.repeats, 5u);
  EXPECT_EQ(t.median_us, 3.0);
  EXPECT_EQ(t.min_us, 1.0);
  EXPECT_NEAR(t.p10_us, 1.4, 1e-12);
  EXPECT_NEAR(t.p90_us, 4.6, 1e-12);
}

TEST(GrammarBench, SplitIsTheNameBeforeTheDashesOrTheLastUnderscore) {
  EXPECT_EQ(MaskBenchSplit("Github_easy---o10008.json"), "Github_easy");
  EXPECT_EQ(MaskBenchSplit("Synthesized---draft4_valid_oneOf_id2.json"), "Synthesized");
  EXPECT_EQ(MaskBenchSplit("JME_12.json"), "JME");
  EXPECT_EQ(MaskBenchSplit("plain.json"), "plain");
}

TEST(GrammarBench, WritesJsonAsStrictModeDoes) {
  const auto v = nlohmann::ordered_json::parse(
      R"({"b": [1, 2.5, {"x": null}], "a": "\u00e9\"\n", "e": {}, "f": [], "n": 1.0})");
  EXPECT_EQ(WriteJson(v, ", ", ": "),
            "{\"b\": [1, 2.5, {\"x\": null}], \"a\": \"\xc3\xa9\\\"\\n\", \"e\": {}, "
            "\"f\": [], \"n\": 1.0}");
  EXPECT_EQ(WriteJson(v["b"], ",", ":"), "[1,2.5,{\"x\":null}]");
}

TEST(GrammarBench, RefusalReasonNamesTheKeyword) {
  EXPECT_EQ(RefusalReason(Status::Unimplemented("unsupported keyword \"not\" at #/a")), "not");
  EXPECT_EQ(RefusalReason(
                Status::Unimplemented("#/format: unsupported format \"byte\" (supported: date)")),
            "format byte");
  EXPECT_EQ(RefusalReason(Status::Unimplemented(
                "cannot merge differing \"pattern\" keywords (allOf) at #/allOf/1")),
            "merge pattern");
  EXPECT_EQ(RefusalReason(Status::ResourceExhausted(
                "maxLength 32767 at #/p is above the grammar's repeat limit (10000)")),
            "maxLength N");
}

TEST(GrammarBench, TokenSetHashIsASumOverTheSet) {
  std::vector<uint64_t> mask(2, 0);
  EXPECT_EQ(TokenSetHash(mask), 0u);
  mask[0] = 1ull << 3;
  mask[1] = 1ull << 5;  // token 69
  EXPECT_EQ(TokenSetHash(mask), SplitMix64(3).NextU64() + SplitMix64(69).NextU64());
}

TEST(GrammarBench, PrintableBytesEscapesWhatIsNotUtf8) {
  EXPECT_EQ(PrintableBytes("a\xc3\xa9"), "a\xc3\xa9");
  EXPECT_EQ(PrintableBytes("\xc3"), "\\xc3");
  EXPECT_EQ(PrintableBytes("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
}

TEST(ParseCacheSize, ReadsSysfsUnits) {
  EXPECT_EQ(ParseCacheSize("266240K"), 266240ull << 10);
  EXPECT_EQ(ParseCacheSize("32M\n"), 32ull << 20);
  EXPECT_EQ(ParseCacheSize("1024"), 1024u);
  EXPECT_EQ(ParseCacheSize(""), 0u);
  EXPECT_EQ(ParseCacheSize("K"), 0u);
  EXPECT_EQ(ParseCacheSize("12Q"), 0u);
}

TEST(TimeCalls, TakesAtLeastMinRepeats) {
  int calls = 0;
  TimingOptions o;
  o.repeats = 7;
  o.min_sample_us = 0.0;
  const Timing t = TimeCalls([&] { ++calls; }, o);
  EXPECT_EQ(t.repeats, 7u);
  EXPECT_EQ(t.samples_us.size(), 7u);
  EXPECT_LE(t.p10_us, t.median_us);
  EXPECT_LE(t.median_us, t.p90_us);
  EXPECT_EQ(static_cast<uint64_t>(calls), 2 + 7 * t.calls_per_sample);
}

TEST(TimeInterleaved, TakesOneSampleOfEachPerRound) {
  std::vector<int> order;
  TimingOptions o;
  o.repeats = 5;
  o.min_sample_us = 0.0;
  const std::vector<Timing> t =
      TimeInterleaved({[&] { order.push_back(0); }, [&] { order.push_back(1); }}, o);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].samples_us.size(), 5u);
  EXPECT_EQ(t[1].samples_us.size(), 5u);
  // Two warm-up calls each, then rounds alternating which goes first.
  EXPECT_EQ(order, (std::vector<int>{0, 0, 1, 1, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1}));
}

TEST(NiceTicks, CoversTheRangeInRoundSteps) {
  EXPECT_EQ(NiceTicks(10.0, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(NiceTicks(0.0, 5), (std::vector<double>{0}));
  EXPECT_EQ(NiceTicks(87.0, 8), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  const std::vector<double> small = NiceTicks(0.3, 3);
  ASSERT_EQ(small.size(), 4u);
  EXPECT_NEAR(small.back(), 0.3, 1e-12);
}

TEST(RenderSvg, DrawsEverySeriesAndLine) {
  LinePlot plot;
  plot.title = "a < b & c";
  plot.log_x = true;
  plot.series.push_back({"one", "#000", "", 2.0, {{128, 1.0}, {1024, 2.0}, {16384, 3.0}}});
  plot.series.push_back({"two", "#111", "4 2", 1.0, {{128, 0.5}, {16384, 0.7}}});
  plot.hlines.push_back({10.0, "bandwidth"});
  const std::string svg = RenderSvg(plot);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("a &lt; b &amp; c"), std::string::npos);
  size_t polylines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1)) {
    ++polylines;
  }
  EXPECT_EQ(polylines, 2u);
  EXPECT_NE(svg.find(">1024<"), std::string::npos);  // a power-of-two tick
  EXPECT_NE(svg.find("bandwidth"), std::string::npos);
}

TEST(AttentionFixture, GatherReproducesThePagedContents) {
  for (const auto& [dtype, order] :
       {std::pair{DType::kF32, PageOrder::kShuffled}, std::pair{DType::kBF16, PageOrder::kShuffled},
        std::pair{DType::kBF16, PageOrder::kEngine}}) {
    AttentionShape shape;
    shape.num_q_heads = 4;
    shape.num_kv_heads = 2;
    shape.head_dim = 8;
    shape.page_size = 4;
    shape.context = 13;  // a partial last page
    shape.batch = 3;
    shape.kv_dtype = dtype;
    ThreadPool pool(2);
    Result<AttentionFixture> f = AttentionFixture::Create(shape, 7, order, pool);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    if (order == PageOrder::kShuffled) {
      EXPECT_TRUE(f->shuffled());
    }
    const kv::PagedKvView paged = f->paged_kv(), dense = f->dense_kv();
    const kv::PagedBatchView table = f->paged_batch();
    const size_t es = DTypeSize(dtype);
    for (uint64_t b = 0; b < shape.batch; ++b) {
      for (uint64_t h = 0; h < shape.num_kv_heads; ++h) {
        for (uint64_t pos = 0; pos < shape.context; ++pos) {
          const auto page = static_cast<uint64_t>(table.pages(b)[pos / shape.page_size]);
          const uint64_t src =
              ((page * shape.num_kv_heads + h) * shape.page_size + pos % shape.page_size) *
              shape.head_dim * es;
          const uint64_t dst =
              ((b * shape.num_kv_heads + h) * shape.context + pos) * shape.head_dim * es;
          EXPECT_EQ(std::memcmp(paged.key_pages + src, dense.key_pages + dst, shape.head_dim * es),
                    0);
          EXPECT_EQ(
              std::memcmp(paged.value_pages + src, dense.value_pages + dst, shape.head_dim * es),
              0);
        }
      }
    }
    // And the kernel agrees bit for bit on both layouts.
    std::vector<float> a(f->query().size()), c(f->query().size());
    ASSERT_TRUE(attention::PagedAttention(f->params(), f->query(), paged, table, a, &pool).ok());
    ASSERT_TRUE(
        attention::PagedAttention(f->params(), f->query(), dense, f->dense_batch(), c, &pool).ok());
    EXPECT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0);
  }
}

TEST(AttentionFixture, PoolOrderDealsPagesInPoolOrder) {
  AttentionShape shape;
  shape.num_q_heads = 2;
  shape.num_kv_heads = 1;
  shape.head_dim = 4;
  shape.page_size = 2;
  shape.context = 6;
  shape.batch = 2;
  ThreadPool pool(1);
  Result<AttentionFixture> f = AttentionFixture::Create(shape, 7, PageOrder::kPool, pool);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_FALSE(f->shuffled());
  EXPECT_EQ(f->adjacent_page_fraction(), 1.0);
  const kv::PagedBatchView table = f->paged_batch();
  EXPECT_EQ(std::vector<int32_t>(table.indices.begin(), table.indices.end()),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(std::vector<int32_t>(table.indptr.begin(), table.indptr.end()),
            (std::vector<int32_t>{0, 3, 6}));
}

TEST(AttentionFixture, OnePagePerSequenceNeedsNoShuffle) {
  AttentionShape shape;
  shape.num_q_heads = 2;
  shape.num_kv_heads = 1;
  shape.head_dim = 4;
  shape.page_size = 8;
  shape.context = 8;
  shape.batch = 3;
  ThreadPool pool(1);
  Result<AttentionFixture> f = AttentionFixture::Create(shape, 7, PageOrder::kShuffled, pool);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_FALSE(f->shuffled());
}

// The engine's order: every sequence holds its own distinct pages, and the
// allocator keeps a sequence's consecutive pages adjacent even with the
// batch growing in turn and short requests coming and going (without the
// pages kept after each tail this shape gets 0.50).
TEST(AttentionFixture, EngineOrderIsTheAllocatorsTables) {
  AttentionShape shape;
  shape.num_q_heads = 2;
  shape.num_kv_heads = 1;
  shape.head_dim = 4;
  shape.page_size = 4;
  shape.context = 300;
  shape.batch = 4;
  ThreadPool pool(1);
  Result<AttentionFixture> f = AttentionFixture::Create(shape, 7, PageOrder::kEngine, pool);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const kv::PagedBatchView table = f->paged_batch();
  std::set<int32_t> pages(table.indices.begin(), table.indices.end());
  EXPECT_EQ(pages.size(), table.indices.size());
  EXPECT_GT(f->adjacent_page_fraction(), 0.95);
  EXPECT_EQ(ParsePageOrder("engine"), PageOrder::kEngine);
  EXPECT_EQ(ParsePageOrder("random"), std::nullopt);
}

// Worked-example shape: hidden 8, 4 heads, 2 K/V heads (head dim 2), ffn 12,
// 2 layers, vocab 258. Per layer q 8x8 + k 4x8 + v 4x8 + o 8x8 + gate, up,
// down 12x8 each = 64 + 32 + 32 + 64 + 3 * 96 = 480 bf16 elements = 960
// bytes; two layers 1920; the head 258x8 = 2064 elements = 4128 bytes.
// The embedding lookup (one row) and the f32 norm gains are not counted.
// Runs `folio bench attention` on a one-configuration grid, two passes of
// five samples on one thread, and returns its report.
nlohmann::json RunTinyAttentionBench(AttentionBenchOptions o) {
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() /
      ("folio_attention_bench_" + std::to_string(::getpid()) + ".json");
  o.threads = 1;
  o.repeats = 5;
  o.passes = 2;
  o.bandwidth_passes = 1;
  o.no_plot = true;
  o.json_output = out.string();
  EXPECT_EQ(RunAttentionBench(o, "test"), 0);
  std::ifstream in(o.json_output);
  nlohmann::json report = nlohmann::json::parse(in);
  std::filesystem::remove(out);
  return report;
}

// Two passes over a one-configuration grid: each row pools both passes'
// samples (paired round by round), and its statistics come from the pool;
// paged is paired with contiguous and with gather in rounds of their own.
TEST(AttentionBench, RowsPoolTheSamplesOfEveryPass) {
  AttentionBenchOptions o;
  o.contexts = {48};
  o.batches = {2};
  o.kv_dtypes = {"bf16"};
  o.bandwidth_mib = 8;
  const nlohmann::json r = RunTinyAttentionBench(o);
  EXPECT_EQ(r["passes"], 2);
  ASSERT_EQ(r["rows"].size(), 3u);
  std::vector<double> ratios;
  for (const nlohmann::json& row : r["rows"]) {
    SCOPED_TRACE(row["mode"].get<std::string>());
    const auto samples = row["samples_us"].get<std::vector<double>>();
    EXPECT_EQ(samples.size(), 10u);
    EXPECT_EQ(row["repeats"], 10);
    EXPECT_EQ(row["median_us"].get<double>(), Quantile(samples, 0.5));
    EXPECT_TRUE(row["outputs_identical"].get<bool>());
    EXPECT_FALSE(row.contains("paired_fraction_of_bandwidth")) << "in cache";
  }
  const auto paged = r["rows"][2]["samples_us"].get<std::vector<double>>();
  const auto contiguous = r["rows"][0]["samples_us"].get<std::vector<double>>();
  for (size_t i = 0; i < paged.size(); ++i) ratios.push_back(paged[i] / contiguous[i]);
  EXPECT_EQ(r["rows"][2]["paired_time_vs_contiguous"].get<double>(), Quantile(ratios, 0.5));
  // Against gather, paged's samples from its own rounds with gather.
  const auto beside = r["rows"][2]["samples_beside_gather_us"].get<std::vector<double>>();
  const auto gather = r["rows"][1]["samples_us"].get<std::vector<double>>();
  ASSERT_EQ(beside.size(), gather.size());
  ratios.clear();
  for (size_t i = 0; i < beside.size(); ++i) ratios.push_back(beside[i] / gather[i]);
  EXPECT_EQ(r["rows"][2]["paired_time_vs_gather"].get<double>(), Quantile(ratios, 0.5));
}

// A pass reads every word of every thread's slice: its sum is the sum of
// the words the probe wrote (word i of thread t's slice holds i * K + t).
TEST(ReadProbe, PassSumsEveryWordOfEverySlice) {
  ThreadPool pool(2);
  Result<ReadProbe> probe = ReadProbe::Create(4096 + 100, pool);  // rounded down to 4096
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ(probe->bytes(), 4096u);
  uint64_t want = 0;
  for (uint64_t t = 0; t < 2; ++t) {
    for (uint64_t i = 0; i < 4096 / 8 / 2; ++i) want += i * 0x9e3779b97f4a7c15ULL + t;
  }
  EXPECT_EQ(probe->Pass(), want);
  EXPECT_EQ(probe->Pass(), want);
}

TEST(ReadProbe, RejectsABufferWithoutALinePerThread) {
  ThreadPool pool(2);
  const Result<ReadProbe> probe = ReadProbe::Create(127, pool);
  ASSERT_FALSE(probe.ok());
  EXPECT_NE(probe.error().message().find("127 bytes"), std::string::npos)
      << probe.error().ToString();
}

// Out of cache, contiguous and paged are each timed in rounds with one pass
// of the bandwidth probe; their paired fraction is the median of the
// per-round fractions, over both passes of the grid.
TEST(AttentionBench, OutOfCacheRowsPairEachModeWithTheProbe) {
  AttentionBenchOptions o;
  o.contexts = {40};
  o.batches = {1};
  o.kv_dtypes = {"f32"};
  o.out_of_cache_factor = 1e-9;  // every configuration is out of cache
  o.bandwidth_mib = 4;
  const nlohmann::json r = RunTinyAttentionBench(o);
  ASSERT_EQ(r["rows"].size(), 3u);
  EXPECT_FALSE(r["rows"][1].contains("paired_fraction_of_bandwidth")) << "gather";
  for (const size_t m : {size_t{0}, size_t{2}}) {
    const nlohmann::json& row = r["rows"][m];
    SCOPED_TRACE(row["mode"].get<std::string>());
    EXPECT_FALSE(row["in_cache"].get<bool>());
    const auto kernel = row["samples_beside_probe_us"].get<std::vector<double>>();
    const auto probe = row["probe_samples_us"].get<std::vector<double>>();
    ASSERT_EQ(kernel.size(), 10u);
    ASSERT_EQ(probe.size(), 10u);
    const auto kv_bytes = row["bytes_read"].get<double>();
    const auto probe_bytes = row["probe_bytes"].get<double>();
    EXPECT_EQ(probe_bytes, 4.0 * (1 << 20));
    std::vector<double> fractions;
    for (size_t i = 0; i < kernel.size(); ++i) {
      fractions.push_back((kv_bytes / (kernel[i] * 1e-6) / 1e9) /
                          (probe_bytes / (probe[i] * 1e-6) / 1e9));
    }
    EXPECT_DOUBLE_EQ(row["paired_fraction_of_bandwidth"].get<double>(), Quantile(fractions, 0.5));
    EXPECT_DOUBLE_EQ(row["paired_fraction_p10"].get<double>(), Quantile(fractions, 0.1));
    EXPECT_DOUBLE_EQ(row["paired_fraction_p90"].get<double>(), Quantile(fractions, 0.9));
  }
  const nlohmann::json& target = r["targets"]["paged_out_of_cache_at_least_80pct_of_bandwidth"];
  EXPECT_EQ(target["paired"]["configs"], 1);
  EXPECT_EQ(target["paired"]["worst_fraction_of_bandwidth"],
            r["rows"][2]["paired_fraction_of_bandwidth"]);
}

TEST(DecodeBench, WeightBytesPerTokenIsEveryMatrixOnce) {
  model::ModelConfig c = model::WorkedExampleConfig();
  Result<model::ModelWeights> w = SyntheticWeights(c, 3);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->layers[0].wq.type, model::TensorType::kBF16);
  EXPECT_EQ(w->final_norm.type, model::TensorType::kF32);
  EXPECT_EQ(WeightBytesPerToken(c, *w), 1920u + 4128u);

  // Untied: the head is lm_head, and the embedding table is still not read
  // whole: the same count.
  c.tie_embeddings = false;
  Result<model::ModelWeights> untied = SyntheticWeights(c, 3);
  ASSERT_TRUE(untied.ok()) << untied.status().ToString();
  EXPECT_EQ(WeightBytesPerToken(c, *untied), 1920u + 4128u);
}

TEST(DecodeBench, AMixtureCountsTheRouterAndKExperts) {
  // What one token reads: per layer q, k, v, o, the router and K of the E
  // experts' gate, up and down (bf16), then the tied head.
  model::ModelConfig c = model::WorkedExampleConfig();
  c.num_experts = 4;
  c.experts_per_token = 2;
  c.expert_ffn_size = 8;
  c.norm_topk_prob = true;
  Result<model::ModelWeights> w = SyntheticWeights(c, 3);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const uint64_t d = c.hidden_size, q = c.q_size(), kv = c.kv_size();
  const uint64_t layer =
      2 * q * d + 2 * kv * d + c.num_experts * d + c.experts_per_token * 3 * d * c.expert_ffn_size;
  EXPECT_EQ(WeightBytesPerToken(c, *w), 2 * (c.num_layers * layer + c.vocab_size * d));
}

TEST(DecodeBench, SyntheticWeightsMakeAModelThatDecodes) {
  model::ModelConfig c = model::WorkedExampleConfig();
  c.rope_style = model::RopeStyle::kNeox;
  ThreadPool pool(2);
  Result<model::ModelWeights> w = SyntheticWeights(c, 5, &pool);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  Result<model::Model> m = model::Model::Create(c, std::move(*w), true);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  model::Decoder decoder(*m, &pool);
  kv::PagedKvCacheConfig kc;
  kc.num_layers = c.num_layers;
  kc.num_kv_heads = c.num_kv_heads;
  kc.head_dim = c.head_dim();
  kc.page_size = 4;
  kc.num_pages = 2;
  kc.dtype = DType::kBF16;
  Result<kv::PagedKvCache> cache = kv::PagedKvCache::Create(kc);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  const kv::SeqId seq = cache->AddSequence();
  auto step = [&](std::vector<int32_t> tokens) -> Result<std::vector<float>> {
    const std::pair<kv::SeqId, uint64_t> request{seq, tokens.size()};
    FOLIO_ASSIGN_OR_RETURN(auto plan, cache->PrepareAppend(std::span(&request, 1)));
    if (!plan) return Status::ResourceExhausted("pool too small");
    FOLIO_ASSIGN_OR_RETURN(auto meta, cache->BuildBatchMetadata(std::span(&seq, 1), &*plan));
    auto logits = decoder.Step(*cache, meta, tokens);
    cache->Commit(*plan);
    return logits;
  };
  ASSERT_TRUE(step({1, 2, 3}).ok());
  Result<std::vector<float>> logits = step({4});
  ASSERT_TRUE(logits.ok()) << logits.status().ToString();
  EXPECT_EQ(logits->size(), c.vocab_size);
}

// --weight-type: every matrix re-encoded (here Q8_0), its values within
// half a step of the bf16 source; vectors untouched; a type folio cannot
// write is refused.
TEST(DecodeBench, QuantizeWeightsReencodesEveryMatrix) {
  model::ModelConfig c = SyntheticConfig(1);  // the 1B shape, shrunk to 32-wide rows
  c.hidden_size = 64;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.ffn_size = 96;
  c.vocab_size = 40;
  ThreadPool pool(2);
  Result<model::ModelWeights> w = SyntheticWeights(c, 4, &pool);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  Result<model::ModelWeights> q = model::QuantizeMatrices(*w, ops::WeightType::kQ8_0, &pool);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const model::Tensor& src = w->layers[0].w_up;
  const model::Tensor& got = q->layers[0].w_up;
  EXPECT_EQ(got.type, model::TensorType::kQ8_0);
  EXPECT_EQ(got.shape, src.shape);
  EXPECT_EQ(q->final_norm.type, model::TensorType::kF32);
  EXPECT_EQ(q->embedding.type, model::TensorType::kQ8_0);
  const uint64_t cols = src.shape[1];
  std::vector<float> a(cols), b(cols);
  for (uint64_t r = 0; r < src.shape[0]; ++r) {
    ops::DequantizeRow(src.type, src.bytes.data() + r * ops::WeightRowBytes(src.type, cols), a);
    ops::DequantizeRow(got.type, got.bytes.data() + r * ops::WeightRowBytes(got.type, cols), b);
    for (uint64_t i = 0; i < cols; ++i) {
      // Q8_0: d = absmax / 127 <= 0.05 / 127 per block; error <= d / 2,
      // plus the f16 rounding of d (2^-11 relative) on every level.
      ASSERT_NEAR(b[i], a[i], 0.05 / 127 / 2 + 0.05 * 0x1p-10) << r << " " << i;
    }
  }
  EXPECT_FALSE(model::QuantizeMatrices(*w, ops::WeightType::kIQ4_XS, &pool).ok());
}

TEST(DecodeBench, SyntheticConfigIsAbout1B) {
  const model::ModelConfig c = SyntheticConfig(16);
  ASSERT_TRUE(c.Validate().ok());
  EXPECT_EQ(c.head_dim(), 64u);
  EXPECT_GT(c.ParameterCount(), 900'000'000u);
  EXPECT_LT(c.ParameterCount(), 1'200'000'000u);
}

// The serving benchmark end to end on a tiny workload: every field the
// report promises is there, and the counters agree with what each mode is.
TEST(ServeBench, ReportsEveryModeAndTheSweep) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("folio_serve_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ServeBenchOptions o;
  o.quick = true;
  o.num_seqs = 5;
  o.min_input_len = 20;
  o.max_input_len = 60;
  o.min_output_len = 3;
  o.max_output_len = 9;
  o.prefill_step = 32;
  o.batch_size = 2;
  o.threads = 1;
  o.sweep_requests = {2};
  o.json_output = (dir / "serve.json").string();
  ASSERT_EQ(RunServeBench(o, "test"), 0);
  std::ifstream in(o.json_output);
  const nlohmann::json r = nlohmann::json::parse(in);
  for (const char* mode : {"dense", "paged_gather", "paged"}) {
    SCOPED_TRACE(mode);
    const nlohmann::json& m = r["modes"][mode];
    for (const char* field :
         {"prefill_tokens_per_second", "output_tokens_per_second", "decode_tokens_per_second",
          "requests_per_second", "decode_step_median_ms", "decode_step_p95_ms",
          "decode_step_max_ms", "ttft_median_ms", "ttft_p95_ms", "itl_median_ms", "itl_p95_ms",
          "peak_kv_bytes", "kv_copy_bytes", "reused_page_allocations",
          "peak_tail_waste_fraction"}) {
      EXPECT_TRUE(m.contains(field)) << field;
    }
    EXPECT_GT(m["output_tokens_per_second"].get<double>(), 0.0);
    EXPECT_LE(m["peak_running"].get<uint64_t>(), 2u);
  }
  const nlohmann::json& modes = r["modes"];
  EXPECT_EQ(modes["paged"]["kv_copy_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(modes["paged_gather"]["kv_copy_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(modes["paged_gather"]["kv_copy_bytes"], modes["dense"]["kv_copy_bytes"]);
  // Reserving the maximum length holds at least what paging holds.
  EXPECT_GE(modes["dense"]["peak_kv_bytes"].get<uint64_t>(),
            modes["paged"]["peak_kv_bytes"].get<uint64_t>());
  ASSERT_EQ(r["admission_sweep"].size(), 1u);
  const nlohmann::json& row = r["admission_sweep"][0];
  for (const char* field :
       {"kv_budget_bytes", "paged_concurrent", "reserved_concurrent",
        "paged_output_tokens_per_second", "reserved_output_tokens_per_second"}) {
    EXPECT_TRUE(row.contains(field)) << field;
  }
  EXPECT_GE(row["paged_concurrent"].get<uint64_t>(), row["reserved_concurrent"].get<uint64_t>());
  EXPECT_TRUE(std::filesystem::exists(dir / "serve-concurrency.svg"));
  EXPECT_TRUE(std::filesystem::exists(dir / "serve-throughput.svg"));
  std::filesystem::remove_all(dir);
}

TEST(KvTransferBench, ReportsEveryStageAndTheBytes) {
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("folio_kv_bench_" + std::to_string(::getpid()));
  KvTransferBenchOptions o;
  o.num_seqs = 2;
  o.prompt_len = 20;
  o.page_size = 8;
  o.repeats = 1;
  o.threads = 1;
  o.json_output = out.string();
  ASSERT_EQ(RunKvTransferBench(o, "test"), 0);
  std::ifstream in(out);
  const nlohmann::json r = nlohmann::json::parse(in);
  std::filesystem::remove(out);
  // Each sequence's 20 prompt tokens have K/V (its first generated token is
  // not fed yet): 3 pages of 8 slots; K and V of 4 layers x 4 heads x 64
  // dims in bf16.
  EXPECT_EQ(r["workload"]["pages"], 6);
  EXPECT_EQ(r["kv_bytes"], 2 * 4 * 6 * 8 * 4 * 64 * 2);
  EXPECT_GT(r["file_bytes"].get<uint64_t>(), r["kv_bytes"].get<uint64_t>());
  for (const char* stage : {"export", "encode", "write", "read_decode", "import", "memcpy_floor"}) {
    EXPECT_TRUE(r["stages"].contains(stage) && r["stages"][stage].contains("median_ms")) << stage;
  }
}

}  // namespace
// The built-in model (no download): every configuration's tokens equal
// plain decoding's, and each row reports what the docs describe.
TEST(SpeculativeBench, ReportsEveryKindAndDraftLengthWithIdenticalOutputs) {
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() /
      ("folio_speculative_bench_" + std::to_string(::getpid()) + ".json");
  SpeculativeBenchOptions o;
  o.max_tokens = 24;
  o.rounds = 1;
  o.threads = 1;
  o.draft_tokens = {2};
  o.json_output = out.string();
  ASSERT_EQ(RunSpeculativeBench(o, "test"), 0);
  std::ifstream in(o.json_output);
  const nlohmann::json r = nlohmann::json::parse(in);
  std::filesystem::remove(out);
  EXPECT_TRUE(r["outputs_identical_to_plain_decoding"].get<bool>());
  for (const char* kind : {"grounded", "free"}) {
    const nlohmann::json& rows = r["kinds"][kind];
    ASSERT_EQ(rows.size(), 2u) << kind;
    EXPECT_EQ(rows[0]["draft_tokens"], 0);
    EXPECT_EQ(rows[0]["speedup"]["median"], 1.0);
    EXPECT_EQ(rows[1]["draft_tokens"], 2);
    EXPECT_EQ(rows[1]["tokens"], rows[0]["tokens"]);
    EXPECT_GE(rows[1]["tokens_per_target_step"].get<double>(), 1.0);
  }
  // Step times by rows: one-row steps (plain decoding), none over 1 + 2.
  const nlohmann::json& by_rows = r["step_ms_by_rows"];
  ASSERT_FALSE(by_rows.empty());
  EXPECT_EQ(by_rows[0]["rows"], 1);
  EXPECT_EQ(by_rows[0]["relative_to_one_row"], 1.0);
  for (const nlohmann::json& row : by_rows) {
    EXPECT_LE(row["rows"].get<uint64_t>(), 3u);
    EXPECT_GT(row["steps"].get<uint64_t>(), 0u);
    EXPECT_GT(row["median_ms"].get<double>(), 0.0);
  }
}

// Forked samples hold fewer pages than copies doing the same work, and
// both runs produce the same number of tokens, bounded or not.
TEST(ParallelBench, SharingSavesPagesForTheSameWork) {
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() /
      ("folio_parallel_bench_" + std::to_string(::getpid()) + ".json");
  ParallelBenchOptions o;
  o.requests = 3;
  o.n_list = {3};
  o.max_len = 64;
  o.page_size = 4;
  o.threads = 1;
  o.json_output = out.string();
  ASSERT_EQ(RunParallelBench(o, "test"), 0);
  std::ifstream in(o.json_output);
  const nlohmann::json r = nlohmann::json::parse(in);
  std::filesystem::remove(out);
  ASSERT_EQ(r["rows"].size(), 1u);
  const nlohmann::json& row = r["rows"][0];
  EXPECT_LT(row["unbounded"]["shared"]["peak_pages"], row["unbounded"]["copied"]["peak_pages"]);
  EXPECT_GT(row["pages_saved_fraction"].get<double>(), 0.0);
  EXPECT_EQ(row["unbounded"]["shared"]["tokens"], row["unbounded"]["copied"]["tokens"]);
  EXPECT_EQ(row["at_budget"]["shared"]["tokens"], row["at_budget"]["copied"]["tokens"]);
}

}  // namespace folio::bench

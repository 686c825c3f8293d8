#include "folio/model/decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <vector>

#include "folio/backend/backend.h"
#include "folio/core/checked_math.h"
#include "folio/kv/paged_kv_cache.h"
#include "folio/tokenizer/byte_tokenizer.h"
#include "model/decoder_internal.h"
#include "reference/placed_cache.h"
#include "testing/test_model.h"

namespace folio::model {
namespace {

using reference::MakePlacedCache;
using reference::PlacedCache;
using reference::StepLanes;

const Model& WorkedModel() {
  static const Model* m = new Model(*Model::FromSeed(WorkedExampleConfig(), 20));
  return *m;
}

std::vector<int32_t> Document() { return tokenizer::ByteTokenizer::Encode("abcde", true, true); }

// `batch` lanes on the engine's paged cache, lane b's logical page lp at
// page table[lp] * batch + b.
PlacedCache Placed(const Model& m, uint64_t page_size, std::vector<uint64_t> table,
                   uint64_t batch = 1, DType dtype = DType::kF32) {
  return *MakePlacedCache(m.config(), page_size, table, batch, dtype);
}

std::vector<float> Append(const Decoder& dec, PlacedCache& c, std::span<const int32_t> tokens,
                          LogitRows rows = LogitRows::kAll) {
  auto r = StepLanes(dec, c, tokens, rows);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<float>();
}

// Everything a failed step must not change: lengths, block tables, the
// pool's free list, and every committed row.
struct CacheState {
  std::vector<uint64_t> lengths;
  std::vector<std::vector<kv::PageId>> tables;
  std::vector<kv::PageId> free_list;
  std::vector<float> rows;
  bool operator==(const CacheState&) const = default;
};
CacheState Capture(const PlacedCache& c) {
  CacheState s;
  const kv::PagedKvCacheConfig& kc = c.cache.config();
  std::vector<float> row(kc.head_dim);
  for (const kv::SeqId lane : c.lanes) {
    s.lengths.push_back(c.cache.length(lane));
    const auto table = c.cache.block_table(lane);
    s.tables.emplace_back(table.begin(), table.end());
    for (uint64_t l = 0; l < kc.num_layers; ++l)
      for (const kv::KvRole role : {kv::KvRole::kKey, kv::KvRole::kValue})
        for (uint64_t pos = 0; pos < c.cache.length(lane); ++pos)
          for (uint64_t h = 0; h < kc.num_kv_heads; ++h) {
            c.cache.ReadRow(l, role, lane, pos, h, row.data());
            s.rows.insert(s.rows.end(), row.begin(), row.end());
          }
  }
  s.free_list = c.cache.pool().free_list();
  return s;
}

// Any valid page table and page size gives the same logits, bit for bit.
TEST(Decoder, PagedAndContiguousLogitsAgreeBitForBit) {
  const Decoder dec(WorkedModel());
  auto contiguous = Placed(WorkedModel(), 12, {0});
  const auto want = Append(dec, contiguous, Document());
  ASSERT_EQ(want.size(), 7u * 258u);
  struct Layout {
    uint64_t page_size;
    std::vector<uint64_t> table;
  };
  for (const Layout& layout :
       {Layout{3, {2, 0, 3, 1}}, Layout{3, {3, 1, 0, 2}}, Layout{5, {2, 0, 1}},
        Layout{1, {11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}}, Layout{12, {0}}}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      auto paged = Placed(WorkedModel(), layout.page_size, layout.table, 1, dtype);
      auto dense = Placed(WorkedModel(), 12, {0}, 1, dtype);
      const auto got = Append(dec, paged, Document());
      EXPECT_EQ(got, Append(dec, dense, Document())) << "page_size " << layout.page_size;
      if (dtype == DType::kF32) {
        EXPECT_EQ(got, want) << "page_size " << layout.page_size;
      }
    }
  }
}

// Contract 3: token-by-token decode, chunked prefill and the cache-free
// forward pass produce the same bits.
void ExpectCachedEqualsFull(const Model& model) {
  const Decoder dec(model);
  const auto doc = Document();
  const auto full = *dec.Forward(doc, 1);
  auto cache = Placed(model, 3, {2, 0, 3, 1});
  std::vector<float> stepwise;
  for (int32_t t : doc) {
    auto row = Append(dec, cache, std::span<const int32_t>(&t, 1), LogitRows::kLast);
    stepwise.insert(stepwise.end(), row.begin(), row.end());
  }
  EXPECT_EQ(stepwise, full);
  auto chunked = Placed(model, 3, {2, 0, 3, 1});
  auto first = Append(dec, chunked, std::span<const int32_t>(doc).first(3));
  auto rest = Append(dec, chunked, std::span<const int32_t>(doc).subspan(3));
  first.insert(first.end(), rest.begin(), rest.end());
  EXPECT_EQ(first, full);
  EXPECT_EQ(full.size(), doc.size() * model.config().vocab_size);
}

// Contract 1 on two lanes: a batch of two sequences gives each the bits
// it gets alone, with one thread and with two.
void ExpectLanesMatchSoloRuns(const Model& model) {
  const std::vector<int32_t> lane0 = {0, 99, 100, 5, 17}, lane1 = {0, 7, 42, 200, 3};
  std::vector<int32_t> both = lane0;
  both.insert(both.end(), lane1.begin(), lane1.end());
  const Decoder dec(model);
  std::vector<float> solos = *dec.Forward(lane0, 1);
  const std::vector<float> solo1 = *dec.Forward(lane1, 1);
  solos.insert(solos.end(), solo1.begin(), solo1.end());
  EXPECT_EQ(*dec.Forward(both, 2), solos);
  ThreadPool two(2);
  EXPECT_EQ(*Decoder(model, &two).Forward(both, 2), solos);
}

// One config-and-weights change to every layer of a model.
using OptionChange = void (*)(ModelConfig&, LayerWeights&);

// Each change, applied alone to `base`, gives a model whose logits on
// Document() differ from base's: the option it turns off did something.
void ExpectEachChangeMovesTheLogits(const Model& base,
                                    std::initializer_list<OptionChange> changes) {
  const auto run = [](const Model& m) { return *Decoder(m).Forward(Document(), 1); };
  const std::vector<float> want = run(base);
  size_t i = 0;
  for (const OptionChange change : changes) {
    ModelConfig c = base.config();
    ModelWeights w = base.weights();
    for (LayerWeights& l : w.layers) change(c, l);
    const Result<Model> m = Model::Create(c, std::move(w));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_NE(run(*m), want) << "change " << i++;
  }
}

TEST(Decoder, CachedLogitsEqualFullForward) { ExpectCachedEqualsFull(WorkedModel()); }

TEST(Decoder, WindowedGqaCachedEqualsFull) {
  ModelConfig c = WorkedExampleConfig();
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.window = 3;
  c.tie_embeddings = false;
  ExpectCachedEqualsFull(*Model::FromSeed(c, 7));
}

// Every family option at once: sliding-window layers between global ones,
// each kind with its own RoPE base, sandwich norms stored as offsets from
// 1, GeGLU, a scaled embedding, an attention scale and a final soft-cap.
ModelConfig FamilyConfig() {
  ModelConfig c = WorkedExampleConfig();
  c.num_layers = 3;
  c.num_kv_heads = 1;
  c.explicit_head_dim = 4;  // two RoPE pairs, so that the base matters
  c.qk_norm = true;
  c.window = 3;
  c.layers = {LayerConfig{3, 10.0, {}}, LayerConfig{0, 1000.0, {}}, LayerConfig{3, 10.0, {}}};
  c.activation = Activation::kGeluTanh;
  c.norm_layout = NormLayout::kSandwich;
  c.norm_unit_offset = true;
  c.scale_embedding = true;
  c.attention_scale = 0.3;
  c.final_logit_softcap = 5.0;
  c.attn_logit_softcap = 0.7;
  return c;
}

TEST(Decoder, FamilyOptionsCachedEqualsFull) {
  ExpectCachedEqualsFull(*Model::FromSeed(FamilyConfig(), 11));
}

// A cache of layer groups, one per window (kv::PagedKvCache, "Layer
// groups"), whose windowed groups give pages back as the sequences grow:
// two sequences stepped together in chunks of every size give the
// cache-free forward pass's bits, while the windowed layers hold only
// their windows' pages.
TEST(Decoder, LayerGroupsThatGiveWindowPagesBackKeepEveryBit) {
  ModelConfig config = FamilyConfig();
  config.max_positions = 128;
  const Model model = *Model::FromSeed(config, 11);
  const Decoder dec(model);
  const auto doc_a = tokenizer::ByteTokenizer::Encode(
      "the window slides past the early pages, which go back to the pool", true, true);
  const auto doc_b =
      tokenizer::ByteTokenizer::Encode("a second, shorter lane beside it", true, true);
  const auto full_a = *dec.Forward(doc_a, 1), full_b = *dec.Forward(doc_b, 1);
  const uint64_t vocab = model.config().vocab_size;
  for (const uint64_t chunk : {1, 2, 5, 11}) {
    kv::PagedKvCacheConfig kc;
    kc.num_layers = model.config().num_layers;
    kc.num_kv_heads = model.config().num_kv_heads;
    kc.head_dim = model.config().head_dim();
    kc.page_size = 2;
    kc.num_pages = 200;
    for (uint64_t l = 0; l < kc.num_layers; ++l) {
      kc.layer_windows.push_back(model.config().Layer(l).window);
    }
    kv::PagedKvCache cache = *kv::PagedKvCache::Create(kc);
    ASSERT_EQ(cache.num_groups(), 3u);  // one layer each: global, then two windowed
    const kv::SeqId a = cache.AddSequence(), b = cache.AddSequence();
    std::vector<float> got_a, got_b;
    uint64_t released = 0;
    for (uint64_t done = 0; done < doc_a.size(); done += chunk) {
      std::vector<std::pair<kv::SeqId, uint64_t>> requests;
      std::vector<kv::SeqId> seqs;
      std::vector<int32_t> tokens;
      const uint64_t n_a = std::min<uint64_t>(chunk, doc_a.size() - done);
      const uint64_t n_b = done < doc_b.size() ? std::min<uint64_t>(chunk, doc_b.size() - done) : 0;
      requests.emplace_back(a, n_a);
      seqs.push_back(a);
      tokens.insert(tokens.end(), doc_a.begin() + done, doc_a.begin() + done + n_a);
      if (n_b > 0) {
        requests.emplace_back(b, n_b);
        seqs.push_back(b);
        tokens.insert(tokens.end(), doc_b.begin() + done, doc_b.begin() + done + n_b);
      }
      auto plan = cache.PrepareAppend(requests);
      ASSERT_TRUE(plan.ok() && plan->has_value());
      std::vector<kv::BatchMetadata> metas;
      for (uint64_t g = 0; g < cache.num_groups(); ++g) {
        metas.push_back(*cache.BuildBatchMetadata(seqs, &**plan, g));
      }
      const LogitRows rows = LogitRows::kAll;
      auto logits = dec.Step(cache, metas, tokens, std::span(&rows, 1));
      ASSERT_TRUE(logits.ok()) << logits.status().ToString();
      released += cache.Commit(**plan).size();
      got_a.insert(got_a.end(), logits->begin(), logits->begin() + n_a * vocab);
      got_b.insert(got_b.end(), logits->begin() + n_a * vocab, logits->end());
      // A windowed layer keeps at most the window (3) and the last and this
      // step's tokens, in pages of 2.
      for (uint64_t g = 1; g < cache.num_groups(); ++g) {
        const auto t = cache.block_table(a, g);
        EXPECT_LE(
            static_cast<uint64_t>(
                t.end() - std::find_if(t.begin(), t.end(), [](kv::PageId p) { return p != -1; })),
            CeilDiv(3 + 2 * chunk, 2) + 2);
      }
    }
    EXPECT_EQ(got_a, full_a) << "chunk " << chunk;
    EXPECT_EQ(got_b, full_b) << "chunk " << chunk;
    EXPECT_GT(released, 0u);
    // One group cannot take the groups' metadata, and vice versa.
    EXPECT_FALSE(dec.Step(cache, kv::BatchMetadata{}, doc_a).ok());
  }
}

// Each option changes the logits (so none is silently dropped on the way
// to the kernels).
TEST(Decoder, EachFamilyOptionChangesTheLogits) {
  const ModelConfig base = FamilyConfig();
  const auto run = [](const ModelConfig& c) {
    return *Decoder(*Model::FromSeed(c, 11)).Forward(Document(), 1);
  };
  const auto want = run(base);
  std::vector<ModelConfig> changed(8, base);
  changed[7].attn_logit_softcap = 0;
  changed[0].layers[0].window = 0;
  changed[1].layers[1].rope_theta = 10.0;
  changed[2].activation = Activation::kSilu;
  changed[3].scale_embedding = false;
  changed[4].attention_scale = 0;
  changed[5].final_logit_softcap = 0;
  changed[6].layers.clear();  // every layer global with rope_theta 10000
  for (size_t i = 0; i < changed.size(); ++i) {
    EXPECT_NE(run(changed[i]), want) << "change " << i;
  }
}

// A mixture of experts, without and with a shared expert (Qwen2-MoE):
// stepwise, chunked and forward give the same bits (routing included), and
// so does a lane beside another.
TEST(Decoder, ExpertsCachedEqualsFullAndLanesMatchSoloRuns) {
  for (const uint64_t shared : {0, 12}) {
    ModelConfig c = WorkedExampleConfig();
    c.num_experts = 6;
    c.experts_per_token = 2;
    c.expert_ffn_size = 10;
    c.shared_expert_ffn_size = shared;
    const Model m = *Model::FromSeed(c, 13);
    ExpectCachedEqualsFull(m);
    const Decoder dec(m);
    const std::vector<int32_t> lane0 = {0, 99, 100, 5}, lane1 = {0, 7, 42, 200};
    std::vector<int32_t> both = lane0;
    both.insert(both.end(), lane1.begin(), lane1.end());
    const auto pair = *dec.Forward(both, 2);
    const auto solo0 = *dec.Forward(lane0, 1), solo1 = *dec.Forward(lane1, 1);
    std::vector<float> solos = solo0;
    solos.insert(solos.end(), solo1.begin(), solo1.end());
    EXPECT_EQ(pair, solos) << "shared " << shared;
  }
}

// The backend seam (docs/design.md, "The backend seam"): a step keeps
// every activation in the backend's memory. What crosses is its inputs
// going up (token ids, the RoPE angles of its positions, which rows want
// logits) and the logits coming down, mixtures included (the backend
// routes). The backend counts every crossing itself.
void ExpectOnlyInputsAndLogitsCross(const Model& m) {
  const ModelConfig& c = m.config();
  const auto be =
      std::shared_ptr<backend::Backend>(backend::MakeBackend(backend::BackendKind::kCpu));
  const Decoder dec(m, be);
  auto cache = Placed(m, 3, {2, 0, 3, 1});
  const std::vector<int32_t> doc = Document();
  const uint64_t n = doc.size(), f = sizeof(float);
  for (const bool forward : {false, true}) {
    const backend::Transfers before = be->transfers();
    const std::vector<float> logits =
        forward ? *dec.Forward(doc, 1) : Append(dec, cache, doc, LogitRows::kAll);
    const backend::Transfers after = be->transfers();
    ASSERT_EQ(logits.size(), n * c.vocab_size);
    SCOPED_TRACE(forward ? "forward" : "paged step");
    // Tokens, cos, sin, the logit rows up; the logits down.
    EXPECT_EQ(after.writes - before.writes, 4u);
    EXPECT_EQ(after.write_bytes - before.write_bytes,
              n * 4 + 2 * n * (c.RotaryDim() / 2) * f + n * 4);
    EXPECT_EQ(after.reads - before.reads, 1u);
    EXPECT_EQ(after.read_bytes - before.read_bytes, logits.size() * f);
    EXPECT_EQ(after.host_views, before.host_views);
  }
}

TEST(Decoder, AStepCrossesToTheHostOnlyForItsInputsAndLogits) {
  ExpectOnlyInputsAndLogitsCross(WorkedModel());
  ModelConfig c = WorkedExampleConfig();
  c.num_experts = 6;
  c.experts_per_token = 2;
  c.expert_ffn_size = 10;
  c.shared_expert_ffn_size = 12;
  ExpectOnlyInputsAndLogitsCross(*Model::FromSeed(c, 13));
}

// One row through the router (RouteRow): the chosen experts in
// increasing index and their weights.
struct Routed {
  std::vector<uint32_t> experts;
  std::vector<float> weights;
};
Routed Route(const ModelConfig& c, const std::vector<float>& logits,
             const std::vector<float>& selection_bias = {}) {
  ops::RouterScratch scratch;
  Routed r{std::vector<uint32_t>(c.experts_per_token), std::vector<float>(c.experts_per_token)};
  ops::RouteRow(c.Router(), logits, selection_bias, scratch, r.experts, r.weights);
  return r;
}

ModelConfig SigmoidRouter(uint64_t experts, uint64_t k) {
  ModelConfig c = WorkedExampleConfig();
  c.num_experts = experts;
  c.experts_per_token = k;
  c.expert_ffn_size = 4;
  c.routing = Routing::kSigmoidTopK;
  c.norm_topk_prob = false;
  return c;
}

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// The logit whose sigmoid is p.
float Logit(double p) { return static_cast<float>(std::log(p / (1 - p))); }

TEST(Router, SigmoidScoresAreTheWeights) {
  const Routed r = Route(SigmoidRouter(4, 2), {0.0f, 2.0f, -1.0f, 1.0f});
  EXPECT_EQ(r.experts, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(r.weights, (std::vector<float>{Sigmoid(2.0f), Sigmoid(1.0f)}));
}

TEST(Router, SelectionBiasChoosesButDoesNotWeigh) {
  const Routed r = Route(SigmoidRouter(4, 2), {0.0f, 2.0f, -1.0f, 1.0f}, {0.0f, 0.0f, 5.0f, 0.0f});
  EXPECT_EQ(r.experts, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(r.weights, (std::vector<float>{Sigmoid(2.0f), Sigmoid(-1.0f)}));
  // Under softmax scoring too: the weights are the unbiased probabilities.
  ModelConfig softmax = SigmoidRouter(4, 2);
  softmax.routing = Routing::kSoftmaxTopK;
  const Routed s = Route(softmax, {0.0f, 2.0f, -1.0f, 1.0f}, {0.0f, 0.0f, 5.0f, 0.0f});
  EXPECT_EQ(s.experts, (std::vector<uint32_t>{1, 2}));
  EXPECT_LT(s.weights[1], s.weights[0]);
}

TEST(Router, RenormalisedWeightsAreScaledAfterwards) {
  ModelConfig c = SigmoidRouter(4, 2);
  c.norm_topk_prob = true;
  c.routed_scale = 2.5;
  const Routed r = Route(c, {0.0f, 2.0f, -1.0f, 1.0f});
  const float total = Sigmoid(2.0f) + Sigmoid(1.0f) + 1e-20f;
  EXPECT_EQ(r.weights,
            (std::vector<float>{Sigmoid(2.0f) / total * 2.5f, Sigmoid(1.0f) / total * 2.5f}));
  c.norm_topk_prob = false;
  EXPECT_EQ(Route(c, {0.0f, 2.0f, -1.0f, 1.0f}).weights,
            (std::vector<float>{Sigmoid(2.0f) * 2.5f, Sigmoid(1.0f) * 2.5f}));
}

// Four groups of two. Group 0 holds the best single score (0.9 + 0.1 =
// 1.0), group 1 the best pair (0.6 + 0.6 = 1.2), group 2 the next (1.1):
// with one group allowed only group 1's experts run.
TEST(Router, GroupsByTheirTwoBestScoresLimitTheChoice) {
  ModelConfig c = SigmoidRouter(8, 2);
  c.expert_groups = 4;
  c.expert_groups_used = 1;
  const std::vector<float> logits = {Logit(0.9),  Logit(0.1),  Logit(0.6), Logit(0.6),
                                     Logit(0.55), Logit(0.55), Logit(0.2), Logit(0.2)};
  EXPECT_EQ(Route(c, logits).experts, (std::vector<uint32_t>{2, 3}));
  c.expert_groups_used = 2;  // groups 1 and 2: still not expert 0
  EXPECT_EQ(Route(c, logits).experts, (std::vector<uint32_t>{2, 3}));
  c.expert_groups_used = 4;  // every group: the two best overall
  EXPECT_EQ(Route(c, logits).experts, (std::vector<uint32_t>{0, 2}));
  c.expert_groups = 1;
  c.expert_groups_used = 1;
  EXPECT_EQ(Route(c, logits).experts, (std::vector<uint32_t>{0, 2}));
  // The groups rank the biased scores: a bias on group 3 lifts it first.
  c.expert_groups = 4;
  EXPECT_EQ(Route(c, logits, {0, 0, 0, 0, 0, 0, 0.5f, 0.5f}).experts,
            (std::vector<uint32_t>{6, 7}));
}

TEST(Router, TiesGoToTheLowerIndex) {
  ModelConfig c = SigmoidRouter(6, 2);
  EXPECT_EQ(Route(c, {1.0f, 0.0f, 1.0f, 1.0f, 0.0f, 0.0f}).experts, (std::vector<uint32_t>{0, 2}));
  c.expert_groups = 3;  // groups {0,1} 1+0, {2,3} 1+1, {4,5} 0+0
  c.expert_groups_used = 1;
  EXPECT_EQ(Route(c, {1.0f, 0.0f, 1.0f, 1.0f, 0.0f, 0.0f}).experts, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(Route(c, {1.0f, 1.0f, 1.0f, 1.0f, 0.0f, 0.0f}).experts, (std::vector<uint32_t>{0, 1}));
}

// dots1's mixture: sigmoid routing with a selection bias, 4 groups of 2
// experts (2 used), a routed scale, a leading dense layer, two ungated
// shared experts and Qwen3's q/k norms.
ModelConfig DeepSeekConfig() {
  ModelConfig c = test_support::DeepSeekMixtureConfig();
  c.max_positions = 40;
  c.qk_norm = true;
  c.norm_topk_prob = true;
  return c;
}

TEST(Decoder, DeepSeekRouterCachedEqualsFullAndLanesMatchSoloRuns) {
  const Model m = *Model::FromSeed(DeepSeekConfig(), 37);
  ExpectCachedEqualsFull(m);
  ExpectLanesMatchSoloRuns(m);
}

TEST(Decoder, EachRouterOptionChangesTheLogits) {
  ExpectEachChangeMovesTheLogits(
      *Model::FromSeed(DeepSeekConfig(), 41),
      {
          [](ModelConfig& c, LayerWeights&) { c.routing = Routing::kSoftmaxTopK; },
          [](ModelConfig& c, LayerWeights& l) {
            c.router_selection_bias = false;
            l.router_selection_bias = {};
          },
          [](ModelConfig& c, LayerWeights&) { c.expert_groups_used = 4; },
          [](ModelConfig& c, LayerWeights&) { c.routed_scale = 1.0; },
          [](ModelConfig& c, LayerWeights&) { c.norm_topk_prob = false; },
          [](ModelConfig& c, LayerWeights& l) {
            c.num_shared_experts = 0;
            l.shared_gate = l.shared_up = l.shared_down = {};
          },
      });
}

// gpt-oss's block: biases on o, the router and the experts, top-k then
// softmax routing, the clamped SwiGLU, attention sinks, alternating windows.
ModelConfig GptOssConfig() {
  ModelConfig c = WorkedExampleConfig();
  c.max_positions = 40;
  c.num_layers = 2;
  c.num_experts = 6;
  c.experts_per_token = 2;
  c.expert_ffn_size = 10;
  c.routing = Routing::kTopKSoftmax;
  c.moe_bias = true;
  c.swiglu_limit = 0.05;  // small: the random weights' pre-activations cross it
  c.output_bias = true;
  c.attention_sinks = true;
  c.attention_bias = true;
  c.layers = {LayerConfig{3, 10000.0, {}}, LayerConfig{0, 10000.0, {}}};
  return c;
}

TEST(Decoder, GptOssBlockCachedEqualsFullAndLanesMatchSoloRuns) {
  const Model m = *Model::FromSeed(GptOssConfig(), 29);
  ExpectCachedEqualsFull(m);
  ExpectLanesMatchSoloRuns(m);
}

TEST(Decoder, EachGptOssOptionChangesTheLogits) {
  // One set of weights; each variant turns one option off and drops only
  // the tensors that option reads, so nothing else moves.
  ExpectEachChangeMovesTheLogits(
      *Model::FromSeed(GptOssConfig(), 31),
      {
          [](ModelConfig& c, LayerWeights&) { c.routing = Routing::kSoftmaxTopK; },
          [](ModelConfig& c, LayerWeights& l) {
            c.moe_bias = false;
            l.router_bias = {};
            l.expert_gate_bias.clear();
            l.expert_up_bias.clear();
            l.expert_down_bias.clear();
          },
          [](ModelConfig& c, LayerWeights&) { c.swiglu_limit = 0; },
          [](ModelConfig& c, LayerWeights& l) {
            c.output_bias = false;
            l.bo = {};
          },
          [](ModelConfig& c, LayerWeights& l) {
            c.attention_sinks = false;
            l.sinks = {};
          },
      });
}

TEST(Decoder, BatchLanesMatchTheirSoloRuns) {
  const Decoder dec(WorkedModel());
  const std::vector<int32_t> lane0 = {0, 99, 100, 5}, lane1 = {0, 7, 42, 200};
  std::vector<int32_t> both = lane0;
  both.insert(both.end(), lane1.begin(), lane1.end());
  auto batched = Placed(WorkedModel(), 3, {1, 3, 0, 2}, 2);
  const auto logits = Append(dec, batched, both);
  auto solo0 = Placed(WorkedModel(), 12, {0});
  auto solo1 = Placed(WorkedModel(), 12, {0});
  auto want = Append(dec, solo0, lane0);
  const auto b = Append(dec, solo1, lane1);
  want.insert(want.end(), b.begin(), b.end());
  EXPECT_EQ(logits, want);
  EXPECT_EQ(logits, *dec.Forward(both, 2));
}

TEST(Decoder, RejectsBadTokensWithoutChange) {
  const Decoder dec(WorkedModel());
  auto cache = Placed(WorkedModel(), 3, {2, 0, 3, 1});
  Append(dec, cache, Document());
  const CacheState before = Capture(cache);
  EXPECT_EQ(StepLanes(dec, cache, std::vector<int32_t>{258}, LogitRows::kLast).status().code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(StepLanes(dec, cache, std::vector<int32_t>{-1}, LogitRows::kLast).status().code(),
            StatusCode::kOutOfRange);
  // Past the last placed page.
  EXPECT_EQ(StepLanes(dec, cache, std::vector<int32_t>(6, 3), LogitRows::kLast).status().code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(Capture(cache), before);
}

// A model whose logits overflow float32 (huge final gain and head) while
// every K/V row stays finite: the failure comes after all layers wrote
// their rows, and still nothing is committed.
TEST(Decoder, FailureAfterAllRowsWrittenLeavesCacheUnchanged) {
  ModelConfig c = WorkedExampleConfig();
  c.tie_embeddings = false;
  SplitMix64 rng(20);
  auto w = InitializeWeights(c, rng);
  w.final_norm = Tensor::FromDoubles({8}, std::vector<double>(8, 1e30));
  // Each logit term ~1e60: inf in float32.
  w.lm_head = Tensor::FromDoubles({258, 8}, std::vector<double>(258 * 8, 1e30));
  auto huge = *Model::Create(c, std::move(w));
  const Decoder dec(huge);
  auto cache = Placed(huge, 3, {2, 0, 3, 1});
  // One committed position, written directly.
  const kv::SeqId lane = cache.lanes[0];
  const std::pair<kv::SeqId, uint64_t> request{lane, 1};
  auto plan = *cache.cache.PrepareAppend(std::span(&request, 1));
  ASSERT_TRUE(plan.has_value());
  for (uint64_t l = 0; l < 2; ++l) {
    const std::vector<float> row(4, l == 0 ? 0.5f : 0.25f);
    ASSERT_TRUE(cache.cache.WriteRows(l, plan->slot_mapping(), row, row).ok());
  }
  cache.cache.Commit(*plan);
  const CacheState before = Capture(cache);
  auto r = StepLanes(dec, cache, std::vector<int32_t>{0, 99, 100}, LogitRows::kLast);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("non-finite logit"), std::string::npos);
  EXPECT_EQ(Capture(cache), before);
}

// Layer 1's keys overflow float32 after layer 0 wrote its rows.
TEST(Decoder, FailureInALaterLayerLeavesCacheUnchanged) {
  ModelConfig c = WorkedExampleConfig();
  SplitMix64 rng(20);
  auto w = InitializeWeights(c, rng);
  w.layers[1].attn_norm = Tensor::FromDoubles({8}, std::vector<double>(8, 1e20));
  w.layers[1].wk = Tensor::FromDoubles({4, 8}, std::vector<double>(32, 1e20));
  auto bad = *Model::Create(c, std::move(w));
  const Decoder dec(bad);
  auto cache = Placed(bad, 3, {2, 0, 3, 1});
  const CacheState before = Capture(cache);
  auto r = StepLanes(dec, cache, Document(), LogitRows::kLast);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("layer 1"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("key element"), std::string::npos) << r.error().message();
  EXPECT_EQ(Capture(cache), before);
}

// After a failed step the cache continues exactly as one that never failed.
TEST(Decoder, FailedStepDoesNotPerturbLaterSteps) {
  const Decoder dec(WorkedModel());
  auto a = Placed(WorkedModel(), 3, {2, 0, 3, 1});
  auto b = Placed(WorkedModel(), 3, {2, 0, 3, 1});
  Append(dec, a, Document());
  Append(dec, b, Document());
  ASSERT_FALSE(StepLanes(dec, a, std::vector<int32_t>{5, 6, 7, 8, 300}, LogitRows::kLast).ok());
  const std::vector<int32_t> next = {42};
  EXPECT_EQ(Append(dec, a, next, LogitRows::kLast), Append(dec, b, next, LogitRows::kLast));
}

TEST(Decoder, ForwardRejectsTooManyPositions) {
  const Decoder dec(WorkedModel());
  auto r = dec.Forward(std::vector<int32_t>(13, 2), 1);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace folio::model

namespace folio::model {
namespace {

// One continuous-batching step over a PagedKvCache. Every sequence's last
// row equals what the cache-free forward pass gives for the same tokens alone,
// bit for bit, whatever the batch holds: chunked prefill of one sequence
// next to decode of another, in shuffled pages.
class PagedStep : public ::testing::Test {
 protected:
  PagedStep() {
    ModelConfig c = WorkedExampleConfig();
    c.max_positions = 64;
    c.num_kv_heads = 2;
    model_ = std::make_unique<Model>(*Model::FromSeed(c, 5));
    kv::PagedKvCacheConfig kc;
    kc.num_layers = c.num_layers;
    kc.num_kv_heads = c.num_kv_heads;
    kc.head_dim = c.head_dim();
    kc.page_size = 4;
    kc.num_pages = 32;
    kc.dtype = DType::kF32;
    cache_ = std::make_unique<kv::PagedKvCache>(*kv::PagedKvCache::Create(kc));
  }

  // Appends tokens[s] to sequence seqs[s] for all s in one step.
  std::vector<float> Step(const std::vector<kv::SeqId>& seqs,
                          const std::vector<std::vector<int32_t>>& tokens) {
    std::vector<std::pair<kv::SeqId, uint64_t>> requests;
    std::vector<int32_t> flat;
    for (size_t s = 0; s < seqs.size(); ++s) {
      requests.emplace_back(seqs[s], tokens[s].size());
      flat.insert(flat.end(), tokens[s].begin(), tokens[s].end());
    }
    auto plan = cache_->PrepareAppend(requests);
    EXPECT_TRUE(plan.ok() && plan->has_value());
    auto meta = cache_->BuildBatchMetadata(seqs, &**plan);
    EXPECT_TRUE(meta.ok()) << meta.status().ToString();
    auto logits = Decoder(*model_).Step(*cache_, *meta, flat);
    EXPECT_TRUE(logits.ok()) << logits.status().ToString();
    cache_->Commit(**plan);
    return *logits;
  }

  // The last row's logits of `tokens` alone, from the cache-free forward
  // pass.
  std::vector<float> Alone(const std::vector<int32_t>& tokens) {
    const std::vector<float> all = *Decoder(*model_).Forward(tokens, 1);
    return std::vector<float>(all.end() - 258, all.end());
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<kv::PagedKvCache> cache_;
};

// Positions come from the metadata's CSR pages (kv::BatchContexts), the
// one source the kernels read too: metadata that cannot give a context is
// refused by field, and the cache's plan is left to abort.
TEST_F(PagedStep, MetadataWhoseContextsDoNotFollowIsRefused) {
  const kv::SeqId a = cache_->AddSequence();
  auto plan = cache_->PrepareAppend(std::vector<std::pair<kv::SeqId, uint64_t>>{{a, 3}});
  ASSERT_TRUE(plan.ok() && plan->has_value());
  const kv::BatchMetadata good = *cache_->BuildBatchMetadata(std::vector<kv::SeqId>{a}, &**plan);
  const std::vector<int32_t> tokens = {0, 7, 8};
  ASSERT_TRUE(Decoder(*model_).Step(*cache_, good, tokens).ok());
  const auto refused = [&](kv::BatchMetadata m, const std::string& field) {
    const auto r = Decoder(*model_).Step(*cache_, m, tokens);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(field), std::string::npos) << r.status().ToString();
  };
  kv::BatchMetadata m = good;
  m.last_page_len[0] = 0;  // a sequence with pages and an empty last page
  refused(m, "last_page_len");
  m = good;
  m.indptr.push_back(m.indptr.back());  // two sequences' pages for a batch of one
  refused(m, "indptr");
  m = good;
  m.last_page_len.push_back(0);  // a second (empty) context for a batch of one
  m.indptr.push_back(m.indptr.back());
  refused(m, "last_page_len");
  cache_->Abort(std::move(**plan));
}

TEST_F(PagedStep, MixedPrefillAndDecodeMatchSoloRuns) {
  const kv::SeqId a = cache_->AddSequence(), b = cache_->AddSequence();
  const std::vector<int32_t> pa = {0, 99, 100, 101, 102, 103, 104}, pb = {0, 7, 8};
  // Step 1: a's first chunk and b's whole prompt.
  auto s1 = Step({a, b}, {{pa.begin(), pa.begin() + 5}, pb});
  ASSERT_EQ(s1.size(), 2u * 258u);
  EXPECT_EQ(std::vector<float>(s1.begin() + 258, s1.end()), Alone(pb));
  // Step 2: b decodes while a finishes its prompt.
  auto s2 = Step({b, a}, {{42}, {pa.begin() + 5, pa.end()}});
  std::vector<int32_t> b2 = pb;
  b2.push_back(42);
  EXPECT_EQ(std::vector<float>(s2.begin(), s2.begin() + 258), Alone(b2));
  EXPECT_EQ(std::vector<float>(s2.begin() + 258, s2.end()), Alone(pa));
}

TEST_F(PagedStep, ForkedPrefixDecodesLikeAFreshSequence) {
  const kv::SeqId a = cache_->AddSequence();
  const std::vector<int32_t> prompt = {0, 99, 100, 101, 102, 103};
  Step({a}, {prompt});
  const kv::SeqId b = *cache_->Fork(a);  // shares a's pages, tail copied on write
  auto both = Step({a, b}, {{17}, {23}});
  std::vector<int32_t> pa = prompt, pb = prompt;
  pa.push_back(17);
  pb.push_back(23);
  EXPECT_EQ(std::vector<float>(both.begin(), both.begin() + 258), Alone(pa));
  EXPECT_EQ(std::vector<float>(both.begin() + 258, both.end()), Alone(pb));
}

}  // namespace
}  // namespace folio::model

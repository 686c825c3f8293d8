// The BERT block on the paged cache: a step's hidden states equal the
// cache-free forward pass bit for bit whatever the pages and the batch,
// attention looks both ways, and what an encoder cannot do is refused.
// (Agreement with transformers' BertModel: tests/python/test_bert.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "folio/kv/paged_kv_cache.h"
#include "folio/model/decoder.h"

namespace folio::model {
namespace {

ModelConfig BertConfig() {
  ModelConfig c;
  c.architecture = Architecture::kBert;
  c.block = Block::kBert;
  c.activation = Activation::kGelu;
  c.hidden_size = 16;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  c.ffn_size = 24;
  c.num_layers = 2;
  c.max_positions = 32;
  c.vocab_size = 258;
  c.type_vocab_size = 2;
  c.norm_eps = 1e-12;
  c.tie_embeddings = false;
  return c;
}

const Model& Bert() {
  static const Model* m = new Model(*Model::FromSeed(BertConfig(), 41));
  return *m;
}

// A paged cache for the model, pages of `page_size`, the pool's pages
// handed out in `order` first (so sequences get shuffled pages).
std::unique_ptr<kv::PagedKvCache> Cache(uint64_t page_size) {
  const ModelConfig& c = Bert().config();
  kv::PagedKvCacheConfig kc;
  kc.num_layers = c.num_layers;
  kc.num_kv_heads = c.num_kv_heads;
  kc.head_dim = c.head_dim();
  kc.page_size = page_size;
  kc.num_pages = 32;
  kc.dtype = DType::kF32;
  return std::make_unique<kv::PagedKvCache>(*kv::PagedKvCache::Create(kc));
}

// One step of whole prompts; their hidden states, sequence by sequence.
Result<std::vector<float>> Step(kv::PagedKvCache& cache,
                                const std::vector<std::vector<int32_t>>& prompts,
                                LogitRows rows = LogitRows::kHidden) {
  std::vector<kv::SeqId> seqs;
  std::vector<std::pair<kv::SeqId, uint64_t>> requests;
  std::vector<int32_t> flat;
  for (const std::vector<int32_t>& p : prompts) {
    seqs.push_back(cache.AddSequence());
    requests.emplace_back(seqs.back(), p.size());
    flat.insert(flat.end(), p.begin(), p.end());
  }
  auto plan = cache.PrepareAppend(requests);
  EXPECT_TRUE(plan.ok() && plan->has_value());
  auto meta = cache.BuildBatchMetadata(seqs, &**plan);
  EXPECT_TRUE(meta.ok()) << meta.status().ToString();
  std::vector<float> hidden;
  const Result<std::vector<float>> logits = Decoder(Bert()).Step(
      cache, *meta, flat, std::span<const LogitRows>(&rows, 1), nullptr, &hidden);
  cache.Abort(std::move(**plan));
  if (!logits.ok()) return logits.status();
  EXPECT_TRUE(logits->empty());
  return hidden;
}

TEST(BertBlock, StepEqualsForwardWhateverThePagesAndTheBatch) {
  const std::vector<int32_t> a = {101, 7, 250, 3, 99, 42, 102}, b = {101, 5, 102};
  const Decoder dec(Bert());
  std::vector<float> want = *dec.Forward(a, 1);
  ASSERT_EQ(want.size(), a.size() * 16);
  const std::vector<float> alone_b = *dec.Forward(b, 1);
  want.insert(want.end(), alone_b.begin(), alone_b.end());
  for (const uint64_t page_size : {1, 3, 16}) {
    auto cache = Cache(page_size);
    // Pages of another sequence first, so these sit elsewhere in the pool.
    cache->AddSequence();
    EXPECT_EQ(*Step(*cache, {a, b}), want) << "page_size " << page_size;
    EXPECT_EQ(*Step(*cache, {b}), alone_b) << "page_size " << page_size;
  }
}

TEST(BertBlock, AttentionSeesLaterTokens) {
  const Decoder dec(Bert());
  const std::vector<float> x = *dec.Forward(std::vector<int32_t>{101, 7, 8, 102}, 1);
  const std::vector<float> y = *dec.Forward(std::vector<int32_t>{101, 7, 9, 102}, 1);
  // The first position's state changes with the third token.
  EXPECT_NE(std::vector<float>(x.begin(), x.begin() + 16),
            std::vector<float>(y.begin(), y.begin() + 16));
}

TEST(BertBlock, StepRefusesLogitsAndAPromptInChunks) {
  auto cache = Cache(4);
  const Result<std::vector<float>> logits = Step(*cache, {{101, 7, 102}}, LogitRows::kLast);
  EXPECT_EQ(logits.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(logits.status().message().find("hidden states, not logits"), std::string::npos);

  // A prompt's first rows committed in one step, the rest offered in the
  // next: the second step would attend without the earlier rows' view of
  // the later ones.
  const kv::SeqId s = cache->AddSequence();
  const std::vector<std::pair<kv::SeqId, uint64_t>> two = {{s, 2}};
  auto first = cache->PrepareAppend(two);
  cache->Commit(**first);
  auto rest = cache->PrepareAppend(two);
  const std::vector<kv::SeqId> seqs = {s};
  auto meta = cache->BuildBatchMetadata(seqs, &**rest);
  std::vector<float> hidden;
  const LogitRows rows = LogitRows::kHidden;
  const std::vector<int32_t> tokens = {8, 102};
  const Result<std::vector<float>> chunked = Decoder(Bert()).Step(
      *cache, *meta, tokens, std::span<const LogitRows>(&rows, 1), nullptr, &hidden);
  cache->Abort(std::move(**rest));
  EXPECT_EQ(chunked.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(chunked.status().message().find("in one step"), std::string::npos);
}

TEST(BertBlock, TokenTypesChangeTheStatesAndAreChecked) {
  const std::vector<int32_t> pair = {101, 7, 102, 9, 102};
  auto cache = Cache(4);
  const auto step = [&](std::vector<int32_t> types) -> Result<std::vector<float>> {
    const kv::SeqId s = cache->AddSequence();
    const std::vector<std::pair<kv::SeqId, uint64_t>> request = {{s, pair.size()}};
    auto plan = cache->PrepareAppend(request);
    const std::vector<kv::SeqId> seqs = {s};
    auto meta = cache->BuildBatchMetadata(seqs, &**plan);
    std::vector<float> hidden;
    const LogitRows rows = LogitRows::kHidden;
    const Result<std::vector<float>> r =
        Decoder(Bert()).Step(*cache, std::span<const kv::BatchMetadata>(&*meta, 1), pair,
                             std::span<const LogitRows>(&rows, 1), nullptr, &hidden, types);
    cache->Abort(std::move(**plan));
    if (!r.ok()) return r.status();
    return hidden;
  };
  const std::vector<float> untyped = *step({});
  EXPECT_EQ(*step({0, 0, 0, 0, 0}), untyped);
  EXPECT_NE(*step({0, 0, 0, 1, 1}), untyped);
  EXPECT_EQ(step({0, 0, 0, 2, 2}).status().code(), StatusCode::kOutOfRange);  // 2 types
  EXPECT_EQ(step({0, 1}).status().code(), StatusCode::kInvalidArgument);
}

TEST(BertBlock, ClassifyRunsTheHeadAndNeedsOne) {
  const std::vector<float> cls(16, 0.25f);
  EXPECT_EQ(Decoder(Bert()).Classify(cls).status().code(), StatusCode::kFailedPrecondition);
  ModelConfig c = BertConfig();
  c.architecture = Architecture::kBertClassifier;
  c.num_labels = 3;
  const Model m = *Model::FromSeed(c, 47);
  const Decoder dec(m);
  const std::vector<float> logits = *dec.Classify(cls);
  ASSERT_EQ(logits.size(), 3u);
  // classifier(tanh(pooler cls)), in double.
  const std::vector<double> p = m.weights().pooler.ToDoubles(),
                            pb = m.weights().pooler_bias.ToDoubles(),
                            k = m.weights().classifier.ToDoubles(),
                            kb = m.weights().classifier_bias.ToDoubles();
  std::vector<double> pooled(16);
  for (size_t i = 0; i < 16; ++i) {
    double sum = pb[i];
    for (size_t j = 0; j < 16; ++j) sum += p[i * 16 + j] * cls[j];
    pooled[i] = std::tanh(sum);
  }
  for (size_t l = 0; l < 3; ++l) {
    double sum = kb[l];
    for (size_t j = 0; j < 16; ++j) sum += k[l * 16 + j] * pooled[j];
    EXPECT_NEAR(logits[l], sum, 1e-5) << l;
  }
  EXPECT_EQ(dec.Classify(std::vector<float>(15)).status().code(), StatusCode::kInvalidArgument);
}

TEST(BertBlock, ConfigRefusesADecodersOptions) {
  EXPECT_TRUE(BertConfig().Validate().ok());
  using Change = void (*)(ModelConfig&);
  for (const Change change : std::vector<Change>{
           [](ModelConfig& c) { c.qk_norm = true; },
           [](ModelConfig& c) { c.window = 4; },
           [](ModelConfig& c) { c.attention_bias = true; },
           [](ModelConfig& c) { c.rope_scaling.type = RopeScaling::Type::kLinear; },
           [](ModelConfig& c) { c.activation = Activation::kSilu; },
           [](ModelConfig& c) { c.num_kv_heads = 2; },
           [](ModelConfig& c) { c.type_vocab_size = 0; },
           [](ModelConfig& c) { c.num_experts = 2; },
       }) {
    ModelConfig c = BertConfig();
    change(c);
    EXPECT_EQ(c.Validate().code(), StatusCode::kInvalidArgument);
  }
  ModelConfig decoder = WorkedExampleConfig();
  decoder.type_vocab_size = 2;
  EXPECT_EQ(decoder.Validate().code(), StatusCode::kInvalidArgument);
  decoder = WorkedExampleConfig();
  decoder.activation = Activation::kGelu;
  EXPECT_EQ(decoder.Validate().code(), StatusCode::kInvalidArgument);
  decoder = WorkedExampleConfig();
  decoder.num_labels = 1;  // a decoder's score head is fine
  EXPECT_TRUE(decoder.Validate().ok());
}

TEST(BertBlock, ParameterCountIsEveryTensorsElements) {
  uint64_t count = 0;
  ForEachTensor(Bert().config(), Bert().weights(),
                [&](const std::string&, const std::vector<uint64_t>& shape, const Tensor&) {
                  uint64_t n = 1;
                  for (uint64_t s : shape) n *= s;
                  count += n;
                });
  EXPECT_EQ(Bert().config().ParameterCount(), count);
}

}  // namespace
}  // namespace folio::model

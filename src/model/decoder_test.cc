#include "folio/model/decoder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "folio/tokenizer/byte_tokenizer.h"

namespace folio::model {
namespace {

using kv::PageTableLayout;

const Model& WorkedModel() {
  static const Model* m = new Model(*Model::FromSeed(WorkedExampleConfig(), 20));
  return *m;
}

DecoderCache MakeCache(const Model& m, const PageTableLayout& layout, uint64_t batch = 1,
                       DType dtype = DType::kF64) {
  return *DecoderCache::Create(m, layout, batch, dtype);
}

std::vector<int32_t> Document() { return tokenizer::ByteTokenizer::Encode("abcde", true, true); }

// Per-layer snapshots plus length: everything a failed step must not change.
struct CacheState {
  uint64_t length;
  std::vector<std::vector<double>> keys, values;
  bool operator==(const CacheState&) const = default;
};
CacheState Capture(const DecoderCache& c) {
  CacheState s{c.length(), {}, {}};
  for (size_t l = 0; l < c.num_layers(); ++l) {
    auto snap = c.layer(l).Snapshot<double>();
    s.keys.push_back(snap.keys);
    s.values.push_back(snap.values);
  }
  return s;
}

TEST(Decoder, PagedAndContiguousLogitsAgreeBitForBit) {
  const Decoder<double> dec(WorkedModel());
  auto contiguous = MakeCache(WorkedModel(), *PageTableLayout::Contiguous(12));
  const auto want = *dec.Prefill(contiguous, Document());
  ASSERT_EQ(want.size(), 7u * 258u);
  for (auto layout :
       {*PageTableLayout::Create(12, 3, {2, 0, 3, 1}),
        *PageTableLayout::Create(12, 3, {3, 1, 0, 2}), *PageTableLayout::Create(12, 5, {2, 0, 1}),
        *PageTableLayout::Create(12, 1, {11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}),
        *PageTableLayout::Identity(12, 12)}) {
    auto paged = MakeCache(WorkedModel(), layout);
    EXPECT_EQ(*dec.Prefill(paged, Document()), want) << "page_size " << layout.page_size();
  }
}

// Contract 3: token-by-token decode, chunked prefill and the cache-free
// forward pass produce the same bits, in both compute precisions.
template <typename T>
void ExpectCachedEqualsFull(const Model& model, DType kv_dtype) {
  const Decoder<T> dec(model);
  const auto doc = Document();
  const auto full = *dec.Forward(doc, 1);
  const uint64_t vocab = model.config().vocab_size;
  auto cache = MakeCache(model, *PageTableLayout::Create(12, 3, {2, 0, 3, 1}), 1, kv_dtype);
  std::vector<T> stepwise;
  for (int32_t t : doc) {
    auto row = *dec.Decode(cache, std::span<const int32_t>(&t, 1));
    stepwise.insert(stepwise.end(), row.begin(), row.end());
  }
  EXPECT_EQ(stepwise, full);
  cache.Reset();
  auto first = *dec.Prefill(cache, std::span<const int32_t>(doc).first(3));
  auto rest = *dec.Prefill(cache, std::span<const int32_t>(doc).subspan(3));
  first.insert(first.end(), rest.begin(), rest.end());
  EXPECT_EQ(first, full);
  EXPECT_EQ(full.size(), doc.size() * vocab);
}

TEST(Decoder, CachedLogitsEqualFullForwardFloat64) {
  ExpectCachedEqualsFull<double>(WorkedModel(), DType::kF64);
}

TEST(Decoder, CachedLogitsEqualFullForwardFloat32) {
  ExpectCachedEqualsFull<float>(WorkedModel(), DType::kF32);
}

TEST(Decoder, WindowedGqaCachedEqualsFull) {
  ModelConfig c = WorkedExampleConfig();
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.window = 3;
  c.tie_embeddings = false;
  ExpectCachedEqualsFull<double>(*Model::FromSeed(c, 7), DType::kF64);
}

TEST(Decoder, BatchLanesMatchTheirSoloRuns) {
  const Decoder<double> dec(WorkedModel());
  const std::vector<int32_t> lane0 = {0, 99, 100, 5}, lane1 = {0, 7, 42, 200};
  std::vector<int32_t> both = lane0;
  both.insert(both.end(), lane1.begin(), lane1.end());
  auto batched = MakeCache(WorkedModel(), *PageTableLayout::Create(12, 3, {1, 3, 0, 2}), 2);
  const auto logits = *dec.Prefill(batched, both);
  auto solo = MakeCache(WorkedModel(), *PageTableLayout::Contiguous(12));
  const auto a = *dec.Prefill(solo, lane0);
  solo.Reset();
  const auto b = *dec.Prefill(solo, lane1);
  std::vector<double> concat = a;
  concat.insert(concat.end(), b.begin(), b.end());
  EXPECT_EQ(logits, concat);
}

TEST(Decoder, ResetThenPrefillMatchesFreshCache) {
  const Decoder<double> dec(WorkedModel());
  auto cache = MakeCache(WorkedModel(), *PageTableLayout::Create(12, 3, {2, 0, 3, 1}));
  const auto first = *dec.Prefill(cache, Document());
  cache.Reset();
  EXPECT_EQ(cache.length(), 0u);
  EXPECT_EQ(*dec.Prefill(cache, Document()), first);
}

TEST(DecoderCache, RejectsCapacityBeyondModelPositions) {
  auto r = DecoderCache::Create(WorkedModel(), *PageTableLayout::Identity(13, 3), 1, DType::kF64);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("capacity 13 exceeds"), std::string::npos);
}

TEST(DecoderCache, ShorterCacheGivesSameLogits) {
  const Decoder<double> dec(WorkedModel());
  auto full = MakeCache(WorkedModel(), *PageTableLayout::Identity(12, 3));
  auto short_cache = MakeCache(WorkedModel(), *PageTableLayout::Create(8, 3, {2, 0, 1}));
  EXPECT_EQ(*dec.Prefill(short_cache, Document()), *dec.Prefill(full, Document()));
  EXPECT_EQ(dec.Prefill(short_cache, std::vector<int32_t>{4, 5}).error().code(),
            StatusCode::kResourceExhausted);
}

TEST(Decoder, RejectsCacheOfAnotherModel) {
  auto other = *Model::FromSeed(WorkedExampleConfig(), 21);
  auto cache = MakeCache(other, *PageTableLayout::Identity(12, 3));
  const Decoder<double> dec(WorkedModel());
  auto r = dec.Prefill(cache, Document());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache.length(), 0u);
}

TEST(Decoder, RejectsBadTokensAndOverflowWithoutChange) {
  const Decoder<double> dec(WorkedModel());
  auto cache = MakeCache(WorkedModel(), *PageTableLayout::Identity(12, 3));
  ASSERT_TRUE(dec.Prefill(cache, Document()).has_value());
  const CacheState before = Capture(cache);
  EXPECT_EQ(dec.Prefill(cache, std::vector<int32_t>{258}).error().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(dec.Prefill(cache, std::vector<int32_t>(6, 3)).error().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(dec.Decode(cache, std::vector<int32_t>{3, 4}).error().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Capture(cache), before);
}

// A model whose logits overflow float32 (huge final gain and head) while
// every K/V row stays finite: the failure comes after all layers staged
// their rows, and still nothing is committed.
TEST(Decoder, FailureAfterAllRowsPreparedLeavesCacheUnchanged) {
  ModelConfig c = WorkedExampleConfig();
  c.tie_embeddings = false;
  SplitMix64 rng(20);
  auto w = InitializeWeights(c, rng);
  w.final_norm = Tensor::FromDoubles({8}, std::vector<double>(8, 1e30));
  // Each logit term ~1e60: inf in float32.
  w.lm_head = Tensor::FromDoubles({258, 8}, std::vector<double>(258 * 8, 1e30));
  auto huge = *Model::Create(c, std::move(w));
  const Decoder<float> dec(huge);
  auto cache = MakeCache(huge, *PageTableLayout::Create(12, 3, {2, 0, 3, 1}), 1, DType::kF32);
  ASSERT_TRUE(cache.layer(0)
                  .Append<float>(std::vector<float>(4, 0.5f), std::vector<float>(4, 0.5f), 1)
                  .ok());
  ASSERT_TRUE(cache.layer(1)
                  .Append<float>(std::vector<float>(4, 0.25f), std::vector<float>(4, 0.25f), 1)
                  .ok());
  const CacheState before = Capture(cache);
  auto r = dec.Prefill(cache, std::vector<int32_t>{0, 99, 100});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("non-finite logit"), std::string::npos);
  EXPECT_EQ(Capture(cache), before);
  EXPECT_EQ(cache.layer(0).pending(), 0u);
  EXPECT_EQ(cache.layer(1).pending(), 0u);
}

// Layer 1's keys overflow float32 after layer 0 staged its rows.
TEST(Decoder, FailureInALaterLayerRollsBackEarlierLayers) {
  ModelConfig c = WorkedExampleConfig();
  SplitMix64 rng(20);
  auto w = InitializeWeights(c, rng);
  w.layers[1].attn_norm = Tensor::FromDoubles({8}, std::vector<double>(8, 1e20));
  w.layers[1].wk = Tensor::FromDoubles({4, 8}, std::vector<double>(32, 1e20));
  auto bad = *Model::Create(c, std::move(w));
  const Decoder<float> dec(bad);
  auto cache = MakeCache(bad, *PageTableLayout::Identity(12, 3), 1, DType::kF32);
  const CacheState before = Capture(cache);
  auto r = dec.Prefill(cache, Document());
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("layer 1: key element"), std::string::npos);
  EXPECT_EQ(Capture(cache), before);
  EXPECT_EQ(cache.layer(0).pending(), 0u);
}

// After a failed step the cache continues exactly as one that never failed.
TEST(Decoder, FailedStepDoesNotPerturbLaterSteps) {
  const Decoder<double> dec(WorkedModel());
  auto a = MakeCache(WorkedModel(), *PageTableLayout::Create(12, 3, {2, 0, 3, 1}));
  auto b = MakeCache(WorkedModel(), *PageTableLayout::Create(12, 3, {2, 0, 3, 1}));
  ASSERT_TRUE(dec.Prefill(a, Document()).has_value());
  ASSERT_TRUE(dec.Prefill(b, Document()).has_value());
  ASSERT_FALSE(dec.Prefill(a, std::vector<int32_t>{5, 6, 7, 8, 9, 300}).has_value());
  const std::vector<int32_t> next = {42};
  EXPECT_EQ(*dec.Decode(a, next), *dec.Decode(b, next));
}

TEST(Decoder, ForwardRejectsTooManyPositions) {
  const Decoder<double> dec(WorkedModel());
  auto r = dec.Forward(std::vector<int32_t>(13, 2), 1);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace folio::model

namespace folio::model {
namespace {

// One continuous-batching step over a PagedKvCache. Every sequence's last
// row equals what the fixed-layout cache gives for the same tokens alone,
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
    auto logits = Decoder<float>(*model_).Step(*cache_, *meta, flat);
    EXPECT_TRUE(logits.ok()) << logits.status().ToString();
    cache_->Commit(**plan);
    return *logits;
  }

  // The last row's logits of `tokens` prefilled alone in a fixed cache.
  std::vector<float> Alone(const std::vector<int32_t>& tokens) {
    auto cache =
        *DecoderCache::Create(*model_, *kv::PageTableLayout::Identity(64, 64), 1, DType::kF32);
    return *Decoder<float>(*model_).Prefill(cache, tokens, LogitRows::kLast);
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<kv::PagedKvCache> cache_;
};

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

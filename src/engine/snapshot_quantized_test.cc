// KV snapshots of quantized caches: i8 pages travel with their row scales
// and continue bit-identically; f8e4m3 has no encoding.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "folio/engine/engine.h"
#include "folio/format/kv_snapshot.h"
#include "folio/tokenizer/byte_tokenizer.h"
#include "testing/engine_drive.h"
#include "testing/test_model.h"

namespace folio::engine {
namespace {

using test_support::Drive;
using test_support::ExpectNoLeak;
using test_support::InOrder;
using test_support::Outcome;
using test_support::SampledWithLogprobs;
using test_support::SharedStemPrompts;
using test_support::TestModel;

const std::vector<std::vector<int32_t>>& kPrompts = test_support::TestPrompts();

EngineConfig I8Config() {
  EngineConfig config;
  config.kv_dtype = DType::kI8;
  config.page_size = 4;
  return config;
}

// A running i8 engine with kPrompts[0] one step in, and its snapshot.
struct Exported {
  Engine engine;
  format::KvSnapshot snapshot;
};
Exported ExportOne(const EngineConfig& config) {
  auto engine = *Engine::Create(TestModel(), config);
  const RequestId id = *engine.AddRequest(kPrompts[0], SampledWithLogprobs());
  EXPECT_TRUE(engine.Step().ok());
  auto snapshot = engine.ExportSnapshot(std::vector<RequestId>{id});
  EXPECT_TRUE(snapshot.ok()) << snapshot.status().ToString();
  return {std::move(engine), std::move(*snapshot)};
}

void ExpectRefusal(Engine& e, const format::KvSnapshot& s, StatusCode code,
                   const std::string& needle) {
  const uint64_t free_before = e.cache().pool().num_free();
  const Status st = e.ImportSnapshot(s).status();
  EXPECT_EQ(st.code(), code) << st.ToString();
  EXPECT_NE(st.ToString().find(needle), std::string::npos) << st.ToString();
  EXPECT_EQ(e.cache().pool().num_free(), free_before);
  EXPECT_FALSE(e.HasUnfinished());
}

// Prefill here, decode there, with i8 pages: requests exported mid-flight
// (one still in prefill, others decoding, some sharing stem pages) finish
// in another engine with the tokens, log-prob bits and text of an engine
// that never exported, and so does the exporting engine, which carries on.
TEST(EngineSnapshotQuantized, I8ImportedRequestsContinueBitIdentically) {
  const tokenizer::Tokenizer& tok = tokenizer::ByteTokenizer::AsTokenizer();
  const auto prompts = SharedStemPrompts();
  RequestParams params = SampledWithLogprobs();
  params.stop_strings = {"zz"};
  EngineConfig config = I8Config();
  config.max_num_batched_tokens = 24;  // so the long prompt is still prefilling
  auto reference = *Engine::Create(TestModel(), config, nullptr, &tok);
  const std::vector<Outcome> want = Drive(reference, prompts, params, InOrder(prompts.size()));
  for (const Outcome& o : want) EXPECT_FALSE(o.logprob_bits.empty());

  auto sender = *Engine::Create(TestModel(), config, nullptr, &tok);
  std::vector<RequestId> ids;
  std::map<RequestId, size_t> sender_index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ids.push_back(*sender.AddRequest(prompts[i], params));
    sender_index[ids.back()] = i;
  }
  std::vector<Outcome> sent(prompts.size());
  auto step_sender = [&] {
    auto outs = sender.Step();
    ASSERT_TRUE(outs.ok()) << outs.status().ToString();
    for (const StepOutput& o : *outs) test_support::Record(o, sent[sender_index.at(o.id)]);
  };
  for (int step = 0; step < 4; ++step) step_sender();

  std::vector<RequestId> moving;
  std::vector<size_t> moving_index;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (sent[i].finish != FinishReason::kNone) continue;
    if (sender.ExportSnapshot(std::vector<RequestId>{ids[i]}).ok()) {
      moving.push_back(ids[i]);
      moving_index.push_back(i);
    }
  }
  ASSERT_GE(moving.size(), 3u);
  auto snapshot = sender.ExportSnapshot(moving);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status().ToString();
  EXPECT_EQ(snapshot->kv_dtype, format::ElementType::kI8);
  uint64_t references = 0;
  for (const auto& q : snapshot->sequences) references += q.block_table.size();
  EXPECT_LT(snapshot->num_pages, references);  // the stem's pages travel once
  ASSERT_EQ(snapshot->key_scales.size(), snapshot->num_layers);
  ASSERT_EQ(snapshot->value_scales.size(), snapshot->num_layers);
  for (uint64_t l = 0; l < snapshot->num_layers; ++l) {
    const uint64_t rows = snapshot->num_pages * snapshot->page_size * snapshot->num_kv_heads;
    EXPECT_EQ(snapshot->key_scales[l].size(), rows);
    EXPECT_EQ(snapshot->value_scales[l].size(), rows);
  }
  // Through the wire format.
  auto decoded = format::DecodeSnapshot(format::EncodeSnapshot(*snapshot));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->key_scales, snapshot->key_scales);
  EXPECT_EQ(decoded->value_scales, snapshot->value_scales);
  EXPECT_EQ(decoded->keys, snapshot->keys);

  EngineConfig other = config;
  other.num_pages = 300;  // a different pool, pages placed elsewhere
  auto receiver = *Engine::Create(TestModel(), other, nullptr, &tok);
  ASSERT_TRUE(receiver.AddRequest(kPrompts[3], SampledWithLogprobs()).ok());  // occupies pages
  ASSERT_TRUE(receiver.Step().ok());
  auto imported = receiver.ImportSnapshot(*decoded);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  ASSERT_EQ(imported->size(), moving.size());
  // The receiver's requests start from what the sender had said so far.
  std::vector<Outcome> received(prompts.size());
  std::map<RequestId, size_t> receiver_index;
  for (size_t k = 0; k < moving.size(); ++k) {
    receiver_index[(*imported)[k]] = moving_index[k];
    received[moving_index[k]] = sent[moving_index[k]];
  }
  while (receiver.HasUnfinished()) {
    auto outs = receiver.Step();
    ASSERT_TRUE(outs.ok()) << outs.status().ToString();
    for (const StepOutput& o : *outs) {
      if (receiver_index.count(o.id)) test_support::Record(o, received[receiver_index.at(o.id)]);
    }
  }
  while (sender.HasUnfinished()) step_sender();
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(sent[i], want[i]) << "sender, prompt " << i;
  }
  for (const size_t i : moving_index) {
    EXPECT_EQ(received[i], want[i]) << "receiver, prompt " << i;
  }
  ExpectNoLeak(sender);
  ExpectNoLeak(receiver);
}

// Hurray's quantization sections cover i8 / u8 storage only: an f8e4m3
// cache's codes have no faithful description, so no snapshot is written or
// read for one.
TEST(EngineSnapshotQuantized, F8E4M3IsUnimplemented) {
  EngineConfig config = I8Config();
  config.kv_dtype = DType::kF8E4M3;
  auto engine = *Engine::Create(TestModel(), config);
  const RequestId id = *engine.AddRequest(kPrompts[0], SampledWithLogprobs());
  ASSERT_TRUE(engine.Step().ok());
  const Status st = engine.ExportSnapshot(std::vector<RequestId>{id}).status();
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.ToString();
  EXPECT_NE(st.ToString().find("KV dtype f8e4m3 has no snapshot encoding"), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.ToString().find("i8 / u8 storage only"), std::string::npos) << st.ToString();

  const format::KvSnapshot i8 = ExportOne(I8Config()).snapshot;
  auto receiver = *Engine::Create(TestModel(), config);
  ExpectRefusal(receiver, i8, StatusCode::kUnimplemented, "f8e4m3 has no snapshot encoding");
}

TEST(EngineSnapshotQuantized, KvDtypeMismatchIsRefusedByName) {
  const format::KvSnapshot i8 = ExportOne(I8Config()).snapshot;
  EngineConfig f32 = I8Config();
  f32.kv_dtype = DType::kF32;
  auto float_engine = *Engine::Create(TestModel(), f32);
  ExpectRefusal(float_engine, i8, StatusCode::kInvalidArgument,
                "snapshot KV dtype i8 differs from this engine's f32");
  EngineConfig bf16 = f32;
  bf16.kv_dtype = DType::kBF16;
  auto bf16_engine = *Engine::Create(TestModel(), bf16);
  ExpectRefusal(bf16_engine, i8, StatusCode::kInvalidArgument, "KV dtype i8 differs");

  const format::KvSnapshot f32_snapshot = ExportOne(f32).snapshot;
  EXPECT_TRUE(f32_snapshot.key_scales.empty());
  auto i8_engine = *Engine::Create(TestModel(), I8Config());
  ExpectRefusal(i8_engine, f32_snapshot, StatusCode::kInvalidArgument,
                "snapshot KV dtype f32 differs from this engine's i8");
  EXPECT_TRUE(i8_engine.ImportSnapshot(i8).ok());
}

// Hurray's per-block block_size (here the page size) must be a power of
// two >= 2; the default page size, 16, is one.
TEST(EngineSnapshotQuantized, I8ExportNeedsAPowerOfTwoPageSize) {
  EngineConfig config = I8Config();
  config.page_size = 3;
  auto engine = *Engine::Create(TestModel(), config);
  const RequestId id = *engine.AddRequest(kPrompts[0], SampledWithLogprobs());
  ASSERT_TRUE(engine.Step().ok());
  const Status st = engine.ExportSnapshot(std::vector<RequestId>{id}).status();
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.ToString();
  EXPECT_NE(st.ToString().find("page size 3 cannot be exported with KV dtype i8"),
            std::string::npos)
      << st.ToString();
  EXPECT_NE(st.ToString().find("power of two >= 2"), std::string::npos) << st.ToString();

  EngineConfig defaults;
  defaults.kv_dtype = DType::kI8;
  EXPECT_EQ(defaults.page_size, 16u);
  const format::KvSnapshot s = ExportOne(defaults).snapshot;
  EXPECT_EQ(s.page_size, 16u);
  EXPECT_TRUE(format::DecodeSnapshot(format::EncodeSnapshot(s)).ok());
}

// A bad scale is refused before anything changes, like every other import
// error; a good snapshot then imports into the same engine.
TEST(EngineSnapshotQuantized, I8ImportRefusesBadScalesAndChangesNothing) {
  const format::KvSnapshot good = ExportOne(I8Config()).snapshot;
  auto receiver = *Engine::Create(TestModel(), I8Config());
  for (const float bad_scale : {0.0f, std::nanf("")}) {
    format::KvSnapshot bad = good;
    bad.value_scales[1][0] = bad_scale;
    ExpectRefusal(receiver, bad, StatusCode::kInvalidArgument,
                  "layer 1 value scale of page 0 slot 0 head 0");
  }
  format::KvSnapshot short_scales = good;
  short_scales.key_scales[0].pop_back();
  ExpectRefusal(receiver, short_scales, StatusCode::kInvalidArgument, "layer 0 key scales");
  EngineConfig tiny = I8Config();
  tiny.num_pages = 8;
  auto small = *Engine::Create(TestModel(), tiny);
  ASSERT_TRUE(small.AddRequest(kPrompts[3], SampledWithLogprobs()).ok());
  ASSERT_TRUE(small.Step().ok());  // 5 of 8 pages in use; the snapshot needs 4
  const uint64_t free_before = small.cache().pool().num_free();
  EXPECT_EQ(small.ImportSnapshot(good).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(small.cache().pool().num_free(), free_before);

  auto imported = receiver.ImportSnapshot(good);
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  while (receiver.HasUnfinished()) ASSERT_TRUE(receiver.Step().ok());
  ExpectNoLeak(receiver);
}

}  // namespace
}  // namespace folio::engine

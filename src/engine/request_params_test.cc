// The declared request parameters (engine/request_params.h): their checks,
// their effect on stopping, and their trip through a KV snapshot.
#include "folio/engine/request_params.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "folio/engine/engine.h"
#include "folio/tokenizer/byte_tokenizer.h"
#include "testing/test_model.h"

#ifndef FOLIO_SOURCE_DIR
#define FOLIO_SOURCE_DIR "."
#endif

namespace folio::engine {
namespace {

using test_support::TestModel;

const std::vector<int32_t> kPrompt = {0, 99, 100, 101, 102, 103};

Engine MakeEngine() {
  EngineConfig c;
  c.page_size = 4;
  c.num_pages = 64;
  return *Engine::Create(TestModel(), c, nullptr, &tokenizer::ByteTokenizer::AsTokenizer());
}

RequestParams Sampled(uint64_t max_tokens) {
  RequestParams p;
  p.sampling = {0.9, 0, 1.0, 0.0};
  p.max_tokens = max_tokens;
  p.seed = 5;
  return p;
}

std::vector<int32_t> Generated(const RequestParams& p) {
  Engine e = MakeEngine();
  auto out = e.Generate({kPrompt}, p);
  EXPECT_TRUE(out.ok()) << out.error().ToString();
  return out.ok() ? (*out)[0] : std::vector<int32_t>{};
}

// Steps the engine to the end; the tokens it produced.
std::vector<int32_t> Drain(Engine& e) {
  std::vector<int32_t> tokens;
  while (e.HasUnfinished()) {
    Result<std::vector<StepOutput>> step = e.Step();
    if (!step.ok()) {
      ADD_FAILURE() << step.error().ToString();
      break;
    }
    for (const StepOutput& o : *step)
      tokens.insert(tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
  }
  return tokens;
}

TEST(RequestParams, EosIdsStopUnlessIgnored) {
  const std::vector<int32_t> plain = Generated(Sampled(12));
  ASSERT_EQ(plain.size(), 12u);
  RequestParams p = Sampled(12);
  p.eos_token_ids = {plain[3]};
  const std::vector<int32_t> stopped = Generated(p);
  // It ends at the first occurrence of that id, which it keeps.
  const auto first = std::find(plain.begin(), plain.end(), plain[3]) - plain.begin();
  EXPECT_EQ(stopped, std::vector<int32_t>(plain.begin(), plain.begin() + first + 1));
  p.ignore_eos = true;
  EXPECT_EQ(Generated(p), plain);
  // stop_token_ids still apply.
  p.stop_token_ids = {plain[5]};
  const auto fifth = std::find(plain.begin(), plain.end(), plain[5]) - plain.begin();
  EXPECT_EQ(Generated(p), std::vector<int32_t>(plain.begin(), plain.begin() + fifth + 1));
}

TEST(RequestParams, StopTokenIdsListsEachOnceAndDropsEosWhenIgnored) {
  RequestParams p;
  p.stop_token_ids = {4, 9};
  p.eos_token_ids = {9, 2};
  EXPECT_EQ(StopTokenIds(p), (std::vector<int32_t>{4, 9, 2}));
  EXPECT_TRUE(IsStopToken(p, 2));
  p.ignore_eos = true;
  EXPECT_EQ(StopTokenIds(p), (std::vector<int32_t>{4, 9}));
  EXPECT_FALSE(IsStopToken(p, 2));
  EXPECT_TRUE(IsStopToken(p, 9));
}

TEST(RequestParams, EachBadValueIsRefusedByName) {
  Engine e = MakeEngine();
  const uint64_t vocab = TestModel().config().vocab_size;
  RequestParams p = Sampled(4);
  p.sampling.min_p = 1.5;
  Status s = e.ValidateRequest(kPrompt, p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("min_p"), std::string::npos) << s.ToString();
  p = Sampled(4);
  p.stop_token_ids = {1, static_cast<int32_t>(vocab)};
  s = e.ValidateRequest(kPrompt, p);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("stop_token_ids[1]"), std::string::npos) << s.ToString();
  p.stop_token_ids = std::vector<int32_t>(kMaxStopTokenIds + 1, 1);
  s = e.ValidateRequest(kPrompt, p);
  EXPECT_NE(s.message().find("at most"), std::string::npos) << s.ToString();
  p.stop_token_ids = {-1};
  EXPECT_EQ(ValidateRequestParams(p, vocab).code(), StatusCode::kOutOfRange);
  // The processors' parameters: each named, with its range.
  const auto refused = [&](const RequestParams& q, const std::string& name,
                           const std::string& range) {
    const Status st = e.ValidateRequest(kPrompt, q);
    EXPECT_FALSE(st.ok()) << name;
    EXPECT_NE(st.message().find(name), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find(range), std::string::npos) << st.ToString();
  };
  p = Sampled(4);
  p.processors.repetition_penalty = 0.0;
  refused(p, "repetition_penalty", "(0, 100]");
  p = Sampled(4);
  p.processors.presence_penalty = -2.5;
  refused(p, "presence_penalty", "[-2, 2]");
  p = Sampled(4);
  p.processors.penalty_last_n = -2;
  refused(p, "penalty_last_n", "[-1, ");
  p = Sampled(4);
  p.processors.logit_bias = {{3, 100.5}};
  refused(p, "logit_bias", "[-100, 100]");
  p.processors.logit_bias = {{static_cast<int32_t>(vocab), 1.0}};
  refused(p, "logit_bias", std::to_string(vocab));
  p.processors.logit_bias.clear();
  for (int32_t t = 0; t < 301; ++t) p.processors.logit_bias[t] = 1;
  s = ValidateRequestParams(p, 1000);
  EXPECT_NE(s.message().find("logit_bias has 301 entries; at most 300"), std::string::npos)
      << s.ToString();
  p = Sampled(4);
  p.processors.min_tokens = -1;
  refused(p, "min_tokens", "[0, ");
  p = Sampled(4);
  p.bad_words = {"a", ""};
  refused(p, "bad_words[1]", "empty");
  p = Sampled(4);
  p.processors.dry.base = 0.5;
  refused(p, "dry_base", "[1, 100]");
}

TEST(RequestParams, EveryDeclaredFieldTravelsInASnapshot) {
  Engine sender = MakeEngine();
  RequestParams p = Sampled(10);
  p.sampling.min_p = 0.25;
  p.stop_token_ids = {7, 8};
  p.eos_token_ids = {9};
  p.ignore_eos = true;
  // Every processor away from its default, so the receiver continues with
  // the same penalties, bans and breakers or the tokens differ.
  p.sampling.typical_p = 0.9;
  p.sampling.top_n_sigma = 2.0;
  p.sampling.xtc_probability = 0.5;
  p.sampling.xtc_threshold = 0.05;
  p.processors.repetition_penalty = 1.4;
  p.processors.presence_penalty = 0.5;
  p.processors.frequency_penalty = 0.25;
  p.processors.penalty_last_n = 12;
  p.processors.logit_bias = {{100, 2.0}, {101, -50.0}};
  p.processors.allowed_token_ids = {};
  p.processors.min_tokens = 3;
  p.processors.dry = {0.8, 1.5, 2, 16};
  p.bad_words = {"ab"};
  p.dry_sequence_breakers = {"\n", "x"};
  p.include_stop_str_in_output = true;
  p.skip_special_tokens = false;
  Result<RequestId> id = sender.AddRequest(kPrompt, p);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(sender.Step().ok());
  Result<format::KvSnapshot> snap = sender.ExportSnapshot(std::vector<RequestId>{*id});
  ASSERT_TRUE(snap.ok()) << snap.error().ToString();
  const auto& params = snap->sequences[0].request["params"];
  for (const RequestParamInfo& info : RequestParamInfos()) {
    EXPECT_TRUE(params.contains(std::string(info.name))) << info.name;
  }
  EXPECT_EQ(params["ignore_eos"], true);
  EXPECT_EQ(params["eos_token_ids"], std::vector<int32_t>{9});
  // Read back, the declared fields are the sender's.
  Result<RequestParams> back = RequestParamsFromJson(params, "test");
  ASSERT_TRUE(back.ok()) << back.error().ToString();
  EXPECT_FALSE(back->skip_special_tokens);
  nlohmann::json before = params;  // written before the field: true
  before.erase("skip_special_tokens");
  EXPECT_TRUE(RequestParamsFromJson(before, "test")->skip_special_tokens);
  ForEachRequestParam(*back, [&](const RequestParamInfo& info, const auto& value) {
    ForEachRequestParam(p, [&](const RequestParamInfo& sent, const auto& original) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>,
                                   std::decay_t<decltype(original)>>) {
        if (sent.name == info.name) {
          EXPECT_EQ(value, original) << info.name;
        }
      }
    });
  });

  Engine receiver = MakeEngine();
  Result<std::vector<RequestId>> ids = receiver.ImportSnapshot(*snap);
  ASSERT_TRUE(ids.ok()) << ids.error().ToString();
  // The imported request ends exactly as the sender's would.
  EXPECT_EQ(Drain(receiver), Drain(sender));

  // A snapshot written before a field was declared still reads: it keeps
  // the field's default.
  format::KvSnapshot old = *snap;
  old.sequences[0].request["params"].erase("ignore_eos");
  old.sequences[0].request["params"].erase("eos_token_ids");
  Engine third = MakeEngine();
  EXPECT_TRUE(third.ImportSnapshot(old).ok());
}

TEST(RequestParams, TheDocsTableIsTheDeclaration) {
  std::ifstream in(std::string(FOLIO_SOURCE_DIR) + "/docs/request-params.md");
  ASSERT_TRUE(in) << "docs/request-params.md is missing";
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find(RequestParamsMarkdown()), std::string::npos)
      << "docs/request-params.md must hold this table (from engine/request_params.h):\n"
      << RequestParamsMarkdown();
}

}  // namespace
}  // namespace folio::engine

// Renders checked against Python's jinja2: every case in
// testdata/render_cases.json holds a template, its variables and what
// jinja2 3.1 configured as Hugging Face's apply_chat_template made of them
// (tools/chat/make_render_cases.py writes the file). Hand-written tests
// below cover what Python cannot tell us: folio's error codes, positions
// and limits.
#include "folio/chat/template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#ifndef FOLIO_SOURCE_DIR
#define FOLIO_SOURCE_DIR "."
#endif

namespace folio::chat {
namespace {

using Json = nlohmann::ordered_json;

constexpr int64_t kTestEpoch = 1700000000;  // make_render_cases.py's EPOCH

struct Case {
  std::string name;
  Json data;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> LoadCases() {
  std::ifstream in(std::string(FOLIO_SOURCE_DIR) + "/src/chat/testdata/render_cases.json");
  std::stringstream text;
  text << in.rdbuf();
  std::vector<Case> cases;
  const Json all = Json::parse(text.str(), nullptr, false);
  if (!all.is_array()) return cases;
  for (const Json& c : all) cases.push_back({c["name"].get<std::string>(), c});
  return cases;
}

class RenderCase : public testing::TestWithParam<Case> {};

TEST_P(RenderCase, MatchesJinja2) {
  const Json& c = GetParam().data;
  const std::string source = c["template"].get<std::string>();
  Result<Template> t = Template::Parse(source);
  const std::string error = c.value("error", "");
  if (error == "syntax") {
    ASSERT_FALSE(t.has_value()) << source;
    EXPECT_EQ(t.error().code(), StatusCode::kInvalidArgument) << t.error().ToString();
    return;
  }
  ASSERT_TRUE(t.has_value()) << t.error().ToString() << "\n" << source;
  RenderOptions options;
  options.now_epoch_seconds = kTestEpoch;
  Result<std::string> r = t->Render(c["variables"], options);
  if (error.empty()) {
    ASSERT_TRUE(r.has_value()) << r.error().ToString() << "\n" << source;
    EXPECT_EQ(*r, c["output"].get<std::string>()) << source;
  } else if (error == "raised") {
    ASSERT_FALSE(r.has_value()) << *r;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.error().message(), "chat template raised: " + c["message"].get<std::string>());
  } else {
    ASSERT_FALSE(r.has_value()) << "rendered " << *r << "; jinja2 raised " << c["message"];
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument) << r.error().ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(Jinja2, RenderCase, testing::ValuesIn(LoadCases()),
                         [](const testing::TestParamInfo<Case>& p) { return p.param.name; });

TEST(RenderCases, FileIsPresent) { EXPECT_GT(LoadCases().size(), 100u); }

}  // namespace
}  // namespace folio::chat

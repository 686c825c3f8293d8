// What Python cannot tell us: folio's error codes and positions, the
// limits, and the API's promises (copies, reuse, key order).
#include <gtest/gtest.h>

#include <thread>

#include "folio/chat/template.h"

namespace folio::chat {
namespace {

using Json = nlohmann::ordered_json;

Status ParseError(std::string_view source, TemplateLimits limits = {}) {
  Result<Template> t = Template::Parse(source, limits);
  return t ? Status::Ok() : t.error();
}

Status RenderError(std::string_view source, const Json& vars = Json::object(),
                   TemplateLimits limits = {}) {
  Result<Template> t = Template::Parse(source, limits);
  if (!t) return t.error().WithContext("parse failed");
  Result<std::string> r = t->Render(vars);
  return r ? Status::Ok() : r.error();
}

std::string Render(std::string_view source, const Json& vars = Json::object()) {
  Result<Template> t = Template::Parse(source);
  if (!t) return "PARSE " + t.error().ToString();
  Result<std::string> r = t->Render(vars);
  return r ? *r : "RENDER " + r.error().ToString();
}

void ExpectStartsWith(const Status& s, StatusCode code, std::string_view prefix,
                      std::string_view also = {}) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_TRUE(s.message().starts_with(prefix)) << s.message();
  if (!also.empty()) {
    EXPECT_NE(s.message().find(also), std::string::npos) << s.message();
  }
}

TEST(TemplateParse, SyntaxErrorNamesLineColumnAndToken) {
  ExpectStartsWith(ParseError("line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}"),
                   StatusCode::kInvalidArgument, "3:10: ", "end of print statement");
}

TEST(TemplateParse, UnclosedBlockNamesWhatWasExpected) {
  ExpectStartsWith(ParseError("{% for m in messages %}\n{{ m }}"), StatusCode::kInvalidArgument,
                   "2:8: ", "'endfor'");
}

TEST(TemplateParse, UnknownTagIsASyntaxError) {
  ExpectStartsWith(ParseError("ab\n  {% do x.append(1) %}"), StatusCode::kInvalidArgument,
                   "2:6: ", "unknown tag 'do'");
}

TEST(TemplateParse, ColumnsCountCodePoints) {
  ExpectStartsWith(ParseError("é€😀{{ ) }}"), StatusCode::kInvalidArgument, "1:7: ");
}

TEST(TemplateParse, IncludeExtendsImportAreUnimplemented) {
  for (const char* source :
       {"{% include 'x.jinja' %}", "{% extends 'base' %}", "{% import 'm' as m %}",
        "{% from 'm' import f %}", "{% block b %}{% endblock %}"}) {
    const Status s = ParseError(source);
    EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << source;
    EXPECT_TRUE(s.message().starts_with("1:4: ")) << s.message();
  }
  ExpectStartsWith(ParseError("{% include 'x' %}"), StatusCode::kUnimplemented, "1:4: ", "include");
}

TEST(TemplateParse, RecursiveLoopsAndStarArgsAreUnimplemented) {
  ExpectStartsWith(ParseError("{% for x in y recursive %}{% endfor %}"), StatusCode::kUnimplemented,
                   "1:15: ", "recursive");
  ExpectStartsWith(ParseError("{{ f(*args) }}"), StatusCode::kUnimplemented, "1:6: ", "*args");
}

TEST(TemplateParse, AJinjaFilterFolioLacksIsUnimplemented) {
  ExpectStartsWith(ParseError("{{ x | truncate(3) }}"), StatusCode::kUnimplemented,
                   "1:8: ", "'truncate'");
}

TEST(TemplateParse, AFilterNobodyHasIsASyntaxError) {
  ExpectStartsWith(ParseError("{{ x | frobnicate }}"), StatusCode::kInvalidArgument,
                   "1:8: ", "frobnicate");
}

TEST(TemplateParse, UnknownFilterInsideIfFailsOnlyWhenRun) {
  // jinja2 defers unknown filters inside if statements to run time.
  Result<Template> t = Template::Parse("{% if x %}{{ y | truncate }}{% endif %}ok");
  ASSERT_TRUE(t.ok()) << t.error().ToString();
  EXPECT_EQ(*t->Render(Json{{"x", false}}), "ok");
  Result<std::string> r = t->Render(Json{{"x", true}});
  ASSERT_FALSE(r.ok());
  ExpectStartsWith(r.error(), StatusCode::kUnimplemented, "1:18: ", "truncate");
}

TEST(TemplateParse, DeepNestingIsResourceExhausted) {
  const std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_EQ(ParseError(deep).code(), StatusCode::kResourceExhausted);
  std::string ifs;
  for (int i = 0; i < 500; ++i) ifs += "{% if true %}";
  EXPECT_EQ(ParseError(ifs).code(), StatusCode::kResourceExhausted);
}

TEST(TemplateRender, RaiseExceptionMessageIsExact) {
  const Status s = RenderError("{{ raise_exception('Conversation roles must alternate') }}");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "chat template raised: Conversation roles must alternate");
  EXPECT_EQ(RenderError("{{ raise_exception(42) }}").message(), "chat template raised: 42");
}

TEST(TemplateRender, RuntimeErrorsNameLineAndColumn) {
  ExpectStartsWith(RenderError("ok\n{{ missing.attr }}"), StatusCode::kInvalidArgument,
                   "2:11: ", "'missing' is undefined");
  ExpectStartsWith(RenderError("{{ 'a' + 1 }}"), StatusCode::kInvalidArgument,
                   "1:8: ", "can only concatenate str");
  ExpectStartsWith(RenderError("{{ messages.append(1) }}", Json{{"messages", Json::array()}}),
                   StatusCode::kInvalidArgument, "1:19: ", "unsafe");
}

TEST(TemplateRender, OutputLimit) {
  TemplateLimits limits;
  limits.max_output_bytes = 100;
  ExpectStartsWith(RenderError("{% for i in range(50) %}abc{% endfor %}", Json::object(), limits),
                   StatusCode::kResourceExhausted, "1:", "max_output_bytes");
  // A string that grows without output is bounded too.
  ExpectStartsWith(RenderError("{% set ns = namespace(s='x') %}{% for i in range(20) %}"
                               "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                               Json::object(), limits),
                   StatusCode::kResourceExhausted, "1:");
  EXPECT_EQ(RenderError("{{ 'ab' * 1000 }}", Json::object(), limits).code(),
            StatusCode::kResourceExhausted);
}

TEST(TemplateRender, LoopIterationLimitCountsAllLoops) {
  TemplateLimits limits;
  limits.max_loop_iterations = 100;
  EXPECT_TRUE(RenderError("{% for i in range(10) %}{% for j in range(9) %}{% endfor %}{% endfor %}",
                          Json::object(), limits)
                  .ok());
  ExpectStartsWith(
      RenderError("{% for i in range(10) %}{% for j in range(10) %}{% endfor %}{% endfor %}",
                  Json::object(), limits),
      StatusCode::kResourceExhausted, "1:", "max_loop_iterations");
}

TEST(TemplateRender, CallDepthLimit) {
  TemplateLimits limits;
  limits.max_call_depth = 8;
  const char* source = "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{% endmacro %}";
  EXPECT_TRUE(RenderError(std::string(source) + "{{ f(7) }}", Json::object(), limits).ok());
  ExpectStartsWith(RenderError(std::string(source) + "{{ f(8) }}", Json::object(), limits),
                   StatusCode::kResourceExhausted, "1:", "max_call_depth");
}

TEST(TemplateRender, MacroCallsCountAgainstTheIterationLimit) {
  // Two calls per level: 2^20 calls without a loop.
  TemplateLimits limits;
  limits.max_loop_iterations = 1000;
  ExpectStartsWith(RenderError("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}"
                               "{% endif %}{% endmacro %}{{ f(20) }}",
                               Json::object(), limits),
                   StatusCode::kResourceExhausted, "1:", "max_loop_iterations");
}

TEST(TemplateRender, ValuesNestTooDeep) {
  ExpectStartsWith(RenderError("{% set ns = namespace(x=1) %}{% for i in range(1000) %}"
                               "{% set ns.x = [ns.x] %}{% endfor %}"),
                   StatusCode::kResourceExhausted, "1:", "nests deeper");
  Json deep = 1;
  for (int i = 0; i < 1000; ++i) deep = Json::array({deep});
  EXPECT_EQ(RenderError("{{ x }}", Json{{"x", deep}}).code(), StatusCode::kResourceExhausted);
}

TEST(TemplateRender, ANamespaceHoldingItselfPrints) {
  // A reference cycle: printing stops, and the render frees it (ASan).
  const std::string out = Render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  EXPECT_TRUE(out.starts_with("<Namespace {'me': <Namespace {'me': ")) << out.substr(0, 80);
}

TEST(TemplateRender, VariablesMustBeAnObject) {
  Result<Template> t = Template::Parse("x");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->Render(Json::array()).status().code(), StatusCode::kInvalidArgument);
}

TEST(TemplateRender, IntegersPast64BitsAreUnimplemented) {
  EXPECT_EQ(RenderError("{{ x }}", Json{{"x", 18446744073709551615u}}).code(),
            StatusCode::kUnimplemented);
  ExpectStartsWith(RenderError("{{ 2 ** 64 }}"), StatusCode::kUnimplemented, "1:6: ", "64-bit");
  EXPECT_EQ(RenderError("{{ 9223372036854775807 + 1 }}").code(), StatusCode::kUnimplemented);
}

TEST(TemplateRender, OrderedJsonKeepsKeyOrderAndJsonSortsIt) {
  Result<Template> t = Template::Parse("{{ d | tojson }} {% for k in d %}{{ k }}{% endfor %}");
  ASSERT_TRUE(t.ok());
  Json ordered = {{"d", {{"z", 1}, {"a", 2}}}};
  EXPECT_EQ(*t->Render(ordered), R"({"z": 1, "a": 2} za)");
  nlohmann::json sorted = {{"d", {{"z", 1}, {"a", 2}}}};
  EXPECT_EQ(*t->Render(sorted), R"({"a": 2, "z": 1} az)");
}

TEST(TemplateRender, CopiesShareTheProgramAndRenderAlike) {
  Result<Template> t =
      Template::Parse("{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}{% endfor %}");
  ASSERT_TRUE(t.ok());
  const Json vars = {{"messages", {{{"role", "user"}, {"content", " hi "}}}}};
  const Template copy = *t;
  Template moved = std::move(*t);
  EXPECT_EQ(*copy.Render(vars), "<user>hi");
  EXPECT_EQ(*moved.Render(vars), "<user>hi");
  EXPECT_EQ(*copy.Render(vars), *copy.Render(vars));
}

TEST(TemplateRender, ConcurrentRendersOfOneTemplate) {
  Result<Template> t = Template::Parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "{{ m | upper }}{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(t.ok());
  std::vector<std::thread> threads;
  std::vector<std::string> outs(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k) {
        outs[static_cast<size_t>(i)] = *t->Render(Json{{"messages", {"a", "b", "c"}}});
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& o : outs) EXPECT_EQ(o, "ABC3");
}

TEST(TemplateRender, StrftimeNowReadsTheLocalClockByDefault) {
  const std::string year = Render("{{ strftime_now('%Y') }}");
  ASSERT_EQ(year.size(), 4u) << year;
  EXPECT_GE(std::stoi(year), 2024);
  Result<Template> t = Template::Parse("{{ strftime_now('%Y-%m-%d %z') }}");
  RenderOptions o;
  o.now_epoch_seconds = 0;
  EXPECT_EQ(*t->Render(Json::object(), o), "1970-01-01 +0000");
}

TEST(TemplateRender, GenerationBlocksRenderTheirBody) {
  EXPECT_EQ(Render("a{% generation %}b{% set x = 1 %}{% endgeneration %}[{{ x }}]"), "ab[]");
}

}  // namespace
}  // namespace folio::chat

// What the tokenizer.json tests share: a fixture that writes JSON into a
// per-test temporary folder, loads it, and checks a refusal of its base
// file mutated one way (the code, and the field named in the message); and
// the same check for a TokenizerSpec (GGUF's vocabulary) mutated one way.
#ifndef FOLIO_TOKENIZER_TOKENIZER_JSON_FIXTURE_H_
#define FOLIO_TOKENIZER_TOKENIZER_JSON_FIXTURE_H_

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "folio/tokenizer/tokenizer.h"

namespace folio::tokenizer {

// r is a refusal with `code` and `needle` in its message.
inline void ExpectRefusal(const Result<Tokenizer>& r, StatusCode code, const std::string& needle) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), code) << r.error().ToString();
  EXPECT_NE(r.error().message().find(needle), std::string::npos)
      << "message '" << r.error().message() << "' lacks '" << needle << "'";
}

// Tokenizer::FromSpec refuses `base` mutated: `code`, `needle` named.
inline void ExpectSpecRefused(TokenizerSpec base, const std::function<void(TokenizerSpec&)>& mutate,
                              StatusCode code, const std::string& needle) {
  mutate(base);
  ExpectRefusal(Tokenizer::FromSpec(base), code, needle);
}

class TokenizerJsonFixture : public ::testing::Test {
 protected:
  using Json = nlohmann::json;

  // The valid tokenizer.json that ExpectRefused mutates.
  virtual Json Base() const = 0;

  void SetUp() override {
    const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("folio_" + std::string(t->test_suite_name()) + "_" + t->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path Write(const std::string& text, const std::string& name = "tokenizer.json") {
    const auto path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  Result<Tokenizer> Load(const Json& j) { return Tokenizer::FromTokenizerJson(Write(j.dump())); }
  // Loads the base mutated and expects `code` with `needle` in the message.
  void ExpectRefused(const std::function<void(Json&)>& mutate, StatusCode code,
                     const std::string& needle) {
    Json j = Base();
    mutate(j);
    SCOPED_TRACE("loading " + j.dump().substr(0, 200));
    ExpectRefusal(Load(j), code, needle);
  }

  std::filesystem::path dir_;
};

}  // namespace folio::tokenizer

#endif  // FOLIO_TOKENIZER_TOKENIZER_JSON_FIXTURE_H_

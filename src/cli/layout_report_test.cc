#include "cli/layout_report.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace folio::cli {
namespace {

using nlohmann::json;

const std::string kConfig = std::string(FOLIO_SOURCE_DIR) + "/configs/worked_example.toml";

json WorkedReport() {
  static const json* report = [] {
    auto cfg = LoadLayoutConfig(kConfig);
    EXPECT_TRUE(cfg.has_value()) << cfg.status().ToString();
    auto r = BuildLayoutReport(*cfg);
    EXPECT_TRUE(r.has_value()) << r.status().ToString();
    return new json(*r);
  }();
  return *report;
}

TEST(LayoutReport, MappingsMatchWorkedExample) {
  const json m = WorkedReport()["mappings"];
  ASSERT_EQ(m.size(), 7u);
  const uint64_t expected[] = {24, 26, 28, 0, 2, 4, 36};
  for (size_t p = 0; p < 7; ++p) {
    EXPECT_EQ(m[p]["logical_position"], p);
    EXPECT_EQ(m[p]["key_scalar_index"], expected[p]);
    EXPECT_EQ(m[p]["value_scalar_index"], expected[p]);
  }
  EXPECT_EQ(m[4]["physical_page"], 0);
  EXPECT_EQ(m[4]["offset_in_page"], 1);
}

TEST(LayoutReport, PayloadsMatchWorkedExample) {
  const json p = WorkedReport()["per_layer_payloads"];
  ASSERT_EQ(p["layers"].size(), 2u);
  for (const json& l : p["layers"]) {
    EXPECT_EQ(l["allocated_scalar_slots"], 96);
    EXPECT_EQ(l["allocated_payload_bytes"], 768);
    EXPECT_EQ(l["live_scalar_slots"], 56);
    EXPECT_EQ(l["live_payload_bytes"], 448);
    EXPECT_EQ(l["unused_scalar_slots"], 40);
    EXPECT_EQ(l["unused_payload_bytes"], 320);
    EXPECT_EQ(l["active_page_tail_scalar_slots"], 16);
    EXPECT_EQ(l["active_page_tail_payload_bytes"], 128);
    EXPECT_EQ(l["inactive_page_scalar_slots"], 24);
    EXPECT_EQ(l["inactive_page_payload_bytes"], 192);
  }
  EXPECT_EQ(p["all_layers_allocated_payload_bytes"], 1536);
  // Positions 7, 8 are the tail of physical page 3; page 1 (9-11) is inactive.
  const json pages = WorkedReport()["physical_pages"];
  EXPECT_EQ(pages[3]["state"], "partial");
  EXPECT_EQ(pages[3]["positions"], json({6, 7, 8}));
  EXPECT_EQ(pages[1]["state"], "inactive");
  EXPECT_EQ(pages[1]["positions"], json({9, 10, 11}));
}

TEST(LayoutReport, ModelComparisonAgrees) {
  const json c = WorkedReport()["model_comparison"];
  EXPECT_EQ(c["logits_compared"], 1806);
  EXPECT_EQ(c["same_cached_bits"], true);
  EXPECT_EQ(c["within_tolerance"], true);
  EXPECT_EQ(c["tolerance"], 1e-10);
}

TEST(LayoutReport, GenerationReproducesPublishedTokens) {
  const json g = WorkedReport()["generation"];
  EXPECT_EQ(g["prompt"], json({0, 99}));
  EXPECT_EQ(g["generated_ids"], json({70, 56, 216, 6}));
  EXPECT_EQ(g["same_tokens"], true);
  EXPECT_EQ(g["same_steps"], true);
  EXPECT_EQ(g["same_stop_reason"], true);
  EXPECT_EQ(g["same_work_counts"], true);
  EXPECT_EQ(g["same_next_random_value"], true);
  EXPECT_EQ(g["final_cache_length"], 5);
  EXPECT_EQ(g["prefill_tokens"], 2);
  EXPECT_EQ(g["decode_tokens"], 3);
  EXPECT_EQ(g["stop_reason"], "max_tokens");
}

TEST(LayoutReport, RoundingComparisonMatchesWorkedExample) {
  const json r = WorkedReport()["rounding_comparison_empty_layer"];
  EXPECT_EQ(r["paged_allocated_scalar_slots"], 96);
  EXPECT_EQ(r["contiguous_allocated_scalar_slots"], 80);
  EXPECT_EQ(r["extra_scalar_slots"], 16);
  EXPECT_EQ(r["extra_payload_bytes"], 128);
  EXPECT_EQ(r["live_length"], 0);
  EXPECT_EQ(r["inaccessible_positions"], json({10, 11}));
}

// Any valid permutation gives the same logits and tokens; only addresses move.
TEST(LayoutReport, AnotherPermutationSameResults) {
  auto cfg = *LoadLayoutConfig(kConfig);
  cfg.page_table = {1, 3, 0, 2};
  const json other = *BuildLayoutReport(cfg);
  EXPECT_EQ(other["generation"]["layouts"], WorkedReport()["generation"]["layouts"]);
  EXPECT_EQ(other["model_comparison"]["same_cached_bits"], true);
  EXPECT_NE(other["mappings"], WorkedReport()["mappings"]);
}

TEST(LayoutReport, Float32ComputeSameTokens) {
  auto cfg = *LoadLayoutConfig(kConfig);
  cfg.compute = DType::kF32;
  cfg.kv_dtype = DType::kF32;
  const json r = *BuildLayoutReport(cfg);
  EXPECT_EQ(r["generation"]["generated_ids"], json({70, 56, 216, 6}));
  EXPECT_EQ(r["model_comparison"]["same_cached_bits"], true);
  EXPECT_EQ(r["per_layer_payloads"]["layers"][0]["allocated_payload_bytes"], 384);
}

class LayoutConfigErrors : public ::testing::Test {
 protected:
  Status Load(const std::string& toml) {
    // One file per test: CTest runs tests of this binary in parallel.
    const auto path = std::filesystem::temp_directory_path() /
                      (std::string("folio_layout_config_") +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
                       std::to_string(counter_++) + ".toml");
    std::ofstream(path) << toml;
    auto r = LoadLayoutConfig(path);
    std::filesystem::remove(path);
    return r.status();
  }
  int counter_ = 0;
};

TEST_F(LayoutConfigErrors, UnknownKeyIsNamed) {
  EXPECT_NE(Load("[cache]\npage_sise = 3\n").message().find("unknown key [cache] page_sise"),
            std::string::npos);
}

TEST_F(LayoutConfigErrors, WrongTypeIsNamed) {
  EXPECT_NE(Load("[cache]\npage_size = \"3\"\n").message().find("[cache] page_size"),
            std::string::npos);
  EXPECT_NE(Load("[cache]\npage_table = [1, -2]\n").message().find("non-negative"),
            std::string::npos);
  EXPECT_NE(Load("[cache]\nkv_dtype = \"f8\"\n").message().find("'f8'"), std::string::npos);
}

TEST_F(LayoutConfigErrors, SyntaxErrorNamesLine) {
  EXPECT_NE(Load("[model]\nseed = = 3\n").message().find("line 2"), std::string::npos);
}

TEST(LayoutReport, RejectsAliasingTable) {
  auto cfg = *LoadLayoutConfig(kConfig);
  cfg.page_table = {2, 0, 2, 1};
  auto r = BuildLayoutReport(cfg);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("aliases"), std::string::npos);
}

}  // namespace
}  // namespace folio::cli

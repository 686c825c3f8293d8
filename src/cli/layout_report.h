// `folio layout`: the worked-example report as one JSON document.
#ifndef FOLIO_CLI_LAYOUT_REPORT_H_
#define FOLIO_CLI_LAYOUT_REPORT_H_

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "folio/core/dtype.h"
#include "folio/core/status.h"
#include "folio/model/config.h"

namespace folio::cli {

struct LayoutRunConfig {
  model::ModelConfig model;  // model.max_positions is the cache capacity
  uint64_t seed = 20;
  uint64_t page_size = 3;
  std::vector<uint64_t> page_table = {2, 0, 3, 1};
  uint64_t batch = 1;
  DType kv_dtype = DType::kF64;
  DType compute = DType::kF64;
  std::string document = "abcde";
  uint64_t prompt_tokens = 2;
  uint64_t max_new_tokens = 4;
  double temperature = 0.0;
  uint64_t top_k = 0;
  uint64_t sampling_seed = 20;
  uint64_t rounding_capacity = 10;
  uint64_t rounding_page_size = 3;
};

// Reads a TOML file shaped like configs/worked_example.toml. Unknown
// sections or keys and values of the wrong type are errors naming them.
Result<LayoutRunConfig> LoadLayoutConfig(const std::filesystem::path& path);

// Runs the worked example end to end and returns the report with sections
// config, model, mappings, physical_pages, per_layer_payloads,
// model_comparison, generation and rounding_comparison_empty_layer.
Result<nlohmann::json> BuildLayoutReport(const LayoutRunConfig& config);

}  // namespace folio::cli

#endif  // FOLIO_CLI_LAYOUT_REPORT_H_

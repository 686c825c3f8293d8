// gpt-oss's MXFP4 experts as transformers packs them, re-packed into
// ggml's blocks: checked through ops::DequantizeRow against transformers'
// definition (convert_moe_packed_tensors), restated here.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "checkpoint/loaders.h"
#include "folio/core/splitmix64.h"
#include "folio/ops/weight_type.h"

namespace folio::checkpoint {
namespace {

using Role = GptOssExpertPart::Role;

// Two experts, hidden 64, ffn 32: gate_up has 64 rows of 2 blocks, down
// 64 rows of 1 block.
ModelConfig Config() {
  ModelConfig c;
  c.num_experts = 2;
  c.hidden_size = 64;
  c.expert_ffn_size = 32;
  return c;
}

// transformers' packed pair for `rows` rows of `cols` columns per expert:
// random codes, scales 120 ... 134.
struct Packed {
  std::vector<std::byte> blocks, scales;
  StoredBytes blocks_view, scales_view;
};
Packed RandomPacked(const std::string& name, uint64_t experts, uint64_t rows, uint64_t cols,
                    uint64_t seed) {
  SplitMix64 rng(seed);
  Packed p;
  const uint64_t n = experts * rows * (cols / 32);
  p.blocks.resize(n * 16);
  p.scales.resize(n);
  for (std::byte& b : p.blocks) b = static_cast<std::byte>(rng.NextU64() & 0xff);
  for (std::byte& s : p.scales) s = static_cast<std::byte>(120 + rng.NextU64() % 15);
  p.blocks_view = {name + "_blocks", {experts, rows, cols / 32, 16}, p.blocks};
  p.scales_view = {name + "_scales", {experts, rows, cols / 32}, p.scales};
  return p;
}

// Element k of stored row `row` of expert e, as transformers reads it: the
// low (k even) or high nibble of block byte k % 32 / 2 indexes E2M1's
// values, times 2^(scale - 127). (E2M1's -0 compares equal to 0.)
float HfValue(const Packed& p, uint64_t rows, uint64_t cols, uint64_t e, uint64_t row, uint64_t k) {
  constexpr float kFp4[16] = {0,     0.5f,  1,     1.5f,  2,     3,     4,     6,
                              -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  const uint64_t block = (e * rows + row) * (cols / 32) + k / 32;
  const auto byte = std::to_integer<uint32_t>(p.blocks[block * 16 + k % 32 / 2]);
  const uint32_t code = k % 2 == 0 ? byte & 0x0f : byte >> 4;
  const int exp = static_cast<int>(std::to_integer<uint32_t>(p.scales[block])) - 127;
  return std::ldexp(kFp4[code], exp);
}

TEST(GptOssMxfp4, GateUpAndDownRowsKeepTransformersValues) {
  const ModelConfig c = Config();
  const Packed gate_up = RandomPacked("gate_up_proj", 2, 64, 64, 1);
  const Packed down = RandomPacked("down_proj", 2, 64, 32, 2);
  for (Role role : {Role::kGate, Role::kUp, Role::kDown}) {
    const bool is_down = role == Role::kDown;
    const Packed& p = is_down ? down : gate_up;
    const uint64_t stored_rows = 64, cols = is_down ? 32 : 64, rows = is_down ? 64 : 32;
    for (uint64_t e = 0; e < 2; ++e) {
      SCOPED_TRACE("role " + std::to_string(static_cast<int>(role)) + " expert " +
                   std::to_string(e));
      Result<Tensor> t = GptOssMxfp4ExpertTensor(c, p.blocks_view, p.scales_view,
                                                 GptOssExpertPart{"x", e, role, false});
      ASSERT_TRUE(t.has_value()) << t.error().ToString();
      ASSERT_EQ(t->type, ops::WeightType::kMXFP4);
      ASSERT_EQ(t->shape, (std::vector<uint64_t>{rows, cols}));
      ASSERT_EQ(t->bytes.size(), rows * cols / 32 * 17);
      std::vector<float> got(cols);
      for (uint64_t r = 0; r < rows; ++r) {
        ops::DequantizeRow(ops::WeightType::kMXFP4, t->bytes.data() + r * cols / 32 * 17, got);
        // Gate is stored row 2r, up 2r + 1; down's rows are as stored.
        const uint64_t from = is_down ? r : 2 * r + (role == Role::kUp ? 1 : 0);
        for (uint64_t k = 0; k < cols; ++k) {
          ASSERT_EQ(got[k], HfValue(p, stored_rows, cols, e, from, k))
              << "row " << r << " column " << k;
        }
      }
    }
  }
}

TEST(GptOssMxfp4, ScalesThatDisagreeWithBlocksAreRefusedByName) {
  const ModelConfig c = Config();
  Packed p = RandomPacked("gate_up_proj", 2, 64, 64, 3);
  p.scales_view.shape = {2, 64, 1};
  p.scales_view.bytes = std::span<const std::byte>(p.scales).first(128);
  const Result<Tensor> t = GptOssMxfp4ExpertTensor(c, p.blocks_view, p.scales_view,
                                                   GptOssExpertPart{"x", 0, Role::kGate, false});
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.error().message().find("tensor gate_up_proj_scales has shape [2,64,1], expected "
                                     "[2,64,2]"),
            std::string::npos)
      << t.error().message();
}

TEST(GptOssMxfp4, BlocksOfAnotherConfigAreRefusedByName) {
  ModelConfig c = Config();
  c.num_experts = 3;
  const Packed p = RandomPacked("down_proj", 2, 64, 32, 4);
  const Result<Tensor> t = GptOssMxfp4ExpertTensor(c, p.blocks_view, p.scales_view,
                                                   GptOssExpertPart{"x", 0, Role::kDown, false});
  ASSERT_FALSE(t.has_value());
  EXPECT_NE(t.error().message().find("tensor down_proj_blocks has shape [2,64,1,16], expected "
                                     "[3,64,1,16]"),
            std::string::npos)
      << t.error().message();
}

TEST(GptOssMxfp4, RowsOfPartialBlocksAreRefused) {
  ModelConfig c = Config();
  c.expert_ffn_size = 48;  // down's rows: 48 columns
  const Packed p = RandomPacked("down_proj", 2, 64, 32, 5);
  const Result<Tensor> t = GptOssMxfp4ExpertTensor(c, p.blocks_view, p.scales_view,
                                                   GptOssExpertPart{"x", 0, Role::kDown, false});
  ASSERT_FALSE(t.has_value());
  EXPECT_NE(t.error().message().find("down_proj_blocks: MXFP4 rows of 48 elements"),
            std::string::npos)
      << t.error().message();
}

TEST(GptOssMxfp4, TheE8M0NanIsRefusedNamingExpertRowAndBlock) {
  const ModelConfig c = Config();
  Packed p = RandomPacked("gate_up_proj", 2, 64, 64, 6);
  p.scales[(1 * 64 + 7) * 2 + 1] = std::byte{0xff};  // expert 1, stored row 7 (up 3), block 1
  const Result<Tensor> gate = GptOssMxfp4ExpertTensor(c, p.blocks_view, p.scales_view,
                                                      GptOssExpertPart{"x", 1, Role::kGate, false});
  EXPECT_TRUE(gate.has_value());  // gate reads the even rows only
  const Result<Tensor> up = GptOssMxfp4ExpertTensor(c, p.blocks_view, p.scales_view,
                                                    GptOssExpertPart{"x", 1, Role::kUp, false});
  ASSERT_FALSE(up.has_value());
  EXPECT_EQ(up.error().message(),
            "tensor gate_up_proj_scales: expert 1 row 7 block 1 has the E8M0 scale 0xff (NaN in "
            "OCP MX)");
}

}  // namespace
}  // namespace folio::checkpoint

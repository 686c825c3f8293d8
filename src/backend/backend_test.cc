#include "folio/backend/backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "folio/core/splitmix64.h"
#include "folio/ops/quantize.h"

namespace folio::backend {
namespace {

std::vector<float> Random(size_t n, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(2 * rng.NextUnit() - 1);
  return v;
}

TEST(Backend, NamesParseBackAndUnknownNamesAreRefused) {
  for (const BackendKind k : {BackendKind::kCpu, BackendKind::kReference}) {
    EXPECT_EQ(*ParseBackendKind(BackendName(k)), k);
    EXPECT_EQ(MakeBackend(k)->kind(), k);
  }
  const auto bad = ParseBackendKind("cuda");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().ToString().find("cuda"), std::string::npos);
}

TEST(Backend, UploadRefusesAnInvalidView) {
  const std::vector<float> w(6);
  const ops::WeightView q8{reinterpret_cast<const std::byte*>(w.data()), ops::WeightType::kQ8_0, 2,
                           3};  // 3 columns: not whole Q8_0 blocks
  for (const BackendKind k : {BackendKind::kCpu, BackendKind::kReference}) {
    EXPECT_EQ(MakeBackend(k)->Upload(q8).status().code(), StatusCode::kInvalidArgument);
  }
}

// The reference matmul accumulates in double and rounds once; the SIMD one
// accumulates in f32. Each output is a dot of `cols` products of values in
// [-1, 1): the f32 sum's error is at most cols * eps * sum|products| (a
// loose, order-independent bound), here <= cols^2 * eps.
TEST(Backend, CpuMatMulIsWithinTheF32BoundOfTheReference) {
  const uint64_t rows = 37, cols = 96, n = 5;
  const std::vector<float> w = Random(rows * cols, 1), x = Random(n * cols, 2);
  const ops::WeightView view{reinterpret_cast<const std::byte*>(w.data()), ops::WeightType::kF32,
                             rows, cols};
  ThreadPool pool(2);
  auto cpu = MakeBackend(BackendKind::kCpu, &pool);
  auto ref = MakeBackend(BackendKind::kReference);
  std::vector<float> a(n * rows), b(n * rows);
  ASSERT_TRUE(cpu->MatMul(*cpu->Upload(view), x, n, a).ok());
  ASSERT_TRUE(ref->MatMul(*ref->Upload(view), x, n, b).ok());
  const double bound = static_cast<double>(cols * cols) * std::numeric_limits<float>::epsilon();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], bound) << i;
}

// One plan, two layers' pools; the reference (float64 two-pass softmax) and
// the kernel agree within f32 rounding of a convex combination of values
// in [-1, 1) (the kernel's online softmax rescales in f32: a few eps per
// key, scaled by the context).
TEST(Backend, AttentionPlansOnceAndAgreesAcrossBackends) {
  const uint64_t heads = 2, q_heads = 4, dim = 16, page = 4, pages = 6;
  const kv::PagedKvCacheConfig kc{2, heads, dim, page, pages, DType::kF32, {}, 0};
  ThreadPool pool(2);
  std::vector<std::vector<float>> outs;
  for (const BackendKind k : {BackendKind::kCpu, BackendKind::kReference}) {
    auto be = MakeBackend(k, &pool);
    Result<kv::PagedKvCache> cache = be->CreateKvPool(kc);
    ASSERT_TRUE(cache.ok());
    const kv::SeqId seq = cache->AddSequence();
    const std::pair<kv::SeqId, uint64_t> req{seq, 10};
    auto plan = cache->PrepareAppend({&req, 1});
    ASSERT_TRUE(plan.ok() && plan->has_value());
    for (uint64_t layer = 0; layer < 2; ++layer) {
      ASSERT_TRUE(be->WriteKv(*cache, layer, (*plan)->slot_mapping(),
                              Random(10 * heads * dim, 10 + layer),
                              Random(10 * heads * dim, 20 + layer))
                      .ok());
    }
    const std::vector<kv::SeqId> seqs = {seq};
    auto meta = cache->BuildBatchMetadata(seqs, &**plan);
    ASSERT_TRUE(meta.ok());
    const std::vector<float> q = Random(10 * q_heads * dim, 3);
    std::vector<float> out(q.size());
    attention::PagedAttentionParams p;
    p.num_q_heads = q_heads;
    p.scale = 0.25;
    auto attn = be->PlanAttention(p, q, out, cache->View(0), kv::ViewOf(*meta));
    ASSERT_TRUE(attn.ok()) << attn.status().ToString();
    std::vector<float> both;
    for (uint64_t layer = 0; layer < 2; ++layer) {
      ASSERT_TRUE((*attn)->Run(q, cache->View(layer), out, {}).ok());
      both.insert(both.end(), out.begin(), out.end());
    }
    outs.push_back(both);
  }
  const double bound = 64 * 10 * std::numeric_limits<float>::epsilon();
  for (size_t i = 0; i < outs[0].size(); ++i) EXPECT_NEAR(outs[0][i], outs[1][i], bound) << i;
}

// The element-wise ops split a large call (a prefill's, >= 32K elements)
// over the pool by rows: the bits equal the same call on one thread, and
// RmsNorm and Rope (scalar on both backends) equal the reference's.
TEST(Backend, ElementwiseOpsGiveTheSameBitsOnAnyThreadCount) {
  const uint64_t rows = 96, width = 576, head_dim = 64, half = head_dim / 2;
  const std::vector<float> x = Random(rows * width, 30), gain = Random(width, 31);
  const std::vector<float> cos = Random(rows * half, 32), sin = Random(rows * half, 33);
  const std::vector<float> up = Random(rows * width, 34);
  ThreadPool pool(3);
  const auto run = [&](Backend& be) {
    std::vector<float> norm(x.size()), rot = x, gate = x, geglu = x;
    be.RmsNorm(x, gain, 1e-5f, norm);
    be.Rope(rot, rows, head_dim, cos, sin, /*neox=*/true);
    be.SwiGlu(gate, up);
    be.GeGlu(geglu, up);
    return std::vector<std::vector<float>>{norm, rot, gate, geglu};
  };
  const auto alone = run(*MakeBackend(BackendKind::kCpu));
  const auto spread = run(*MakeBackend(BackendKind::kCpu, &pool));
  const auto reference = run(*MakeBackend(BackendKind::kReference));
  for (size_t op = 0; op < 4; ++op) {
    EXPECT_EQ(std::memcmp(alone[op].data(), spread[op].data(), x.size() * sizeof(float)), 0)
        << "op " << op;
  }
  for (size_t op = 0; op < 2; ++op) {
    EXPECT_EQ(std::memcmp(alone[op].data(), reference[op].data(), x.size() * sizeof(float)), 0)
        << "op " << op;
  }
}

// Several weights on one input: each output has the bits of MatMul on that
// weight alone, on both backends, in both activation modes, and with packed
// and unpacked weights in one call (f32 has no packed form).
TEST(Backend, MatMulsEqualsMatMulPerWeight) {
  const uint64_t cols = 256, n = 6;
  const std::vector<float> x = Random(n * cols, 5);
  std::vector<std::vector<std::byte>> stored;
  std::vector<ops::WeightView> views;
  for (const auto& [type, rows] : {std::pair{ops::WeightType::kQ4_K, uint64_t{40}},
                                   std::pair{ops::WeightType::kQ8_0, uint64_t{8}},
                                   std::pair{ops::WeightType::kF32, uint64_t{3}}}) {
    const std::vector<float> w = Random(rows * cols, 10 + rows);
    stored.emplace_back(rows * ops::WeightRowBytes(type, cols));
    for (uint64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(ops::QuantizeRow(type, std::span(w).subspan(r * cols, cols),
                                   stored.back().data() + r * ops::WeightRowBytes(type, cols))
                      .ok());
    }
    views.push_back({stored.back().data(), type, rows, cols});
  }
  ThreadPool pool(2);
  for (const BackendKind kind : {BackendKind::kCpu, BackendKind::kReference}) {
    for (const auto mode : {ops::MatMulActivations::kF32, ops::MatMulActivations::kQ8}) {
      auto be = MakeBackend(kind, &pool, mode);
      std::vector<Weight> weights;
      for (const ops::WeightView& v : views) weights.push_back(*be->Upload(v));
      for (const size_t count : {size_t{2}, size_t{3}}) {  // all packed under q8, then a mix
        std::vector<const Weight*> ws;
        std::vector<std::vector<float>> got, want;
        std::vector<std::span<float>> ys;
        for (size_t i = 0; i < count; ++i) {
          ws.push_back(&weights[i]);
          want.emplace_back(n * views[i].rows);
          got.emplace_back(n * views[i].rows);
          ASSERT_TRUE(be->MatMul(weights[i], x, n, want.back()).ok());
        }
        for (auto& y : got) ys.emplace_back(y);
        ASSERT_TRUE(be->MatMuls(ws, x, n, ys).ok());
        for (size_t i = 0; i < count; ++i) {
          EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), got[i].size() * sizeof(float)), 0)
              << BackendName(kind) << ", weight " << i << " of " << count;
        }
      }
      std::vector<float> y(n * views[0].rows);
      const std::span<float> one[] = {y};
      EXPECT_EQ(be->MatMuls({}, x, n, one).code(), StatusCode::kInvalidArgument);
    }
  }
}

}  // namespace
}  // namespace folio::backend

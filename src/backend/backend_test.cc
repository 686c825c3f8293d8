#include "folio/backend/backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "folio/core/splitmix64.h"
#include "folio/ops/quantize.h"

namespace folio::backend {
namespace {

// A float vector as its bit patterns, so that == compares bits (NaN
// payloads and the sign of zero included).
std::vector<uint32_t> Bits(const std::vector<float>& v) {
  std::vector<uint32_t> bits(v.size());
  std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
  return bits;
}

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

// A host backend's cache sits on host storage of the config's shape; a bad
// config is refused before any storage is made.
TEST(Backend, CreateKvPoolPutsTheCacheOnTheBackendsStorage) {
  kv::PagedKvCacheConfig kc{3, 2, 8, 4, 5, DType::kBF16, {16, 0, 16}, 0};
  for (const BackendKind k : {BackendKind::kCpu, BackendKind::kReference}) {
    auto be = MakeBackend(k);
    const Result<std::unique_ptr<kv::KvStorage>> storage = be->CreateKvStorage(kc);
    ASSERT_TRUE(storage.ok());
    EXPECT_EQ((*storage)->shape(), kv::PagedKvCache::StorageShape(kc));
    Result<kv::PagedKvCache> cache = be->CreateKvPool(kc);
    ASSERT_TRUE(cache.ok());
    EXPECT_EQ(cache->storage().shape(), kv::PagedKvCache::StorageShape(kc));
    kv::PagedKvCacheConfig bad = kc;
    bad.num_pages = 0;
    EXPECT_EQ(be->CreateKvPool(bad).status().code(), StatusCode::kInvalidArgument);
  }
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
  const DeviceBuffer<float> ya = cpu->Allocate<float>(n * rows),
                            yb = ref->Allocate<float>(n * rows);
  ASSERT_TRUE(cpu->MatMul(*cpu->Upload(view), cpu->ToDevice<float>(x), n, ya).ok());
  ASSERT_TRUE(ref->MatMul(*ref->Upload(view), ref->ToDevice<float>(x), n, yb).ok());
  const std::vector<float> a = cpu->ToHost<float>(ya), b = ref->ToHost<float>(yb);
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
                              be->ToDevice<float>(Random(10 * heads * dim, 10 + layer)),
                              be->ToDevice<float>(Random(10 * heads * dim, 20 + layer)))
                      .ok());
    }
    const std::vector<kv::SeqId> seqs = {seq};
    auto meta = cache->BuildBatchMetadata(seqs, &**plan);
    ASSERT_TRUE(meta.ok());
    const DeviceBuffer<float> q = be->ToDevice<float>(Random(10 * q_heads * dim, 3));
    const DeviceBuffer<float> out = be->Allocate<float>(q.size());
    attention::PagedAttentionParams p;
    p.num_q_heads = q_heads;
    p.scale = 0.25;
    auto attn = be->PlanAttention(p, q, out, cache->View(0), kv::ViewOf(*meta));
    ASSERT_TRUE(attn.ok()) << attn.status().ToString();
    std::vector<float> both;
    for (uint64_t layer = 0; layer < 2; ++layer) {
      ASSERT_TRUE((*attn)->Run(q, cache->View(layer), out, {}).ok());
      const std::vector<float> o = be->ToHost<float>(out);
      both.insert(both.end(), o.begin(), o.end());
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
    const DeviceBuffer<float> norm = be.Allocate<float>(x.size()), rot = be.ToDevice<float>(x),
                              gate = be.ToDevice<float>(x), geglu = be.ToDevice<float>(x);
    const DeviceBuffer<float> up_d = be.ToDevice<float>(up);
    be.RmsNorm(be.ToDevice<float>(x), be.ToDevice<float>(gain), 1e-5f, norm);
    be.Rope(rot, rows, head_dim, be.ToDevice<float>(cos), be.ToDevice<float>(sin),
            /*neox=*/true);
    be.SwiGlu(gate, up_d);
    be.GeGlu(geglu, up_d);
    std::vector<std::vector<float>> outs;
    for (const DeviceBuffer<float>& b : {norm, rot, gate, geglu})
      outs.push_back(be.ToHost<float>(b));
    return outs;
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
      const DeviceBuffer<float> xd = be->ToDevice<float>(x);
      for (const size_t count : {size_t{2}, size_t{3}}) {  // all packed under q8, then a mix
        std::vector<const Weight*> ws;
        std::vector<DeviceBuffer<float>> got, want;
        std::vector<DeviceSpan<float>> ys;
        for (size_t i = 0; i < count; ++i) {
          ws.push_back(&weights[i]);
          want.push_back(be->Allocate<float>(n * views[i].rows));
          got.push_back(be->Allocate<float>(n * views[i].rows));
          ASSERT_TRUE(be->MatMul(weights[i], xd, n, want.back()).ok());
        }
        for (const auto& y : got) ys.emplace_back(y);
        ASSERT_TRUE(be->MatMuls(ws, xd, n, ys).ok());
        for (size_t i = 0; i < count; ++i) {
          EXPECT_EQ(Bits(be->ToHost<float>(got[i])), Bits(be->ToHost<float>(want[i])))
              << BackendName(kind) << ", weight " << i << " of " << count;
        }
      }
      const DeviceBuffer<float> y = be->Allocate<float>(n * views[0].rows);
      const DeviceSpan<float> one[] = {y};
      EXPECT_EQ(be->MatMuls({}, xd, n, one).code(), StatusCode::kInvalidArgument);
    }
  }
}

// The element-wise arithmetic and row moves a forward pass runs between
// matmuls give, on every backend and thread count, the bits of the scalar
// loop each one names in backend.h.
TEST(Backend, ArithmeticOpsGiveTheBitsOfTheirScalarLoops) {
  const uint64_t rows = 70, width = 600;  // 42,000 elements: above the parallel threshold
  const std::vector<float> x = Random(rows * width, 40), y = Random(rows * width, 41);
  const std::vector<float> bias = Random(width, 42), scales = Random(rows, 43);
  std::vector<float> add = x, with_bias = x, scaled = x, capped = x, sig = x, acc = x;
  for (size_t i = 0; i < x.size(); ++i) {
    add[i] += y[i];
    with_bias[i] += bias[i % width];
    scaled[i] *= 0.375f;
    capped[i] = std::tanh(capped[i] / 0.3f) * 0.3f;
    sig[i] = 1.0f / (1.0f + std::exp(-sig[i]));
    acc[i] += scales[i / width] * y[i];
  }
  const std::vector<std::vector<float>> want = {add, with_bias, scaled, capped, sig, acc};
  ThreadPool pool(3);
  for (const BackendKind kind : {BackendKind::kCpu, BackendKind::kReference}) {
    for (ThreadPool* threads : {static_cast<ThreadPool*>(nullptr), &pool}) {
      auto be = MakeBackend(kind, threads);
      std::vector<DeviceBuffer<float>> got;
      for (size_t op = 0; op < want.size(); ++op) got.push_back(be->ToDevice<float>(x));
      const DeviceBuffer<float> yd = be->ToDevice<float>(y);
      be->Add(got[0], yd);
      be->AddBias(got[1], be->ToDevice<float>(bias));
      be->Scale(got[2], 0.375f);
      be->SoftCap(got[3], 0.3f);
      be->Sigmoid(got[4]);
      be->AddScaledRows(got[5], yd, be->ToDevice<float>(scales));
      for (size_t op = 0; op < want.size(); ++op) {
        EXPECT_EQ(Bits(be->ToHost<float>(got[op])), Bits(want[op]))
            << BackendName(kind) << ", op " << op;
      }
      const DeviceBuffer<float> filled = be->ToDevice<float>(x);
      be->Fill(filled, -2.5f);
      EXPECT_EQ(be->ToHost<float>(filled), std::vector<float>(x.size(), -2.5f));
    }
  }
}

TEST(Backend, GatherAndScatterMoveWholeRows) {
  const uint64_t n = 5, width = 3;
  const std::vector<float> table = Random(n * width, 50);
  const std::vector<int32_t> idx = {4, 0, 4, 2};
  for (const BackendKind kind : {BackendKind::kCpu, BackendKind::kReference}) {
    auto be = MakeBackend(kind);
    const DeviceBuffer<float> gathered = be->Allocate<float>(idx.size() * width);
    be->GatherRows(be->ToDevice<float>(table), be->ToDevice<int32_t>(idx), gathered);
    const std::vector<float> g = be->ToHost<float>(gathered);
    for (size_t i = 0; i < idx.size(); ++i) {
      for (size_t f = 0; f < width; ++f) {
        EXPECT_EQ(g[i * width + f], table[static_cast<size_t>(idx[i]) * width + f]) << i;
      }
    }
    // Scatter back the rows 1, 3 (one each) into a zeroed table.
    const std::vector<int32_t> to = {1, 3};
    const DeviceBuffer<float> scattered = be->Allocate<float>(n * width);
    be->ScatterRows(be->ToDevice<float>(std::vector<float>(g.begin(), g.begin() + 2 * width)),
                    be->ToDevice<int32_t>(to), scattered);
    const std::vector<float> t = be->ToHost<float>(scattered);
    for (size_t r = 0; r < n; ++r) {
      for (size_t f = 0; f < width; ++f) {
        const float expect = r == 1 ? g[f] : r == 3 ? g[width + f] : 0.0f;
        EXPECT_EQ(t[r * width + f], expect) << r;
      }
    }
  }
}

TEST(Backend, FindNonFiniteNamesTheFirstBadElement) {
  for (const BackendKind kind : {BackendKind::kCpu, BackendKind::kReference}) {
    auto be = MakeBackend(kind);
    std::vector<float> x = Random(100, 60);
    EXPECT_FALSE(be->FindNonFinite(be->ToDevice<float>(x)).has_value());
    x[70] = std::numeric_limits<float>::infinity();
    x[90] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(be->FindNonFinite(be->ToDevice<float>(x)), std::optional<uint64_t>(70));
  }
}

// Every crossing between the host and a backend's memory is counted, with
// its bytes; ops on buffers already there are not crossings.
TEST(Backend, TransfersCountEveryCrossing) {
  auto be = MakeBackend(BackendKind::kCpu);
  const std::vector<float> x = Random(12, 70);
  const DeviceBuffer<float> a = be->ToDevice<float>(x);  // allocation + 1 write
  const DeviceBuffer<float> b = be->Allocate<float>(12);
  be->Write<float>(x, b);
  be->Add(a, b);
  be->Scale(a, 2.0f);
  Transfers t = be->transfers();
  EXPECT_EQ(t.writes, 2u);
  EXPECT_EQ(t.write_bytes, 2 * 12 * sizeof(float));
  EXPECT_EQ(t.reads, 0u);
  const std::vector<float> back = be->ToHost<float>(a.span().subspan(4, 8));
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(back[i], (x[4 + i] + x[4 + i]) * 2.0f);
  const std::span<float> in_place = be->HostView(b.span());
  EXPECT_EQ(in_place[3], x[3]);
  t = be->transfers();
  EXPECT_EQ(t.reads, 1u);
  EXPECT_EQ(t.read_bytes, 8 * sizeof(float));
  EXPECT_EQ(t.host_views, 1u);
  // A fresh buffer is zeroed; an empty one allocates nothing.
  EXPECT_EQ(be->ToHost<float>(be->Allocate<float>(3)), std::vector<float>(3, 0.0f));
  EXPECT_TRUE(be->Allocate<float>(0).empty());
}

TEST(BackendDeathTest, ASubspanOutsideItsBufferIsAProgrammingError) {
  auto be = MakeBackend(BackendKind::kCpu);
  const DeviceBuffer<float> a = be->Allocate<float>(8);
  EXPECT_DEATH((void)a.span().subspan(6, 3), "subspan");
  EXPECT_DEATH(be->Write<float>(std::vector<float>(7), a), "writing 7 elements into 8");
}

}  // namespace
}  // namespace folio::backend

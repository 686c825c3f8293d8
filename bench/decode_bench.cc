#include "bench/decode_bench.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "bench/machine_info.h"
#include "bench/memory_bandwidth.h"
#include "bench/report.h"
#include "bench/timing.h"
#include "folio/backend/backend.h"
#include "folio/checkpoint/model_io.h"
#include "folio/core/dtype.h"
#include "folio/core/splitmix64.h"
#include "folio/core/str_cat.h"
#include "folio/engine/engine.h"
#include "folio/engine/kv_cache_manager.h"
#include "folio/model/decoder.h"
#include "folio/model/model.h"
#include "folio/ops/matmul.h"
#include "folio/ops/quantize.h"

namespace folio::bench {

using nlohmann::json;

model::ModelConfig SyntheticConfig(uint64_t layers, uint64_t experts, uint64_t experts_per_token,
                                   uint64_t expert_ffn) {
  model::ModelConfig c;
  c.architecture = model::Architecture::kLlama;
  c.hidden_size = 2048;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.ffn_size = 8192;
  c.num_layers = layers;
  c.max_positions = 4096;
  c.vocab_size = 32000;
  c.rope_theta = 10000.0;
  c.norm_eps = 1e-5;
  c.tie_embeddings = true;
  c.rope_style = model::RopeStyle::kNeox;
  if (experts != 0) {
    c.num_experts = experts;
    c.experts_per_token = experts_per_token;
    c.expert_ffn_size = expert_ffn;
    c.norm_topk_prob = true;
  }
  return c;
}

namespace {

// A bf16 tensor of `shape` filled with uniform [-0.05, 0.05) values: one
// SplitMix64 draw per four elements, chunks of 1 Mi elements with their own
// stream (seeded from `seed` and the chunk index) so the fill parallelises.
model::Tensor RandomBF16(std::vector<uint64_t> shape, uint64_t seed, ThreadPool* pool) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  auto data = std::make_shared<std::vector<uint16_t>>(n);
  constexpr uint64_t kChunk = 1 << 20;
  const uint64_t chunks = (n + kChunk - 1) / kChunk;
  uint16_t* out = data->data();
  auto fill = [&](size_t c) {
    SplitMix64 rng(seed ^ (0x9e3779b97f4a7c15ULL * (c + 1)));
    const uint64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
    constexpr float kScale = 0.05f / 32768.0f;
    for (uint64_t i = begin; i < end; i += 4) {
      uint64_t r = rng.NextU64();
      for (uint64_t k = i; k < std::min(end, i + 4); ++k, r >>= 16) {
        const float v = static_cast<float>(static_cast<int32_t>(r & 0xffff) - 32768) * kScale;
        out[k] = F32ToBF16Bits(v);
      }
    }
  };
  if (pool != nullptr) {
    pool->ParallelFor(chunks, fill);
  } else {
    for (size_t c = 0; c < chunks; ++c) fill(c);
  }
  model::Tensor t;
  t.type = model::TensorType::kBF16;
  t.shape = std::move(shape);
  t.bytes = std::span<const std::byte>(reinterpret_cast<const std::byte*>(data->data()),
                                       n * sizeof(uint16_t));
  t.owner = std::move(data);
  return t;
}

model::Tensor OnesF32(uint64_t n) {
  auto data = std::make_shared<std::vector<float>>(n, 1.0f);
  model::Tensor t;
  t.type = model::TensorType::kF32;
  t.shape = {n};
  t.bytes = std::span<const std::byte>(reinterpret_cast<const std::byte*>(data->data()),
                                       n * sizeof(float));
  t.owner = std::move(data);
  return t;
}

// The matrices one decoded token multiplies, in the decoder's order.
template <typename Fn>
void ForEachDecodeMatrix(const model::ModelConfig& c, const model::ModelWeights& w, Fn&& fn) {
  for (uint64_t i = 0; i < w.layers.size(); ++i) {
    const model::LayerWeights& l = w.layers[i];
    for (const model::Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo}) fn(*t);
    if (c.IsMoeLayer(i)) {
      fn(l.router);
      for (uint64_t e = 0; e < c.experts_per_token; ++e) {
        for (const model::Tensor* t : {&l.expert_gate[e], &l.expert_up[e], &l.expert_down[e]}) {
          fn(*t);
        }
      }
      for (const model::Tensor* t :  // every token runs the shared expert, if any
           {&l.shared_gate, &l.shared_up, &l.shared_down, &l.shared_expert_gate}) {
        if (!t->empty()) fn(*t);
      }
    } else {
      for (const model::Tensor* t : {&l.w_gate, &l.w_up, &l.w_down}) fn(*t);
    }
  }
  fn(c.tie_embeddings ? w.embedding : w.lm_head);
}

// The matmuls of one decoded token alone (no attention, norms, RoPE or
// cache writes): the same backend MatMul calls on one activation row,
// median over `repeats` tokens. Weights without a matmul kernel (f64, which
// the decoder rounds to f32 once) are skipped: the timing then says so
// through matmul_ms being absent.
Result<Timing> TimeMatmulsOnly(const model::ModelConfig& c, const model::ModelWeights& w,
                               ThreadPool& pool, ops::MatMulActivations activations,
                               uint64_t repeats) {
  const std::unique_ptr<backend::Backend> cpu =
      backend::MakeBackend(backend::BackendKind::kCpu, &pool, activations);
  std::vector<backend::Weight> weights;
  uint64_t widest = 0;
  Status failure;
  ForEachDecodeMatrix(c, w, [&](const model::Tensor& t) {
    if (!ops::TraitsOf(t.type).has_matmul || t.shape.size() != 2) {
      failure =
          Status::Unimplemented("matmul-only timing needs matrices of types with a matmul kernel");
      return;
    }
    Result<backend::Weight> up = cpu->Upload({t.bytes.data(), t.type, t.shape[0], t.shape[1]});
    if (!up) {
      failure = up.error();
      return;
    }
    weights.push_back(*up);
    widest = std::max({widest, t.shape[0], t.shape[1]});
  });
  FOLIO_RETURN_IF_ERROR(failure);
  const backend::DeviceBuffer<float> x = cpu->ToDevice<float>(std::vector<float>(widest, 0.01f));
  const backend::DeviceBuffer<float> y = cpu->Allocate<float>(widest);
  auto token = [&] {
    for (const backend::Weight& v : weights) {
      Status s = cpu->MatMul(v, x.span().first(v.host.cols), 1, y.span().first(v.host.rows));
      if (!s.ok() && failure.ok()) failure = s;
    }
  };
  TimingOptions o;
  o.repeats = repeats;
  o.min_repeats = std::min<uint64_t>(repeats, 5);
  o.min_sample_us = 0.0;  // one token per sample
  o.budget_us = 20e6;
  Timing t = TimeCalls(token, o);
  FOLIO_RETURN_IF_ERROR(failure);
  return t;
}

}  // namespace

Result<model::ModelWeights> SyntheticWeights(const model::ModelConfig& c, uint64_t seed,
                                             ThreadPool* pool) {
  FOLIO_RETURN_IF_ERROR(c.Validate());
  if (c.attention_bias || c.qk_norm) {
    return Status::InvalidArgument("synthetic weights: no biases or q/k norms");
  }
  model::ModelWeights w;
  w.layers.resize(c.num_layers);
  uint64_t index = 0;
  model::ForEachTensor(
      c, w, [&](const std::string&, const std::vector<uint64_t>& shape, model::Tensor& t) {
        ++index;
        t = shape.size() == 1 ? OnesF32(shape[0]) : RandomBF16(shape, seed * 1000003 + index, pool);
      });
  return w;
}

Result<std::unique_ptr<model::Model>> LoadOrSynthesize(const std::string& path,
                                                       const model::ModelConfig& synthetic,
                                                       uint64_t seed, ThreadPool* pool,
                                                       ops::WeightType weight_type) {
  if (!path.empty()) {
    std::cerr << "loading " << path << "...\n";
    FOLIO_ASSIGN_OR_RETURN(model::Model m, checkpoint::LoadModel(path));
    return std::make_unique<model::Model>(std::move(m));
  }
  std::cerr << "building a synthetic model: " << synthetic.num_layers << " layers, "
            << synthetic.ParameterCount() << " parameters, bf16...\n";
  FOLIO_ASSIGN_OR_RETURN(model::ModelWeights w, SyntheticWeights(synthetic, seed, pool));
  if (weight_type != ops::WeightType::kBF16) {
    std::cerr << "quantizing its matrices to " << ops::WeightTypeName(weight_type) << "...\n";
    FOLIO_ASSIGN_OR_RETURN(w, model::QuantizeMatrices(w, weight_type, pool));
  }
  FOLIO_ASSIGN_OR_RETURN(model::Model m,
                         model::Model::Create(synthetic, std::move(w), /*check_finite=*/false));
  return std::make_unique<model::Model>(std::move(m));
}

uint64_t WeightBytesPerToken(const model::ModelConfig& c, const model::ModelWeights& w) {
  uint64_t bytes = 0;
  ForEachDecodeMatrix(c, w, [&](const model::Tensor& t) { bytes += t.bytes.size(); });
  return bytes;
}

CLI::App* AddDecodeBenchCommand(CLI::App& bench, DecodeBenchOptions& o) {
  CLI::App* cmd =
      bench.add_subcommand("decode",
                           "prefill and decode tokens/s of the full model vs the weight-bandwidth "
                           "floor, as JSON");
  cmd->add_option("--model", o.model, "model folder or .gguf (default: synthetic ~1B bf16)");
  cmd->add_option("--json-output,-o", o.json_output, "write the JSON here (default: stdout)");
  cmd->add_flag("--quick", o.quick, "synthetic with 4 layers, 64 prompt + 16 decode tokens");
  cmd->add_option("--threads-list", o.threads_list, "thread counts to run (default 1,2)")
      ->delimiter(',');
  cmd->add_option("--prompt-tokens", o.prompt_tokens, "prefill length (default 128; quick 64)");
  cmd->add_option("--decode-tokens", o.decode_tokens, "timed decode steps (default 32; quick 16)");
  cmd->add_option("--layers", o.layers, "synthetic layers (default 16; quick 4)");
  cmd->add_option("--experts", o.experts,
                  "synthetic: a mixture of this many experts per layer (default 0: dense)");
  cmd->add_option("--experts-per-token", o.experts_per_token,
                  "synthetic mixture: experts per token (default 4)");
  cmd->add_option("--expert-ffn", o.expert_ffn, "synthetic mixture: expert width (default 768)");
  cmd->add_option("--kv-dtype", o.kv_dtype, "KV cache dtype: bf16 or f32");
  cmd->add_option("--page-size", o.page_size, "KV page size")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--seed", o.seed, "synthetic weights and token seed");
  cmd->add_option("--bandwidth-mib", o.bandwidth_mib,
                  "streaming-read buffer (MiB; default 2048, quick 1024)");
  cmd->add_option("--bandwidth-passes", o.bandwidth_passes,
                  "timed bandwidth passes, best counts (default 5; quick 3)");
  cmd->add_flag("--no-matmul-only", o.no_matmul_only, "skip timing one token's matmuls alone");
  cmd->add_option("--weight-type", o.weight_type,
                  "the synthetic model's matrices: bf16 (default), f32, f16, q8_0, q4_0, q4_1, "
                  "q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs or mxfp4");
  cmd->add_option("--batch-sizes", o.batch_sizes,
                  "also time decode with this many sequences per step (e.g. 2,4,8)")
      ->delimiter(',');
  cmd->add_option("--matmul-activations", o.matmul_activations,
                  "q8 (default, the engine's), f32, or both side by side (q8,f32): how "
                  "quantized weights multiply")
      ->delimiter(',');
  return cmd;
}

namespace {

// Step times of `steps` engine steps in which `batch` sequences each
// decode one token: the requests (prompt_ids with the first token varied,
// so no two are alike) are prefilled first, untimed.
Result<std::vector<double>> TimeBatchedDecode(const model::Model& m, engine::EngineConfig ec,
                                              uint64_t batch, std::vector<int32_t> prompt_ids,
                                              uint64_t steps, uint64_t pages_per_seq,
                                              ThreadPool& pool) {
  ec.num_pages = (pages_per_seq + 1) * batch;  // a page of slack each for admission's watermark
  ec.max_num_seqs = batch;
  ec.max_num_batched_tokens = prompt_ids.size() * batch;
  Result<engine::Engine> eng = engine::Engine::Create(m, ec, &pool);
  if (!eng) return eng.error();
  for (uint64_t i = 0; i < batch; ++i) {
    prompt_ids[0] = static_cast<int32_t>(i % m.config().vocab_size);
    engine::RequestParams params;
    params.max_tokens = steps + 1;  // the prefill step samples the first
    Result<engine::RequestId> id = eng->AddRequest(prompt_ids, params);
    if (!id) return id.error();
  }
  Result<std::vector<engine::StepOutput>> first = eng->Step();  // every prompt at once
  if (!first) return first.error();
  std::vector<double> step_us;
  for (uint64_t i = 0; i < steps; ++i) {
    const double t0 = NowUs();
    Result<std::vector<engine::StepOutput>> r = eng->Step();
    step_us.push_back(NowUs() - t0);
    if (!r) return r.error();
    if (r->size() != batch) {
      return Status::FailedPrecondition("a batched step decoded " + std::to_string(r->size()) +
                                        " sequences, not " + std::to_string(batch));
    }
  }
  return step_us;
}

}  // namespace

int RunDecodeBench(const DecodeBenchOptions& o, const std::string& command) {
  auto fail = [](const Status& s) {
    std::cerr << "folio bench decode: " << s.ToString() << "\n";
    return 1;
  };
  const uint64_t prompt = o.prompt_tokens ? o.prompt_tokens : (o.quick ? 64 : 128);
  const uint64_t steps = o.decode_tokens ? o.decode_tokens : (o.quick ? 16 : 32);
  const uint64_t bw_mib = o.bandwidth_mib ? o.bandwidth_mib : (o.quick ? 1024 : 2048);
  const uint64_t bw_passes = o.bandwidth_passes ? o.bandwidth_passes : (o.quick ? 3 : 5);
  Result<DType> kv_dtype = ParseDType(o.kv_dtype);
  if (!kv_dtype) return fail(kv_dtype.error().WithContext("--kv-dtype"));
  if (o.threads_list.empty() ||
      std::find(o.threads_list.begin(), o.threads_list.end(), 0u) != o.threads_list.end()) {
    return fail(Status::InvalidArgument("--threads-list: counts must be > 0"));
  }
  if (steps == 0) return fail(Status::InvalidArgument("--decode-tokens must be > 0"));
  std::vector<ops::MatMulActivations> modes;
  for (const std::string& name : o.matmul_activations) {
    Result<ops::MatMulActivations> mode = ops::ParseMatMulActivations(name);
    if (!mode) return fail(mode.error().WithContext("--matmul-activations"));
    modes.push_back(*mode);
  }
  if (modes.empty()) return fail(Status::InvalidArgument("--matmul-activations is empty"));

  std::optional<ops::WeightType> synthetic_type;
  for (const ops::WeightTypeTraits& row : ops::kWeightTypeTraits) {
    if (row.name == o.weight_type) synthetic_type = row.type;
  }
  if (!synthetic_type) {
    return fail(Status::InvalidArgument("--weight-type: unknown type '" + o.weight_type + "'"));
  }
  if (!o.model.empty() && *synthetic_type != ops::WeightType::kBF16) {
    return fail(Status::InvalidArgument("--weight-type applies to the synthetic model only"));
  }

  const MachineInfo machine = ReadMachineInfo();
  const std::array<double, 3> load_start = ReadLoadAverage();
  const CpuSnapshot run_start = TakeCpuSnapshot();

  // The model: loaded, or synthetic (filled over a pool of all cores).
  const double t_load = NowUs();
  const uint64_t layers = o.layers ? o.layers : (o.quick ? 4 : 16);
  if (!o.model.empty() && o.experts != 0) {
    return fail(Status::InvalidArgument("--experts applies to the synthetic model only"));
  }
  ThreadPool fill_pool(0);
  Result<std::unique_ptr<model::Model>> loaded = LoadOrSynthesize(
      o.model, SyntheticConfig(layers, o.experts, o.experts_per_token, o.expert_ffn), o.seed,
      &fill_pool, *synthetic_type);
  if (!loaded) return fail(loaded.error());
  std::unique_ptr<model::Model> m = std::move(*loaded);
  std::string model_name = !o.model.empty() ? o.model
                           : layers == 16   ? "synthetic-1b"
                                            : "synthetic-1b-" + std::to_string(layers) + "layers";
  if (o.experts != 0) {
    model_name = "synthetic-moe-" + std::to_string(layers) + "layers-" + std::to_string(o.experts) +
                 "x" + std::to_string(o.expert_ffn) + "-top" + std::to_string(o.experts_per_token);
  }
  const model::ModelConfig& config = m->config();
  (void)m->id();  // hash once here, not inside a timed region
  std::cerr << "  ready in " << Fixed((NowUs() - t_load) / 1e6, 1) << " s\n";

  std::string weight_type = "mixed";
  {
    bool first = true;
    ForEachDecodeMatrix(config, m->weights(), [&](const model::Tensor& t) {
      const std::string name(model::TensorTypeName(t.type));
      if (first)
        weight_type = name;
      else if (weight_type != name)
        weight_type = "mixed";
      first = false;
    });
  }
  const uint64_t weight_bytes = WeightBytesPerToken(config, m->weights());
  const uint64_t parameters = config.ParameterCount();
  if (prompt + steps + 1 > config.max_positions) {
    return fail(Status::InvalidArgument("prompt + decode tokens exceed the model's max_positions"));
  }
  // One sequence's pages, every layer group's (a windowed one only its
  // window's): the single-request pool, and each batched sequence's share.
  const uint64_t pages_per_seq =
      engine::MaxPagesHeld(config, o.page_size, prompt + steps + 1, prompt);

  // Prompt ids: deterministic, inside the vocabulary.
  SplitMix64 rng(o.seed ^ 0x70c0ffee);
  std::vector<int32_t> prompt_ids(prompt);
  for (int32_t& t : prompt_ids) {
    t = static_cast<int32_t>(rng.NextU64() % config.vocab_size);
  }

  json runs = json::array();
  for (uint64_t threads : o.threads_list) {
    ThreadPool pool(threads);
    std::cerr << "[threads " << pool.num_threads() << "] bandwidth (" << bw_mib << " MiB, best of "
              << bw_passes << ")...";
    Result<BandwidthResult> bw = MeasureReadBandwidth(bw_mib << 20, bw_passes, pool);
    if (!bw) return fail(bw.error());
    std::cerr << " " << Fixed(bw->best_gbps, 2) << " GB/s\n";

    for (const ops::MatMulActivations mode : modes) {
      const CpuSnapshot before = TakeCpuSnapshot();  // other load during this mode's run
      // The serving path: one request on the engine, its prompt prefilled
      // in one step, then one greedy decode step per token. A warm-up request
      // runs first; without prefix caching the timed one recomputes it all.
      std::cerr << "  matmul activations " << ops::MatMulActivationsName(mode) << "\n";
      engine::EngineConfig ec;
      ec.matmul_activations = mode;
      ec.page_size = o.page_size;
      ec.num_pages = pages_per_seq;
      ec.kv_dtype = *kv_dtype;
      ec.max_num_batched_tokens = prompt;
      ec.max_num_seqs = 1;
      ec.prefix_caching = false;
      Result<engine::Engine> eng = engine::Engine::Create(*m, ec, &pool);
      if (!eng) return fail(eng.error());
      std::cerr << "  prefill " << prompt << " tokens (warm-up + timed)...";
      for (int pass = 0; pass < 2; ++pass) {
        engine::RequestParams params;
        params.max_tokens = pass == 0 ? 1 : steps + 1;
        Result<engine::RequestId> id = eng->AddRequest(prompt_ids, params);
        if (!id) return fail(id.error().WithContext("prefill"));
        const double t0 = NowUs();
        Result<std::vector<engine::StepOutput>> r = eng->Step();
        const double us = NowUs() - t0;
        if (!r) return fail(r.error().WithContext("prefill"));
        if (pass == 1) {
          json row;
          row["prefill_ms"] = us / 1e3;
          row["prefill_tokens_per_second"] = static_cast<double>(prompt) / (us / 1e6);
          runs.push_back(row);
        }
      }
      json& row = runs.back();
      std::cerr << " " << Fixed(row["prefill_tokens_per_second"].get<double>(), 1)
                << " tokens/s\n  decode " << steps << " steps...";

      std::vector<double> step_us;
      for (uint64_t i = 0; i < steps; ++i) {
        const double t0 = NowUs();
        Result<std::vector<engine::StepOutput>> r = eng->Step();
        step_us.push_back(NowUs() - t0);
        if (!r) return fail(r.error().WithContext("decode step " + std::to_string(i)));
      }
      if (eng->HasUnfinished())
        return fail(Status::FailedPrecondition("the decode request did not finish"));
      const double median_ms = Quantile(step_us, 0.5) / 1e3;
      const double decode_tps = 1e3 / median_ms;
      const double floor_tps = bw->best_gbps * 1e9 / static_cast<double>(weight_bytes);
      std::cerr << " " << Fixed(decode_tps, 2) << " tokens/s (median " << Fixed(median_ms, 1)
                << " ms; floor " << Fixed(floor_tps, 2) << " tokens/s => "
                << Fixed(100 * decode_tps / floor_tps, 1) << "%)\n";

      row["threads"] = pool.num_threads();
      row["matmul_activations"] = std::string(ops::MatMulActivationsName(mode));
      row["model"] = model_name;
      row["parameters"] = parameters;
      row["num_layers"] = config.num_layers;
      row["weight_type"] = weight_type;
      row["kv_dtype"] = std::string(DTypeName(*kv_dtype));
      row["page_size"] = o.page_size;
      row["prompt_tokens"] = prompt;
      row["decode_tokens"] = steps;
      row["weight_bytes_per_token"] = weight_bytes;
      row["memory_bandwidth_gbps"] = bw->best_gbps;
      row["memory_bandwidth_passes_gbps"] = bw->pass_gbps;
      row["decode_tokens_per_second"] = decode_tps;
      row["decode_ms_median"] = median_ms;
      row["decode_ms_p10"] = Quantile(step_us, 0.1) / 1e3;
      row["decode_ms_p90"] = Quantile(step_us, 0.9) / 1e3;
      json step_ms = json::array();
      for (double us : step_us) step_ms.push_back(us / 1e3);
      row["decode_ms_steps"] = step_ms;
      row["floor_tokens_per_second"] = floor_tps;
      row["floor_ms_per_token"] = 1e3 / floor_tps;
      row["fraction_of_floor"] = decode_tps / floor_tps;
      row["achieved_weight_gbps"] = static_cast<double>(weight_bytes) * decode_tps / 1e9;

      json batched = json::array();
      for (uint64_t batch : o.batch_sizes) {
        if (batch <= 1) continue;
        std::cerr << "  decode " << batch << " sequences, " << steps << " steps...";
        Result<std::vector<double>> b_us =
            TimeBatchedDecode(*m, ec, batch, prompt_ids, steps, pages_per_seq, pool);
        if (!b_us) return fail(b_us.error().WithContext("batch " + std::to_string(batch)));
        const double b_ms = Quantile(*b_us, 0.5) / 1e3;
        const double b_tps = static_cast<double>(batch) * 1e3 / b_ms;
        std::cerr << " " << Fixed(b_tps, 2) << " tokens/s (median step " << Fixed(b_ms, 1)
                  << " ms; " << Fixed(b_tps / decode_tps, 2) << "x one sequence)\n";
        batched.push_back({{"sequences", batch},
                           {"step_ms_median", b_ms},
                           {"step_ms_p10", Quantile(*b_us, 0.1) / 1e3},
                           {"step_ms_p90", Quantile(*b_us, 0.9) / 1e3},
                           {"tokens_per_second", b_tps},
                           {"speedup_vs_one_sequence", b_tps / decode_tps}});
      }
      if (!batched.empty()) row["batched_decode"] = batched;

      if (!o.no_matmul_only) {
        std::cerr << "  one token's matmuls alone...";
        Result<Timing> mm = TimeMatmulsOnly(config, m->weights(), pool, mode, 9);
        if (mm) {
          const double mm_ms = mm->median_us / 1e3;
          row["matmul_only_ms_median"] = mm_ms;
          row["matmul_only_share_of_decode"] = mm_ms / median_ms;
          row["matmul_only_fraction_of_floor"] = (1e3 / mm_ms) / floor_tps;
          std::cerr << " " << Fixed(mm_ms, 1) << " ms (" << Fixed(100 * mm_ms / median_ms, 1)
                    << "% of a decode step)\n";
        } else {
          std::cerr << " skipped: " << mm.error().ToString() << "\n";
        }
      }
      const OtherLoad load = LoadBetween(before, TakeCpuSnapshot());
      row["other_load_cores"] = load.other_cores;
      row["steal_cores"] = load.steal_cores;
    }
  }
  const OtherLoad run_load = LoadBetween(run_start, TakeCpuSnapshot());
  json report;
  report["benchmark"] = "decode";
  report["command"] = command;
  report["machine"] = MachineJson(machine, load_start, run_load);
  report["model"] = {{"name", model_name},
                     {"architecture", model::ArchitectureName(config.architecture)},
                     {"hidden_size", config.hidden_size},
                     {"num_layers", config.num_layers},
                     {"num_heads", config.num_heads},
                     {"num_kv_heads", config.num_kv_heads},
                     {"head_dim", config.head_dim()},
                     {"ffn_size", config.ffn_size},
                     {"vocab_size", config.vocab_size},
                     {"tie_embeddings", config.tie_embeddings},
                     {"parameters", parameters},
                     {"num_experts", config.num_experts},
                     {"experts_per_token", config.experts_per_token},
                     {"expert_ffn_size", config.expert_ffn_size},
                     {"weight_type", weight_type},
                     {"weight_bytes_per_token", weight_bytes}};
  report["memory_bandwidth"] = {
      {"method",
       "sum of 64-bit words, SIMD loads, one slice per thread, best pass, "
       "measured before each thread count's run with that many threads"},
      {"buffer_mib", bw_mib},
      {"passes", bw_passes}};
  report["floor"] =
      "decode floor tokens/s = memory_bandwidth_gbps * 1e9 / "
      "weight_bytes_per_token; fraction_of_floor = decode_tokens_per_second "
      "/ that";
  report["runs"] = runs;

  if (Status s = EmitJson(report, o.json_output); !s.ok()) return fail(s);
  return 0;
}

}  // namespace folio::bench

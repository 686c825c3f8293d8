#include "folio/checkpoint/quantize_model.h"

#include <array>
#include <charconv>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <system_error>

#include "checkpoint/loaders.h"
#include "folio/checkpoint/model_io.h"
#include "folio/checkpoint/model_tokenizer.h"
#include "folio/core/str_cat.h"
#include "folio/ops/quantize.h"

namespace folio::checkpoint {
namespace {

using ops::WeightType;

// ggml's GGML_QNT_VERSION, which llama.cpp writes as
// general.quantization_version into every quantized file.
constexpr uint32_t kQuantizationVersion = 2;

bool IsBlockType(WeightType t) { return ops::TraitsOf(t).block_size > 1; }

// i in "blk.<i>.<rest>", when `name` has that form and ends with `rest`.
std::optional<uint64_t> LayerOf(std::string_view name, std::string_view rest) {
  constexpr std::string_view kPrefix = "blk.";
  if (!name.starts_with(kPrefix) || !name.ends_with(rest)) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  uint64_t layer = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
  if (ec != std::errc() || end == name.data() ||
      std::string_view(end, name.data() + name.size()) != StrCat(".", rest)) {
    return std::nullopt;
  }
  return layer;
}

// An unsigned metadata value as llama.cpp writes it: u32, or u64 when it
// does not fit (folio's reader takes either).
GgufValue Uint(uint64_t v) {
  if (v <= UINT32_MAX) return GgufU32(static_cast<uint32_t>(v));
  return {GgufValueType::kU64, GgufValueType::kU8, v};
}

// Where a Q or K projection's rows come from: Hugging Face orders each
// head's features as two halves that RoPE pairs (NeoX), GGUF llama files
// as adjacent pairs, so llama.cpp's converter permutes them. Row h *
// head_dim + 2p + s of the file is row h * head_dim + s * head_dim / 2 + p
// of the source. heads == 0: no permutation.
struct RowOrder {
  uint64_t heads = 0;
  uint64_t head_dim = 0;
  uint64_t SourceRow(uint64_t r) const {
    if (heads == 0) return r;
    const uint64_t h = r / head_dim, w = r % head_dim;
    return h * head_dim + (w % 2) * (head_dim / 2) + w / 2;
  }
};

struct Source {
  std::optional<model::Model> model;
  std::string format;             // "gguf" or "folder"
  std::vector<GgufKeyValue> kvs;  // a GGUF source's metadata
  std::string name;               // a folder's name
  std::string chat_template;      // a folder's
  // A folder's tokenizer.json as GGUF keys, or why it is not written.
  std::optional<tokenizer::TokenizerSpec> tokenizer;
  std::string tokenizer_note;
  std::vector<std::string> order;  // a GGUF source's tensor names, in file order
  bool permute_qk = false;         // Hugging Face NeoX rows into GGUF llama's order
};

// A folder's tokenizer.json as the GGUF keys llama.cpp's converter writes,
// when it has a GGUF form (Tokenizer::ToGgufSpec). A vocabulary shorter
// than the embedding is padded with unused "[PAD<id>]" tokens, as the
// converter does. Otherwise the file goes without tokenizer keys, and
// tokenizer_note says why: the weights are still what was asked for.
void FolderTokenizer(const std::filesystem::path& in, uint64_t vocab_size, Source& src) {
  Result<std::optional<tokenizer::Tokenizer>> tok = LoadModelTokenizer(in);
  if (!tok.ok()) {
    src.tokenizer_note = "not written: " + tok.error().ToString();
    return;
  }
  if (!tok->has_value()) {
    src.tokenizer_note = "not written: the folder has no tokenizer.json";
    return;
  }
  Result<tokenizer::TokenizerSpec> spec = (*tok)->ToGgufSpec();
  if (!spec.ok()) {
    src.tokenizer_note = "not written: " + spec.error().ToString();
    return;
  }
  if (spec->tokens.size() > vocab_size) {
    src.tokenizer_note = "not written: " + std::to_string(spec->tokens.size()) +
                         " tokens for an embedding of " + std::to_string(vocab_size) + " rows";
    return;
  }
  for (uint64_t id = spec->tokens.size(); id < vocab_size; ++id) {
    spec->tokens.push_back("[PAD" + std::to_string(id) + "]");
    spec->token_types.push_back(5);  // unused
  }
  src.tokenizer_note = "pre-tokenizer " + spec->pre_tokenizer + ", " +
                       std::to_string(spec->tokens.size()) + " tokens";
  src.tokenizer = *std::move(spec);
}

Result<Source> OpenSource(const std::filesystem::path& in) {
  Source src;
  std::error_code ec;
  if (std::filesystem::is_directory(in, ec)) {
    FOLIO_ASSIGN_OR_RETURN(model::Model m, LoadFolderModel(in));
    const model::ModelConfig& c = m.config();
    src.name = in.filename().string();
    if (src.name.empty()) src.name = in.parent_path().filename().string();  // "dir/"
    src.chat_template = FolderChatTemplate(in);
    FolderTokenizer(in, c.vocab_size, src);
    src.permute_qk =
        c.rope_style == model::RopeStyle::kNeox &&
        model::TraitsOf(c.architecture).gguf_rope_style == model::RopeStyle::kInterleaved;
    src.model.emplace(std::move(m));
    src.format = "folder";
    return src;
  }
  if (!std::filesystem::exists(in, ec)) return Status::NotFound("no model at " + in.string());
  FOLIO_ASSIGN_OR_RETURN(GgufFile opened, GgufFile::Open(in));
  auto file = std::make_shared<const GgufFile>(std::move(opened));
  FOLIO_ASSIGN_OR_RETURN(src.kvs, ReadGgufMetadata(*file));
  for (const GgufFile::TensorInfo& t : file->tensors()) src.order.push_back(t.name);
  FOLIO_ASSIGN_OR_RETURN(model::Model m, GgufModel(file, in));
  src.model.emplace(std::move(m));
  src.format = "gguf";
  return src;
}

// The output file's metadata: the source's with the file type updated, or
// a folder's config as llama.cpp's keys.
Result<std::vector<GgufKeyValue>> OutputMetadata(const Source& src, const QuantizeScheme& scheme,
                                                 bool quantized) {
  if (src.format == "gguf") {
    std::vector<GgufKeyValue> kvs = src.kvs;
    SetGgufValue(kvs, "general.file_type", GgufU32(scheme.file_type));
    if (quantized) SetGgufValue(kvs, "general.quantization_version", GgufU32(kQuantizationVersion));
    return kvs;
  }
  FOLIO_ASSIGN_OR_RETURN(
      std::vector<GgufKeyValue> kvs,
      GgufMetadataFor(src.model->config(), src.name, scheme.file_type, quantized));
  if (src.tokenizer) {
    for (GgufKeyValue& kv : GgufTokenizerKeys(*src.tokenizer)) kvs.push_back(std::move(kv));
  }
  if (!src.chat_template.empty()) {
    kvs.push_back({"tokenizer.chat_template", GgufString(src.chat_template)});
  }
  return kvs;
}

// Encodes `src` (shape plan.shape) as plan.type into `out`, rows in
// parallel, adding each row's squared error and weight to `stats`.
Status EncodeTensor(const model::Tensor& src, const TensorQuantization& plan, RowOrder order,
                    std::span<std::byte> out, ThreadPool& pool, QuantizeStats& stats) {
  const uint64_t cols = plan.shape.back();
  const uint64_t rows = src.num_elements() / cols;
  const uint64_t src_row_bytes = ops::WeightRowBytes(src.type, cols);
  const uint64_t out_row_bytes = ops::WeightRowBytes(plan.type, cols);
  FOLIO_CHECK(src_row_bytes * rows == src.bytes.size() && out_row_bytes * rows == out.size(),
              plan.name);
  FOLIO_CHECK(order.heads == 0 || plan.shape.size() == 2, plan.name, " permuted but not a matrix");
  // Rows are independent; ~16k elements a task keeps tasks short and many.
  const uint64_t chunk = std::max<uint64_t>(1, 16384 / cols);
  const uint64_t num_chunks = (rows + chunk - 1) / chunk;
  std::vector<double> sq_error(rows), sq_weight(rows);
  std::vector<Status> status(num_chunks);
  pool.ParallelFor(num_chunks, [&](size_t c) {
    std::vector<double> source(cols), decoded(cols);  // one row each
    std::vector<float> row(cols);
    for (uint64_t r = c * chunk; r < std::min(rows, (c + 1) * chunk); ++r) {
      const uint64_t from = order.SourceRow(r);
      ops::DequantizeRow(src.type, src.bytes.data() + from * src_row_bytes, std::span(source));
      // f64 weights round to f32 here, once; every other type widens
      // exactly, so `row` is the source's own f32 value.
      for (uint64_t i = 0; i < cols; ++i) row[i] = static_cast<float>(source[i]);
      std::byte* dst = out.data() + r * out_row_bytes;
      if (Status s = ops::QuantizeRow(plan.type, row, dst); !s.ok()) {
        status[c] = s.WithContext(StrCat("row ", r));
        return;
      }
      ops::DequantizeRow(plan.type, dst, std::span(decoded));
      double e = 0.0, w = 0.0;
      for (uint64_t i = 0; i < cols; ++i) {
        e += (decoded[i] - source[i]) * (decoded[i] - source[i]);
        w += source[i] * source[i];
      }
      sq_error[r] = e;
      sq_weight[r] = w;
    }
  });
  for (const Status& s : status) FOLIO_RETURN_IF_ERROR(s);
  stats.tensors += 1;
  stats.elements += rows * cols;
  stats.bytes += out.size();
  for (uint64_t r = 0; r < rows; ++r) {  // row order, whatever the threads did
    stats.sum_sq_error += sq_error[r];
    stats.sum_sq_weight += sq_weight[r];
  }
  return Status::Ok();
}

}  // namespace

Result<QuantizeScheme> ParseQuantizeScheme(std::string_view name) {
  std::string names;
  for (const QuantizeScheme& s : kQuantizeSchemes) {
    if (s.name == name) return s;
    names += names.empty() ? "" : ", ";
    names += s.name;
  }
  return Status::InvalidArgument(StrCat("--type ", Quote(name), " is not one of ", names));
}

WeightType FallbackType(WeightType wanted, uint64_t cols) {
  auto fits = [cols](WeightType t) { return cols % ops::TraitsOf(t).block_size == 0; };
  if (fits(wanted)) return wanted;
  WeightType next = WeightType::kF16;
  switch (wanted) {
    case WeightType::kQ4_K:
      next = WeightType::kQ5_0;
      break;
    case WeightType::kQ5_K:
      next = WeightType::kQ5_1;
      break;
    case WeightType::kQ6_K:
      next = WeightType::kQ8_0;
      break;
    case WeightType::kIQ4_XS:
      next = WeightType::kIQ4_NL;
      break;
    case WeightType::kQ2_K:
    case WeightType::kQ3_K:
      next = WeightType::kQ4_0;
      break;
    case WeightType::kF64:
    case WeightType::kF32:
    case WeightType::kF16:
    case WeightType::kBF16:
    case WeightType::kQ8_0:
    case WeightType::kQ4_0:
    case WeightType::kQ4_1:
    case WeightType::kQ5_0:
    case WeightType::kQ5_1:
    case WeightType::kIQ4_NL:
    case WeightType::kMXFP4:
      break;
  }
  return fits(next) ? next : WeightType::kF16;
}

bool MoreBitsLayer(uint64_t i, uint64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

std::vector<TensorQuantization> PlanQuantization(const model::ModelConfig& config,
                                                 const QuantizeScheme& scheme) {
  std::vector<TensorQuantization> plan;
  model::ModelWeights shapes_only;
  shapes_only.layers.resize(config.num_layers);
  model::ForEachTensor(
      config, shapes_only,
      [&](const std::string& hf_name, const std::vector<uint64_t>& shape, const model::Tensor&) {
        TensorQuantization t{GgufTensorName(hf_name, config), shape, scheme.base, scheme.base};
        if (shape.size() == 1) {
          t.wanted = t.type = WeightType::kF32;
          plan.push_back(std::move(t));
          return;
        }
        if (scheme.mix == QuantizeMix::kKM) {
          const bool head =
              t.name == "output.weight" || (config.tie_embeddings && t.name == "token_embd.weight");
          std::optional<uint64_t> layer = LayerOf(t.name, "attn_v.weight");
          if (!layer) layer = LayerOf(t.name, "ffn_down.weight");
          if (head || (layer && MoreBitsLayer(*layer, config.num_layers))) {
            t.wanted = WeightType::kQ6_K;
          }
        }
        t.type = FallbackType(t.wanted, shape.back());
        plan.push_back(std::move(t));
      });
  return plan;
}

Result<std::vector<GgufKeyValue>> GgufMetadataFor(const model::ModelConfig& c, std::string name,
                                                  uint32_t file_type, bool quantized) {
  using model::Architecture;
  using model::Fixed;
  // GGUF files of Mistral models say llama (model/architecture.h).
  const Architecture arch =
      c.architecture == Architecture::kMistral ? Architecture::kLlama : c.architecture;
  const model::ArchitectureTraits& t = model::TraitsOf(arch);
  const std::string_view folio_name = model::ArchitectureName(c.architecture);
  if (t.gguf_name.empty()) {
    return Status::Unimplemented(StrCat("architecture ", folio_name,
                                        " has no GGUF name (folio writes llama, mistral, ",
                                        "qwen2 and qwen3)"));
  }
  if (c.HasFamilyOptions() || model::TraitsOf(c.architecture).fused_projections) {
    return Status::Unimplemented(StrCat(
        "architecture ", folio_name,
        ": folio does not write GGUF files of families with per-layer windows, sandwich norms, ",
        "GeGLU, partial rotary or fused projections yet (it writes llama, mistral, qwen2 and ",
        "qwen3)"));
  }
  if (c.rope_style == model::RopeStyle::kInterleaved &&
      t.gguf_rope_style == model::RopeStyle::kNeox) {
    return Status::Unimplemented(
        StrCat(folio_name, " with interleaved RoPE: its GGUF files ", "rotate NeoX halves"));
  }
  if (c.attention_bias != (t.attention_bias == Fixed::kAlways)) {
    return Status::Unimplemented(StrCat(folio_name, " with attention_bias ",
                                        c.attention_bias ? "true" : "false", ": GGUF ", t.gguf_name,
                                        " files say otherwise"));
  }
  if (c.qk_norm != (t.qk_norm == Fixed::kAlways)) {
    return Status::Unimplemented(StrCat(folio_name, " with qk_norm ", c.qk_norm ? "true" : "false",
                                        ": GGUF ", t.gguf_name, " files say otherwise"));
  }
  if (c.rope_scaling.type == model::RopeScaling::Type::kLlama3) {
    return Status::Unimplemented(
        "llama3 rope scaling: GGUF files carry it as a rope_freqs.weight tensor, which folio "
        "neither writes nor reads");
  }
  const std::string a(t.gguf_name);
  std::vector<GgufKeyValue> kvs = {
      {"general.architecture", GgufString(a)},
      {"general.name", GgufString(std::move(name))},
      {"general.file_type", GgufU32(file_type)},
  };
  if (quantized) kvs.push_back({"general.quantization_version", GgufU32(kQuantizationVersion)});
  auto add = [&](std::string_view key, GgufValue v) {
    kvs.push_back({StrCat(a, ".", key), std::move(v)});
  };
  add("vocab_size", Uint(c.vocab_size));
  add("context_length", Uint(c.max_positions));
  add("embedding_length", Uint(c.hidden_size));
  add("block_count", Uint(c.num_layers));
  add("feed_forward_length", Uint(c.ffn_size));
  add("attention.head_count", Uint(c.num_heads));
  add("attention.head_count_kv", Uint(c.num_kv_heads));
  add("attention.layer_norm_rms_epsilon", GgufF32(static_cast<float>(c.norm_eps)));
  add("rope.freq_base", GgufF32(static_cast<float>(c.rope_theta)));
  add("rope.dimension_count", Uint(c.head_dim()));
  if (c.explicit_head_dim != 0) {
    add("attention.key_length", Uint(c.head_dim()));
    add("attention.value_length", Uint(c.head_dim()));
  }
  if (c.rope_scaling.type == model::RopeScaling::Type::kLinear) {
    add("rope.scaling.type", GgufString("linear"));
    add("rope.scaling.factor", GgufF32(static_cast<float>(c.rope_scaling.factor)));
  }
  if (c.window != 0) add("attention.sliding_window", Uint(c.window));
  return kvs;
}

double QuantizeStats::BitsPerWeight() const {
  return elements == 0 ? 0.0 : 8.0 * static_cast<double>(bytes) / static_cast<double>(elements);
}

double QuantizeStats::RmsRelativeError() const {
  return sum_sq_weight == 0.0 ? 0.0 : std::sqrt(sum_sq_error / sum_sq_weight);
}

Result<QuantizeReport> QuantizeModel(const std::filesystem::path& in,
                                     const std::filesystem::path& out, const QuantizeScheme& scheme,
                                     ThreadPool& pool) {
  FOLIO_ASSIGN_OR_RETURN(const Source src, OpenSource(in));
  const model::Model& m = *src.model;
  const model::ModelConfig& config = m.config();
  QuantizeReport report;
  report.source_format = src.format;
  report.tokenizer = src.format == "folder" ? src.tokenizer_note : "kept from the source";
  report.tensors = PlanQuantization(config, scheme);
  bool quantized = false;
  for (const TensorQuantization& t : report.tensors) quantized |= IsBlockType(t.type);
  Result<std::vector<GgufKeyValue>> kvs = OutputMetadata(src, scheme, quantized);
  if (!kvs) return kvs.error().WithContext(in.string());

  std::vector<const model::Tensor*> tensors;
  std::vector<RowOrder> orders;
  model::ForEachTensor(
      config, m.weights(),
      [&](const std::string& hf_name, const std::vector<uint64_t>&, const model::Tensor& t) {
        tensors.push_back(&t);
        RowOrder order;
        // Matrices only: llama and mistral, the architectures permuted,
        // have no q/k biases in GGUF (GgufMetadataFor refuses them).
        if (src.permute_qk) {
          if (hf_name.ends_with("q_proj.weight")) {
            order = {config.num_heads, config.head_dim()};
          } else if (hf_name.ends_with("k_proj.weight")) {
            order = {config.num_kv_heads, config.head_dim()};
          }
        }
        orders.push_back(order);
      });
  FOLIO_CHECK(tensors.size() == report.tensors.size());
  if (!src.order.empty()) {  // a GGUF source's tensors stay in its order
    std::map<std::string_view, size_t> planned;
    for (size_t i = 0; i < report.tensors.size(); ++i) planned[report.tensors[i].name] = i;
    std::vector<TensorQuantization> plan;
    std::vector<const model::Tensor*> ordered_tensors;
    std::vector<RowOrder> ordered_orders;
    for (const std::string& name : src.order) {
      const size_t i = planned.at(name);  // GgufModel matched every tensor
      plan.push_back(report.tensors[i]);
      ordered_tensors.push_back(tensors[i]);
      ordered_orders.push_back(orders[i]);
    }
    report.tensors = std::move(plan);
    tensors = std::move(ordered_tensors);
    orders = std::move(ordered_orders);
  }

  std::vector<GgufTensorSpec> specs;
  for (const TensorQuantization& t : report.tensors) {
    specs.push_back({t.name, GgmlTypeOf(t.type), {t.shape.rbegin(), t.shape.rend()}});
  }
  std::array<QuantizeStats, ops::kNumWeightTypes> by_type{};
  auto fill = [&](size_t i, std::span<std::byte> bytes) {
    const TensorQuantization& t = report.tensors[i];
    return EncodeTensor(*tensors[i], t, orders[i], bytes, pool,
                        by_type[static_cast<size_t>(t.type)]);
  };
  auto check = [](const std::filesystem::path& tmp) {
    Result<model::Model> back = LoadModel(tmp);
    return back ? Status::Ok() : back.error().WithContext("reading back what was written");
  };
  FOLIO_RETURN_IF_ERROR(WriteGgufFile(out, *kvs, specs, fill, check));

  for (size_t i = 0; i < by_type.size(); ++i) {
    const QuantizeStats& s = by_type[i];
    if (s.tensors == 0) continue;
    report.by_type.emplace_back(static_cast<WeightType>(i), s);
    report.total.tensors += s.tensors;
    report.total.elements += s.elements;
    report.total.bytes += s.bytes;
    report.total.sum_sq_error += s.sum_sq_error;
    report.total.sum_sq_weight += s.sum_sq_weight;
  }
  std::error_code ec;
  report.file_bytes = std::filesystem::file_size(out, ec);
  return report;
}

}  // namespace folio::checkpoint

#include "folio/checkpoint/quantize_model.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <initializer_list>
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

uint64_t ShapeElements(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

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
  // A GGUF source's tensors, in file order: name and row-major shape.
  std::vector<std::pair<std::string, std::vector<uint64_t>>> order;
  bool permute_qk = false;  // Hugging Face NeoX rows into GGUF llama's order
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
  for (const GgufFile::TensorInfo& t : file->tensors()) {
    src.order.emplace_back(t.name, std::vector<uint64_t>(t.dims.rbegin(), t.dims.rend()));
  }
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

// A tensor ForEachTensor names, as `rows` consecutive rows of the GGUF
// tensor it is written into.
struct Piece {
  const model::Tensor* tensor;
  uint64_t rows;
  RowOrder order;
};

// A GGUF tensor of the plan and the pieces it is written from, in row
// order: one, or an expert stack's experts, or a fused tensor's parts.
struct PlannedTensor {
  TensorQuantization plan;
  std::vector<Piece> pieces;
};

// "row r", or "expert j row i" of a stack.
std::string RowName(const TensorQuantization& plan, uint64_t r) {
  if (plan.shape.size() != 3) return StrCat("row ", r);
  return StrCat("expert ", r / plan.shape[1], " row ", r % plan.shape[1]);
}

// Encodes t's pieces (rows of plan.shape.back() elements) as plan.type
// into `out`, rows in parallel, adding each row's squared error and weight
// to `stats`.
Status EncodeTensor(const PlannedTensor& t, std::span<std::byte> out, ThreadPool& pool,
                    QuantizeStats& stats) {
  const TensorQuantization& plan = t.plan;
  const uint64_t cols = plan.shape.back();
  std::vector<uint64_t> first;  // each piece's first row
  uint64_t rows = 0;
  for (const Piece& p : t.pieces) {
    FOLIO_CHECK(ops::WeightRowBytes(p.tensor->type, cols) * p.rows == p.tensor->bytes.size(),
                plan.name);
    first.push_back(rows);
    rows += p.rows;
  }
  const uint64_t out_row_bytes = ops::WeightRowBytes(plan.type, cols);
  FOLIO_CHECK(out_row_bytes * rows == out.size(), plan.name);
  // Rows are independent; ~16k elements a task keeps tasks short and many.
  const uint64_t chunk = std::max<uint64_t>(1, 16384 / cols);
  const uint64_t num_chunks = (rows + chunk - 1) / chunk;
  std::vector<double> sq_error(rows), sq_weight(rows);
  std::vector<Status> status(num_chunks);
  pool.ParallelFor(num_chunks, [&](size_t c) {
    std::vector<double> source(cols), decoded(cols);  // one row each
    std::vector<float> row(cols);
    for (uint64_t r = c * chunk; r < std::min(rows, (c + 1) * chunk); ++r) {
      const auto p =
          static_cast<size_t>(std::upper_bound(first.begin(), first.end(), r) - first.begin() - 1);
      const model::Tensor& src = *t.pieces[p].tensor;
      const uint64_t from = t.pieces[p].order.SourceRow(r - first[p]);
      ops::DequantizeRow(src.type, src.bytes.data() + from * ops::WeightRowBytes(src.type, cols),
                         std::span(source));
      // f64 weights round to f32 here, once; every other type widens
      // exactly, so `row` is the source's own f32 value.
      for (uint64_t i = 0; i < cols; ++i) row[i] = static_cast<float>(source[i]);
      std::byte* dst = out.data() + r * out_row_bytes;
      if (Status s = ops::QuantizeRow(plan.type, row, dst); !s.ok()) {
        status[c] = s.WithContext(RowName(plan, r));
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

// Layer i of a tensor "blk.<i>.<one of rests>".
std::optional<uint64_t> LayerOfAny(std::string_view name,
                                   std::initializer_list<std::string_view> rests) {
  for (std::string_view rest : rests) {
    if (std::optional<uint64_t> layer = LayerOf(name, rest)) return layer;
  }
  return std::nullopt;
}

// What the scheme asks for one tensor: llama.cpp's llama_tensor_get_type
// (the rules PlanQuantization's comment restates).
WeightType WantedType(const model::ModelConfig& c, const QuantizeScheme& scheme,
                      const std::string& name, const std::vector<uint64_t>& shape) {
  if (shape.size() == 1 || name.ends_with(".bias") || name.ends_with("ffn_gate_inp.weight") ||
      name.ends_with("ffn_gate_inp_shexp.weight")) {
    return WeightType::kF32;
  }
  const bool head = name == "output.weight" || (c.tie_embeddings && name == "token_embd.weight");
  switch (scheme.mix) {
    case QuantizeMix::kPure:
      return scheme.base;
    case QuantizeMix::kMxfp4Moe:
      return shape.size() == 3 && shape[0] > 1 ? WeightType::kMXFP4 : WeightType::kQ8_0;
    case QuantizeMix::kKM:
    case QuantizeMix::kQ3KM:
      break;
  }
  if (head) return WeightType::kQ6_K;
  const uint64_t n = c.num_layers;
  const bool eight_experts = c.num_experts == 8;
  const bool q3_k_m = scheme.mix == QuantizeMix::kQ3KM;
  if (std::optional<uint64_t> i = LayerOfAny(name, {"attn_v.weight", "attn_qkv.weight"})) {
    if (eight_experts) return WeightType::kQ8_0;
    if (q3_k_m) return *i < 2 ? WeightType::kQ5_K : WeightType::kQ4_K;
    return MoreBitsLayer(*i, n) ? WeightType::kQ6_K : scheme.base;
  }
  if (eight_experts && LayerOf(name, "attn_k.weight")) return WeightType::kQ8_0;
  if (LayerOf(name, "attn_output.weight")) {
    if (eight_experts) return WeightType::kQ5_K;
    if (q3_k_m) return WeightType::kQ4_K;
  }
  if (std::optional<uint64_t> i =
          LayerOfAny(name, {"ffn_down.weight", "ffn_down_exps.weight", "ffn_down_shexp.weight"})) {
    if (q3_k_m) return *i < n / 16 ? WeightType::kQ5_K : WeightType::kQ4_K;
    return MoreBitsLayer(*i, n) ? WeightType::kQ6_K : scheme.base;
  }
  return scheme.base;
}

void Decide(const model::ModelConfig& c, const QuantizeScheme& scheme, TensorQuantization& t) {
  t.wanted = WantedType(c, scheme, t.name, t.shape);
  t.type = FallbackType(t.wanted, t.shape.back());
}

// The GGUF tensors of a model of `c` (weights `w`: a loaded model's, or
// empty ones to plan shapes), in ForEachTensor order: each tensor is one
// of its own, or, where GgufPartOf says so (an expert of a stack, the rows
// of a fused projection), a piece of one, listed where its first piece
// comes. permute_qk: Q/K rows from Hugging Face's NeoX order into GGUF
// llama's.
template <typename W>
std::vector<PlannedTensor> PlanTensors(const model::ModelConfig& c, W& w,
                                       const QuantizeScheme& scheme, bool permute_qk) {
  std::vector<PlannedTensor> planned;
  std::map<std::string, size_t> stacked;          // GGUF name -> index in planned
  std::vector<std::vector<uint64_t>> first_rows;  // of each piece, for stacks
  model::ForEachTensor(
      c, w,
      [&](const std::string& hf_name, const std::vector<uint64_t>& shape, const model::Tensor& t) {
        RowOrder order;
        // Matrices only: llama and mistral, the architectures permuted, have no
        // q/k biases in GGUF (GgufMetadataFor refuses them).
        if (permute_qk && hf_name.ends_with("q_proj.weight")) {
          order = {c.num_heads, c.head_dim()};
        } else if (permute_qk && hf_name.ends_with("k_proj.weight")) {
          order = {c.num_kv_heads, c.head_dim()};
        }
        const std::optional<GgufPart> part = GgufPartOf(c, hf_name);
        if (!part) {
          TensorQuantization q{GgufTensorName(hf_name, c), shape, WeightType::kF32,
                               WeightType::kF32};
          planned.push_back({std::move(q), {Piece{&t, shape.size() == 1 ? 1 : shape[0], order}}});
          first_rows.push_back({0});
          return;
        }
        auto [at, added] = stacked.emplace(part->name, planned.size());
        if (added) {
          std::vector<uint64_t> whole;
          if (part->vector) {  // a stack of expert biases: [experts, n]
            whole = {part->total_rows, shape[0]};
          } else if (part->name.ends_with("_exps.weight")) {  // [experts, rows, cols]
            whole = {c.num_experts, part->rows, shape.back()};
          } else {  // a fused projection's rows
            whole = {part->total_rows, shape.back()};
          }
          planned.push_back({{part->name, whole, WeightType::kF32, WeightType::kF32}, {}});
          first_rows.emplace_back();
        }
        planned[at->second].pieces.push_back(Piece{&t, part->rows, order});
        first_rows[at->second].push_back(part->first_row);
      });
  for (size_t i = 0; i < planned.size(); ++i) {
    PlannedTensor& p = planned[i];
    // Pieces in row order, covering the tensor's rows exactly once.
    std::vector<size_t> by_row(p.pieces.size());
    for (size_t j = 0; j < by_row.size(); ++j) by_row[j] = j;
    std::sort(by_row.begin(), by_row.end(),
              [&](size_t a, size_t b) { return first_rows[i][a] < first_rows[i][b]; });
    std::vector<Piece> pieces;
    uint64_t next = 0;
    for (size_t j : by_row) {
      FOLIO_CHECK(first_rows[i][j] == next, p.plan.name, " piece at row ", first_rows[i][j]);
      pieces.push_back(p.pieces[j]);
      next += p.pieces[j].rows;
    }
    uint64_t rows = 1;
    for (size_t d = 0; d + 1 < p.plan.shape.size(); ++d) rows *= p.plan.shape[d];
    FOLIO_CHECK(next == rows, p.plan.name, ": ", next, " rows of ", rows);
    p.pieces = std::move(pieces);
    Decide(c, scheme, p.plan);
  }
  return planned;
}

// gpt-oss as its GGUF files imply it (folio's GptOssFromGguf, llama.cpp's
// graph): even layers slide with the window, every layer on the model's
// RoPE, the clamped SwiGLU with limit 7 and alpha 1.702, and the block's
// fixed options (top-k-then-softmax routing, biases, sinks).
Status CheckGptOssForGguf(const model::ModelConfig& c) {
  if (c.swiglu_limit != 7.0 || c.swiglu_alpha != 1.702) {
    return Status::Unimplemented(StrCat("gpt-oss with swiglu_limit ", c.swiglu_limit,
                                        " and swiglu_alpha ", c.swiglu_alpha,
                                        ": GGUF gpt-oss files imply 7 and 1.702"));
  }
  for (uint64_t i = 0; i < c.num_layers; ++i) {
    const model::LayerConfig want{i % 2 == 0 ? c.window : 0, c.rope_theta, c.rope_scaling};
    if (c.Layer(i) != want) {
      return Status::Unimplemented(StrCat("gpt-oss layer ", i, " with window ", c.Layer(i).window,
                                          ": GGUF gpt-oss files slide the even layers (window ",
                                          c.window, ") and keep one RoPE"));
    }
  }
  model::ModelConfig rest = c;  // the options gpt-oss's files do not imply
  rest.layers.clear();
  rest.num_experts = 0;
  rest.output_bias = rest.attention_sinks = false;
  if (rest.HasFamilyOptions() || c.routing != model::Routing::kTopKSoftmax || !c.moe_bias ||
      !c.norm_topk_prob || !c.output_bias || !c.attention_sinks) {
    return Status::Unimplemented(
        "gpt-oss with options its GGUF files do not imply (routing, biases, sinks, norms)");
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
  model::ModelWeights shapes_only;
  shapes_only.layers.resize(config.num_layers);
  std::vector<TensorQuantization> plan;
  for (PlannedTensor& t : PlanTensors(config, shapes_only, scheme, false)) {
    plan.push_back(std::move(t.plan));
  }
  return plan;
}

Result<std::vector<GgufKeyValue>> GgufMetadataFor(const model::ModelConfig& c, std::string name,
                                                  uint32_t file_type, bool quantized) {
  using model::Architecture;
  using model::Fixed;
  // GGUF files of Mistral and Mixtral models say llama (model/architecture.h).
  const Architecture arch =
      c.architecture == Architecture::kMistral || c.architecture == Architecture::kMixtral
          ? Architecture::kLlama
          : c.architecture;
  const model::ArchitectureTraits& t = model::TraitsOf(arch);
  const std::string_view folio_name = model::ArchitectureName(c.architecture);
  constexpr std::string_view kWritten =
      "it writes llama, mistral, qwen2, qwen3, qwen3moe, qwen2moe, mixtral and gpt-oss";
  if (t.gguf_name.empty()) {
    return Status::Unimplemented(
        StrCat("architecture ", folio_name, " has no GGUF name (", kWritten, ")"));
  }
  const bool gpt_oss = arch == Architecture::kGptOss;
  if (gpt_oss) {
    FOLIO_RETURN_IF_ERROR(CheckGptOssForGguf(c));
  } else {
    model::ModelConfig dense = c;  // the options outside the mixture
    dense.num_experts = 0;
    if (dense.HasFamilyOptions() || model::TraitsOf(c.architecture).fused_projections) {
      return Status::Unimplemented(StrCat(
          "architecture ", folio_name,
          ": folio does not write GGUF files of families with per-layer windows, sandwich norms, ",
          "GeGLU, partial rotary or fused projections yet (", kWritten, ")"));
    }
    if (c.routing != model::Routing::kSoftmaxTopK || c.moe_bias || c.swiglu_limit != 0) {
      return Status::Unimplemented(StrCat(folio_name,
                                          " with gpt-oss's routing, expert biases or clamped "
                                          "SwiGLU: GGUF ",
                                          t.gguf_name, " files cannot say so"));
    }
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
  // The mixtures llama.cpp's graphs read: llama's (Mixtral), qwen3moe's,
  // qwen2moe's with its shared expert, gpt-oss's.
  if (c.IsMoe() && !t.moe && arch != Architecture::kLlama) {
    return Status::Unimplemented(
        StrCat(folio_name, " with experts: GGUF ", t.gguf_name, " files have none"));
  }
  if (!c.IsMoe() && t.moe) {
    return Status::Unimplemented(
        StrCat(folio_name, " without experts: GGUF ", t.gguf_name, " files have them"));
  }
  const bool shared = arch == Architecture::kQwen2Moe;
  if (c.IsMoe() && (c.shared_expert_ffn_size != 0) != shared) {
    return Status::Unimplemented(
        StrCat(folio_name, c.shared_expert_ffn_size != 0 ? " with" : " without",
               " a shared expert: GGUF ", t.gguf_name, " files say otherwise"));
  }
  if (c.IsMoe() && arch == Architecture::kLlama && c.expert_ffn_size != c.ffn_size) {
    return Status::Unimplemented(StrCat(folio_name, " with experts ", c.expert_ffn_size,
                                        " wide and an MLP width of ", c.ffn_size,
                                        ": GGUF llama files make the experts feed_forward_length "
                                        "wide"));
  }
  const bool yarn = c.rope_scaling.type == model::RopeScaling::Type::kYarn;
  // folio's reader (YarnFromGguf) rounds the ramp's bounds, but for gpt-oss.
  if (yarn && c.rope_scaling.truncate == gpt_oss) {
    return Status::Unimplemented(StrCat(folio_name, " with ",
                                        c.rope_scaling.truncate ? "a truncated" : "an untruncated",
                                        " YaRN ramp: GGUF ", t.gguf_name, " files say otherwise"));
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
  const model::RopeScaling& s = c.rope_scaling;
  if (s.type == model::RopeScaling::Type::kLinear) {
    add("rope.scaling.type", GgufString("linear"));
    add("rope.scaling.factor", GgufF32(static_cast<float>(s.factor)));
  }
  if (yarn) {  // as YarnFromGguf reads it back
    add("rope.scaling.type", GgufString("yarn"));
    add("rope.scaling.factor", GgufF32(static_cast<float>(s.factor)));
    add("rope.scaling.original_context_length", Uint(s.original_max_positions));
    if (s.beta_fast != 32.0)
      add("rope.scaling.yarn_beta_fast", GgufF32(static_cast<float>(s.beta_fast)));
    if (s.beta_slow != 1.0)
      add("rope.scaling.yarn_beta_slow", GgufF32(static_cast<float>(s.beta_slow)));
    model::RopeScaling settled = s;  // YaRN's own attention factor for this factor
    settled.attention_factor = 0;
    model::SettleYarn(0, 0, settled);
    if (s.attention_factor != settled.attention_factor) {
      add("rope.scaling.yarn_attn_factor",
          GgufF32(static_cast<float>(s.attention_factor / settled.attention_factor)));
    }
  }
  if (c.window != 0) add("attention.sliding_window", Uint(c.window));
  if (c.IsMoe()) {
    add("expert_count", Uint(c.num_experts));
    add("expert_used_count", Uint(c.experts_per_token));
    if (arch != Architecture::kLlama) add("expert_feed_forward_length", Uint(c.expert_ffn_size));
    if (shared) add("expert_shared_feed_forward_length", Uint(c.shared_expert_ffn_size));
    // What folio's reader assumes without the key (gpt-oss: always on).
    if (c.norm_topk_prob != (arch != Architecture::kQwen2Moe)) {
      add("expert_weights_norm", GgufBool(c.norm_topk_prob));
    }
  }
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
  std::vector<PlannedTensor> planned = PlanTensors(config, m.weights(), scheme, src.permute_qk);
  if (!src.order.empty()) {  // a GGUF source's tensors keep their order and shapes
    std::map<std::string, size_t> by_name;
    for (size_t i = 0; i < planned.size(); ++i) by_name[planned[i].plan.name] = i;
    std::vector<PlannedTensor> ordered;
    for (const auto& [name, shape] : src.order) {
      const auto it = by_name.find(name);
      if (it == by_name.end()) {
        // Read into the config instead (longrope's factor lists).
        return Status::Unimplemented(
            StrCat(in.string(), ": tensor ", name, " is not a weight folio writes back"));
      }
      PlannedTensor& t = planned[it->second];
      FOLIO_CHECK(ShapeElements(shape) == ShapeElements(t.plan.shape), name);
      t.plan.shape = shape;  // e.g. ffn_gate_inp_shexp as [hidden]
      Decide(config, scheme, t.plan);
      ordered.push_back(std::move(t));
      by_name.erase(it);
    }
    FOLIO_CHECK(ordered.size() == planned.size());  // GgufModel matched every tensor
    planned = std::move(ordered);
  }
  for (const PlannedTensor& t : planned) report.tensors.push_back(t.plan);
  bool quantized = false;
  for (const TensorQuantization& t : report.tensors) quantized |= IsBlockType(t.type);
  Result<std::vector<GgufKeyValue>> kvs = OutputMetadata(src, scheme, quantized);
  if (!kvs) return kvs.error().WithContext(in.string());

  std::vector<GgufTensorSpec> specs;
  for (const TensorQuantization& t : report.tensors) {
    specs.push_back({t.name, GgmlTypeOf(t.type), {t.shape.rbegin(), t.shape.rend()}});
  }
  std::array<QuantizeStats, ops::kNumWeightTypes> by_type{};
  auto fill = [&](size_t i, std::span<std::byte> bytes) {
    const PlannedTensor& t = planned[i];
    return EncodeTensor(t, bytes, pool, by_type[static_cast<size_t>(t.plan.type)]);
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

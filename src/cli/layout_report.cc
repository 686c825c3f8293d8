#include "cli/layout_report.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "folio/core/checked_math.h"
#include "folio/core/splitmix64.h"
#include "folio/kv/page_table.h"
#include "folio/model/decoder.h"
#include "folio/model/model.h"
#include "folio/sampling/sampler.h"
#include "folio/tokenizer/byte_tokenizer.h"
#include "reference/float64_decoder.h"
#include "reference/placed_cache.h"

namespace folio::cli {
namespace {

using nlohmann::json;

// ---- TOML -----------------------------------------------------------------

std::string Where(std::string_view section, std::string_view key) {
  // Appended piece by piece: g++ 12 misreports `"[" + std::string(...)` as
  // an overlapping memcpy (-Wrestrict) at -O2.
  std::string out;
  out.reserve(section.size() + key.size() + 3);
  out.append(1, '[').append(section).append("] ").append(key);
  return out;
}

Status GetU64(const toml::table& t, std::string_view section, std::string_view key, uint64_t& out) {
  const toml::node* node = t.get(key);
  if (node == nullptr) return Status::Ok();
  const auto v = node->value_exact<int64_t>();
  if (!v || *v < 0) {
    return Status::InvalidArgument(Where(section, key) + " must be a non-negative integer");
  }
  out = static_cast<uint64_t>(*v);
  return Status::Ok();
}

Status GetF64(const toml::table& t, std::string_view section, std::string_view key, double& out) {
  const toml::node* node = t.get(key);
  if (node == nullptr) return Status::Ok();
  const auto v = node->value<double>();  // integers are accepted
  if (!v) return Status::InvalidArgument(Where(section, key) + " must be a number");
  out = *v;
  return Status::Ok();
}

Status GetBool(const toml::table& t, std::string_view section, std::string_view key, bool& out) {
  const toml::node* node = t.get(key);
  if (node == nullptr) return Status::Ok();
  const auto v = node->value_exact<bool>();
  if (!v) return Status::InvalidArgument(Where(section, key) + " must be true or false");
  out = *v;
  return Status::Ok();
}

Status GetString(const toml::table& t, std::string_view section, std::string_view key,
                 std::string& out) {
  const toml::node* node = t.get(key);
  if (node == nullptr) return Status::Ok();
  const auto v = node->value_exact<std::string>();
  if (!v) return Status::InvalidArgument(Where(section, key) + " must be a string");
  out = *v;
  return Status::Ok();
}

Status GetDType(const toml::table& t, std::string_view section, std::string_view key, DType& out) {
  std::string name;
  if (t.get(key) == nullptr) return Status::Ok();
  FOLIO_RETURN_IF_ERROR(GetString(t, section, key, name));
  Result<DType> d = ParseDType(name);
  if (!d) return d.error().WithContext(Where(section, key));
  out = *d;
  return Status::Ok();
}

Status GetTable(const toml::table& t, std::string_view section, std::string_view key,
                std::vector<uint64_t>& out) {
  const toml::node* node = t.get(key);
  if (node == nullptr) return Status::Ok();
  const toml::array* arr = node->as_array();
  if (arr == nullptr) return Status::InvalidArgument(Where(section, key) + " must be an array");
  std::vector<uint64_t> v;
  for (const toml::node& e : *arr) {
    const auto x = e.value_exact<int64_t>();
    if (!x || *x < 0) {
      return Status::InvalidArgument(Where(section, key) +
                                     " entries must be non-negative integers");
    }
    v.push_back(static_cast<uint64_t>(*x));
  }
  out = std::move(v);
  return Status::Ok();
}

Status CheckKeys(const toml::table& t, std::string_view section,
                 const std::set<std::string_view>& allowed) {
  for (const auto& [key, value] : t) {
    if (!allowed.count(key.str())) {
      return Status::InvalidArgument("unknown key " + Where(section, key.str()));
    }
  }
  return Status::Ok();
}

// ---- report sections --------------------------------------------------------

std::string Hex(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

json PayloadJson(const kv::PayloadAccounting& a) {
  return json{{"live_length", a.live_length},
              {"reserved_pages", a.reserved_pages},
              {"active_pages", a.active_pages},
              {"element_bytes", a.element_bytes},
              {"allocated_scalar_slots", a.allocated_scalar_slots},
              {"live_scalar_slots", a.live_scalar_slots},
              {"unused_scalar_slots", a.unused_scalar_slots},
              {"active_page_tail_scalar_slots", a.active_page_tail_scalar_slots},
              {"inactive_page_scalar_slots", a.inactive_page_scalar_slots},
              {"allocated_payload_bytes", a.allocated_payload_bytes},
              {"live_payload_bytes", a.live_payload_bytes},
              {"unused_payload_bytes", a.unused_payload_bytes},
              {"active_page_tail_payload_bytes", a.active_page_tail_payload_bytes},
              {"inactive_page_payload_bytes", a.inactive_page_payload_bytes}};
}

// The worked example's fixed layout: every one of the N = ceil(C / P) pages
// reserved up front, and the table a permutation of 0..N-1, so no path
// yields an aliasing map. Positions in [C, N * P) have slots but are not
// addressable.
Status CheckPageTable(uint64_t capacity, uint64_t page_size, std::span<const uint64_t> table) {
  if (capacity == 0) {
    return Status::InvalidArgument("capacity must be > 0 (got 0)");
  }
  if (page_size == 0) {
    return Status::InvalidArgument("page_size must be > 0 (got 0)");
  }
  const uint64_t num_pages = CeilDiv(capacity, page_size);
  if (!CheckedMul(num_pages, page_size)) {
    return Status::OutOfRange("capacity " + std::to_string(capacity) + " rounded up to pages of " +
                              std::to_string(page_size) + " overflows uint64");
  }
  if (table.size() != num_pages) {
    return Status::InvalidArgument("page table has " + std::to_string(table.size()) +
                                   " entries; capacity " + std::to_string(capacity) +
                                   " with page_size " + std::to_string(page_size) + " needs " +
                                   std::to_string(num_pages));
  }
  std::vector<uint64_t> seen_at(num_pages, UINT64_MAX);
  for (uint64_t i = 0; i < num_pages; ++i) {
    const uint64_t phys = table[i];
    if (phys >= num_pages) {
      return Status::OutOfRange("page table entry " + std::to_string(i) + " is physical page " +
                                std::to_string(phys) + ", but there are only " +
                                std::to_string(num_pages) + " pages");
    }
    if (seen_at[phys] != UINT64_MAX) {
      return Status::InvalidArgument("page table aliases physical page " + std::to_string(phys) +
                                     " (entries " + std::to_string(seen_at[phys]) + " and " +
                                     std::to_string(i) + ")");
    }
    seen_at[phys] = i;
  }
  return Status::Ok();
}

json PhysicalPagesJson(uint64_t capacity, uint64_t p, std::span<const uint64_t> table,
                       uint64_t live) {
  std::vector<uint64_t> logical_of(table.size());
  for (uint64_t lp = 0; lp < table.size(); ++lp) logical_of[table[lp]] = lp;
  json pages = json::array();
  for (uint64_t phys = 0; phys < table.size(); ++phys) {
    const uint64_t lp = logical_of[phys];
    const uint64_t first = lp * p;
    const uint64_t end = std::min(first + p, capacity);
    const uint64_t live_here = live > first ? std::min(live, end) - first : 0;
    json positions = json::array();
    for (uint64_t pos = first; pos < end; ++pos) positions.push_back(pos);
    pages.push_back({{"physical_page", phys},
                     {"logical_page", lp},
                     {"positions", positions},
                     {"live_positions", live_here},
                     {"state", live_here == 0   ? "inactive"
                               : live_here == p ? "full"
                                                : "partial"}});
  }
  return pages;
}

template <typename T>
double MaxAbsDiff(const std::vector<T>& a, const std::vector<T>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  return m;
}

// One selected token.
struct GenerationStep {
  uint64_t step = 0;          // 0 = the token selected after prefill
  uint64_t num_inputs = 0;    // tokens fed in the forward pass before it
  uint64_t cache_length = 0;  // cache length after that pass
  int32_t token = 0;
  double logit = 0;  // the selected token's logit
};

struct Generation {
  std::vector<int32_t> tokens;  // selected tokens; an end token is not included
  std::vector<GenerationStep> steps;
  std::string stop_reason = "max_tokens";  // or "end_token", "capacity"
  uint64_t prefill_tokens = 0;
  uint64_t decode_tokens = 0;
};

// Cached generation for one lane on the paged cache: prefill the prompt,
// then select and feed one token at a time until the end token, the token
// limit or the capacity. The token selected last is never fed back, so
// stopping at the limit after k tokens from an m-token prompt leaves the
// cache at m + k - 1 positions.
template <typename T, typename Decoder>
Result<Generation> Generate(const Decoder& decoder, reference::PlacedCache& cache,
                            uint64_t capacity, std::span<const int32_t> prompt,
                            const LayoutRunConfig& cfg, SplitMix64& rng) {
  const sampling::SamplingParams params{cfg.temperature, cfg.top_k};
  FOLIO_RETURN_IF_ERROR(params.Validate());
  if (cfg.max_new_tokens == 0) return Status::InvalidArgument("max_new_tokens must be >= 1");
  Generation result;
  FOLIO_ASSIGN_OR_RETURN(std::vector<T> logits,
                         reference::StepLanes(decoder, cache, prompt, model::LogitRows::kLast));
  result.prefill_tokens = prompt.size();
  uint64_t inputs = prompt.size();
  while (true) {
    FOLIO_ASSIGN_OR_RETURN(int32_t token,
                           sampling::SelectToken<T>(std::span<const T>(logits), params, rng));
    result.steps.push_back({result.steps.size(), inputs, cache.length(), token,
                            static_cast<double>(logits[static_cast<size_t>(token)])});
    if (token == tokenizer::ByteTokenizer::kEnd) {
      result.stop_reason = "end_token";
      break;
    }
    result.tokens.push_back(token);
    if (result.tokens.size() == cfg.max_new_tokens) {
      result.stop_reason = "max_tokens";
      break;
    }
    if (cache.length() == capacity) {
      result.stop_reason = "capacity";
      break;
    }
    FOLIO_ASSIGN_OR_RETURN(logits,
                           reference::StepLanes(decoder, cache, std::span<const int32_t>(&token, 1),
                                                model::LogitRows::kLast));
    ++result.decode_tokens;
    inputs = 1;
  }
  return result;
}

json GenerationJson(const Generation& r, uint64_t final_length, uint64_t next_random) {
  json steps = json::array();
  for (const auto& s : r.steps) {
    steps.push_back({{"step", s.step},
                     {"num_inputs", s.num_inputs},
                     {"cache_length", s.cache_length},
                     {"token", s.token},
                     {"logit", s.logit}});
  }
  return json{{"generated_ids", r.tokens},
              {"steps", steps},
              {"stop_reason", r.stop_reason},
              {"prefill_tokens", r.prefill_tokens},
              {"decode_tokens", r.decode_tokens},
              {"final_cache_length", final_length},
              {"next_random_value", Hex(next_random)}};
}

bool SameSteps(const Generation& a, const Generation& b) {
  if (a.steps.size() != b.steps.size()) return false;
  for (size_t i = 0; i < a.steps.size(); ++i) {
    const auto &x = a.steps[i], &y = b.steps[i];
    if (x.token != y.token || x.num_inputs != y.num_inputs || x.cache_length != y.cache_length ||
        std::memcmp(&x.logit, &y.logit, sizeof x.logit) != 0) {
      return false;
    }
  }
  return true;
}

// The sections that run the model, in compute type T: float64 on the
// reference decoder, float32 on the engine's decoder. Both run on the
// engine's paged cache, the worked example's table made literal (lane b's
// logical page lp is page table[lp] * batch + b), beside a contiguous one
// (one page of the whole capacity per lane).
template <typename T, typename Decoder>
Status RunModelSections(const LayoutRunConfig& cfg, const model::Model& m,
                        const std::vector<int32_t>& doc, json& report) {
  const Decoder dec(m);
  const uint64_t capacity = cfg.model.max_positions;
  const std::vector<uint64_t> contiguous_table = {0};
  std::vector<int32_t> lanes;
  for (uint64_t b = 0; b < cfg.batch; ++b) lanes.insert(lanes.end(), doc.begin(), doc.end());
  auto placed = [&](bool paged, uint64_t batch) {
    return reference::MakePlacedCache(m.config(), paged ? cfg.page_size : capacity,
                                      paged ? cfg.page_table : contiguous_table, batch,
                                      cfg.kv_dtype);
  };

  FOLIO_ASSIGN_OR_RETURN(auto paged, placed(true, cfg.batch));
  FOLIO_ASSIGN_OR_RETURN(auto dense, placed(false, cfg.batch));
  FOLIO_ASSIGN_OR_RETURN(std::vector<T> paged_logits,
                         reference::StepLanes(dec, paged, lanes, model::LogitRows::kAll));
  FOLIO_ASSIGN_OR_RETURN(std::vector<T> dense_logits,
                         reference::StepLanes(dec, dense, lanes, model::LogitRows::kAll));
  FOLIO_ASSIGN_OR_RETURN(std::vector<T> full_logits, dec.Forward(lanes, cfg.batch));
  const bool same_bits =
      std::memcmp(paged_logits.data(), dense_logits.data(), paged_logits.size() * sizeof(T)) == 0;
  // float64 reproduces the course's 1e-10; float32 rounds each of the ~10^2
  // operations on a logit at 2^-24 relative, so 1e-4 absolute is generous.
  const double tolerance = sizeof(T) == 8 ? 1e-10 : 1e-4;
  const double err_dense = MaxAbsDiff(paged_logits, dense_logits);
  const double err_full = MaxAbsDiff(paged_logits, full_logits);
  report["model_comparison"] = {
      {"compute", DTypeName(cfg.compute)},
      {"rows", lanes.size()},
      {"vocab_size", m.config().vocab_size},
      {"logits_compared", paged_logits.size()},
      {"same_cached_bits", same_bits},
      {"against_contiguous_cache", {{"max_abs_error", err_dense}}},
      {"against_full_prefix_forward", {{"max_abs_error", err_full}}},
      {"tolerance", tolerance},
      {"within_tolerance", err_dense <= tolerance && err_full <= tolerance}};

  // Generation from the document's first prompt_tokens ids, batch 1.
  const std::vector<int32_t> prompt(doc.begin(),
                                    doc.begin() + static_cast<ptrdiff_t>(cfg.prompt_tokens));
  json runs;
  std::vector<Generation> results;
  std::vector<uint64_t> next_random;
  for (const bool is_paged : {true, false}) {
    FOLIO_ASSIGN_OR_RETURN(auto cache, placed(is_paged, 1));
    SplitMix64 rng(cfg.sampling_seed);
    FOLIO_ASSIGN_OR_RETURN(Generation r, Generate<T>(dec, cache, capacity, prompt, cfg, rng));
    runs[is_paged ? "paged" : "contiguous"] = GenerationJson(r, cache.length(), rng.PeekU64());
    results.push_back(std::move(r));
    next_random.push_back(rng.PeekU64());
  }
  const auto& a = results[0];
  const auto& b = results[1];
  report["generation"] = {{"prompt", prompt},
                          {"generated_ids", a.tokens},
                          {"stop_reason", a.stop_reason},
                          {"prefill_tokens", a.prefill_tokens},
                          {"decode_tokens", a.decode_tokens},
                          {"final_cache_length", runs["paged"]["final_cache_length"]},
                          {"next_random_value", Hex(next_random[0])},
                          {"same_tokens", a.tokens == b.tokens},
                          {"same_steps", SameSteps(a, b)},
                          {"same_stop_reason", a.stop_reason == b.stop_reason},
                          {"same_work_counts", a.prefill_tokens == b.prefill_tokens &&
                                                   a.decode_tokens == b.decode_tokens},
                          {"same_next_random_value", next_random[0] == next_random[1]},
                          {"layouts", runs}};
  return Status::Ok();
}

}  // namespace

Result<LayoutRunConfig> LoadLayoutConfig(const std::filesystem::path& path) {
  toml::table root;
  try {
    root = toml::parse_file(path.string());
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument(path.string() + ": " + std::string(e.description()) +
                                   " at line " + std::to_string(e.source().begin.line));
  }
  LayoutRunConfig c;
  c.model = model::WorkedExampleConfig();
  c.model.max_positions = 12;
  Status s = CheckKeys(root, "", {"model", "cache", "run", "rounding"});
  const toml::table empty;
  auto section = [&](std::string_view name) -> const toml::table& {
    const toml::table* t = root.get_as<toml::table>(name);
    return t ? *t : empty;
  };
  const toml::table& m = section("model");
  const toml::table& k = section("cache");
  const toml::table& r = section("run");
  const toml::table& g = section("rounding");
  for (const Status& step :
       {s,
        CheckKeys(m, "model",
                  {"hidden_size", "num_heads", "num_kv_heads", "ffn_size", "num_layers",
                   "vocab_size", "rope_theta", "norm_eps", "tie_embeddings", "window", "seed"}),
        CheckKeys(k, "cache",
                  {"capacity", "page_size", "page_table", "batch", "kv_dtype", "compute"}),
        CheckKeys(r, "run",
                  {"document", "prompt_tokens", "max_new_tokens", "temperature", "top_k",
                   "sampling_seed"}),
        CheckKeys(g, "rounding", {"capacity", "page_size"}),
        GetU64(m, "model", "hidden_size", c.model.hidden_size),
        GetU64(m, "model", "num_heads", c.model.num_heads),
        GetU64(m, "model", "num_kv_heads", c.model.num_kv_heads),
        GetU64(m, "model", "ffn_size", c.model.ffn_size),
        GetU64(m, "model", "num_layers", c.model.num_layers),
        GetU64(m, "model", "vocab_size", c.model.vocab_size),
        GetF64(m, "model", "rope_theta", c.model.rope_theta),
        GetF64(m, "model", "norm_eps", c.model.norm_eps),
        GetBool(m, "model", "tie_embeddings", c.model.tie_embeddings),
        GetU64(m, "model", "window", c.model.window),
        GetU64(m, "model", "seed", c.seed),
        GetU64(k, "cache", "capacity", c.model.max_positions),
        GetU64(k, "cache", "page_size", c.page_size),
        GetTable(k, "cache", "page_table", c.page_table),
        GetU64(k, "cache", "batch", c.batch),
        GetDType(k, "cache", "kv_dtype", c.kv_dtype),
        GetDType(k, "cache", "compute", c.compute),
        GetString(r, "run", "document", c.document),
        GetU64(r, "run", "prompt_tokens", c.prompt_tokens),
        GetU64(r, "run", "max_new_tokens", c.max_new_tokens),
        GetF64(r, "run", "temperature", c.temperature),
        GetU64(r, "run", "top_k", c.top_k),
        GetU64(r, "run", "sampling_seed", c.sampling_seed),
        GetU64(g, "rounding", "capacity", c.rounding_capacity),
        GetU64(g, "rounding", "page_size", c.rounding_page_size)}) {
    if (!step.ok()) return step.WithContext(path.string());
  }
  return c;
}

Result<json> BuildLayoutReport(const LayoutRunConfig& cfg) {
  if (cfg.compute != DType::kF64 && cfg.compute != DType::kF32) {
    return Status::InvalidArgument("compute must be f64 or f32 (got " +
                                   std::string(DTypeName(cfg.compute)) + ")");
  }
  FOLIO_ASSIGN_OR_RETURN(model::Model m, model::Model::FromSeed(cfg.model, cfg.seed));
  const uint64_t capacity = cfg.model.max_positions, page_size = cfg.page_size;
  FOLIO_RETURN_IF_ERROR(CheckPageTable(capacity, page_size, cfg.page_table));
  const std::span<const uint64_t> table = cfg.page_table;
  const std::vector<int32_t> doc = tokenizer::ByteTokenizer::Encode(cfg.document, true, true);
  if (doc.size() > capacity) {
    return Status::OutOfRange("document frames to " + std::to_string(doc.size()) +
                              " tokens; capacity is " + std::to_string(capacity));
  }
  if (cfg.prompt_tokens == 0 || cfg.prompt_tokens > doc.size()) {
    return Status::OutOfRange("prompt_tokens must be in [1, " + std::to_string(doc.size()) +
                              "] (got " + std::to_string(cfg.prompt_tokens) + ")");
  }
  if (cfg.batch == 0) return Status::InvalidArgument("batch must be > 0");
  if (IsQuantized(cfg.kv_dtype)) {
    return Status::Unimplemented("KV dtype " + std::string(DTypeName(cfg.kv_dtype)) +
                                 " needs a scale per row, which the fixed layout's byte "
                                 "accounting does not show; use f64, f32, bf16 or f16");
  }
  if (cfg.compute == DType::kF32 && cfg.kv_dtype == DType::kF64) {
    return Status::InvalidArgument(
        "compute f32 reads K/V with the engine's kernels: kv_dtype f32, bf16 or f16 (f64 K/V "
        "needs compute f64)");
  }
  const model::ModelConfig& mc = cfg.model;
  const kv::LaneShape shape{cfg.batch, mc.num_kv_heads, mc.head_dim()};
  const uint64_t live = doc.size();

  json report;
  report["config"] = {
      {"model",
       {{"hidden_size", mc.hidden_size},
        {"num_heads", mc.num_heads},
        {"num_kv_heads", mc.num_kv_heads},
        {"head_dim", mc.head_dim()},
        {"ffn_size", mc.ffn_size},
        {"num_layers", mc.num_layers},
        {"vocab_size", mc.vocab_size},
        {"rope_theta", mc.rope_theta},
        {"norm_eps", mc.norm_eps},
        {"tie_embeddings", mc.tie_embeddings},
        {"window", mc.window},
        {"seed", cfg.seed}}},
      {"cache",
       {{"capacity", capacity},
        {"page_size", page_size},
        {"num_pages", table.size()},
        {"page_table", cfg.page_table},
        {"batch", cfg.batch},
        {"kv_dtype", DTypeName(cfg.kv_dtype)},
        {"compute", DTypeName(cfg.compute)},
        {"array_shape", {"num_pages", "batch", "num_kv_heads", "page_size", "head_dim"}}}},
      {"run",
       {{"document", cfg.document},
        {"document_ids", doc},
        {"prompt_tokens", cfg.prompt_tokens},
        {"max_new_tokens", cfg.max_new_tokens},
        {"temperature", cfg.temperature},
        {"top_k", cfg.top_k},
        {"sampling_seed", cfg.sampling_seed}}}};
  report["model"] = {{"id", m.id()}, {"parameters", mc.ParameterCount()}};

  json mappings = json::array();
  for (uint64_t p = 0; p < live; ++p) {
    const uint64_t lp = p / page_size, offset = p % page_size;
    // K and V share the layout, so one index serves both arrays.
    const uint64_t index = kv::ScalarIndex(shape, page_size, table[lp], offset, 0, 0, 0);
    mappings.push_back({{"logical_position", p},
                        {"logical_page", lp},
                        {"physical_page", table[lp]},
                        {"offset_in_page", offset},
                        {"key_scalar_index", index},
                        {"value_scalar_index", index}});
  }
  report["mappings"] = mappings;
  report["physical_pages"] = PhysicalPagesJson(capacity, page_size, table, live);

  FOLIO_ASSIGN_OR_RETURN(kv::PayloadAccounting per_layer,
                         kv::AccountPayload(capacity, page_size, shape, cfg.kv_dtype, live));
  json layers = json::array();
  for (uint64_t l = 0; l < mc.num_layers; ++l) {
    json entry = PayloadJson(per_layer);
    entry["layer"] = l;
    layers.push_back(entry);
  }
  report["per_layer_payloads"] = {
      {"layers", layers},
      {"all_layers_allocated_payload_bytes", per_layer.allocated_payload_bytes * mc.num_layers},
      {"all_layers_live_payload_bytes", per_layer.live_payload_bytes * mc.num_layers}};

  if (cfg.compute == DType::kF64) {
    FOLIO_RETURN_IF_ERROR(
        (RunModelSections<double, reference::Float64Decoder>(cfg, m, doc, report)));
  } else {
    FOLIO_RETURN_IF_ERROR((RunModelSections<float, model::Decoder>(cfg, m, doc, report)));
  }

  // An empty layer with every page reserved, paged against contiguous: the
  // positions past the capacity in the last page have slots but no address.
  const uint64_t rounding_capacity = cfg.rounding_capacity;
  FOLIO_ASSIGN_OR_RETURN(auto paged_a, kv::AccountPayload(rounding_capacity, cfg.rounding_page_size,
                                                          shape, cfg.kv_dtype, 0));
  FOLIO_ASSIGN_OR_RETURN(auto dense_a, kv::AccountPayload(rounding_capacity, rounding_capacity,
                                                          shape, cfg.kv_dtype, 0));
  json inaccessible = json::array();
  const uint64_t rounded_positions = paged_a.reserved_pages * cfg.rounding_page_size;
  for (uint64_t p = rounding_capacity; p < rounded_positions; ++p) inaccessible.push_back(p);
  report["rounding_comparison_empty_layer"] = {
      {"capacity", cfg.rounding_capacity},
      {"page_size", cfg.rounding_page_size},
      {"paged_pages", paged_a.reserved_pages},
      {"paged_allocated_scalar_slots", paged_a.allocated_scalar_slots},
      {"contiguous_allocated_scalar_slots", dense_a.allocated_scalar_slots},
      {"extra_scalar_slots", paged_a.allocated_scalar_slots - dense_a.allocated_scalar_slots},
      {"extra_payload_bytes", paged_a.allocated_payload_bytes - dense_a.allocated_payload_bytes},
      {"live_length", paged_a.live_length},
      {"inaccessible_positions", inaccessible}};
  return report;
}

}  // namespace folio::cli

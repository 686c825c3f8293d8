// Engine::ExportSnapshot / ImportSnapshot: a request's pages and state out
// of one engine and into another (format/kv_snapshot.h).
#include <bit>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "folio/core/json_reader.h"
#include "folio/engine/engine.h"
#include "folio/engine/request_params.h"

namespace folio::engine {
namespace {

using nlohmann::json;

Result<format::ElementType> ToElementType(DType d) {
  switch (d) {
    case DType::kF32:
      return format::ElementType::kF32;
    case DType::kBF16:
      return format::ElementType::kBF16;
    case DType::kF16:
      return format::ElementType::kF16;
    case DType::kI8:
      return format::ElementType::kI8;
    case DType::kF8E4M3:
      return Status::Unimplemented(
          "KV dtype f8e4m3 has no snapshot encoding: Hurray's quantization sections describe "
          "i8 / u8 storage only, so an f8e4m3 cache's codes cannot be described faithfully");
    default:
      break;
  }
  return Status::Unimplemented("KV dtype " + std::string(DTypeName(d)) +
                               " has no snapshot encoding");
}

// The pool pages a snapshot carries, numbered in order of first use, and
// how many slots of each some sequence wrote. A snapshot page is one
// logical page: its pool page in every layer group (-1 where a window
// released it; its rows leave as zeros, which no query reads).
struct SnapshotPages {
  std::map<std::vector<kv::PageId>, uint32_t> renumber;
  std::vector<std::vector<kv::PageId>> pages;  // snapshot page -> [num_groups] pool pages
  std::vector<uint64_t> live;                  // snapshot page -> slots some sequence wrote

  // A sequence's block table in snapshot pages (each shared page once).
  std::vector<uint32_t> Add(const kv::PagedKvCache& cache, kv::SeqId seq, uint64_t num_computed) {
    const uint64_t page_size = cache.config().page_size;
    std::vector<uint32_t> out;
    for (size_t i = 0; i < cache.block_table(seq).size(); ++i) {
      std::vector<kv::PageId> key;
      for (uint64_t g = 0; g < cache.num_groups(); ++g) key.push_back(cache.block_table(seq, g)[i]);
      auto [pos, added] = renumber.emplace(key, static_cast<uint32_t>(pages.size()));
      if (added) {
        pages.push_back(std::move(key));
        live.push_back(0);
      }
      const uint64_t first = i * page_size;
      live[pos->second] = std::max(live[pos->second], std::min(page_size, num_computed - first));
      out.push_back(pos->second);
    }
    return out;
  }
};

// Copies the pages' K and V (and, quantized, their row scales) into s,
// token-major, layer by layer. Errors: an unwritten live row's scale.
Status CopyPages(const kv::PagedKvCache& cache, const SnapshotPages& p, format::KvSnapshot& s) {
  const kv::PagedKvCacheConfig& kc = cache.config();
  const uint64_t heads = kc.num_kv_heads;
  for (uint64_t l = 0; l < kc.num_layers; ++l) {
    const uint64_t group = cache.group_of(l);
    for (const kv::KvRole role : {kv::KvRole::kKey, kv::KvRole::kValue}) {
      const bool key = role == kv::KvRole::kKey;
      std::vector<std::byte> pool(s.num_pages * cache.page_bytes());  // zeros
      for (size_t j = 0; j < p.pages.size(); ++j) {
        if (p.pages[j][group] == -1) continue;
        cache.ReadPageTokenMajor(
            l, role, p.pages[j][group], p.live[j],
            std::span(pool).subspan(j * cache.page_bytes(), cache.page_bytes()));
      }
      (key ? s.keys : s.values).push_back(std::move(pool));
      if (!IsQuantized(kc.dtype)) continue;
      // Every live slot's row was written, which set its scale.
      const uint64_t rows = kc.page_size * heads;
      std::vector<float> scales(s.num_pages * rows, 1.0f);
      for (size_t j = 0; j < p.pages.size(); ++j) {
        if (p.pages[j][group] == -1) continue;
        const std::span<float> out = std::span(scales).subspan(j * rows, rows);
        cache.ReadPageScales(l, role, p.pages[j][group], p.live[j], out);
        for (uint64_t i = 0; i < rows; ++i) {
          if (!std::isfinite(out[i]) || !(out[i] > 0.0f)) {
            return Status::FailedPrecondition(
                "layer " + std::to_string(l) + (key ? " key" : " value") + " scale of page " +
                std::to_string(p.pages[j][group]) + " slot " + std::to_string(i / heads) +
                " head " + std::to_string(i % heads) + " is " + std::to_string(out[i]) +
                ", not a finite number > 0 (the row is unwritten)");
          }
        }
      }
      (key ? s.key_scales : s.value_scales).push_back(std::move(scales));
    }
  }
  return Status::Ok();
}

// The snapshot's model, KV dtype and K/V shape against this engine's.
Status CheckShape(const format::KvSnapshot& s, const kv::PagedKvCacheConfig& kc,
                  const std::string& model_id) {
  FOLIO_ASSIGN_OR_RETURN(format::ElementType dtype, ToElementType(kc.dtype));
  auto mismatch = [](const std::string& field, const std::string& theirs, const std::string& ours) {
    return Status::InvalidArgument("snapshot " + field + " " + theirs +
                                   " differs from this engine's " + ours);
  };
  if (s.model_id != model_id) return mismatch("model id", s.model_id, model_id);
  if (s.kv_dtype != dtype) {
    return mismatch("KV dtype", std::string(format::ElementTypeName(s.kv_dtype)),
                    std::string(format::ElementTypeName(dtype)));
  }
  const std::pair<const char*, std::pair<uint64_t, uint64_t>> dims[] = {
      {"page size", {s.page_size, kc.page_size}},
      {"layer count", {s.num_layers, kc.num_layers}},
      {"K/V head count", {s.num_kv_heads, kc.num_kv_heads}},
      {"head dim", {s.head_dim, kc.head_dim}}};
  for (const auto& [name, v] : dims) {
    if (v.first != v.second) {
      return mismatch(name, std::to_string(v.first), std::to_string(v.second));
    }
  }
  return Status::Ok();
}

// Writes the snapshot's pages into the held pool pages: pages[j][g] is
// snapshot page j's page in layer group g, -1 where no sequence needs it.
// Validate checked every scale (finite, > 0) and CheckShape the dtype, so
// nothing fails.
void WritePages(kv::PagedKvCache& cache, const format::KvSnapshot& s,
                const std::vector<std::vector<kv::PageId>>& pool_pages) {
  const kv::PagedKvCacheConfig& kc = cache.config();
  const uint64_t page_bytes = cache.page_bytes();
  const uint64_t rows = kc.page_size * kc.num_kv_heads;  // scales per page
  for (uint64_t l = 0; l < s.num_layers; ++l) {
    const uint64_t group = cache.group_of(l);
    for (size_t j = 0; j < pool_pages.size(); ++j) {
      const kv::PageId page = pool_pages[j][group];
      if (page == -1) continue;
      const auto at = [&](const std::vector<std::byte>& pool) {
        return std::span(pool).subspan(j * page_bytes, page_bytes);
      };
      FOLIO_CHECK(cache.WritePageTokenMajor(l, kv::KvRole::kKey, page, at(s.keys[l])).ok());
      FOLIO_CHECK(cache.WritePageTokenMajor(l, kv::KvRole::kValue, page, at(s.values[l])).ok());
      if (!IsQuantized(kc.dtype)) continue;
      const auto scales = [&](const std::vector<float>& all) {
        return std::span(all).subspan(j * rows, rows);
      };
      FOLIO_CHECK(cache.WritePageScales(l, kv::KvRole::kKey, page, scales(s.key_scales[l])).ok());
      FOLIO_CHECK(
          cache.WritePageScales(l, kv::KvRole::kValue, page, scales(s.value_scales[l])).ok());
    }
  }
}

}  // namespace

Status Engine::CheckExportable(RequestId id) const {
  const std::string name = "request " + std::to_string(id);
  if (!scheduler_.Contains(id)) {
    return Status::NotFound("no unfinished request " + std::to_string(id));
  }
  // A forked sample's or beam's own sequence is no request of its own.
  if (RequestOf(id) != id) return Status::NotFound("no unfinished request " + std::to_string(id));
  const Request& r = request(id);
  const Member& m = r.member(id);
  if (!m.output) {
    return Status::FailedPrecondition(name + " runs a beam search, which snapshots do not carry");
  }
  const RequestParams& params = m.output->params;
  if (params.n > 1 || r.members.size() > 1) {
    return Status::FailedPrecondition(
        name + " has parallel samples (n > 1), which snapshots do not carry");
  }
  if (params.grammar) {
    // Not carried yet: the grammar's source would have to travel, and the
    // output be replayed through a new matcher on import, as
    // ResumeRequest does.
    return Status::FailedPrecondition(
        name + " follows a grammar (structured output), which snapshots do not carry");
  }
  if (params.pooling != Pooling::kNone) {
    return Status::FailedPrecondition(
        name + " is a pooled embedding (prefill only), which snapshots do not carry");
  }
  if (!scheduler_.sequence(id).seq) {
    return Status::FailedPrecondition(name + " is waiting and holds no pages yet");
  }
  return Status::Ok();
}

Result<format::KvSnapshot> Engine::ExportSnapshot(std::span<const RequestId> ids) const {
  const kv::PagedKvCache& cache = kv_->cache();
  const kv::PagedKvCacheConfig& kc = cache.config();
  format::KvSnapshot s;
  s.model_id = runner_.model_id();
  FOLIO_ASSIGN_OR_RETURN(s.kv_dtype, ToElementType(kc.dtype));
  if (IsQuantized(kc.dtype) && (kc.page_size < 2 || !std::has_single_bit(kc.page_size))) {
    return Status::Unimplemented(
        "page size " + std::to_string(kc.page_size) + " cannot be exported with KV dtype " +
        std::string(DTypeName(kc.dtype)) +
        ": a snapshot stores its scales as Hurray per-block scales with block_size = page size, "
        "and block_size must be a power of two >= 2");
  }
  s.page_size = kc.page_size;
  s.num_layers = kc.num_layers;
  s.num_kv_heads = kc.num_kv_heads;
  s.head_dim = kc.head_dim;
  SnapshotPages pages;
  std::set<RequestId> seen;
  for (const RequestId id : ids) {
    if (scheduler_.Contains(id) && !seen.insert(id).second) {
      return Status::InvalidArgument("request " + std::to_string(id) + " listed twice");
    }
    FOLIO_RETURN_IF_ERROR(CheckExportable(id));
    const Sequence& r = scheduler_.sequence(id);
    const OutputProcessor::State& o = *request(id).member(id).output;
    FOLIO_ASSIGN_OR_RETURN(nlohmann::json params, RequestParamsToJson(o.params));
    format::SnapshotSequence q;
    q.num_tokens = r.num_computed;
    q.block_table = pages.Add(cache, *r.seq, r.num_computed);
    q.request = {{"prompt", r.prompt()},
                 {"output", r.output()},
                 {"params", std::move(params)},
                 {"rng_state", o.rng.state()},
                 {"text_sent", o.text_sent}};
    s.sequences.push_back(std::move(q));
  }
  s.num_pages = pages.pages.size();
  FOLIO_RETURN_IF_ERROR(CopyPages(cache, pages, s));
  return s;
}

Result<Engine::Continued> Engine::StageSnapshotSequence(const format::SnapshotSequence& q,
                                                        const std::string& where) const {
  const JsonReader f(q.request, JsonErrorStyle::kFile, where);
  FOLIO_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, f.TokenIds("prompt"));
  FOLIO_ASSIGN_OR_RETURN(std::vector<int32_t> output, f.TokenIds("output"));
  const auto params_json = q.request.find("params");
  if (params_json == q.request.end()) {
    return Status::InvalidArgument(where + ": params is missing");
  }
  FOLIO_ASSIGN_OR_RETURN(RequestParams params, RequestParamsFromJson(*params_json, where));
  FOLIO_ASSIGN_OR_RETURN(uint64_t rng_state, f.U64("rng_state"));
  FOLIO_ASSIGN_OR_RETURN(uint64_t text_sent, f.U64("text_sent"));
  const uint64_t num_prompt = prompt.size(), num_output = output.size();
  Result<Continued> c =
      CheckContinued(std::move(prompt), std::move(output), params, rng_state, text_sent);
  if (!c.ok()) return c.status().WithContext(where);
  // Every token but the last has K/V; the last is fed next.
  if (q.num_tokens >= num_prompt + num_output ||
      (num_output != 0 && q.num_tokens + 1 != num_prompt + num_output)) {
    return Status::InvalidArgument(
        where + ": " + std::to_string(q.num_tokens) + " tokens with K/V do not fit a prompt of " +
        std::to_string(num_prompt) + " and " + std::to_string(num_output) + " generated tokens");
  }
  c->sequence.num_computed = q.num_tokens;
  return c;
}

Result<std::vector<RequestId>> Engine::ImportSnapshot(const format::KvSnapshot& s) {
  FOLIO_RETURN_IF_ERROR(s.Validate());
  FOLIO_RETURN_IF_ERROR(CheckShape(s, kv_->config(), runner_.model_id()));
  // Every request, checked before anything changes.
  std::vector<Continued> staged;
  for (size_t i = 0; i < s.sequences.size(); ++i) {
    FOLIO_ASSIGN_OR_RETURN(
        Continued c,
        StageSnapshotSequence(s.sequences[i], "snapshot sequence " + std::to_string(i)));
    staged.push_back(std::move(c));
  }
  // Which (snapshot page, layer group) some sequence's next query sees: a
  // windowed group takes no page for the positions its window left.
  const kv::PagedKvCache& cache = kv_->cache();
  const uint64_t groups = cache.num_groups();
  std::vector<std::vector<uint8_t>> needed(s.num_pages, std::vector<uint8_t>(groups, 0));
  uint64_t num_needed = 0;
  for (const format::SnapshotSequence& q : s.sequences) {
    for (uint64_t g = 0; g < groups; ++g) {
      const uint64_t first = cache.FirstKept(cache.groups()[g].window, q.num_tokens);
      for (size_t lp = first / s.page_size; lp < q.block_table.size(); ++lp) {
        uint8_t& n = needed[q.block_table[lp]][g];
        num_needed += n == 0 ? 1 : 0;
        n = 1;
      }
    }
  }
  // The last check: the pages (HoldNewPages changes nothing when they do
  // not fit). From here on nothing can fail.
  Result<std::vector<kv::PageId>> held = kv_->HoldNewPages(num_needed);
  if (!held.ok()) return held.status().WithContext("snapshot");
  std::vector<std::vector<kv::PageId>> pages(s.num_pages, std::vector<kv::PageId>(groups, -1));
  for (size_t j = 0, next = 0; j < pages.size(); ++j) {
    for (uint64_t g = 0; g < groups; ++g) {
      if (needed[j][g] != 0) pages[j][g] = (*held)[next++];
    }
  }
  WritePages(kv_->mutable_cache(), s, pages);
  std::vector<RequestId> ids;
  for (size_t i = 0; i < staged.size(); ++i) {
    std::vector<std::vector<kv::PageId>> tables(groups);
    for (uint64_t g = 0; g < groups; ++g) {
      for (const uint32_t p : s.sequences[i].block_table) tables[g].push_back(pages[p][g]);
    }
    Result<kv::SeqId> seq = kv_->AdoptSequence(tables, s.sequences[i].num_tokens);
    FOLIO_CHECK(seq.ok(), seq.status().ToString());
    const RequestId id = next_id_++;
    Sequence& sequence = staged[i].sequence;
    sequence.id = id;
    sequence.seq = *seq;
    AddSampled(std::move(sequence), std::move(staged[i].output), /*running=*/true);
    ids.push_back(id);
  }
  for (const kv::PageId p : *held) kv_->DropPage(p);
  return ids;
}

Result<Engine::Continued> Engine::CheckContinued(std::vector<int32_t> prompt,
                                                 std::vector<int32_t> output,
                                                 const RequestParams& params, uint64_t rng_state,
                                                 uint64_t text_sent) const {
  FOLIO_RETURN_IF_ERROR(ValidateRequest(prompt, params));
  if (params.n > 1 || params.beam.num_beams > 0) {
    return Status::FailedPrecondition(
        "a request with parallel samples (n > 1) or a beam search has no single random stream "
        "to continue");
  }
  for (size_t t = 0; t < output.size(); ++t) {
    if (output[t] < 0 || static_cast<uint64_t>(output[t]) >= runner_.config().vocab_size) {
      return Status::OutOfRange("output token " + std::to_string(t) + " has id " +
                                std::to_string(output[t]) + " outside the vocabulary");
    }
  }
  if (output.size() >= params.max_tokens) {
    return Status::InvalidArgument("already has its " + std::to_string(params.max_tokens) +
                                   " tokens");
  }
  FOLIO_ASSIGN_OR_RETURN(OutputProcessor::State state,
                         outputs_.RestoredState(params, rng_state, output, text_sent));
  Continued c{Sequence{}, std::move(state)};
  c.sequence.num_prompt_tokens = prompt.size();
  c.sequence.max_tokens = params.max_tokens;
  c.sequence.tokens = std::move(prompt);
  c.sequence.tokens.insert(c.sequence.tokens.end(), output.begin(), output.end());
  return c;
}

Result<RequestId> Engine::ResumeRequest(std::vector<int32_t> prompt, std::vector<int32_t> output,
                                        RequestParams params, uint64_t rng_state,
                                        uint64_t text_sent) {
  FOLIO_ASSIGN_OR_RETURN(Continued c, CheckContinued(std::move(prompt), std::move(output), params,
                                                     rng_state, text_sent));
  const RequestId id = next_id_++;
  c.sequence.id = id;
  AddSampled(std::move(c.sequence), std::move(c.output), /*running=*/false);
  return id;
}

}  // namespace folio::engine

#include "bench/grammar_bench.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "bench/machine_info.h"
#include "bench/report.h"
#include "bench/timing.h"
#include "folio/checkpoint/gguf.h"
#include "folio/checkpoint/model_tokenizer.h"
#include "folio/core/splitmix64.h"
#include "folio/core/utf8.h"
#include "folio/engine/output_processor.h"
#include "folio/grammar/grammar.h"
#include "folio/grammar/structured_output.h"
#include "folio/tokenizer/byte_tokenizer.h"
#include "folio/tokenizer/tokenizer.h"

namespace folio::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr uint64_t kMaxListed = 200;  // failures listed in the report (all are counted)

// The tokenizer and the number of logit rows the engine would mask (the
// model's vocabulary, which may differ from the tokenizer's).
struct Vocabulary {
  std::optional<tokenizer::Tokenizer> owned;  // none: the byte-level tokenizer
  uint64_t size = 0;
  const tokenizer::Tokenizer& tok() const {
    return owned ? *owned : tokenizer::ByteTokenizer::AsTokenizer();
  }
};

uint64_t ModelVocabSize(const std::string& path, const tokenizer::Tokenizer& tok) {
  if (fs::path(path).extension() == ".gguf") {
    Result<checkpoint::GgufFile> f = checkpoint::GgufFile::Open(path);
    if (f) {
      const checkpoint::GgufFile::TensorInfo* embd = f->Find("token_embd.weight");
      if (embd != nullptr && embd->dims.size() == 2) return embd->dims[1];
    }
  } else if (fs::is_directory(path)) {
    std::ifstream in(fs::path(path) / "config.json");
    const json config = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (config.is_object() && config.contains("vocab_size") &&
        config["vocab_size"].is_number_unsigned()) {
      return config["vocab_size"].get<uint64_t>();
    }
  }
  return tok.vocab_size();
}

Result<Vocabulary> LoadVocabulary(const std::string& model) {
  Vocabulary v;
  if (model.empty()) {
    v.size = v.tok().vocab_size();
    return v;
  }
  FOLIO_ASSIGN_OR_RETURN(std::optional<tokenizer::Tokenizer> t,
                         checkpoint::LoadModelTokenizer(model));
  if (!t) return Status::NotFound(model + " has no tokenizer (no tokenizer.json)");
  v.owned = std::move(t);
  v.size = ModelVocabSize(model, v.tok());
  return v;
}

std::string Hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

std::string Hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Length of the well-formed UTF-8 sequence at s[i], or 0.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  const utf8::LeadByte lead = utf8::ClassifyLead(c);
  if (lead.len == 0 || i + lead.len > s.size()) return 0;
  const auto second = static_cast<unsigned char>(s[i + 1]);
  if (second < lead.lo || second > lead.hi) return 0;
  for (size_t k = 2; k < lead.len; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return lead.len;
}

// The percentiles of `values`, in the unit they are in.
json Percentiles(const std::vector<double>& values) {
  if (values.empty()) return {{"count", 0}};
  double sum = 0;
  for (const double v : values) sum += v;
  return {{"count", values.size()},
          {"p50", Quantile(values, 0.5)},
          {"p90", Quantile(values, 0.9)},
          {"p99", Quantile(values, 0.99)},
          {"max", *std::max_element(values.begin(), values.end())},
          {"mean", sum / static_cast<double>(values.size())}};
}

struct SplitStats {
  uint64_t files = 0;
  uint64_t unreadable = 0;  // not a MaskBench object (not counted as schemas)
  uint64_t schemas = 0;
  uint64_t compiled = 0;
  std::map<std::string, uint64_t> reasons;
  std::map<std::string, uint64_t> codes;
  uint64_t valid_total = 0, valid_accepted = 0;
  uint64_t invalid_total = 0, invalid_rejected = 0;
  uint64_t instances_of_refused = 0;  // not walked: their schema was refused
  uint64_t steps = 0;
  uint64_t disagreements = 0;  // the mask bit and AcceptToken differ
  std::vector<double> mask_us, cold_us, warm_us, compile_ms;
  uint64_t mask_hits = 0, mask_misses = 0, frames_sum = 0, frames_max = 0, masks_cached_sum = 0;
  uint64_t walked = 0;  // instances walked (each on a fresh matcher)

  void Add(const SplitStats& o) {
    files += o.files;
    unreadable += o.unreadable;
    schemas += o.schemas;
    compiled += o.compiled;
    for (const auto& [k, n] : o.reasons) reasons[k] += n;
    for (const auto& [k, n] : o.codes) codes[k] += n;
    valid_total += o.valid_total;
    valid_accepted += o.valid_accepted;
    invalid_total += o.invalid_total;
    invalid_rejected += o.invalid_rejected;
    instances_of_refused += o.instances_of_refused;
    steps += o.steps;
    disagreements += o.disagreements;
    mask_us.insert(mask_us.end(), o.mask_us.begin(), o.mask_us.end());
    cold_us.insert(cold_us.end(), o.cold_us.begin(), o.cold_us.end());
    warm_us.insert(warm_us.end(), o.warm_us.begin(), o.warm_us.end());
    compile_ms.insert(compile_ms.end(), o.compile_ms.begin(), o.compile_ms.end());
    mask_hits += o.mask_hits;
    mask_misses += o.mask_misses;
    frames_sum += o.frames_sum;
    frames_max = std::max(frames_max, o.frames_max);
    masks_cached_sum += o.masks_cached_sum;
    walked += o.walked;
  }

  json ToJson() const {
    const auto pct = [](uint64_t a, uint64_t b) {
      return b == 0 ? 0.0 : 100.0 * static_cast<double>(a) / static_cast<double>(b);
    };
    std::vector<std::pair<std::string, uint64_t>> sorted(reasons.begin(), reasons.end());
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    json top = json::array();
    for (size_t i = 0; i < sorted.size() && i < 30; ++i) {
      top.push_back({{"reason", sorted[i].first}, {"count", sorted[i].second}});
    }
    const auto walked_d = static_cast<double>(std::max<uint64_t>(walked, 1));
    return {
        {"files", files},
        {"unreadable", unreadable},
        {"schemas", schemas},
        {"compiled", compiled},
        {"coverage_pct", pct(compiled, schemas)},
        {"refusal_codes", codes},
        {"refusal_reasons_top30", top},
        {"refusal_reasons_distinct", reasons.size()},
        {"valid", {{"total", valid_total}, {"accepted", valid_accepted}}},
        {"soundness_pct", pct(valid_accepted, valid_total)},
        {"invalid", {{"total", invalid_total}, {"rejected", invalid_rejected}}},
        {"invalid_rejected_pct", pct(invalid_rejected, invalid_total)},
        {"instances_of_refused_schemas", instances_of_refused},
        {"steps", steps},
        {"mask_accept_disagreements", disagreements},
        {"mask_us", Percentiles(mask_us)},
        {"mask_us_cold_first_step", Percentiles(cold_us)},
        {"mask_us_warm", Percentiles(warm_us)},
        {"compile_ms", Percentiles(compile_ms)},
        {"matcher",
         {{"instances", walked},
          {"mask_hits", mask_hits},
          {"mask_misses", mask_misses},
          {"mask_hit_rate",
           mask_hits + mask_misses == 0
               ? 0.0
               : static_cast<double>(mask_hits) / static_cast<double>(mask_hits + mask_misses)},
          {"frames_mean", static_cast<double>(frames_sum) / walked_d},
          {"frames_max", frames_max},
          {"masks_cached_mean", static_cast<double>(masks_cached_sum) / walked_d}}},
    };
  }
};

std::vector<fs::path> MaskBenchFiles(const std::string& folder, uint64_t limit,
                                     const std::vector<std::string>& only) {
  std::vector<fs::path> all;
  for (const fs::directory_entry& e : fs::directory_iterator(folder)) {
    if (!e.is_regular_file() || e.path().extension() != ".json") continue;
    if (!only.empty() &&
        std::find(only.begin(), only.end(), e.path().filename().string()) == only.end()) {
      continue;
    }
    all.push_back(e.path());
  }
  std::sort(all.begin(), all.end());
  if (limit == 0) return all;
  std::map<std::string, uint64_t> taken;
  std::vector<fs::path> out;
  for (const fs::path& p : all) {
    if (taken[MaskBenchSplit(p.filename().string())]++ < limit) out.push_back(p);
  }
  return out;
}

// Everything the walk of one instance found.
struct Walk {
  uint64_t accepted = 0;  // tokens accepted
  bool can_finish = false;
  json masks = json::array();    // [allowed count, set hash] per step
  json ids = json::array();      // with --trace-full: the allowed ids per step
  std::vector<int64_t> mask_ns;  // FillMask's time per step
};

class Bench {
 public:
  Bench(const GrammarBenchOptions& o, const Vocabulary& v, std::vector<std::string> token_bytes)
      : o_(o), vocab_(v) {
    trie_ = std::make_shared<const grammar::TokenTrie>(token_bytes);
    json_.whitespace_flexible = o.whitespace == "flexible";
    allowed_.resize((vocab_.size + 63) / 64);
  }

  Status Run(const std::vector<fs::path>& files, std::ostream* trace) {
    for (const fs::path& path : files) {
      const std::string name = path.filename().string();
      SplitStats& s = splits_[MaskBenchSplit(name)];
      ++s.files;
      std::ifstream in(path);
      const ordered_json doc = ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (!doc.is_object() || !doc.contains("schema")) {
        ++s.unreadable;
        unreadable_.push_back(name);
        continue;
      }
      FOLIO_RETURN_IF_ERROR(RunFile(name, doc, s, trace));
    }
    return Status::Ok();
  }

  json Report() const {
    SplitStats total;
    json splits = json::object();
    for (const auto& [name, s] : splits_) {
      splits[name] = s.ToJson();
      total.Add(s);
    }
    return {{"splits", splits},
            {"total", total.ToJson()},
            {"soundness_failures_count", soundness_failures_},
            {"soundness_failures", failures_},
            {"invalid_accepted_count", invalid_accepted_},
            {"invalid_accepted", invalid_accepted_list_},
            {"mask_accept_disagreements", disagreement_list_},
            {"refused", refused_},
            {"unreadable", unreadable_}};
  }

 private:
  Status RunFile(const std::string& name, const ordered_json& doc, SplitStats& s,
                 std::ostream* trace) {
    ++s.schemas;
    grammar::StructuredOutput so;
    so.kind = grammar::StructuredOutput::Kind::kJsonSchema;
    so.schema = doc["schema"];
    const double start = NowUs();
    using CompiledResult = Result<std::shared_ptr<const grammar::Grammar>>;
    const CompiledResult g = [&]() -> CompiledResult {
      FOLIO_ASSIGN_OR_RETURN(std::string gbnf, grammar::StructuredOutputToGbnf(so, json_));
      return grammar::Grammar::FromGbnf(gbnf);
    }();
    const double compile_us = NowUs() - start;
    if (g) {
      ++s.compiled;
      s.compile_ms.push_back(compile_us / 1000.0);
    } else {
      const std::string reason = RefusalReason(g.error());
      ++s.reasons[reason];
      ++s.codes[std::string(StatusCodeName(g.error().code()))];
      refused_.push_back({{"file", name},
                          {"code", StatusCodeName(g.error().code())},
                          {"reason", reason},
                          {"message", PrintableBytes(g.error().message())}});
    }
    if (trace != nullptr) {
      json line = {{"schema_file", name}, {"split", MaskBenchSplit(name)}, {"compiled", g.ok()}};
      if (g) {
        line["compile_ms"] = compile_us / 1000.0;
      } else {
        line["code"] = StatusCodeName(g.error().code());
        line["reason"] = RefusalReason(g.error());
      }
      *trace << line.dump() << "\n";
    }
    const ordered_json tests =
        doc.contains("tests") && doc["tests"].is_array() ? doc["tests"] : ordered_json::array();
    for (size_t t = 0; t < tests.size(); ++t) {
      const ordered_json& test = tests[t];
      if (!test.is_object() || !test.contains("data")) continue;
      const bool valid =
          test.contains("valid") && test["valid"].is_boolean() && test["valid"].get<bool>();
      const std::string text = WriteJson(test["data"], ", ", ": ");
      FOLIO_ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
                             vocab_.tok().Encode(text, /*add_special_tokens=*/false,
                                                 /*allow_special=*/false));
      json line = {{"file", name}, {"test", t}, {"valid", valid}, {"tokens", tokens}};
      if (!g) {
        ++s.instances_of_refused;
        line["compiled"] = false;
        if (trace != nullptr) *trace << line.dump() << "\n";
        continue;
      }
      const Walk w = WalkInstance(name, *g, tokens, s);
      const bool all = w.accepted == tokens.size();
      const std::string desc = test.contains("description") && test["description"].is_string()
                                   ? test["description"].get<std::string>()
                                   : std::string();
      if (valid) {
        ++s.valid_total;
        if (all && w.can_finish) {
          ++s.valid_accepted;
        } else {
          ++soundness_failures_;
          if (failures_.size() < kMaxListed) {
            failures_.push_back(Failure(name, t, desc, text, tokens, w.accepted, all));
          }
        }
      } else {
        ++s.invalid_total;
        if (!all || !w.can_finish) {
          ++s.invalid_rejected;
        } else {
          ++invalid_accepted_;
          if (invalid_accepted_list_.size() < kMaxListed) {
            invalid_accepted_list_.push_back(
                {{"file", name}, {"test", t}, {"description", desc}, {"text", text}});
          }
        }
      }
      if (trace != nullptr) {
        line["compiled"] = true;
        line["accepted"] = w.accepted;
        line["can_finish"] = w.can_finish;
        line["masks"] = w.masks;
        line["mask_ns"] = w.mask_ns;
        if (o_.trace_full) line["allowed_ids"] = w.ids;
        *trace << line.dump() << "\n";
      }
    }
    return Status::Ok();
  }

  json Failure(const std::string& name, size_t test, const std::string& desc,
               const std::string& text, const std::vector<int32_t>& tokens, uint64_t accepted,
               bool all) const {
    json f = {{"file", name}, {"test", test}, {"description", desc}};
    if (all) {
      f["where"] = "end: every token accepted, but the grammar cannot finish";
      f["step"] = tokens.size();
      f["text"] = PrintableBytes(text.substr(0, 400));
      return f;
    }
    size_t offset = 0;
    for (uint64_t i = 0; i < accepted; ++i) offset += trie_->token_bytes(tokens[i]).size();
    const std::string_view bytes = trie_->token_bytes(tokens[accepted]);
    f["where"] = "token refused";
    f["step"] = accepted;
    f["token"] = tokens[accepted];
    f["token_text"] = PrintableBytes(bytes);
    const size_t from = offset > 60 ? offset - 60 : 0;
    f["before"] = PrintableBytes(std::string_view(text).substr(from, offset - from));
    f["text"] = PrintableBytes(text.substr(0, 400));
    return f;
  }

  // Walks `tokens` on a fresh matcher: FillMask timed at each step (and
  // once more after the last token: the step that would allow the end),
  // then the token's bit and AcceptToken.
  Walk WalkInstance(const std::string& name, const std::shared_ptr<const grammar::Grammar>& g,
                    const std::vector<int32_t>& tokens, SplitStats& s) {
    Walk w;
    grammar::Matcher m(g, trie_);
    const std::span<uint64_t> mask(allowed_);
    for (size_t i = 0; i <= tokens.size(); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      m.FillMask(mask);
      const auto t1 = std::chrono::steady_clock::now();
      const double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
      if (!o_.trace.empty()) {
        w.mask_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
      }
      s.mask_us.push_back(us);
      (i == 0 ? s.cold_us : s.warm_us).push_back(us);
      ++s.steps;
      RecordMask(w);
      if (i == tokens.size()) break;
      const auto u = static_cast<uint32_t>(tokens[i]);
      const bool bit = u < vocab_.size && ((allowed_[u >> 6] >> (u & 63)) & 1) != 0;
      const bool ok = m.AcceptToken(tokens[i]);
      if (bit != ok) {
        ++s.disagreements;
        if (disagreement_list_.size() < kMaxListed) {
          disagreement_list_.push_back(
              {{"file", name},
               {"step", i},
               {"token", tokens[i]},
               {"mask_bit", bit},
               {"accept_token", ok},
               {"token_text", PrintableBytes(trie_->token_bytes(tokens[i]))}});
        }
      }
      if (!ok) break;
      ++w.accepted;
    }
    w.can_finish = w.accepted == tokens.size() && m.CanFinish();
    const grammar::Matcher::Stats st = m.stats();
    s.mask_hits += st.mask_hits;
    s.mask_misses += st.mask_misses;
    s.frames_sum += st.frames;
    s.frames_max = std::max(s.frames_max, st.frames);
    s.masks_cached_sum += st.masks_cached;
    ++s.walked;
    return w;
  }

  void RecordMask(Walk& w) const {
    if (o_.trace.empty()) return;
    uint64_t count = 0;
    for (const uint64_t word : allowed_) count += static_cast<uint64_t>(std::popcount(word));
    w.masks.push_back({count, Hex64(TokenSetHash(allowed_))});
    if (!o_.trace_full) return;
    // The allowed ids, or {"not": ids} (the ids not allowed) when most are.
    const bool complement = count * 2 > vocab_.size;
    std::vector<uint32_t> ids;
    for (size_t k = 0; k < allowed_.size(); ++k) {
      uint64_t word = complement ? ~allowed_[k] : allowed_[k];
      if (complement && (k + 1) * 64 > vocab_.size) {
        word &= (uint64_t{1} << (vocab_.size - k * 64)) - 1;  // no ids past the vocabulary
      }
      for (; word != 0; word &= word - 1) {
        ids.push_back(static_cast<uint32_t>(k * 64 + static_cast<size_t>(std::countr_zero(word))));
      }
    }
    if (complement) {
      w.ids.push_back({{"not", ids}});
    } else {
      w.ids.push_back(ids);
    }
  }

  const GrammarBenchOptions& o_;
  const Vocabulary& vocab_;
  std::shared_ptr<const grammar::TokenTrie> trie_;
  grammar::JsonSchemaOptions json_;
  std::vector<uint64_t> allowed_;
  std::map<std::string, SplitStats> splits_;
  uint64_t soundness_failures_ = 0;
  json failures_ = json::array();
  uint64_t invalid_accepted_ = 0;
  json invalid_accepted_list_ = json::array();
  json disagreement_list_ = json::array();
  json refused_ = json::array();
  json unreadable_ = json::array();
};

Status DumpVocab(const std::string& path, const Vocabulary& v,
                 const std::vector<std::string>& token_bytes) {
  json tokens = json::array();
  json special = json::array();
  json special_text = json::object();
  for (uint64_t id = 0; id < token_bytes.size(); ++id) {
    tokens.push_back(Hex(token_bytes[id]));
    const auto i = static_cast<int32_t>(id);
    if (id < v.tok().vocab_size() && v.tok().IsSpecial(i)) {
      special.push_back(id);
      special_text[std::to_string(id)] = PrintableBytes(v.tok().TokenText(i));
    }
  }
  json out = {{"vocab_size", token_bytes.size()},
              {"tokenizer_vocab_size", v.tok().vocab_size()},
              {"bos_token_id", v.tok().bos_id() ? json(*v.tok().bos_id()) : json(nullptr)},
              {"eos_token_id", v.tok().eos_id() ? json(*v.tok().eos_id()) : json(nullptr)},
              {"tokens_hex", tokens},
              {"special", special},
              {"special_text", special_text}};
  return WriteTextFile(path, out.dump() + "\n");
}

}  // namespace

std::string MaskBenchSplit(std::string_view file_name) {
  std::string_view stem = file_name;
  if (stem.ends_with(".json")) stem.remove_suffix(5);
  if (const size_t dashes = stem.find("---"); dashes != std::string_view::npos) {
    return std::string(stem.substr(0, dashes));
  }
  if (const size_t u = stem.rfind('_'); u != std::string_view::npos && u > 0) {
    return std::string(stem.substr(0, u));
  }
  return std::string(stem);
}

std::string WriteJson(const ordered_json& value, std::string_view item_separator,
                      std::string_view key_separator) {
  std::string out;
  if (value.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, member] : value.items()) {
      if (!first) out += item_separator;
      first = false;
      out += ordered_json(key).dump();
      out += key_separator;
      out += WriteJson(member, item_separator, key_separator);
    }
    out += '}';
  } else if (value.is_array()) {
    out += '[';
    bool first = true;
    for (const ordered_json& item : value) {
      if (!first) out += item_separator;
      first = false;
      out += WriteJson(item, item_separator, key_separator);
    }
    out += ']';
  } else {
    out += value.dump();
  }
  return out;
}

std::string RefusalReason(const Status& status) {
  const std::string& m = status.message();
  const auto quoted_after = [&](std::string_view prefix) -> std::optional<std::string> {
    const size_t at = m.find(prefix);
    if (at == std::string::npos) return std::nullopt;
    const size_t begin = at + prefix.size();
    const size_t end = m.find('"', begin);
    if (end == std::string::npos) return std::nullopt;
    return m.substr(begin, end - begin);
  };
  if (auto k = quoted_after("unsupported keyword \"")) return *k;
  if (auto k = quoted_after("unsupported format \"")) return "format " + *k;
  if (auto k = quoted_after("cannot merge differing \"")) return "merge " + *k;
  if (m.starts_with("oneOf") && m.find("not provably disjoint") != std::string::npos) {
    return "oneOf not provably disjoint";
  }
  std::string head = m.substr(0, m.find(" at "));
  // Elide what varies from schema to schema: quoted text and numbers.
  std::string out;
  for (size_t i = 0; i < head.size(); ++i) {
    const char c = head[i];
    if (c == '"') {
      const size_t end = head.find('"', i + 1);
      out += "\"...\"";
      if (end == std::string::npos) break;
      i = end;
    } else if ((c >= '0' && c <= '9') ||
               (c == '-' && i + 1 < head.size() && head[i + 1] >= '0' && head[i + 1] <= '9' &&
                (out.empty() || out.back() == ' '))) {
      while (i + 1 < head.size() &&
             ((head[i + 1] >= '0' && head[i + 1] <= '9') || head[i + 1] == '.' ||
              head[i + 1] == 'e' || head[i + 1] == 'E' || head[i + 1] == '+' ||
              head[i + 1] == '-')) {
        ++i;
      }
      out += 'N';
    } else {
      out += c;
    }
  }
  if (out.size() > 120) out = out.substr(0, 120) + "...";
  return PrintableBytes(out);
}

uint64_t TokenSetHash(std::span<const uint64_t> mask) {
  uint64_t h = 0;
  for (size_t k = 0; k < mask.size(); ++k) {
    for (uint64_t word = mask[k]; word != 0; word &= word - 1) {
      const uint64_t id = k * 64 + static_cast<uint64_t>(std::countr_zero(word));
      h += SplitMix64(id).NextU64();
    }
  }
  return h;
}

std::string PrintableBytes(std::string_view bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = Utf8Length(bytes, i);
    if (n == 0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(uint8_t(bytes[i])));
      out += buf;
      ++i;
    } else {
      out.append(bytes.substr(i, n));
      i += n;
    }
  }
  return out;
}

CLI::App* AddGrammarBenchCommand(CLI::App& bench, GrammarBenchOptions& o) {
  CLI::App* cmd = bench.add_subcommand(
      "grammar",
      "structured output on MaskBench files: coverage, soundness and per-token mask time, as "
      "JSON");
  cmd->add_option("--maskbench", o.maskbench, "a folder of MaskBench JSON files")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--model", o.model,
                  "model folder or .gguf whose tokenizer is used (default: byte-level)");
  cmd->add_option("--json-output,-o", o.json_output, "write the JSON here (default: stdout)");
  cmd->add_option("--limit", o.limit, "files per split, in name order (default: all)");
  cmd->add_option("--files", o.files, "only these files of the folder (names, comma-separated)")
      ->delimiter(',');
  cmd->add_option("--whitespace", o.whitespace,
                  "strict (\", \" and \": \" only, the default) or flexible")
      ->check(CLI::IsMember({"strict", "flexible"}));
  cmd->add_option("--trace", o.trace,
                  "write each instance's token ids and each step's allowed count and set hash "
                  "(JSON lines)");
  cmd->add_flag("--trace-full", o.trace_full, "with --trace: every step's allowed ids too");
  cmd->add_option("--dump-vocab", o.dump_vocab,
                  "write the token bytes the grammar sees (hex, by id) as JSON");
  return cmd;
}

int RunGrammarBench(const GrammarBenchOptions& o, const std::string& command) {
  auto fail = [](const Status& s) {
    std::cerr << "folio bench grammar: " << s.ToString() << "\n";
    return 1;
  };
  Result<Vocabulary> vocab = LoadVocabulary(o.model);
  if (!vocab) return fail(vocab.error());
  std::vector<std::string> token_bytes = engine::GrammarTokenBytes(vocab->tok(), vocab->size);
  if (!o.dump_vocab.empty()) {
    if (Status s = DumpVocab(o.dump_vocab, *vocab, token_bytes); !s.ok()) return fail(s);
  }
  const std::vector<fs::path> files = MaskBenchFiles(o.maskbench, o.limit, o.files);
  std::optional<std::ofstream> trace;
  if (!o.trace.empty()) {
    trace.emplace(o.trace, std::ios::trunc);
    if (!*trace) return fail(Status::IoError("cannot write " + o.trace));
    *trace << json{{"trace", "folio bench grammar"},
                   {"vocab_size", vocab->size},
                   {"set_hash", "sum mod 2^64 of SplitMix64(id).NextU64() over the allowed ids"},
                   {"steps", "FillMask before each token, and once after the last"},
                   {"lines",
                    "a schema_file line per file (compiled or the refusal), then one line per "
                    "test instance: its token ids and, when compiled, per step [allowed count, "
                    "set hash] (masks) and FillMask's nanoseconds (mask_ns); with --trace-full "
                    "also allowed_ids: per step the ids allowed, or {\"not\": ids} when most "
                    "are"}}
                  .dump()
           << "\n";
  }
  const MachineInfo machine = ReadMachineInfo();
  const std::array<double, 3> load_at_start = ReadLoadAverage();
  const CpuSnapshot before = TakeCpuSnapshot();
  const double start = NowUs();
  Bench bench(o, *vocab, std::move(token_bytes));
  if (Status s = bench.Run(files, trace ? &*trace : nullptr); !s.ok()) return fail(s);
  if (trace) {
    trace->close();
    if (!*trace) return fail(Status::IoError("cannot write " + o.trace));
  }
  const double wall_s = (NowUs() - start) / 1e6;
  json report = {
      {"benchmark", "grammar"},
      {"command", command},
      {"model", o.model.empty() ? "byte-level" : o.model},
      {"vocab_size", vocab->size},
      {"eos_token_id", vocab->tok().eos_id() ? json(*vocab->tok().eos_id()) : json(nullptr)},
      {"whitespace", o.whitespace},
      {"separators", {", ", ": "}},
      {"files", files.size()},
      {"limit_per_split", o.limit},
      {"wall_s", wall_s},
      {"mask_us",
       "FillMask per step on a fresh matcher per instance: every step (before each token and "
       "once after the last), the first step (cold), and the later ones (warm)"},
      {"compile_ms", "StructuredOutputToGbnf + Grammar::FromGbnf, per compiled schema"},
  };
  report.update(bench.Report());
  report["machine"] = MachineJson(machine, load_at_start, LoadBetween(before, TakeCpuSnapshot()));
  if (Status s = EmitJson(report, o.json_output); !s.ok()) return fail(s);
  return 0;
}

}  // namespace folio::bench

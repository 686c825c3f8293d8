// folio._folio.EngineCore: what folio.LLM and folio.AsyncLLM (python/folio/)
// stand on. It loads a model the way `folio serve` does (serving/engine_args.h),
// builds one engine over one KV pool, and runs it on its own thread
// (serving/engine_thread.h; events in outbox.h). Everything Python sees is plain values: token ids,
// strings, tuples, dicts; the pure-Python layer makes vLLM's objects.
//
// The interpreter's lock is released whenever this code waits (loading a
// model, waiting for events, calls that run on the engine thread), and the
// engine thread never touches Python.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "chat_prompt.h"
#include "folio/core/dtype.h"
#include "folio/engine/engine.h"
#include "folio/engine/request_params.h"
#include "folio/format/kv_snapshot.h"
#include "folio/grammar/structured_output.h"
#include "folio/kv/prefix_cache.h"
#include "folio/ops/packed_matmul.h"
#include "folio/serving/engine_args.h"
#include "folio/serving/engine_thread.h"
#include "folio/tokenizer/byte_tokenizer.h"
#include "outbox.h"

namespace nb = nanobind;

namespace folio::python {
namespace {

nb::str Utf8(const std::string& s) {
  // Engine text is well-formed UTF-8 (StreamingDecoder, Tokenizer::Decode);
  // "replace" only guards the edge.
  return nb::steal<nb::str>(
      PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
}

[[noreturn]] void RaiseValue(const std::string& message) {
  PyErr_SetString(PyExc_ValueError, message.c_str());
  throw nb::python_error();
}

// Loading errors: FileNotFoundError for a missing file (the draft model's
// too), RuntimeError when the thread pool cannot start, ValueError for the
// rest (bad arguments, an engine that cannot be built on them).
void ThrowIfLoadError(const Status& s) {
  if (s.code() == StatusCode::kNotFound || s.code() == StatusCode::kResourceExhausted) {
    ThrowIfModelError(s);
  }
  ThrowIfRequestError(s);
}

// The declared request parameters (engine/request_params.h) given by
// keyword: each by its row's type (TypeError otherwise), None for its
// default; a keyword that is not declared is a TypeError naming it.
void SetDeclared(engine::RequestParams& p, const nb::kwargs& given) {
  size_t used = 0;
  engine::ForEachRequestParam(p, [&](const engine::RequestParamInfo& info, auto& member) {
    const nb::str key(info.name.data(), info.name.size());
    if (!given.contains(key)) return;
    ++used;
    const nb::handle v = given[key];
    if (v.is_none()) return;
    using T = std::decay_t<decltype(member)>;
    if constexpr (std::is_same_v<T, bool>) {
      if (!nb::isinstance<nb::bool_>(v)) {
        throw nb::type_error((std::string(info.name) + " must be a bool").c_str());
      }
    } else {
      // Python's bool is an int: refuse it where a number is meant.
      if (nb::isinstance<nb::bool_>(v)) {
        throw nb::type_error(
            (std::string(info.name) + " must be " + std::string(info.type) + ", not a bool")
                .c_str());
      }
    }
    if (!nb::try_cast(v, member)) {
      throw nb::type_error((std::string(info.name) + " must be " + std::string(info.type)).c_str());
    }
  });
  if (used != given.size()) {
    // Some keyword is not a declared parameter: name the first.
    for (const auto& [key, value] : given) {
      bool known = false;
      engine::ForEachRequestParam(p, [&](const engine::RequestParamInfo& info, auto&) {
        known = known || nb::cast<std::string_view>(key) == info.name;
      });
      if (!known) {
        throw nb::type_error(("no request parameter named " + nb::cast<std::string>(key)).c_str());
      }
    }
  }
}

class EngineCore {
 public:
  EngineCore(const serving::EngineArgs& args, uint64_t step_delay_us) {
    const bool builtin = args.model.empty() || args.model == "builtin";
    if (!builtin && !std::filesystem::exists(args.model)) {
      PyErr_SetString(PyExc_FileNotFoundError, ("no model at " + args.model +
                                                " (a model folder, a .gguf file, or \"builtin\")")
                                                   .c_str());
      throw nb::python_error();
    }
    // Python's names for what EngineArgs calls otherwise.
    serving::ArgNames names;
    names.renamed = {{"draft_model", "speculative_config model"},
                     {"speculative_tokens", "num_speculative_tokens"}};
    ThrowIfRequestError(args.Validate(names));
    Result<serving::ServedModel> served = Status::FailedPrecondition("not loaded");
    {
      nb::gil_scoped_release release;
      served = serving::LoadServedModel(args.model, args.builtin_positions, args.tokenizer_pre);
    }
    if (!served) ThrowIfModelError(served.error());
    // A model whose chat template does not parse still generates; chat()
    // raises the parse error.
    Result<serving::ChatFormat> chat = served->MakeChatFormat(std::nullopt);
    if (chat) {
      chat_.emplace(std::move(*chat));
    } else {
      chat_error_ = chat.error().WithContext("the model's chat template");
    }
    Result<std::unique_ptr<serving::ServingEngine>> built = Status::FailedPrecondition("not built");
    {
      nb::gil_scoped_release release;  // the draft model loads here
      built = serving::ServingEngine::Create(std::move(*served), args, names);
    }
    if (!built) ThrowIfLoadError(built.error());
    serving_ = std::move(*built);
    Result<std::shared_ptr<Outbox>> outbox = Outbox::Create();
    if (!outbox) ThrowIfError(outbox.error());
    outbox_ = std::move(*outbox);
    thread_ = std::make_unique<serving::EngineThread>(
        serving_->engine(),
        serving::EngineThreadConfig{.step_delay = std::chrono::microseconds(step_delay_us)});
  }

  ~EngineCore() { Shutdown(); }

  void Shutdown() {
    if (!thread_) return;
    nb::gil_scoped_release release;
    thread_->Stop();
  }

  // ------------------------------------------------------------ the model

  nb::dict Info() const {
    const engine::EngineConfig& config = serving_->config();
    const model::ModelConfig& mc = served().model->config();
    nb::dict d;
    d["builtin"] = served().builtin;
    d["byte_level"] = served().byte_level();
    d["vocab_size"] = mc.vocab_size;
    d["max_positions"] = mc.max_positions;
    d["num_layers"] = mc.num_layers;
    d["num_kv_heads"] = mc.num_kv_heads;
    d["head_dim"] = mc.head_dim();
    d["kv_dtype"] = std::string(DTypeName(config.kv_dtype));
    d["matmul_activations"] = std::string(ops::MatMulActivationsName(config.matmul_activations));
    d["page_size"] = config.page_size;
    d["num_pages"] = config.num_pages;
    d["page_bytes"] = serving_->page_bytes();
    d["max_num_seqs"] = config.max_num_seqs;
    d["max_num_batched_tokens"] = config.max_num_batched_tokens;
    d["prefix_caching"] = config.prefix_caching;
    d["encoder"] = mc.IsEncoder();
    d["default_pooling"] = std::string(engine::PoolingName(served().DefaultPooling()));
    d["num_labels"] = mc.num_labels;
    d["num_speculative_tokens"] = config.speculative.num_draft_tokens;
    d["chat_template"] =
        chat_ ? std::string(serving::ChatFormatSourceName(chat_->source())) : std::string("error");
    d["chat_stop_token_ids"] = chat_ ? chat_->end_of_turn_ids() : std::vector<int32_t>();
    const tokenizer::Tokenizer& t = served().tokenizer();
    d["eos_token_id"] = served().byte_level() ? std::nullopt : t.eos_id();
    d["bos_token_id"] = served().byte_level()
                            ? std::optional<int32_t>(tokenizer::ByteTokenizer::kBegin)
                            : t.bos_id();
    return d;
  }

  // ------------------------------------------------------------ tokenizer

  std::vector<int32_t> Encode(const std::string& text, bool add_special_tokens) const {
    if (served().byte_level()) {
      return tokenizer::ByteTokenizer::Encode(text, /*add_begin=*/add_special_tokens, false);
    }
    Result<std::vector<int32_t>> ids = served().file_tokenizer->Encode(text, add_special_tokens);
    if (!ids) ThrowIfRequestError(ids.error());
    return std::move(*ids);
  }

  // A text pair as the tokenizer pairs them (a cross-encoder's input): ids
  // and token type ids.
  std::pair<std::vector<int32_t>, std::vector<int32_t>> EncodePair(const std::string& a,
                                                                   const std::string& b) const {
    Result<tokenizer::Encoding> e = served().tokenizer().EncodePair(a, b);
    if (!e) ThrowIfRequestError(e.error());
    return {std::move(e->ids), std::move(e->type_ids)};
  }

  nb::str Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
    Result<std::string> text = served().tokenizer().Decode(ids, skip_special_tokens);
    if (!text) ThrowIfRequestError(text.error());
    return Utf8(*text);
  }

  // One token's own text, as log-prob entries show it.
  nb::str TokenText(int32_t id) const {
    Result<std::string> s = served().tokenizer().Decode(std::span<const int32_t>(&id, 1), false);
    return Utf8(s ? *s : std::string());
  }

  // (prompt text, add_special_tokens, end-of-turn ids); the one place a
  // chat is rendered (chat_prompt.h).
  nb::tuple RenderChat(const std::string& messages_json, bool add_generation_prompt,
                       const std::optional<std::string>& chat_template,
                       const std::string& extra_json) const {
    if (!chat_ && !chat_template) ThrowIfRequestError(chat_error_);
    Result<ChatPrompt> p = Status::FailedPrecondition("not rendered");
    {
      nb::gil_scoped_release release;
      p = chat_ ? RenderChatPrompt(served(), *chat_, messages_json, add_generation_prompt,
                                   chat_template, extra_json)
                : Status::FailedPrecondition("no chat format");
    }
    if (!chat_ && chat_template) {
      // The model's own template failed to parse; a given one can still work.
      Result<serving::ChatFormat> f =
          serving::ChatFormat::Create(served().chat_template, chat_template,
                                      served().byte_level() ? nullptr : &*served().file_tokenizer);
      if (!f) ThrowIfRequestError(f.error());
      p = RenderChatPrompt(served(), *f, messages_json, add_generation_prompt, std::nullopt,
                           extra_json);
    }
    if (!p) ThrowIfRequestError(p.error());
    return nb::make_tuple(Utf8(p->text), p->add_special_tokens, p->stop_token_ids);
  }

  // LLM.chat's request (chat_prompt.h, PrepareChatRequest): (prompt text,
  // add_special_tokens, end-of-turn ids, ChatOutputReader, the GBNF that
  // forces a tool call or None).
  nb::tuple PrepareChat(const std::string& body_json,
                        const std::optional<std::string>& chat_template) const {
    if (!chat_ && !chat_template) ThrowIfRequestError(chat_error_);
    Result<ChatRequestPrompt> p = Status::FailedPrecondition("not rendered");
    {
      nb::gil_scoped_release release;
      p = PrepareChatRequest(served(), chat_ ? &*chat_ : nullptr, body_json, chat_template);
    }
    if (!p) ThrowIfRequestError(p.error());
    nb::object grammar = nb::none();
    if (p->tool_grammar) grammar = Utf8(*p->tool_grammar);
    return nb::make_tuple(Utf8(p->prompt.text), p->prompt.add_special_tokens,
                          p->prompt.stop_token_ids, ChatOutputReader(std::move(p->output)),
                          grammar);
  }

  // ------------------------------------------------------------ requests

  void Check(const std::vector<int32_t>& prompt, const engine::RequestParams& params) const {
    ThrowIfRequestError(serving_->engine().ValidateRequest(prompt, params));
  }

  // Compiles a structured-output constraint through the model's grammar
  // cache (without the GIL: a schema may take a while) and sets it on
  // params. kind: json_schema, json_object, regex, choice or grammar;
  // payload: the schema, pattern, choices or GBNF as JSON text; field: what
  // an error names (empty: structured_outputs.KIND).
  void Constrain(engine::RequestParams& params, const std::string& kind, const std::string& payload,
                 const std::string& field) const {
    using Kind = grammar::StructuredOutput::Kind;
    grammar::StructuredOutput o;
    const nlohmann::ordered_json v = nlohmann::ordered_json::parse(payload);
    if (kind == "json_schema") {
      o.kind = Kind::kJsonSchema;
      o.schema = v;
    } else if (kind == "json_object") {
      o.kind = Kind::kJsonObject;
    } else if (kind == "regex" || kind == "grammar") {
      o.kind = kind == "regex" ? Kind::kRegex : Kind::kGrammar;
      o.text = v.get<std::string>();
    } else if (kind == "choice") {
      o.kind = Kind::kChoice;
      o.choices = v.get<std::vector<std::string>>();
    } else {
      RaiseValue("unknown structured output kind '" + kind + "'");
    }
    Result<std::shared_ptr<const grammar::Grammar>> g = Status::FailedPrecondition("not compiled");
    {
      nb::gil_scoped_release release;
      g = served().grammars->Get(o);
    }
    // Whatever the grammar engine refuses is a bad value (ValueError, as
    // vLLM raises), an unsupported keyword included.
    if (!g) {
      RaiseValue(
          g.error().WithContext(field.empty() ? "structured_outputs." + kind : field).ToString());
    }
    params.grammar = std::move(*g);
  }

  // Refuses a bad request at once (ValueError), then hands it to the
  // engine thread.
  void Submit(uint64_t key, std::vector<int32_t> prompt, const engine::RequestParams& params) {
    Check(prompt, params);
    ThrowIfError(thread_->Submit({key, std::move(prompt), params, outbox_}));
  }

  // Checks every request first (ValueError naming the first bad one,
  // nothing submitted), then hands them over together.
  void SubmitMany(const std::vector<uint64_t>& keys, std::vector<std::vector<int32_t>> prompts,
                  const std::vector<const engine::RequestParams*>& params) {
    ThrowIfError(thread_->SubmitAll(Checked(keys, std::move(prompts), params)));
  }

  void Abort(uint64_t key) { thread_->Abort(key); }

  // Every request checked (ValueError naming the first bad one).
  std::vector<serving::EngineThread::Submission> Checked(
      const std::vector<uint64_t>& keys, std::vector<std::vector<int32_t>> prompts,
      const std::vector<const engine::RequestParams*>& params) const {
    if (keys.size() != prompts.size() || keys.size() != params.size()) {
      RaiseValue("need as many keys, prompts and params");
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      const Status s = serving_->engine().ValidateRequest(prompts[i], *params[i]);
      if (!s.ok()) ThrowIfRequestError(s.WithContext("request " + std::to_string(i)));
    }
    std::vector<serving::EngineThread::Submission> all(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      all[i] = {keys[i], std::move(prompts[i]), *params[i], outbox_};
    }
    return all;
  }

  nb::list Take() { return Events(outbox_->Take()); }

  nb::list Wait(double timeout_s) {
    std::vector<serving::Event> events;
    {
      nb::gil_scoped_release release;
      events = outbox_->Wait(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0)));
    }
    return Events(std::move(events));
  }

  int notify_fd() const { return outbox_->notify_fd(); }
  uint64_t in_flight() const { return thread_->in_flight(); }

  nb::dict Stats() const {
    const serving::EngineCounters c = thread_->counters();
    nb::dict d;
    d["num_running"] = c.running;
    d["num_waiting"] = c.waiting + c.queued;
    d["num_pages"] = c.pages_total;
    d["pages_used"] = c.pages_used;
    d["pages_free"] = c.pages_free;
    d["pages_cached"] = c.pages_cached;
    d["pages_held_by_requests"] = c.pages_used - c.pages_cached;
    d["prefix_cache_hit_rate"] = c.stats.prefix_hit_rate();
    d["prefix_query_tokens"] = c.stats.prefix_query_tokens;
    d["prefix_hit_tokens"] = c.stats.prefix_hit_tokens;
    d["prefix_evictions"] = c.stats.prefix_evictions;
    d["preemptions"] = c.stats.preemptions;
    d["steps"] = c.stats.steps;
    d["prompt_tokens_computed"] = c.stats.prompt_tokens_computed;
    d["decode_tokens"] = c.stats.decode_tokens;
    d["peak_running"] = c.stats.peak_running;
    d["draft_tokens"] = c.stats.draft_tokens;  // speculative decoding
    d["draft_accepted_tokens"] = c.stats.draft_accepted_tokens;
    return d;
  }

  bool ResetPrefixCache() {
    Status cleared;
    Status called;
    {
      nb::gil_scoped_release release;
      called = thread_->Call([&](engine::Engine& e) { cleared = e.ClearPrefixCache(); });
    }
    ThrowIfError(called);
    return cleared.ok();
  }

  // ------------------------------------------------------------ KV snapshots

  // The requests' pages and state as snapshot bytes (format/kv_snapshot.h),
  // and the keys exported; the requests keep running here. A request that
  // already finished is an error, or left out with skip_finished.
  nb::tuple ExportKv(const std::vector<uint64_t>& keys, bool skip_finished) {
    Result<format::KvSnapshot> snap = Status::FailedPrecondition("not exported");
    Status called;
    std::vector<std::byte> bytes;
    std::vector<uint64_t> exported;
    {
      nb::gil_scoped_release release;
      called = thread_->Call([&](engine::Engine& e) {
        std::vector<engine::RequestId> ids;
        for (const uint64_t key : keys) {
          std::optional<engine::RequestId> id = thread_->IdOf(key);
          if (!id && skip_finished) continue;
          if (!id) {
            snap = Status::NotFound("request " + std::to_string(key) +
                                    " is not running (finished, aborted or never added)");
            return;
          }
          ids.push_back(*id);
          exported.push_back(key);
        }
        snap = e.ExportSnapshot(ids);
      });
      if (called.ok() && snap) bytes = format::EncodeSnapshot(*snap);
    }
    ThrowIfError(called);
    if (!snap) ThrowIfRequestError(snap.error());
    return nb::make_tuple(nb::bytes(bytes.data(), bytes.size()), exported);
  }

  // Prefill here, decode elsewhere: submits the requests, waits until each
  // has generated decode_tokens tokens (or finished), then, between the
  // same two steps, exports the unfinished ones and aborts them here.
  // Returns (snapshot bytes, the keys exported).
  nb::tuple ExportWhen(const std::vector<uint64_t>& keys, std::vector<std::vector<int32_t>> prompts,
                       const std::vector<const engine::RequestParams*>& params,
                       uint64_t decode_tokens) {
    std::vector<serving::EngineThread::Submission> requests =
        Checked(keys, std::move(prompts), params);
    Result<format::KvSnapshot> snap = Status::FailedPrecondition("not exported");
    Status called;
    std::vector<std::byte> bytes;
    std::vector<uint64_t> exported;
    {
      nb::gil_scoped_release release;
      called = thread_->CallWhen(
          [&](const engine::Engine& e) {
            for (const uint64_t key : keys) {
              const std::optional<engine::RequestId> id = thread_->IdOf(key);
              if (id && e.scheduler().sequence(*id).output().size() < decode_tokens) return false;
            }
            return true;
          },
          [&](engine::Engine& e) {
            std::vector<engine::RequestId> ids;
            for (const uint64_t key : keys) {
              if (const std::optional<engine::RequestId> id = thread_->IdOf(key)) {
                ids.push_back(*id);
                exported.push_back(key);
              }
            }
            snap = e.ExportSnapshot(ids);
            if (!snap) return;
            for (const uint64_t key : exported) thread_->AbortNow(key);
          },
          std::move(requests));
      if (called.ok() && snap) bytes = format::EncodeSnapshot(*snap);
    }
    ThrowIfError(called);
    if (!snap) ThrowIfRequestError(snap.error());
    return nb::make_tuple(nb::bytes(bytes.data(), bytes.size()), exported);
  }

  // Continues, under `key`, a request whose engine is gone, from its
  // tokens so far, its random stream's state after them (the rng_state of
  // its last event) and the bytes of text already returned
  // (Engine::ResumeRequest): it recomputes their K/V and then produces what
  // the first engine would have. ValueError when it cannot continue.
  void Resume(uint64_t key, std::vector<int32_t> prompt, std::vector<int32_t> output,
              const engine::RequestParams& params, uint64_t rng_state, uint64_t text_sent) {
    Status added;
    Status called;
    {
      nb::gil_scoped_release release;
      called = thread_->Call([&](engine::Engine& e) {
        Result<engine::RequestId> id =
            e.ResumeRequest(std::move(prompt), std::move(output), params, rng_state, text_sent);
        added = id.status();
        if (id) thread_->Adopt(*id, key, outbox_);
      });
    }
    ThrowIfError(called);
    ThrowIfRequestError(added);
  }

  // Continues a snapshot's requests here under keys first_key, first_key
  // + 1, ... (one per sequence, in order). Returns each one's state as the
  // snapshot has it (a dict: prompt, output, params, text_sent ...) with
  // "key" and "text": the text its exporter had returned.
  nb::list ImportKv(nb::bytes data, uint64_t first_key) {
    const auto* begin = static_cast<const std::byte*>(static_cast<const void*>(data.c_str()));
    Result<format::KvSnapshot> snap = format::DecodeSnapshot(std::span(begin, data.size()));
    if (!snap) ThrowIfRequestError(snap.error());
    std::vector<uint64_t> keys;
    for (uint64_t i = 0; i < snap->sequences.size(); ++i) keys.push_back(first_key + i);
    Result<std::vector<engine::RequestId>> ids = Status::FailedPrecondition("not imported");
    Status called;
    {
      nb::gil_scoped_release release;
      called = thread_->Call([&](engine::Engine& e) {
        ids = e.ImportSnapshot(*snap);
        if (!ids) return;
        for (size_t i = 0; i < ids->size(); ++i) thread_->Adopt((*ids)[i], keys[i], outbox_);
      });
    }
    ThrowIfError(called);
    if (!ids) ThrowIfRequestError(ids.error());
    nb::object loads = nb::module_::import_("json").attr("loads");
    nb::list out;
    for (size_t i = 0; i < snap->sequences.size(); ++i) {
      const format::SnapshotSequence& q = snap->sequences[i];
      nb::dict d = nb::cast<nb::dict>(loads(nb::str(q.request.dump().c_str())));
      d["key"] = keys[i];
      // The text already returned: the first text_sent bytes of the
      // output's streamed text, as the engine restored it (special tokens
      // as the request wrote them: a harmony chat keeps them).
      const bool skip_special =
          q.request.value("params", nlohmann::json::object()).value("skip_special_tokens", true);
      tokenizer::StreamingDecoder detok(served().tokenizer(), skip_special);
      std::string text;
      for (const int32_t t : q.request["output"].get<std::vector<int32_t>>()) text += detok.Push(t);
      text.resize(std::min<size_t>(text.size(), q.request["text_sent"].get<size_t>()));
      d["text"] = Utf8(text);
      out.append(d);
    }
    return out;
  }

 private:
  nb::list Events(std::vector<serving::Event> events) const {
    nb::list out;
    for (serving::Event& e : events) {
      nb::object logprobs = nb::none();
      if (!e.logprobs.empty()) {
        nb::list lps;
        for (const sampling::TokenLogprobs& lp : e.logprobs) {
          nb::list top;
          for (const auto& [id, v] : lp.top) top.append(nb::make_tuple(id, double{v}));
          lps.append(nb::make_tuple(lp.token, double{lp.logprob}, top));
        }
        logprobs = lps;
      }
      nb::object finish = nb::none();
      if (e.finish != engine::FinishReason::kNone) {
        finish = nb::str(std::string(engine::FinishReasonName(e.finish)).c_str());
      }
      nb::object error = nb::none();
      if (!e.error.ok()) error = Utf8(e.error.message());
      nb::object beam_score = nb::none();
      if (e.beam_score) beam_score = nb::float_(*e.beam_score);
      nb::object embedding = nb::none();
      if (!e.embedding.empty()) embedding = nb::cast(e.embedding);
      out.append(nb::make_tuple(e.key, nb::cast(e.tokens), Utf8(e.text), logprobs, finish, error,
                                e.index, e.final, beam_score, e.rng_state, embedding));
    }
    return out;
  }

  const serving::ServedModel& served() const { return serving_->served(); }

  std::unique_ptr<serving::ServingEngine> serving_;  // the model, its engine and thread pool
  std::optional<serving::ChatFormat> chat_;          // the model's; nullopt if it did not parse
  Status chat_error_;
  std::shared_ptr<Outbox> outbox_;                 // every request's events
  std::unique_ptr<serving::EngineThread> thread_;  // last: stopped before the engine goes
};

}  // namespace

void BindLlm(nb::module_& m) {
  // What folio.SamplingParams becomes once checked (python/folio/
  // sampling_params.py maps vLLM's names onto these fields).
  nb::class_<engine::RequestParams>(m, "RequestParams",
                                    "An engine request's parameters (built by SamplingParams).")
      .def(
          "__init__",
          [](engine::RequestParams* self, double temperature, int64_t top_k, double top_p,
             uint64_t seed, uint64_t max_tokens, std::vector<int32_t> eos_token_ids,
             std::vector<std::string> stop, std::optional<uint64_t> logprobs, uint64_t n,
             uint64_t num_beams, double length_penalty, const std::string& early_stopping,
             const nb::kwargs& declared) {
            if (top_k < -1) {
              RaiseValue("top_k must be -1, 0 (no limit) or positive (got " +
                         std::to_string(top_k) + ")");
            }
            engine::EarlyStopping stopping = engine::EarlyStopping::kHeuristic;
            if (early_stopping == "true") {
              stopping = engine::EarlyStopping::kTrue;
            } else if (early_stopping == "never") {
              stopping = engine::EarlyStopping::kNever;
            } else if (early_stopping != "false") {
              RaiseValue("early_stopping must be 'true', 'false' or 'never' (got '" +
                         early_stopping + "')");
            }
            engine::RequestParams p;
            p.sampling.temperature = temperature;
            p.sampling.top_k = top_k <= 0 ? 0 : static_cast<uint64_t>(top_k);
            p.sampling.top_p = top_p;
            p.seed = seed;
            p.max_tokens = max_tokens;
            p.eos_token_ids = std::move(eos_token_ids);
            p.stop_strings = std::move(stop);
            p.logprobs = logprobs.has_value();
            p.top_logprobs = logprobs.value_or(0);
            p.n = n;
            p.beam = {num_beams, length_penalty, stopping};
            SetDeclared(p, declared);
            new (self) engine::RequestParams(std::move(p));
          },
          nb::arg("temperature"), nb::arg("top_k"), nb::arg("top_p"), nb::arg("seed"),
          nb::arg("max_tokens"), nb::arg("eos_token_ids"), nb::arg("stop"),
          nb::arg("logprobs").none(), nb::arg("n") = 1, nb::arg("num_beams") = 0,
          nb::arg("length_penalty") = 1.0, nb::arg("early_stopping") = "false", nb::arg("declared"),
          "The parameters SamplingParams shapes, then every declared one (request_params()) "
          "by keyword; None leaves a declared one at its default.")
      .def_static(
          "pooled",
          [](const std::string& pooling, bool normalize, uint64_t dimensions) {
            const std::optional<engine::Pooling> p = engine::PoolingFromName(pooling);
            if (!p || *p == engine::Pooling::kNone || *p == engine::Pooling::kClassify) {
              RaiseValue("pooling must be 'last', 'mean' or 'cls' (got '" + pooling + "')");
            }
            engine::RequestParams out;
            out.pooling = *p;
            out.normalize = normalize;
            out.dimensions = dimensions;
            return out;
          },
          nb::arg("pooling"), nb::arg("normalize"), nb::arg("dimensions"),
          "A pooled-embedding request's parameters (engine/request.h): pooling 'last', "
          "'mean' or 'cls'; dimensions 0 keeps every feature.")
      .def_static(
          "scored",
          [](std::vector<int32_t> token_types) {
            engine::RequestParams out;
            out.pooling = engine::Pooling::kClassify;
            out.normalize = false;
            out.token_types = std::move(token_types);
            return out;
          },
          nb::arg("token_types"),
          "A text pair's relevance request (engine/request.h, Pooling::kClassify): the "
          "classification head's logits, the pair's token types.")
      .def_rw("skip_special_tokens", &engine::RequestParams::skip_special_tokens,
              "The output text leaves special tokens out (false for a harmony chat).")
      .def_prop_ro("seed", [](const engine::RequestParams& p) { return p.seed; })
      .def_prop_ro("max_tokens", [](const engine::RequestParams& p) { return p.max_tokens; })
      .def_prop_ro(
          "stop_token_ids", [](const engine::RequestParams& p) { return engine::StopTokenIds(p); },
          "Every id that ends the request: its own, then the model's unless ignore_eos.");

  m.def(
      "request_params",
      [] {
        nb::list out;
        for (const engine::RequestParamInfo& info : engine::RequestParamInfos()) {
          nb::dict d;
          d["name"] = std::string(info.name);
          d["type"] = std::string(info.type);
          d["lo"] = info.lo;
          d["hi"] = info.hi;
          d["lo_open"] = info.lo_open;
          d["doc"] = std::string(info.doc);
          out.append(d);
        }
        return out;
      },
      "The request parameters declared once in the engine (engine/request_params.h): "
      "[{name, type ('number', 'integer', 'boolean', 'token ids', 'token bias' or 'strings'), "
      "lo, hi, lo_open, doc}].");

  m.def(
      "page_hashes",
      [](const std::vector<int32_t>& tokens, uint64_t page_size) {
        if (page_size == 0) RaiseValue("page_size must be >= 1 (got 0)");
        return kv::PrefixCache::ChainHashes(tokens, page_size);
      },
      nb::arg("tokens"), nb::arg("page_size"),
      "The prefix cache's chained hashes of the whole pages of `tokens`: hash i "
      "names the first i + 1 pages, so equal hashes mean equal prefixes (a "
      "router's view of what an engine may have cached).");

  nb::class_<EngineCore>(m, "EngineCore",
                         "The engine behind folio.LLM and folio.AsyncLLM (use those).")
      .def(
          "__init__",
          [](EngineCore* self, const std::string& model, uint64_t builtin_context,
             std::optional<std::string> tokenizer_pre, const std::string& kv_dtype,
             uint64_t page_size, std::optional<uint64_t> num_pages,
             std::optional<uint64_t> kv_bytes, uint64_t max_num_seqs,
             uint64_t max_num_batched_tokens, uint64_t threads, bool prefix_caching,
             const std::string& backend, double watermark, uint64_t num_speculative_tokens,
             uint64_t prompt_lookup_min, uint64_t prompt_lookup_max,
             const std::string& matmul_activations, std::optional<std::string> draft_model,
             uint64_t step_delay_us) {
            serving::EngineArgs a;
            a.model = model;
            a.builtin_positions = builtin_context;
            a.tokenizer_pre = std::move(tokenizer_pre);
            a.kv_dtype = kv_dtype;
            a.page_size = page_size;
            a.num_pages = num_pages;
            a.kv_bytes = kv_bytes;
            a.max_num_seqs = max_num_seqs;
            a.max_num_batched_tokens = max_num_batched_tokens;
            a.threads = threads;
            a.prefix_caching = prefix_caching;
            a.backend = backend;
            a.matmul_activations = matmul_activations;
            a.watermark = watermark;
            a.speculative_tokens = num_speculative_tokens;
            a.prompt_lookup_min = prompt_lookup_min;
            a.prompt_lookup_max = prompt_lookup_max;
            a.draft_model = draft_model.value_or("");
            new (self) EngineCore(a, step_delay_us);
          },
          nb::arg("model"), nb::arg("builtin_context"), nb::arg("tokenizer_pre").none(),
          nb::arg("kv_dtype"), nb::arg("page_size"), nb::arg("num_pages").none(),
          nb::arg("kv_bytes").none(), nb::arg("max_num_seqs"), nb::arg("max_num_batched_tokens"),
          nb::arg("threads"), nb::arg("prefix_caching"), nb::arg("backend"), nb::arg("watermark"),
          nb::arg("num_speculative_tokens") = 0, nb::arg("prompt_lookup_min") = 2,
          nb::arg("prompt_lookup_max") = 4, nb::arg("matmul_activations") = "q8",
          nb::arg("draft_model").none() = nb::none(), nb::arg("step_delay_us") = 0)
      .def("info", &EngineCore::Info, "The model's and the engine's shape, as a dict.")
      .def("encode", &EngineCore::Encode, nb::arg("text"), nb::arg("add_special_tokens"))
      .def("encode_pair", &EngineCore::EncodePair, nb::arg("a"), nb::arg("b"))
      .def("decode", &EngineCore::Decode, nb::arg("ids"), nb::arg("skip_special_tokens"))
      .def("token_text", &EngineCore::TokenText, nb::arg("id"))
      .def("render_chat", &EngineCore::RenderChat, nb::arg("messages_json"),
           nb::arg("add_generation_prompt"), nb::arg("chat_template").none(), nb::arg("extra_json"),
           "JSON messages -> (prompt text, add_special_tokens, end-of-turn ids).")
      .def("prepare_chat", &EngineCore::PrepareChat, nb::arg("body_json"),
           nb::arg("chat_template").none(),
           "LLM.chat's request as folio serve reads a chat body: (prompt text, "
           "add_special_tokens, end-of-turn ids, ChatOutputReader, tool-call GBNF or None). "
           "ValueError 'field: why' for what the server refuses with a 400.")
      .def("constrain", &EngineCore::Constrain, nb::arg("params"), nb::arg("kind"),
           nb::arg("payload_json"), nb::arg("field") = "",
           "Compiles a structured-output constraint onto params (ValueError naming what the "
           "grammar engine refused).")
      .def("check", &EngineCore::Check, nb::arg("prompt"), nb::arg("params"),
           "Raises ValueError if the engine would refuse this request.")
      .def("submit", &EngineCore::Submit, nb::arg("key"), nb::arg("prompt"), nb::arg("params"),
           "Checks a request (ValueError) and hands it to the engine thread.")
      .def("submit_many", &EngineCore::SubmitMany, nb::arg("keys"), nb::arg("prompts"),
           nb::arg("params"), "submit() for many requests, all checked before any is submitted.")
      .def("abort", &EngineCore::Abort, nb::arg("key"))
      .def("take", &EngineCore::Take,
           "Every event waiting: [(key, tokens, text, logprobs, finish, error, index, final, "
           "beam_score, rng_state, embedding)].")
      .def("wait", &EngineCore::Wait, nb::arg("timeout_s"),
           "As take(), waiting up to timeout_s for the first event (the GIL released).")
      .def_prop_ro("notify_fd", &EngineCore::notify_fd,
                   "A file descriptor that is readable while events wait.")
      .def_prop_ro("in_flight", &EngineCore::in_flight)
      .def("stats", &EngineCore::Stats)
      .def("reset_prefix_cache", &EngineCore::ResetPrefixCache)
      .def("export_kv", &EngineCore::ExportKv, nb::arg("keys"), nb::arg("skip_finished"))
      .def("export_when", &EngineCore::ExportWhen, nb::arg("keys"), nb::arg("prompts"),
           nb::arg("params"), nb::arg("decode_tokens"))
      .def("import_kv", &EngineCore::ImportKv, nb::arg("data"), nb::arg("first_key"))
      .def("resume", &EngineCore::Resume, nb::arg("key"), nb::arg("prompt"), nb::arg("output"),
           nb::arg("params"), nb::arg("rng_state"), nb::arg("text_sent"))
      .def("shutdown", &EngineCore::Shutdown);
}

}  // namespace folio::python

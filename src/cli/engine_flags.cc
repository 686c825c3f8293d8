#include "cli/engine_flags.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <type_traits>

#include "folio/core/checked_math.h"
#include "folio/core/file_bytes.h"
#include "folio/engine/kv_cache_manager.h"
#include "folio/engine/request_params.h"
#include "folio/kv/paged_kv_cache.h"

namespace folio::cli {

void AddTokenizerPreOption(CLI::App& cmd, std::optional<std::string>& value) {
  cmd.add_option("--tokenizer-pre", value,
                 "pre-tokenizer name replacing the GGUF file's tokenizer.ggml.pre "
                 "(a name llama.cpp knows, e.g. llama-bpe, qwen2, gpt-4o)");
}

void AddChatTemplateOption(CLI::App& cmd, std::optional<std::string>& value) {
  cmd.add_option("--chat-template", value,
                 "a Jinja chat template file to use instead of the model's own");
}

void AddEngineFlags(CLI::App& cmd, serving::EngineArgs& a, const EngineFlagSet& set) {
  cmd.add_option("--model", a.model,
                 "model folder (Hugging Face or folio), .gguf file, or 'builtin' (default)");
  if (set.tokenizer_pre) AddTokenizerPreOption(cmd, a.tokenizer_pre);
  if (set.builtin_context) {
    cmd.add_option("--builtin-context", a.builtin_positions, "positions of the built-in model");
  }
  cmd.add_option("--page-size", a.page_size, "KV tokens per page")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  if (set.num_pages) {
    cmd.add_option("--num-pages", a.num_pages, "pages in the KV pool")
        ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  }
  cmd.add_option(
      "--kv-dtype", a.kv_dtype,
      "f32, bf16, f16, i8 or f8e4m3 (i8 / f8e4m3: one scale per row of head_dim codes), or f64");
  if (set.scheduling) {
    cmd.add_option("--max-num-seqs", a.max_num_seqs, "requests running at once");
    cmd.add_option("--max-num-batched-tokens", a.max_num_batched_tokens, "tokens per step");
  }
  if (set.threads) cmd.add_option("--threads", a.threads, "compute threads, 0 = all cores");
  if (set.backend) {
    cmd.add_option("--backend", a.backend, "cpu (SIMD kernels) or reference (scalar)");
  }
  if (set.matmul_activations) {
    cmd.add_option("--matmul-activations", a.matmul_activations,
                   "quantized weights: q8 (default; 8-bit activations and integer dot "
                   "products, as ggml: 2-3x faster matmuls) or f32 (exact products of the "
                   "dequantized weights)");
  }
  if (set.speculative) {
    cmd.add_option("--speculative-tokens", a.speculative_tokens,
                   "most draft tokens per step (speculative decoding by prompt lookup, or by "
                   "--draft-model; 0: off; drafts grow while accepted whole); the output never "
                   "changes")
        ->check(CLI::Range(uint64_t{0}, engine::kMaxDraftTokens));
    cmd.add_option("--draft-model", a.draft_model,
                   "a smaller model (folder, .gguf or 'builtin') with the same vocabulary that "
                   "drafts for --speculative-tokens instead of prompt lookup; the output never "
                   "changes");
    cmd.add_option("--speculative-acceptance", a.speculative_acceptance,
                   "exact (default: a draft token stands only where plain decoding would draw "
                   "it, so the output never changes) or rejection (standard speculative "
                   "sampling: plain decoding's distribution, not its random stream; more drafts "
                   "accepted when sampling)");
  }
}

void AddRequestParamFlags(CLI::App& cmd, engine::RequestParams& params) {
  engine::ForEachRequestParam(params, [&cmd](const engine::RequestParamInfo& info, auto& member) {
    const serving::ArgNames to_flag = serving::ArgNames::Flag();
    std::string flag = to_flag(info.name);
    for (const auto& [alias, declared] : engine::kRequestParamAliases) {
      if (declared == info.name) flag += "," + to_flag(alias);
    }
    const std::string doc(info.doc);
    using T = std::decay_t<decltype(member)>;
    if constexpr (std::is_same_v<T, bool>) {
      cmd.add_flag(flag, member, doc);
    } else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, int64_t>) {
      cmd.add_option(flag, member, doc);
    } else if constexpr (std::is_same_v<T, engine::TokenIds>) {
      cmd.add_option(flag, member, doc + " (comma-separated)")->delimiter(',');
    } else if constexpr (std::is_same_v<T, engine::LogitBias>) {
      cmd.add_option_function<std::vector<std::string>>(
             flag,
             [&member, name = info.name](const std::vector<std::string>& items) {
               for (const std::string& item : items) {
                 const size_t eq = item.find('=');
                 char* end = nullptr;
                 const long id = eq == std::string::npos ? -1 : std::strtol(item.c_str(), &end, 10);
                 const bool id_ok = eq != std::string::npos && id >= 0 && end == item.c_str() + eq;
                 const std::string bias_text = id_ok ? item.substr(eq + 1) : std::string();
                 char* bias_end = nullptr;
                 const double bias = std::strtod(bias_text.c_str(), &bias_end);
                 if (!id_ok || bias_text.empty() || *bias_end != '\0') {
                   throw CLI::ValidationError(std::string(name),
                                              "'" + item + "' is not TOKEN_ID=BIAS");
                 }
                 member[static_cast<int32_t>(id)] = bias;
               }
             },
             doc + " (TOKEN_ID=BIAS, comma-separated)")
          ->delimiter(',');
    } else {
      static_assert(std::is_same_v<T, engine::Strings>);
      cmd.add_option(flag, member, doc + " (repeat the flag, one string each)")
          ->expected(1)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
  });
}

void SizeForOneRequest(const model::ModelConfig& mc, uint64_t capacity, uint64_t prompt_tokens,
                       serving::EngineArgs& a) {
  a.page_size = std::max<uint64_t>(1, std::min(a.page_size, capacity));
  a.max_num_batched_tokens = std::max<uint64_t>({prompt_tokens, 1, 1 + a.speculative_tokens});
  a.num_pages = std::max<uint64_t>(
      1, kv::PagedKvCache::MaxPagesHeld(engine::KvCacheConfigFor(mc, a.page_size, 1, DType::kF32),
                                        capacity, a.max_num_batched_tokens));
  a.kv_bytes.reset();
  a.max_num_seqs = 1;
  a.prefix_caching = false;
}

int Fail(std::string_view command, const Status& s) {
  std::cerr << "folio" << (command.empty() ? "" : " ") << command << ": " << s.ToString() << "\n";
  return 1;
}

Result<std::string> ReadFlagFile(const std::string& path, std::string_view flag) {
  Result<FileBytes> file = FileBytes::Map(path);
  if (!file) return file.error().WithContext(flag);
  const std::span<const std::byte> bytes = file->bytes();
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace folio::cli

// What a caller asks of the engine for one request, and what each step
// gives back.
#ifndef FOLIO_ENGINE_REQUEST_H_
#define FOLIO_ENGINE_REQUEST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "folio/engine/beam_search.h"
#include "folio/sampling/logits_processors.h"
#include "folio/sampling/sampler.h"

namespace folio::grammar {
class Grammar;  // folio/grammar/grammar.h
}  // namespace folio::grammar

namespace folio::engine {

using RequestId = uint64_t;

// How a pooled-embedding request turns its prompt's final hidden states
// (after the final norm) into one vector: the last position's (decoder
// embedders such as Qwen3-Embedding), the mean over every position, or the
// first position's (CLS); or kClassify, the first position's state through
// an encoder's classification head (model::Decoder::Classify): num_labels
// logits (a cross-encoder's relevance score).
enum class Pooling : uint8_t { kNone, kLast, kMean, kCls, kClassify };
std::string_view PoolingName(Pooling p);  // "none", "last", "mean", "cls", "classify"
std::optional<Pooling> PoolingFromName(std::string_view name);

struct RequestParams {
  sampling::SamplingParams sampling;
  // Logits processors (sampling/logits_processors.h), applied to each row
  // before the sampler over the sequence's tokens so far. Their text
  // parameters (bad_words, dry_sequence_breakers) are turned into tokens
  // by the engine's tokenizer when the request is added; front ends leave
  // processors.bad_words_ids and processors.dry_breakers empty.
  sampling::ProcessorParams processors;
  // Words the output never completes (vLLM's bad_words): each word,
  // stripped of leading spaces, tokenized alone and after one space
  // (processors.bad_words_ids). Needs an engine with a tokenizer.
  std::vector<std::string> bad_words;
  // DRY's sequence breakers (llama.cpp's default set); used when
  // processors.dry.multiplier > 0, which needs a tokenizer.
  std::vector<std::string> dry_sequence_breakers = {"\n", ":", "\"", "*"};
  // Keep the stop string that ended the text (vLLM's name).
  bool include_stop_str_in_output = false;
  // The output text leaves special tokens out (vLLM's name). Front ends
  // set it false for a harmony chat (gpt-oss), whose reply parser reads
  // the <|channel|>, <|message|>, ... tokens; an end token the request
  // stops on is then in the text too.
  bool skip_special_tokens = true;
  uint64_t max_tokens = 16;
  uint64_t seed = 0;                    // the request's own SplitMix64 stream
  std::vector<int32_t> stop_token_ids;  // finish when one is selected (kept)
  // The ids a serving layer adds as ends of the text: the tokenizer's
  // end-of-sequence id and a chat template's end-of-turn ids. They finish
  // the request as stop_token_ids do, unless ignore_eos.
  std::vector<int32_t> eos_token_ids;
  bool ignore_eos = false;
  // Finish when the output text contains one (needs the engine's
  // tokenizer). The text returned stops before it; the tokens include the
  // one that completed it.
  std::vector<std::string> stop_strings;
  bool logprobs = false;      // return each token's log-probability
  uint64_t top_logprobs = 0;  // and this many alternatives (<= 20)
  // Also return the logits of every prompt position
  // (StepOutput::prompt_logits), to check a model against a reference.
  // Needs an engine without prefix caching (a cached page's rows are never
  // computed); not carried by KV snapshots.
  bool prompt_logits = false;
  // Speculative decoding (engine/drafter.h): draft tokens the engine's
  // drafter may propose per step for this request, 0 = off; unset: the
  // engine's default (EngineConfig::speculative). The output is the same
  // either way, bit for bit; only the speed differs.
  std::optional<uint64_t> num_draft_tokens;
  // Parallel samples of one prompt (OpenAI's n). The prompt is prefilled
  // once; then the request forks into n sequences that share its pages
  // (the partial tail page is copied on first write). Sample i draws from
  // the stream SampleSeed(seed, i), so it equals a request for one sample
  // with that seed, bit for bit. Step outputs name the sample by index.
  uint64_t n = 1;
  // Beam search (engine/beam_search.h, Hugging Face's semantics) when
  // beam.num_beams >= 1: the request runs num_beams beams as forked
  // sequences on shared pages, ends on stop_token_ids, and returns its best
  // n hypotheses (n <= num_beams) at the end, one StepOutput each with
  // every token, index = rank (0: best) and beam_score set; nothing
  // streams. Needs greedy sampling parameters (they do not apply), no stop
  // strings, log-probs, prompt logits or drafts.
  BeamSearchParams beam;
  // Structured output: the output text must be a sentence of this grammar
  // (null: unconstrained). Each step samples only among the tokens whose
  // bytes the grammar allows next; the stop and end-of-sequence ids
  // (StopTokenIds) are allowed only where the text so far is complete. The
  // request finishes with kStop once the grammar is done, kLength when
  // max_tokens cuts the text short, kAbort (and no token) when no token of
  // the vocabulary can continue it (engine/output_processor.h). Needs an
  // engine with a tokenizer. Carried by n > 1 forks (each sample follows
  // the grammar) and speculative drafts (a draft token the grammar forbids
  // is rejected); refused with beam search, by KV snapshots and by the
  // JSON form (RequestParamsToJson), which cannot carry it.
  std::shared_ptr<const grammar::Grammar> grammar;
  // Pooled embeddings: with pooling set the request generates nothing. Its
  // prompt is prefilled like any other (batched with other requests,
  // chunked, preempted and recomputed alike), and once the last prompt
  // position is computed it finishes with kStop and StepOutput::embedding:
  // the pooled final hidden states, summed in position order in double (so
  // the bits never depend on the chunks or the batch), cut to the first
  // `dimensions` features when that is not 0 (Matryoshka), then divided by
  // their L2 norm when `normalize`. Mean and CLS pooling need every row, so
  // such a request never starts on pages of the prefix cache. Needs n = 1
  // and no beams, grammar, prompt_logits, logprobs or draft tokens;
  // max_tokens, the sampling parameters and the stop conditions do not
  // apply.
  // kClassify returns the head's logits as they are: it takes normalize
  // false and no dimensions.
  Pooling pooling = Pooling::kNone;
  bool normalize = true;
  uint64_t dimensions = 0;
  // An encoder's token type for each prompt token (a text pair's second
  // text is type 1, as BERT's tokenizers mark it); empty: all type 0. Only
  // with pooling, on an encoder; each < the model's type_vocab_size.
  std::vector<int32_t> token_types;
};

// Whether `token` finishes a request with these parameters: one of its
// stop_token_ids, or of its eos_token_ids unless ignore_eos.
bool IsStopToken(const RequestParams& params, int32_t token);
// Every id that finishes the request (IsStopToken's), each once.
std::vector<int32_t> StopTokenIds(const RequestParams& params);

// The seed of parallel sample `index` of a request seeded `seed`: seed
// itself for sample 0, else one SplitMix64 draw from seed mixed with the
// index, so samples of one request and of neighbouring seeds do not
// collide in practice.
uint64_t SampleSeed(uint64_t seed, uint64_t index);

enum class FinishReason { kNone, kStop, kLength, kAbort };
std::string_view FinishReasonName(FinishReason r);

// What one step produced for one request.
struct StepOutput {
  RequestId id = 0;
  std::vector<int32_t> new_tokens;
  // With a tokenizer: the text these tokens add. Text that might be the
  // start of a stop string is held back until it is known not to be.
  std::string text;
  std::vector<sampling::TokenLogprobs> logprobs;  // per new token, if asked
  FinishReason finish = FinishReason::kNone;
  // RequestParams::prompt_logits: the logits of the prompt positions this
  // step computed, in order, [rows, vocab]; every position exactly once
  // over the request's life (a chunked prompt's come step by step).
  std::vector<float> prompt_logits;
  // RequestParams::pooling: the embedding, in the step that finishes it.
  std::vector<float> embedding;
  // Prompt tokens whose K/V came from the prefix cache when the request
  // was first admitted (OpenAI's usage.prompt_tokens_details.cached_tokens);
  // 0 for beam search outputs.
  uint64_t cached_prompt_tokens = 0;
  uint64_t index = 0;  // the parallel sample (RequestParams::n), 0..n-1
  // Beam search: the hypothesis' score, its summed log-probability over
  // length ** length_penalty.
  std::optional<double> beam_score;
  // The request's (sample's) random stream after this step's draws: with
  // the tokens so far, what Engine::ResumeRequest needs to continue it
  // elsewhere. 0 for beam search outputs (they draw nothing).
  uint64_t rng_state = 0;
};

}  // namespace folio::engine

#endif  // FOLIO_ENGINE_REQUEST_H_

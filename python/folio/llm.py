"""folio.LLM: offline batch inference, as vLLM's ``LLM`` class.

    from folio import LLM, SamplingParams
    llm = LLM("builtin")            # or a model folder / .gguf file
    outs = llm.generate(["a", "b"], SamplingParams(temperature=0, max_tokens=8))
    print(outs[0].outputs[0].text)

The engine runs on its own C++ thread; generate() hands every prompt over at
once (continuous batching does the rest) and waits with the interpreter's
lock released. One LLM serves one generate() at a time (calls from several
threads queue); use folio.AsyncLLM to interleave requests.
"""
from __future__ import annotations

import importlib
import os
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from folio import _folio

from folio._engine import (ChatMessage, EngineCore, PromptType, Request, Tokenizer,
                           normalize_prompts, params_for)
from folio.outputs import EmbeddingRequestOutput, RequestOutput, ScoringRequestOutput
from folio.pooling_params import PoolingParams
from folio.sampling_params import SamplingParams

#: Wait at most this long for engine events between checks for Ctrl-C.
_POLL_S = 0.1


class LLM:
    """A model and a continuous-batching engine over one paged KV pool.

    model: a model folder (Hugging Face or folio), a .gguf file, or
    "builtin" (folio's byte-level worked example, seed 20, with
    builtin_context positions; nothing to download). Loaded as
    ``folio serve --model`` loads it (FileNotFoundError if it is not there).

    Engine options (``folio serve``'s flags): kv_dtype ("f32" default, "bf16",
    "f16", "i8" / "int8", "f8e4m3" / "fp8" (8-bit pages, one scale per row
    of head_dim codes), "f64"; "auto" = f32), page_size (tokens per KV page), num_pages or
    kv_bytes (the pool; default: what max_num_seqs full-context sequences
    need, at most 512 MiB), max_num_seqs (sequences per step),
    max_num_batched_tokens (tokens per step: decodes plus prefill chunks),
    threads (compute threads, 0 = every core), prefix_caching (also
    ``enable_prefix_caching``), tokenizer_pre (replaces a GGUF file's
    pre-tokenizer name), backend ("cpu" or the scalar "reference"),
    matmul_activations (quantized weights: "q8", the default, 8-bit
    activations and integer dot products as ggml: 2-3x faster matmuls, or
    "f32", exact products of the dequantized weights),
    watermark (pool fraction kept free at admission). seed draws the seeds
    of requests whose SamplingParams.seed is None, in submission order.
    speculative_config (vLLM's): {"method": "ngram",
    "num_speculative_tokens": 16, "prompt_lookup_min": 2,
    "prompt_lookup_max": 4} drafts by prompt lookup, {"model": PATH,
    "num_speculative_tokens": 3} with a smaller model sharing the
    vocabulary ("draft_model"; the values shown are the defaults);
    num_speculative_tokens is the most per step, at most 16 (drafts start
    at 4 and double while accepted whole). The drafts are verified in one
    step and the outputs are exactly those without it, only faster where
    drafts are accepted. Other methods raise ValueError. step_delay_us: the engine
    thread sleeps this long after each step (tests and demos: a slower
    model, as ``folio serve --step-delay-us``).

    Raises ValueError for bad options, FileNotFoundError for a missing model.
    """

    def __init__(self, model: Union[str, "os.PathLike[str]"] = "builtin", *,
                 kv_dtype: str = "f32", page_size: int = 16, num_pages: Optional[int] = None,
                 kv_bytes: Optional[int] = None, max_num_seqs: int = 64,
                 max_num_batched_tokens: int = 1024, threads: int = 0,
                 prefix_caching: bool = True, enable_prefix_caching: Optional[bool] = None,
                 tokenizer_pre: Optional[str] = None, builtin_context: int = 512,
                 backend: str = "cpu", matmul_activations: str = "q8",
                 watermark: float = 0.01, seed: int = 0,
                 speculative_config: Optional[Dict[str, Any]] = None,
                 step_delay_us: int = 0) -> None:
        self._core = EngineCore(
            model, kv_dtype=kv_dtype, page_size=page_size, num_pages=num_pages,
            kv_bytes=kv_bytes, max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens, threads=threads,
            prefix_caching=prefix_caching if enable_prefix_caching is None
            else enable_prefix_caching,
            tokenizer_pre=tokenizer_pre, builtin_context=builtin_context, backend=backend,
            matmul_activations=matmul_activations, watermark=watermark, seed=seed,
            speculative_config=speculative_config, step_delay_us=step_delay_us)
        self._lock = threading.Lock()

    # ------------------------------------------------------------ generation

    def generate(self, prompts: Union[PromptType, Sequence[PromptType]],
                 sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None,
                 *, use_tqdm: bool = True) -> List[RequestOutput]:
        """Completes each prompt; one finished RequestOutput per prompt, in order.

        prompts: a string, a list of token ids, a {"prompt": ...} /
        {"prompt_token_ids": ...} dict, or a list of any of these.
        sampling_params: one for all prompts or one per prompt (default
        SamplingParams()). Every request is checked before any runs:
        ValueError for bad parameters, a prompt that does not tokenize, token
        ids outside the vocabulary, or a request that could never fit the
        model's context or the KV pool. use_tqdm: a progress bar when tqdm is
        installed.
        """
        items = normalize_prompts(prompts)
        params = params_for(sampling_params, len(items))
        return self._run([(p, sp, ()) for p, sp in zip(items, params)], use_tqdm)

    def chat(self, messages: Union[Sequence[ChatMessage], Sequence[Sequence[ChatMessage]]],
             sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None,
             *, use_tqdm: bool = True, chat_template: Optional[str] = None,
             add_generation_prompt: bool = True,
             chat_template_kwargs: Optional[Dict[str, Any]] = None,
             tools: Optional[Sequence[Mapping[str, Any]]] = None,
             tool_choice: Union[str, Mapping[str, Any], None] = None,
             parallel_tool_calls: Optional[bool] = None) -> List[RequestOutput]:
        """Replies to one conversation (a list of {"role", "content"} dicts)
        or to each of a list of them, as ``folio serve``'s chat endpoint does:
        the prompt is the model's own chat template rendered by folio's
        Jinja engine (Tokenizer.apply_chat_template; chat_template: a
        template's text instead; chat_template_kwargs: more template
        variables), and the template's end-of-turn tokens also stop a reply.

        tools, tool_choice, parallel_tool_calls: OpenAI's function tools, as
        the server takes them (docs/tool-calling.md): the tools reach the
        template, tool_choice "required" or {"type": "function", "function":
        {"name": ...}} forces a call whose arguments follow the tool's
        parameters schema (under "auto", a tool marked strict holds a call
        of it to its schema once the model starts one), and each
        completion's tool_calls holds the calls
        the reply made (content and reasoning_content the rest). Messages
        may carry an assistant's tool_calls and tool results
        (tool_call_id). ValueError naming the field for what the server
        refuses with a 400. With add_generation_prompt=False the
        conversation is rendered as is, without tools.
        """
        if not add_generation_prompt:
            if tools is not None or tool_choice is not None or parallel_tool_calls is not None:
                raise ValueError("tools need add_generation_prompt=True (a reply to read)")
            prompts = self._core.chat_prompts(messages, chat_template, add_generation_prompt,
                                              chat_template_kwargs)
            params = params_for(sampling_params, len(prompts))
            return self._run([(p, sp, stops) for (p, stops), sp in zip(prompts, params)],
                             use_tqdm)
        fields = EngineCore.chat_fields(tools, tool_choice, parallel_tool_calls,
                                        chat_template_kwargs)
        chats = self._core.chat_requests(messages, chat_template, fields)
        params = params_for(sampling_params, len(chats))
        outs = self._run([(c.prompt, sp, c.stops, c.grammar, c.special_text)
                          for c, sp in zip(chats, params)],
                         use_tqdm)
        for out, c in zip(outs, chats):
            c.read(out)
        return outs

    # ------------------------------------------------------------ embeddings

    def embed(self, prompts: Union[PromptType, Sequence[PromptType]],
              pooling_params: Union[PoolingParams, Sequence[PoolingParams], None] = None,
              *, use_tqdm: bool = True) -> List[EmbeddingRequestOutput]:
        """One pooled vector per prompt, in order (vLLM's ``LLM.embed``):
        each prompt is prefilled through the same continuous batching as
        generation (many short inputs per step) and its final hidden states
        pooled as pooling_params says (default PoolingParams(): the last
        position's, L2-normalized). A prompt's vector does not depend on the
        prompts beside it, bit for bit. Every request is checked before any
        runs (ValueError, as generate)."""
        items = normalize_prompts(prompts)
        if pooling_params is None or isinstance(pooling_params, PoolingParams):
            params: List[Optional[PoolingParams]] = [pooling_params] * len(items)
        else:
            params = list(pooling_params)
            if len(params) != len(items):
                raise ValueError(f"{len(params)} pooling_params for {len(items)} prompts")
        with self._lock:
            made = []
            for i, (p, pp) in enumerate(zip(items, params)):
                try:
                    made.append(self._core.make_embed_request(p, pp, None))
                except ValueError as e:
                    if len(items) == 1:
                        raise
                    raise ValueError(f"prompt {i}: {e}") from None
            reqs = self._submit(made)
            self._wait(reqs, use_tqdm)
            return [r.embedding_output() for r in reqs]

    def score(self, data_1: Union[str, Sequence[str]], data_2: Union[str, Sequence[str]],
              *, use_tqdm: bool = True) -> List[ScoringRequestOutput]:
        """Relevance of text pairs by a cross-encoder (vLLM's ``LLM.score``):
        one ScoringRequestOutput per pair, outputs.score = sigmoid of the
        model's one logit. A string pairs with every text of the other side;
        two lists pair by index (equal lengths). Each pair is encoded as the
        tokenizer pairs texts ([CLS] a [SEP] b [SEP], b of token type 1) and
        runs through the same batching as embeddings. Every pair is checked
        before any runs (ValueError)."""
        one = [data_1] if isinstance(data_1, str) else list(data_1)
        two = [data_2] if isinstance(data_2, str) else list(data_2)
        if not one or not two:
            raise ValueError("score needs at least one text on each side")
        if not isinstance(data_1, str) and not isinstance(data_2, str) and len(one) != len(two):
            raise ValueError(f"two lists pair by index: {len(one)} and {len(two)} texts")
        pairs = [(one[0 if len(one) == 1 else i], two[0 if len(two) == 1 else i])
                 for i in range(max(len(one), len(two)))]
        with self._lock:
            made = []
            for i, (a, b) in enumerate(pairs):
                try:
                    made.append(self._core.make_score_request(a, b, None))
                except ValueError as e:
                    if len(pairs) == 1:
                        raise
                    raise ValueError(f"pair {i}: {e}") from None
            reqs = self._submit(made)
            self._wait(reqs, use_tqdm)
            return [r.score_output() for r in reqs]

    def _run(self, items: Sequence[Any], use_tqdm: bool) -> List[RequestOutput]:
        with self._lock:
            reqs = self._submit(self._make(items))
            self._wait(reqs, use_tqdm)
            return [r.output() for r in reqs]

    def _make(self, items: Sequence[Any]) -> List[Tuple[Request, _folio.RequestParams]]:
        """Checks every (prompt, params, chat stops[, tool-call grammar, special
        text]) before any is submitted."""
        made = []
        for i, (p, sp, stops, *grammar) in enumerate(items):
            try:
                made.append(self._core.make_request(p, sp, None, stops, *grammar))
            except ValueError as e:
                if len(items) == 1:
                    raise
                raise ValueError(f"prompt {i}: {e}") from None
        return made

    def _submit(self, made: List[Tuple[Request, _folio.RequestParams]]) -> List[Request]:
        """Hands checked requests over together, so a batch starts together."""
        self._core.native.submit_many([r.key for r, _ in made],
                                      [r.prompt_token_ids for r, _ in made],
                                      [p for _, p in made])
        return [r for r, _ in made]

    def _wait(self, reqs: List[Request], use_tqdm: bool) -> None:
        """Applies events until every request finished; aborts them all on an
        exception (Ctrl-C included) so their pages are freed."""
        by_key = {r.key: r for r in reqs}
        left = len(reqs)
        bar = _progress(len(reqs)) if use_tqdm and len(reqs) > 1 else None
        try:
            while left:
                for event in self._core.native.wait(_POLL_S):
                    r = by_key.get(event[0])
                    if r is None:
                        continue
                    r.apply(event, self._core.token_text)
                    if r.finished:
                        left -= 1
                        if bar is not None:
                            bar.update(1)
                        if r.error is not None:
                            raise RuntimeError(f"request {r.request_id}: {r.error}")
        except BaseException:
            for r in reqs:
                if not r.finished:
                    self._core.native.abort(r.key)
            self._drain({r.key for r in reqs if not r.finished})
            raise
        finally:
            if bar is not None:
                bar.close()

    def _drain(self, keys: set[int]) -> None:
        while keys:
            for event in self._core.native.wait(_POLL_S):
                if event[7]:
                    keys.discard(event[0])

    # ------------------------------------------------------------ KV snapshots

    def export_kv(self, prompts: Union[PromptType, Sequence[PromptType]],
                  sampling_params: Union[SamplingParams, Sequence[SamplingParams], None] = None,
                  *, decode_tokens: int = 1,
                  path: Union[str, "os.PathLike[str]", None] = None) -> bytes:
        """Prefill here, decode elsewhere: runs the prompts until each has
        generated at least decode_tokens tokens, then returns their K/V pages
        and request state as KV snapshot bytes (docs/spec/kv-snapshot.md;
        also written to path when given) and drops them here. Another engine
        over the same model, KV dtype and page size continues them with
        import_kv, bit for bit as if they had never moved. Requests that
        finish before the export are not in the snapshot. The KV dtype must
        be f32, bf16 or f16.
        """
        if not isinstance(decode_tokens, int) or decode_tokens < 1:
            raise ValueError(f"decode_tokens must be an integer >= 1 (got {decode_tokens!r})")
        items = normalize_prompts(prompts)
        params = params_for(sampling_params, len(items))
        with self._lock:
            made = self._make([(p, sp, ()) for p, sp in zip(items, params)])
            reqs = [r for r, _ in made]
            # Submitted with the export, so no step runs in between.
            data, _ = self._core.native.export_when(
                [r.key for r in reqs], [r.prompt_token_ids for r in reqs], [p for _, p in made],
                decode_tokens)
            # Every request ended: finished, or exported and aborted here.
            self._wait(reqs, use_tqdm=False)
        if path is not None:
            with open(os.fspath(path), "wb") as f:
                f.write(data)
        return bytes(data)

    def import_kv(self, snapshot: Union[bytes, str, "os.PathLike[str]"], *,
                  use_tqdm: bool = False) -> List[RequestOutput]:
        """Continues a KV snapshot's requests (bytes or a file, from export_kv
        or ``folio kv export``) to the end; one RequestOutput each, in the
        snapshot's order. token_ids and text include what was generated
        before the export; log-probs exist only for tokens generated here
        (earlier positions are None). ValueError if the snapshot does not
        match this engine (model, KV dtype, page size) or its pages do not
        fit the pool; nothing changes then.
        """
        with self._lock:
            reqs = self._core.import_requests(snapshot, None)
            self._wait(reqs, use_tqdm)
            return [r.output() for r in reqs]

    # ------------------------------------------------------------ the engine

    def get_tokenizer(self) -> Tokenizer:
        """The model's tokenizer (encode / decode / apply_chat_template)."""
        return self._core.tokenizer

    @property
    def tokenizer(self) -> Tokenizer:
        return self._core.tokenizer

    @property
    def model_info(self) -> Dict[str, Any]:
        """The model's and engine's shape: vocab_size, max_positions, kv_dtype,
        page_size, num_pages, page_bytes, chat_template, ..."""
        return dict(self._core.info)

    def stats(self) -> Dict[str, Union[int, float]]:
        """The engine's counters, as of its last step: num_running,
        num_waiting, num_pages, pages_used, pages_free, pages_cached (held
        only by the prefix cache), pages_held_by_requests,
        prefix_cache_hit_rate (of cacheable prompt tokens), prefix_query_tokens,
        prefix_hit_tokens, prefix_evictions, preemptions, steps,
        prompt_tokens_computed, decode_tokens, peak_running, draft_tokens and
        draft_accepted_tokens (speculative decoding), in_flight."""
        return self._core.stats()

    def reset_prefix_cache(self) -> bool:
        """Gives every page only the prefix cache holds back to the pool."""
        return bool(self._core.native.reset_prefix_cache())

    def shutdown(self) -> None:
        """Stops the engine thread (also done when the LLM is collected)."""
        self._core.native.shutdown()


def _progress(total: int) -> Any:
    """A tqdm bar when tqdm is installed (it is optional), else None."""
    try:
        tqdm = importlib.import_module("tqdm.auto").tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="Processed prompts", unit="req", dynamic_ncols=True)

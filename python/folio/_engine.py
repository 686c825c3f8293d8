"""What folio.LLM and folio.AsyncLLM share: opening the engine, turning
prompts and SamplingParams into engine requests, and engine events into
RequestOutputs. The engine itself (folio._folio.EngineCore, python/src/
llm.cc) runs on its own C++ thread; this module only feeds and reads it.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import random
from typing import (Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union,
                    cast)

from folio import _folio
from folio.outputs import (CompletionOutput, EmbeddingOutput, EmbeddingRequestOutput,
                           FunctionCall, Logprob, PositionLogprobs,
                           RequestOutput, ScoringOutput, ScoringRequestOutput, ToolCall)
from folio.pooling_params import PoolingParams
from folio.sampling_params import SamplingParams

#: A prompt: text, token ids, or vLLM's {"prompt": text} /
#: {"prompt_token_ids": ids} dicts.
PromptType = Union[str, Sequence[int], Mapping[str, Any]]
#: A chat message: {"role": ..., "content": text or [{"type": "text", "text": ...}]}.
ChatMessage = Mapping[str, Any]

# KV dtype spellings accepted besides folio's own (f32, bf16, f16, f64).
_KV_DTYPES = {"auto": "f32", "float32": "f32", "float": "f32", "bfloat16": "bf16",
              "float16": "f16", "half": "f16", "float64": "f64", "double": "f64",
              "fp8": "f8e4m3", "fp8_e4m3": "f8e4m3", "int8": "i8"}
_ROLES = ("system", "user", "assistant", "tool", "developer")

# An engine event, as EngineCore.take() returns it.
# (key, tokens, text, logprobs, finish, error, sample index, final,
# beam_score, rng_state, embedding).
Event = Tuple[int, List[int], str, Optional[List[Tuple[int, float, List[Tuple[int, float]]]]],
              Optional[str], Optional[str], int, bool, Optional[float], int,
              Optional[List[float]]]


class Tokenizer:
    """The model's tokenizer (``llm.get_tokenizer()``), with the method names
    of Hugging Face tokenizers that vLLM code uses.

    Built-in byte-level models: id 0 begins a sequence, id 1 ends one, and
    byte b is id b + 2; ``add_special_tokens`` adds the begin id, as
    ``folio generate`` does.
    """

    def __init__(self, core: _folio.EngineCore, info: Mapping[str, Any]) -> None:
        self._core = core
        self._info = info

    def encode(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """Text -> token ids; ValueError for text the tokenizer refuses."""
        return list(self._core.encode(text, add_special_tokens))

    def decode(self, token_ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Token ids -> text (ill-formed UTF-8 becomes U+FFFD); ValueError for an id
        outside the vocabulary."""
        return str(self._core.decode([int(t) for t in token_ids], skip_special_tokens))

    def __call__(self, text: str, add_special_tokens: bool = True) -> Dict[str, List[int]]:
        return {"input_ids": self.encode(text, add_special_tokens)}

    def apply_chat_template(self, messages: Sequence[ChatMessage], *, tokenize: bool = False,
                            add_generation_prompt: bool = True,
                            chat_template: Optional[str] = None,
                            **kwargs: Any) -> Union[str, List[int]]:
        """The prompt for a chat, as Hugging Face's apply_chat_template makes it.

        Rendered by folio's Jinja engine with the model's own chat template
        (chat_template: a template's text to use instead), or, for a model
        that ships none, ChatML when its vocabulary has the markers (else a
        ValueError naming chat_template); byte-level models get folio's
        plain format. kwargs become template variables (tools,
        documents, ...). tokenize=True returns ids, with the tokenizer's
        special tokens unless the template writes them itself, as LLM.chat
        sends them. ValueError for a template that does not parse or
        raises.
        """
        text, ids, _ = self._render(messages, add_generation_prompt, chat_template, kwargs)
        return ids if tokenize else text

    def _render(self, messages: Sequence[ChatMessage], add_generation_prompt: bool,
                chat_template: Optional[str], extra: Mapping[str, Any]
                ) -> Tuple[str, List[int], List[int]]:
        """(prompt text, prompt ids, end-of-turn ids): the one place a chat
        becomes a prompt (python/src/chat_prompt.h)."""
        text, add_special, stops = self._core.render_chat(
            json.dumps(_chat_messages(messages)), add_generation_prompt, chat_template,
            json.dumps(dict(extra)) if extra else "null")
        # Byte-level models always start with the begin token, as folio serve.
        special = bool(add_special) or bool(self._info["byte_level"])
        return str(text), self.encode(str(text), add_special_tokens=special), list(stops)

    @property
    def vocab_size(self) -> int:
        return int(self._info["vocab_size"])

    @property
    def eos_token_id(self) -> Optional[int]:
        v = self._info["eos_token_id"]
        return None if v is None else int(v)

    @property
    def bos_token_id(self) -> Optional[int]:
        v = self._info["bos_token_id"]
        return None if v is None else int(v)

    def __len__(self) -> int:
        return self.vocab_size


def _chat_messages(messages: Sequence[ChatMessage]) -> List[Dict[str, Any]]:
    """Messages as the template sees them: content parts joined into one
    string, other keys passed on, as folio serve does."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise ValueError("messages must be a non-empty list of {'role', 'content'} dicts")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise ValueError(f"messages[{i}] must be a dict with 'role' and 'content'")
        role, content = m.get("role"), m.get("content")
        if role not in _ROLES:
            raise ValueError(f"messages[{i}].role must be one of {', '.join(_ROLES)} "
                             f"(got {role!r})")
        if isinstance(content, list):
            parts = []
            for j, p in enumerate(content):
                if not isinstance(p, Mapping) or p.get("type") != "text" or \
                        not isinstance(p.get("text"), str):
                    raise ValueError(f"messages[{i}].content[{j}] must be "
                                     "{'type': 'text', 'text': str}")
                parts.append(p["text"])
            content = "".join(parts)
        if not isinstance(content, str):
            raise ValueError(f"messages[{i}].content must be a string or a list of text parts "
                             f"(got {type(content).__name__})")
        out.append({**m, "content": content})
    return out


class ChatRequest:
    """One conversation of LLM.chat, prepared as folio serve prepares a chat
    body: its prompt, end-of-turn ids, the GBNF of its tool calls (a forced
    tool_choice, or a strict tool under "auto"; else None), and how its reply is read
    (python/src/chat_prompt.h)."""

    def __init__(self, prompt: Dict[str, Any], stops: List[int], reader: Any,
                 grammar: Optional[str]) -> None:
        self.prompt = prompt
        self.stops = stops
        self.reader = reader
        self.grammar = grammar
        # A harmony reply (gpt-oss) is read from its special tokens, so its
        # text keeps them.
        self.special_text = bool(reader.harmony)

    def read(self, out: RequestOutput) -> None:
        """Fills each completion's content, reasoning_content and tool_calls."""
        for c in out.outputs:
            # Call ids: drawn from the request id and the completion's index.
            digest = hashlib.blake2b(f"{out.request_id}/{c.index}".encode(), digest_size=8)
            content, reasoning, calls = self.reader.read(
                c.text, int.from_bytes(digest.digest(), "little"))
            c.content = None if not content and calls else str(content)
            c.reasoning_content = None if reasoning is None else str(reasoning)
            c.tool_calls = None if calls is None else [
                ToolCall(id=str(i), function=FunctionCall(name=str(n), arguments=str(a)))
                for i, n, a in calls]


class _Sample:
    """One parallel sample's accumulated output."""

    def __init__(self, logprobs: bool) -> None:
        self.token_ids: List[int] = []
        self.text = ""
        self.logprobs: Optional[List[PositionLogprobs]] = [] if logprobs else None
        self.cumulative_logprob: Optional[float] = 0.0 if logprobs else None
        self.finish_reason: Optional[str] = None
        self.beam_score: Optional[float] = None
        self.rng_state: Optional[int] = None  # after its last token, once it has one


class Request:
    """One request's accumulated output (n samples); turns engine events
    into RequestOutputs."""

    def __init__(self, key: int, request_id: str, prompt: Optional[str],
                 prompt_token_ids: List[int], logprobs: bool, n: int = 1,
                 best_of: Optional[int] = None, hide_logprobs: bool = False,
                 length_penalty: Optional[float] = None) -> None:
        """n: completions returned. best_of (> n): samples run, the n with the
        highest cumulative log-probability returned (logprobs must be on;
        hide_logprobs: the caller did not ask for them). length_penalty:
        a beam search's (its hypotheses' summed log-probability is their
        score times length ** length_penalty)."""
        self.key = key
        self.request_id = request_id
        self.prompt = prompt
        self.prompt_token_ids = prompt_token_ids
        self.n = n
        self.hide_logprobs = hide_logprobs
        self.length_penalty = length_penalty
        self.samples = [_Sample(logprobs) for _ in range(best_of or n)]
        self.stop_token_ids: Sequence[int] = ()
        self.error: Optional[str] = None
        self.done = False  # the engine's last event for it arrived
        self.embedding: Optional[List[float]] = None  # a pooled request's, once done

    # Sample 0's fields, for callers of one-sample requests.
    @property
    def token_ids(self) -> List[int]:
        return self.samples[0].token_ids

    @property
    def finish_reason(self) -> Optional[str]:
        return self.samples[0].finish_reason

    @property
    def finished(self) -> bool:
        return self.done or self.error is not None

    def apply(self, event: Event, token_text: Any) -> None:
        (_, tokens, text, logprobs, finish, error, index, final, beam_score, rng_state,
         embedding) = event
        while index >= len(self.samples):  # not expected: the engine keeps n
            self.samples.append(_Sample(self.samples[0].logprobs is not None))
        s = self.samples[index]
        s.token_ids.extend(tokens)
        s.text += text
        if tokens:
            s.rng_state = rng_state
        if logprobs is not None:
            if s.logprobs is None:  # an imported request that asked for them
                s.logprobs = [None] * (len(s.token_ids) - len(tokens))
                s.cumulative_logprob = 0.0
            for token, logprob, top in logprobs:
                entry: Dict[int, Logprob] = {}
                rank = None
                for r, (alt, alt_lp) in enumerate(top, start=1):
                    entry[alt] = Logprob(alt_lp, r, token_text(alt))
                    if alt == token:
                        rank = r
                entry[token] = Logprob(logprob, rank, token_text(token))
                s.logprobs.append(entry)
                assert s.cumulative_logprob is not None
                s.cumulative_logprob += logprob
        if finish is not None:
            s.finish_reason = finish
        if beam_score is not None:
            s.beam_score = beam_score
        if embedding is not None:
            self.embedding = [float(x) for x in embedding]
        if error is not None:
            self.error = error
        if final:
            self.done = True

    def score_output(self) -> ScoringRequestOutput:
        """A scored pair's result (it must be done): sigmoid of the head's logit."""
        assert self.embedding is not None, "a scored pair finished without its logit"
        return ScoringRequestOutput(request_id=self.request_id,
                                    prompt_token_ids=list(self.prompt_token_ids),
                                    outputs=ScoringOutput(1.0 / (1.0 + math.exp(-self.embedding[0]))),
                                    finished=self.done)

    def embedding_output(self) -> EmbeddingRequestOutput:
        """A pooled request's result (it must be done)."""
        assert self.embedding is not None, "a pooled request finished without its vector"
        return EmbeddingRequestOutput(request_id=self.request_id, prompt=self.prompt,
                                      prompt_token_ids=list(self.prompt_token_ids),
                                      outputs=EmbeddingOutput(self.embedding),
                                      finished=self.done)

    def output(self) -> RequestOutput:
        samples = self.samples
        if len(samples) > self.n:  # best_of: the n best once all are in
            ranked = sorted(range(len(samples)),
                            key=lambda i: -(samples[i].cumulative_logprob or 0.0))
            samples = [samples[i] for i in ranked[:self.n]] if self.done else []
        completions = []
        for i, s in enumerate(samples):
            stop_reason: Optional[int] = None
            if s.finish_reason == "stop" and s.token_ids and \
                    s.token_ids[-1] in self.stop_token_ids:
                stop_reason = s.token_ids[-1]
            cumulative = s.cumulative_logprob
            if s.beam_score is not None and self.length_penalty is not None:
                cumulative = s.beam_score * len(s.token_ids) ** self.length_penalty
            completions.append(CompletionOutput(
                index=i, text=s.text, token_ids=list(s.token_ids),
                cumulative_logprob=cumulative,
                logprobs=None if s.logprobs is None or self.hide_logprobs
                else list(s.logprobs),
                finish_reason=s.finish_reason, stop_reason=stop_reason,
                rng_state=s.rng_state))
        return RequestOutput(request_id=self.request_id, prompt=self.prompt,
                             prompt_token_ids=list(self.prompt_token_ids),
                             outputs=completions, finished=self.done)


def _speculative(config: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """vLLM's speculative_config, as folio's engine takes it: prompt lookup
    ("ngram") or a draft model ("draft_model", with "model": a folder, .gguf
    or "builtin" sharing the target's vocabulary); the output is the same
    with or without it."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ValueError(f"speculative_config must be a dict (got {config!r})")
    known = {"method", "model", "num_speculative_tokens", "prompt_lookup_min",
             "prompt_lookup_max"}
    unknown = sorted(set(config) - known)
    if unknown:
        raise ValueError(f"speculative_config: folio does not support {', '.join(unknown)} "
                         f"(it knows {', '.join(sorted(known))})")
    model = config.get("model")
    method = config.get("method", "ngram" if model is None else "draft_model")
    if method not in ("ngram", "draft_model"):
        raise ValueError(f"speculative_config: method {method!r} is not supported "
                         "(folio drafts by prompt lookup, 'ngram', or with a smaller model, "
                         "'draft_model')")
    if (method == "draft_model") != (model is not None):
        raise ValueError("speculative_config: 'model' goes with method 'draft_model' "
                         f"(got method={method!r}, model={model!r})")
    # The most draft tokens per step (folio grows drafts while they are
    # accepted whole): prompt lookup drafts are nearly free, a draft model's
    # cost a step of that model per token.
    default_k = 16 if method == "ngram" else 3
    out: Dict[str, Any] = {"num_speculative_tokens": config.get("num_speculative_tokens", default_k),
                           "prompt_lookup_min": config.get("prompt_lookup_min", 2),
                           "prompt_lookup_max": config.get("prompt_lookup_max", 4)}
    for name, v in out.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < (0 if name.startswith("num") else 1):
            raise ValueError(f"speculative_config: {name} must be an integer "
                             f"(got {v!r})")
    if model is not None:
        if not isinstance(model, (str, os.PathLike)):
            raise ValueError(f"speculative_config: model must be a path (got {model!r})")
        out["draft_model"] = os.fspath(model)
    return out


class EngineCore:
    """The loaded model and engine (both LLM classes hold one)."""

    def __init__(self, model: Union[str, "os.PathLike[str]"], *, kv_dtype: str,
                 page_size: int, num_pages: Optional[int], kv_bytes: Optional[int],
                 max_num_seqs: int, max_num_batched_tokens: int, threads: int,
                 prefix_caching: bool, tokenizer_pre: Optional[str], builtin_context: int,
                 backend: str, watermark: float, seed: int, matmul_activations: str = "q8",
                 speculative_config: Optional[Mapping[str, Any]] = None,
                 step_delay_us: int = 0) -> None:
        spec = _speculative(speculative_config)
        for name, v in (("page_size", page_size), ("max_num_seqs", max_num_seqs),
                        ("max_num_batched_tokens", max_num_batched_tokens),
                        ("builtin_context", builtin_context)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1 (got {v!r})")
        for name, o in (("num_pages", num_pages), ("kv_bytes", kv_bytes)):
            if o is not None and (not isinstance(o, int) or isinstance(o, bool) or o < 1):
                raise ValueError(f"{name} must be None or an integer >= 1 (got {o!r})")
        if not isinstance(threads, int) or threads < 0:
            raise ValueError(f"threads must be an integer >= 0 (0 = every core; got {threads!r})")
        if not isinstance(step_delay_us, int) or isinstance(step_delay_us, bool) or \
                not 0 <= step_delay_us <= 10**6:
            raise ValueError(f"step_delay_us must be an integer in [0, 1000000] "
                             f"(got {step_delay_us!r})")
        self.native = _folio.EngineCore(
            model=os.fspath(model), builtin_context=builtin_context, tokenizer_pre=tokenizer_pre,
            kv_dtype=_KV_DTYPES.get(kv_dtype, kv_dtype), page_size=page_size,
            num_pages=num_pages, kv_bytes=kv_bytes, max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens, threads=threads,
            prefix_caching=prefix_caching, backend=backend, watermark=watermark,
            matmul_activations=matmul_activations, step_delay_us=step_delay_us, **spec)
        self.info: Dict[str, Any] = dict(self.native.info())
        self.tokenizer = Tokenizer(self.native, self.info)
        self._seeds = random.Random(seed)
        self._next_key = 0
        self._token_text: Dict[int, str] = {}

    def token_text(self, token: int) -> str:
        s = self._token_text.get(token)
        if s is None:
            s = self._token_text[token] = str(self.native.token_text(token))
        return s

    def new_key(self) -> int:
        self._next_key += 1
        return self._next_key

    def encode_prompt(self, prompt: PromptType) -> Tuple[Optional[str], List[int]]:
        """(prompt text or None, prompt ids)."""
        if isinstance(prompt, Mapping):
            if "prompt_token_ids" in prompt:
                text = prompt.get("prompt")
                _, ids = self.encode_prompt(cast(Sequence[int], prompt["prompt_token_ids"]))
                return (text if isinstance(text, str) else None), ids
            elif "prompt" in prompt:
                prompt = cast(str, prompt["prompt"])
            else:
                raise ValueError("a prompt dict needs 'prompt' or 'prompt_token_ids'")
        if isinstance(prompt, str):
            return prompt, self.tokenizer.encode(prompt, add_special_tokens=True)
        ids = []
        for i, t in enumerate(prompt):
            if not isinstance(t, int) or isinstance(t, bool):
                raise ValueError(f"prompt token {i} must be an int (got {t!r})")
            ids.append(t)
        return None, ids

    def make_request(self, prompt: PromptType, params: SamplingParams, request_id: Optional[str],
                     chat_stops: Sequence[int] = (), grammar: Optional[str] = None,
                     special_text: bool = False) -> Tuple[Request, _folio.RequestParams]:
        """Checks a request (ValueError) without submitting it. grammar: GBNF
        the output must follow (a chat's tool-call grammar); special_text: the
        output text keeps special tokens (a harmony chat's reply)."""
        if not isinstance(params, SamplingParams):
            raise TypeError(f"sampling_params must be a folio.SamplingParams "
                            f"(got {type(params).__name__})")
        text, ids = self.encode_prompt(prompt)
        # The model's end ids: eos, then the chat's end-of-turn ids. The
        # engine stops on them unless params.ignore_eos, and on the
        # request's own stop_token_ids always.
        eos = self.info["eos_token_id"]
        eos_ids = ([int(eos)] if eos is not None else []) + [int(t) for t in chat_stops]
        max_tokens = params.max_tokens
        if max_tokens is None:  # the rest of the context (the last token is never fed)
            max_tokens = max(1, int(self.info["max_positions"]) - len(ids) + 1)
        seed = params.seed if params.seed is not None else self._seeds.getrandbits(64)
        native = params._native(seed, max_tokens, eos_ids)
        if special_text:
            native.skip_special_tokens = False
        if params._constraint is not None:
            if grammar is not None:
                raise ValueError("structured_outputs cannot be combined with a tool_choice "
                                 "that forces a call, or with a strict tool")
            self.native.constrain(native, *params._constraint._kind_and_payload())
        if grammar is not None:
            # The tool calls' grammar: an error names tool_choice, as folio
            # serve's does (a harmony call's grammar needs gpt-oss's tokens).
            self.native.constrain(native, "grammar", json.dumps(grammar), "tool_choice")
        self.native.check(ids, native)
        key = self.new_key()
        ranked = not params.use_beam_search and (params.best_of or params.n) > params.n
        r = Request(key, request_id if request_id is not None else str(key), text, ids,
                    params.logprobs is not None or ranked, params.n,
                    best_of=params.best_of if ranked else None,
                    hide_logprobs=ranked and params.logprobs is None,
                    length_penalty=params.length_penalty if params.use_beam_search else None)
        r.stop_token_ids = native.stop_token_ids
        return r, native

    def make_embed_request(self, prompt: PromptType, params: Optional[PoolingParams],
                           request_id: Optional[str]) -> Tuple[Request, _folio.RequestParams]:
        """Checks a pooled-embedding request (ValueError) without submitting it."""
        params = params if params is not None else PoolingParams()
        if not isinstance(params, PoolingParams):
            raise TypeError(f"pooling_params must be a folio.PoolingParams "
                            f"(got {type(params).__name__})")
        text, ids = self.encode_prompt(prompt)
        pooling = params.pooling if params.pooling is not None else self.info["default_pooling"]
        native = _folio.RequestParams.pooled(pooling, params.normalize,
                                             params.dimensions or 0)
        self.native.check(ids, native)
        key = self.new_key()
        r = Request(key, request_id if request_id is not None else str(key), text, ids, False)
        return r, native

    def make_score_request(self, text_1: str, text_2: str, request_id: Optional[str]
                           ) -> Tuple[Request, _folio.RequestParams]:
        """Checks a text pair's relevance request (ValueError) without submitting it."""
        if self.info.get("num_labels") != 1:
            raise ValueError("score needs a cross-encoder (a *ForSequenceClassification "
                             f"with one label); the model has {self.info.get('num_labels')} labels")
        for name, t in (("text_1", text_1), ("text_2", text_2)):
            if not isinstance(t, str) or not t:
                raise ValueError(f"{name} must be a non-empty string (got {t!r})")
        ids, types = self.native.encode_pair(text_1, text_2)
        native = _folio.RequestParams.scored(types if self.info["encoder"] else [])
        self.native.check(ids, native)
        key = self.new_key()
        r = Request(key, request_id if request_id is not None else str(key), None, ids, False)
        return r, native

    def chat_prompts(self, messages: Union[Sequence[ChatMessage], Sequence[Sequence[ChatMessage]]],
                     chat_template: Optional[str] = None, add_generation_prompt: bool = True,
                     extra: Optional[Mapping[str, Any]] = None
                     ) -> List[Tuple[Dict[str, Any], List[int]]]:
        """For one conversation or a list of them: ({"prompt", "prompt_token_ids"},
        end-of-turn ids) each."""
        batched = isinstance(messages, Sequence) and len(messages) > 0 and \
            isinstance(messages[0], Sequence) and not isinstance(messages[0], (str, Mapping))
        convs = cast(Sequence[Sequence[ChatMessage]], messages if batched else [messages])
        out = []
        for c in convs:
            text, ids, stops = self.tokenizer._render(c, add_generation_prompt, chat_template,
                                                      extra or {})
            out.append(({"prompt": text, "prompt_token_ids": ids}, stops))
        return out

    @staticmethod
    def chat_fields(tools: Optional[Sequence[Mapping[str, Any]]],
                    tool_choice: Union[str, Mapping[str, Any], None],
                    parallel_tool_calls: Optional[bool],
                    chat_template_kwargs: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        """The chat body fields LLM.chat and AsyncLLM.chat take as keywords
        (absent when None)."""
        fields: Dict[str, Any] = {}
        if tools is not None:
            fields["tools"] = list(tools)
        for name, value in (("tool_choice", tool_choice),
                            ("parallel_tool_calls", parallel_tool_calls),
                            ("chat_template_kwargs", chat_template_kwargs)):
            if value is not None:
                fields[name] = value
        return fields

    def chat_requests(self, messages: Union[Sequence[ChatMessage], Sequence[Sequence[ChatMessage]]],
                      chat_template: Optional[str], fields: Mapping[str, Any]
                      ) -> List[ChatRequest]:
        """For one conversation or a list of them, a ChatRequest each. fields:
        a chat body's other fields (tools, tool_choice, parallel_tool_calls,
        chat_template_kwargs), checked as folio serve checks them."""
        batched = isinstance(messages, Sequence) and len(messages) > 0 and \
            isinstance(messages[0], Sequence) and not isinstance(messages[0], (str, Mapping))
        convs = cast(Sequence[Sequence[ChatMessage]], messages if batched else [messages])
        out = []
        for c in convs:
            if isinstance(c, (str, bytes)) or not isinstance(c, Sequence):
                raise ValueError("messages must be a list of {'role', 'content'} dicts")
            try:
                body = json.dumps({"messages": list(c), **fields})
            except (TypeError, ValueError) as e:
                raise ValueError(f"the chat request is not JSON: {e}") from None
            text, add_special, stops, reader, grammar = self.native.prepare_chat(body,
                                                                                 chat_template)
            # Byte-level models always start with the begin token, as folio serve.
            special = bool(add_special) or bool(self.info["byte_level"])
            ids = self.tokenizer.encode(str(text), add_special_tokens=special)
            out.append(ChatRequest({"prompt": str(text), "prompt_token_ids": ids},
                                   [int(t) for t in stops], reader,
                                   None if grammar is None else str(grammar)))
        return out

    def import_requests(self, snapshot: Union[bytes, str, "os.PathLike[str]"],
                        request_ids: Optional[Sequence[str]]) -> List[Request]:
        """Continues a KV snapshot's requests here; their Requests, in order.

        Runs on the caller's thread and blocks it for at most one engine step.
        """
        if isinstance(snapshot, (bytes, bytearray, memoryview)):
            data = bytes(snapshot)
        else:
            with open(os.fspath(snapshot), "rb") as f:
                data = f.read()
        first = self._next_key + 1
        states = self.native.import_kv(data, first)
        self._next_key += len(states)
        if request_ids is not None and len(request_ids) != len(states):
            for s in states:
                self.native.abort(int(s["key"]))
            raise ValueError(f"the snapshot holds {len(states)} requests; got "
                             f"{len(request_ids)} request_ids")
        reqs = []
        for i, s in enumerate(states):
            key = int(s["key"])
            r = Request(key, request_ids[i] if request_ids is not None else str(key), None,
                        [int(t) for t in s["prompt"]], False)
            r.samples[0].token_ids = [int(t) for t in s["output"]]
            r.samples[0].text = str(s["text"])
            r.stop_token_ids = [int(t) for t in s["params"]["stop_token_ids"]]
            reqs.append(r)
        return reqs

    def stats(self) -> Dict[str, Union[int, float]]:
        s: Dict[str, Union[int, float]] = dict(self.native.stats())
        s["in_flight"] = int(self.native.in_flight)
        return s


def normalize_prompts(prompts: Union[PromptType, Sequence[PromptType]]) -> List[PromptType]:
    """One prompt or a list of them -> a list."""
    if isinstance(prompts, (str, Mapping)):
        return [prompts]
    seq = list(cast(Sequence[Any], prompts))
    if seq and all(isinstance(t, int) and not isinstance(t, bool) for t in seq):
        return [cast(Sequence[int], seq)]  # one prompt of token ids
    return cast(List[PromptType], seq)


def params_for(sampling_params: Union[SamplingParams, Sequence[SamplingParams], None],
               n: int) -> List[SamplingParams]:
    if sampling_params is None:
        return [SamplingParams()] * n
    if isinstance(sampling_params, SamplingParams):
        return [sampling_params] * n
    ps = list(sampling_params)
    if len(ps) != n:
        raise ValueError(f"got {len(ps)} sampling_params for {n} prompts")
    return ps

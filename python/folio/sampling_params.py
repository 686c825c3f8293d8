"""folio.SamplingParams: vLLM's sampling parameters, for what folio supports.

The names and defaults are vLLM's (``vllm.SamplingParams``), so code written
for vLLM runs unchanged where it uses what folio has. Each parameter maps
onto one field of folio's request (include/folio/engine/request.h and
include/folio/sampling/sampler.h):

==========================  =================================================
vLLM parameter              folio
==========================  =================================================
temperature (1.0)           sampling temperature; 0 is greedy (argmax, ties
                            to the lowest id, no random draw)
top_k (-1; 0 also off)      top_k (0 = no limit)
top_p (1.0)                 top_p, in (0, 1]
min_p (0.0)                 min_p, in [0, 1] (declared)
typical_p (1.0)             locally typical sampling, in [0, 1] (declared)
top_n_sigma (0.0)           llama.cpp's top-n-sigma, in [0, 100] (declared)
repetition_penalty (1.0)    HF's multiplicative penalty over prompt and
                            output, in (0, 100] (declared)
presence_penalty (0.0)      OpenAI's, over the output, in [-2, 2] (declared)
frequency_penalty (0.0)     OpenAI's, over the output, in [-2, 2] (declared)
penalty_last_n (-1)         the penalties' window (llama.cpp's; -1: all)
logit_bias (None)           {token id: bias in [-100, 100]}, at most 300
                            (declared)
allowed_token_ids (None)    only these tokens can be selected (declared)
bad_words (None)            words the output never completes (declared)
min_tokens (0)              no end token or stop string before this many
                            output tokens (declared)
include_stop_str_in_output  keep the stop string that ended the text
  (False)                   (declared)
dry_* , xtc_*               llama.cpp's DRY and XTC (declared; see
                            docs/request-params.md)
seed (None)                 the request's own SplitMix64 stream; None draws
                            one from the engine's ``seed`` (LLM(seed=0)), so
                            a script's results repeat run to run
max_tokens (16)             max_tokens; None = the rest of the context
stop (None)                 stop strings: the text ends before one
stop_token_ids (None)       stop tokens (kept in token_ids), up to 64
                            (declared)
ignore_eos (False)          True goes on past the tokenizer's end-of-sequence
                            id and a chat template's end-of-turn ids (byte-
                            level models stop on nothing anyway, as ``folio
                            generate``); stop_token_ids still apply (declared)
logprobs (None)             the sampled token's log-probability plus this
                            many alternatives (0 to 20)
skip_special_tokens (True)  the engine's detokenizer always skips them
n (1)                       parallel samples from one prefill, sharing its
                            KV pages (outputs[i]; sample 0 is the one-sample
                            completion for the same seed)
best_of (None = n)          that many samples, the n with the highest
                            cumulative log-probability returned best first
                            (outputs stay empty until the request finishes)
use_beam_search (False)     beam search (Hugging Face's num_beams semantics;
                            engine/beam_search.h) of width best_of (or n),
                            on forked sequences sharing their pages; needs
                            temperature=0 and no stop strings or logprobs;
                            the n best hypotheses come back at the end,
                            best first, cumulative_logprob their summed
                            log-probability
length_penalty (1.0)        beam search: score = sum / length ** penalty
early_stopping (False)      beam search: True, False (HF's heuristic) or
                            "never"
==========================  =================================================

"(declared)": the parameter is declared once in the engine
(include/folio/engine/request_params.h; ``folio._folio.request_params()``
lists them, docs/request-params.md has the table): SamplingParams checks it
against that declaration and passes it by name, as the HTTP server does.

Order (docs/sampling.md): the logits processors (allowed_token_ids,
bad_words, min_tokens, logit_bias, repetition_penalty, presence and
frequency penalties, DRY), then the sampler (top_n_sigma, top_k,
temperature, top_p, min_p, typical_p, XTC) and one draw. Log-probabilities
are those of the model's own distribution (log-softmax of the raw logits,
before the processors), as vLLM's default ``logprobs_mode``.

vLLM parameters folio does not implement are accepted only at their neutral
value; any other value raises ValueError naming every such parameter. A
keyword that is not a field at all is a TypeError naming it.
"""
from __future__ import annotations

import json as _json
import math
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Mapping, Optional, Union

from folio import _folio

#: Log-prob alternatives the engine returns at most (sampling::kMaxTopLogprobs).
MAX_LOGPROBS = 20
#: Entries a logit_bias holds at most (sampling::kMaxLogitBias, OpenAI's limit).
_MAX_LOGIT_BIAS = 300

# vLLM parameters folio has no implementation for, with the values that
# mean "off" (None also matches {} and []); anything else is refused by name.
_NEUTRAL: Dict[str, Any] = {
    "prompt_logprobs": None,
    "detokenize": True,
    "skip_special_tokens": True,
    "spaces_between_special_tokens": True,
    "truncate_prompt_tokens": None,
}


@dataclass
class StructuredOutputsParams:
    """vLLM's structured-output parameters: set exactly one of json (a JSON
    Schema, as a dict or its JSON text), regex (the whole output matches it),
    choice (the output is one of these strings), grammar (GBNF, as
    llama.cpp writes it) or json_object=True (any JSON object).

    vLLM's tuning fields (disable_fallback, disable_any_whitespace,
    disable_additional_properties, whitespace_pattern, structural_tag) are
    accepted only at their defaults; folio has one grammar engine and JSON's
    whitespace rules (docs/structured-output.md).
    """

    json: Optional[Union[str, Dict[str, Any]]] = None
    regex: Optional[str] = None
    choice: Optional[List[str]] = None
    grammar: Optional[str] = None
    json_object: Optional[bool] = None
    disable_fallback: bool = False
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False
    whitespace_pattern: Optional[str] = None
    structural_tag: Optional[str] = None

    def __post_init__(self) -> None:
        tuning = {"disable_fallback": False, "disable_any_whitespace": False,
                  "disable_additional_properties": False, "whitespace_pattern": None,
                  "structural_tag": None}
        bad = [f"{k}={getattr(self, k)!r}" for k, v in tuning.items() if getattr(self, k) != v]
        if bad:
            raise ValueError("folio does not support these structured output options: " +
                             ", ".join(bad))
        given = [k for k in ("json", "regex", "choice", "grammar") if getattr(self, k) is not None]
        if self.json_object:
            given.append("json_object")
        if len(given) != 1:
            raise ValueError("structured_outputs needs exactly one of json, regex, choice, "
                             f"grammar, json_object (got {given or 'none'})")
        if self.regex is not None and not isinstance(self.regex, str):
            raise ValueError(f"structured_outputs.regex must be a string (got {self.regex!r})")
        if self.grammar is not None and not isinstance(self.grammar, str):
            raise ValueError(f"structured_outputs.grammar must be a string "
                             f"(got {self.grammar!r})")
        if self.choice is not None and (
                not isinstance(self.choice, (list, tuple)) or not self.choice
                or not all(isinstance(c, str) for c in self.choice)):
            raise ValueError(f"structured_outputs.choice must be a non-empty list of strings "
                             f"(got {self.choice!r})")
        if self.json is not None and not isinstance(self.json, (str, dict, bool)):
            raise ValueError(f"structured_outputs.json must be a JSON Schema (a dict or its "
                             f"JSON text; got {type(self.json).__name__})")

    def _kind_and_payload(self) -> "tuple[str, str]":
        """(kind, payload as JSON text), as EngineCore.constrain takes them."""
        if self.json is not None:
            schema = _json.loads(self.json) if isinstance(self.json, str) else self.json
            return "json_schema", _json.dumps(schema)
        if self.regex is not None:
            return "regex", _json.dumps(self.regex)
        if self.choice is not None:
            return "choice", _json.dumps(list(self.choice))
        if self.grammar is not None:
            return "grammar", _json.dumps(self.grammar)
        return "json_object", "null"


#: vLLM's older name for the same parameters (SamplingParams.guided_decoding).
GuidedDecodingParams = StructuredOutputsParams


def _structured(name: str, v: Any) -> Optional[StructuredOutputsParams]:
    if v is None:
        return None
    if isinstance(v, StructuredOutputsParams):
        return v
    if isinstance(v, Mapping):
        try:
            return StructuredOutputsParams(**v)
        except TypeError as e:
            raise ValueError(f"{name}: {e}") from None
    raise ValueError(f"{name} must be a folio.StructuredOutputsParams or a dict "
                     f"(got {type(v).__name__})")


@dataclass
class SamplingParams:
    """How one request samples and when it stops (vLLM's names and defaults).

    Raises ValueError for an out-of-range value or a vLLM parameter folio
    does not support set to anything but its neutral value.
    """

    n: int = 1
    best_of: Optional[int] = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    seed: Optional[int] = None
    stop: Optional[Union[str, List[str]]] = None
    stop_token_ids: Optional[List[int]] = None
    ignore_eos: bool = False
    max_tokens: Optional[int] = 16
    min_tokens: int = 0
    logprobs: Optional[int] = None
    prompt_logprobs: Optional[int] = None
    detokenize: bool = True
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    logit_bias: Optional[Dict[int, float]] = None
    allowed_token_ids: Optional[List[int]] = None
    bad_words: Optional[List[str]] = None
    truncate_prompt_tokens: Optional[int] = None
    use_beam_search: bool = False
    length_penalty: float = 1.0
    early_stopping: Union[bool, str] = False
    guided_decoding: Optional[Any] = None
    structured_outputs: Optional[Any] = None
    # folio's parameters beyond vLLM's (llama.cpp's, and HF's typical_p),
    # after vLLM's so that positional arguments keep vLLM's order.
    typical_p: float = 1.0
    top_n_sigma: float = 0.0
    penalty_last_n: int = -1
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = -1
    dry_sequence_breakers: Optional[List[str]] = None
    xtc_probability: float = 0.0
    xtc_threshold: float = 0.1
    # Normalised by __post_init__: stop as a list of strings.
    _stop_list: List[str] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        unsupported = [
            f"{name}={getattr(self, name)!r}"
            for name, neutral in _NEUTRAL.items()
            if not any(_is_neutral(getattr(self, name), n)
                       for n in (neutral if isinstance(neutral, tuple) else (neutral,)))
        ]
        if unsupported:
            raise ValueError("folio does not support these sampling parameters (only their "
                             "neutral values): " + ", ".join(unsupported))
        if not _is_int(self.n) or self.n < 1:
            raise ValueError(f"n must be an integer >= 1 (got {self.n!r})")
        if self.best_of is not None and (not _is_int(self.best_of) or self.best_of < self.n):
            raise ValueError(f"best_of must be None or an integer >= n (got "
                             f"best_of={self.best_of!r}, n={self.n!r})")
        _check_number("length_penalty", self.length_penalty, -math.inf, math.inf,
                      low_open=True)
        if self.early_stopping not in (True, False, "never"):
            raise ValueError(f"early_stopping must be True, False or 'never' "
                             f"(got {self.early_stopping!r})")
        if self.use_beam_search:
            if self.temperature != 0:
                raise ValueError(f"beam search needs temperature=0: it scores the model's own "
                                 f"log-probabilities (got temperature={self.temperature!r})")
        elif self.length_penalty != 1.0 or self.early_stopping is not False:
            raise ValueError("length_penalty and early_stopping apply to beam search only "
                             "(use_beam_search=True)")
        _check_number("temperature", self.temperature, 0.0, math.inf, low_open=False)
        _check_number("top_p", self.top_p, 0.0, 1.0, low_open=True)
        if not _is_int(self.top_k) or self.top_k < -1:
            raise ValueError(f"top_k must be -1, 0 (no limit) or a positive integer "
                             f"(got {self.top_k!r})")
        if self.max_tokens is not None and (not _is_int(self.max_tokens) or self.max_tokens < 1):
            raise ValueError(f"max_tokens must be None or an integer >= 1 "
                             f"(got {self.max_tokens!r})")
        if self.seed is not None and not _is_int(self.seed):
            raise ValueError(f"seed must be None or an integer (got {self.seed!r})")
        if self.logprobs is not None and (not _is_int(self.logprobs)
                                          or not 0 <= self.logprobs <= MAX_LOGPROBS):
            raise ValueError(f"logprobs must be None or an integer in [0, {MAX_LOGPROBS}] "
                             f"(got {self.logprobs!r})")
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        for i, s in enumerate(stop):
            if not isinstance(s, str) or not s:
                raise ValueError(f"stop[{i}] must be a non-empty string (got {s!r})")
        self._stop_list = stop
        for declared in _DECLARED:  # min_p, stop_token_ids, ignore_eos, ...
            _check_declared(declared, getattr(self, declared["name"]))
        if self.structured_outputs is not None and self.guided_decoding is not None:
            raise ValueError("give structured_outputs or guided_decoding, not both")
        self.structured_outputs = _structured("structured_outputs", self.structured_outputs)
        self.guided_decoding = _structured("guided_decoding", self.guided_decoding)
        if self._constraint is not None and self.use_beam_search:
            raise ValueError("structured outputs cannot be combined with use_beam_search")

    @property
    def _constraint(self) -> Optional[StructuredOutputsParams]:
        return self.structured_outputs or self.guided_decoding

    def clone(self) -> "SamplingParams":
        """A copy (vLLM's name)."""
        return SamplingParams(**{f.name: getattr(self, f.name) for f in fields(self) if f.init})

    def _native(self, seed: int, max_tokens: int, eos_ids: List[int]) -> _folio.RequestParams:
        """The engine's parameters: seed, max_tokens and the model's end ids
        (eos, a chat's end-of-turn ids) resolved by the caller
        (_engine.EngineCore.make_request); the declared ones by name."""
        beams = self.best_of or self.n if self.use_beam_search else 0
        # best_of > n samples are ranked by their log-probabilities.
        logprobs = self.logprobs
        if logprobs is None and not self.use_beam_search and self._samples > self.n:
            logprobs = 0
        return _folio.RequestParams(
            temperature=float(self.temperature), top_k=int(self.top_k),
            top_p=float(self.top_p), seed=seed & 0xFFFF_FFFF_FFFF_FFFF,
            max_tokens=max_tokens, eos_token_ids=eos_ids, stop=self._stop_list,
            logprobs=logprobs, n=self.n if self.use_beam_search else self._samples,
            num_beams=beams, length_penalty=float(self.length_penalty),
            early_stopping=str(self.early_stopping).lower(),
            **{d["name"]: getattr(self, d["name"]) for d in _DECLARED})

    @classmethod
    def _from_engine(cls, p: Mapping[str, Any]) -> "SamplingParams":
        """The SamplingParams of a request the server's parser shaped
        (folio._folio.FrontEndGeneration.params, the engine's JSON form): the
        shaped fields by hand, every declared one by name. Its stop tokens are
        every id the engine would stop on (the model's end ids included unless
        it ignores them), so it sets ignore_eos: nothing is to be added."""
        declared = {d["name"]: p[d["name"]] for d in _DECLARED if d["name"] in p}
        for d in _DECLARED:  # JSON object keys are strings; the bias map's are token ids
            if d["type"] == "token bias" and declared.get(d["name"]) is not None:
                declared[d["name"]] = {int(k): v for k, v in declared[d["name"]].items()}
        stops = list(declared.get("stop_token_ids") or [])
        if not declared.get("ignore_eos", False):
            stops += [t for t in p.get("eos_token_ids", []) if t not in stops]
        declared.update(stop_token_ids=stops, ignore_eos=True)
        return cls(temperature=p["temperature"], top_k=p["top_k"], top_p=p["top_p"],
                   seed=p["seed"], max_tokens=p["max_tokens"],
                   stop=list(p["stop_strings"]) or None,
                   logprobs=p["top_logprobs"] if p["logprobs"] else None, **declared)

    @property
    def _samples(self) -> int:
        """Sequences the engine returns: best_of samples, or n hypotheses."""
        return self.n if self.use_beam_search else (self.best_of or self.n)


#: The request parameters the engine declares once (engine/request_params.h):
#: each is a field of SamplingParams under the same name, checked against its
#: row and passed to the engine by name.
_DECLARED: List[Dict[str, Any]] = _folio.request_params()


def _check_declared(row: Dict[str, Any], v: object) -> None:
    name, kind = row["name"], row["type"]
    if v is None:
        return
    if kind == "number":
        _check_number(name, v, row["lo"], row["hi"], low_open=row["lo_open"])
    elif kind == "integer":
        if not _is_int(v) or not row["lo"] <= v <= row["hi"]:
            raise ValueError(f"{name} must be an integer in [{row['lo']:g}, {row['hi']:g}] "
                             f"(got {v!r})")
    elif kind == "boolean":
        if v is not True and v is not False:
            raise ValueError(f"{name} must be True or False (got {v!r})")
    elif kind == "token bias":
        if not isinstance(v, Mapping) or len(v) > _MAX_LOGIT_BIAS:
            raise ValueError(f"{name} must be a dict of at most {_MAX_LOGIT_BIAS} "
                             f"token id -> bias entries (got {v!r:.200})")
        for t, b in v.items():
            if not _is_int(t) or t < 0:
                raise ValueError(f"{name} keys must be token ids >= 0 (got {t!r})")
            _check_number(f"{name}[{t}]", b, row["lo"], row["hi"], low_open=False)
    elif kind == "strings":
        items = list(v) if isinstance(v, (list, tuple)) else None
        if items is None or len(items) > row["hi"]:
            raise ValueError(f"{name} must be a list of at most {row['hi']:g} strings "
                             f"(got {v!r:.200})")
        for i, s in enumerate(items):
            if not isinstance(s, str) or not s:
                raise ValueError(f"{name}[{i}] must be a non-empty string (got {s!r})")
    else:  # token ids
        ids = list(v) if isinstance(v, (list, tuple)) else None
        if ids is None or len(ids) > row["hi"]:
            raise ValueError(f"{name} must be a list of at most {row['hi']:g} token ids "
                             f"(got {v!r})")
        for i, t in enumerate(ids):
            if not _is_int(t) or t < 0:
                raise ValueError(f"{name}[{i}] must be a token id >= 0 (got {t!r})")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_neutral(value: object, neutral: object) -> bool:
    if neutral is None:
        return value is None or value == {} or value == []
    if isinstance(neutral, float):
        return isinstance(value, (int, float)) and float(value) == neutral
    if neutral is True or neutral is False:
        return value is neutral
    return bool(value == neutral)


def _check_number(name: str, v: object, lo: float, hi: float, *, low_open: bool) -> None:
    ok = False
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        ok = (v > lo if low_open else v >= lo) and v <= hi
    if not ok:
        lo_bracket = "(" if low_open else "["
        hi_text = "inf)" if hi == math.inf else f"{hi:g}]"
        raise ValueError(f"{name} must be a finite number in {lo_bracket}{lo:g}, {hi_text} "
                         f"(got {v!r})")

"""What folio.LLM and folio.AsyncLLM return: vLLM's output classes.

``RequestOutput.outputs`` holds one ``CompletionOutput`` per sample
(SamplingParams.n), by index. Text, token ids and log-probs are cumulative:
each streamed RequestOutput of AsyncLLM.generate holds everything generated
so far (vLLM's default, ``RequestOutputKind.CUMULATIVE``), and the last one
has ``finished`` set and every sample's ``finish_reason``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union


@dataclass
class Logprob:
    """One token's log-probability (vLLM's ``Logprob``).

    rank is 1 for the most likely token; folio knows ranks among the
    returned alternatives only, so the sampled token's rank is None when it
    is not among them.
    """

    logprob: float
    rank: Optional[int] = None
    decoded_token: Optional[str] = None


#: Per generated token: {token id: Logprob} for the sampled token and the
#: requested alternatives (vLLM's ``SampleLogprobs``). None for a position
#: whose log-probs this engine never saw (tokens generated before a KV
#: snapshot was imported).
PositionLogprobs = Optional[Dict[int, Logprob]]


@dataclass
class FunctionCall:
    """The function a tool call names and its arguments: JSON text of an
    object, as the OpenAI API and vLLM's ``FunctionCall`` carry them."""

    name: str
    arguments: str


@dataclass
class ToolCall:
    """One tool call of a chat reply (vLLM's and OpenAI's ``ToolCall``)."""

    id: str
    function: FunctionCall
    type: str = "function"


@dataclass
class CompletionOutput:
    """One completion of a request (vLLM's ``CompletionOutput``).

    text: the detokenized output, ending before a stop string; special
    tokens skipped. token_ids: every generated token, a stop token included.
    cumulative_logprob: the sum of the sampled tokens' log-probabilities,
    None unless SamplingParams.logprobs was set. finish_reason: None while
    running, then "stop" (a stop string or token, or end of sequence),
    "length" (max_tokens) or "abort". stop_reason: the stop token id that
    finished it, when one did. rng_state (folio's own): the sample's random
    stream after its last token (None before the first); with token_ids and
    text, what AsyncLLM.resume needs to continue it on another engine.

    LLM.chat also reads the reply as ``folio serve`` does
    (docs/tool-calling.md): content (the text without reasoning or tool
    calls; None when it is empty and there are calls), reasoning_content
    (a <think> block, when the chat template writes them; else None) and
    tool_calls (the calls parsed, [] when there are none; None when the
    request offered no tools). generate leaves the three None.
    """

    index: int
    text: str
    token_ids: List[int]
    cumulative_logprob: Optional[float]
    logprobs: Optional[List[PositionLogprobs]]
    finish_reason: Optional[str] = None
    stop_reason: Union[int, str, None] = None
    rng_state: Optional[int] = field(default=None, repr=False)
    content: Optional[str] = None
    reasoning_content: Optional[str] = None
    tool_calls: Optional[List[ToolCall]] = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """A request's prompt and its outputs so far (vLLM's ``RequestOutput``).

    prompt is None for a request given as token ids.
    """

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput]
    finished: bool
    prompt_logprobs: None = None
    metrics: Optional[Dict[str, float]] = field(default=None, repr=False)


@dataclass
class EmbeddingOutput:
    """A prompt's pooled vector (vLLM's ``EmbeddingOutput``)."""

    embedding: List[float]


@dataclass
class EmbeddingRequestOutput:
    """What LLM.embed returns per prompt (vLLM's ``EmbeddingRequestOutput``).

    prompt is None for a request given as token ids.
    """

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    outputs: EmbeddingOutput
    finished: bool = True


@dataclass
class ScoringOutput:
    """A text pair's relevance (vLLM's ``ScoringOutput``): the sigmoid of a
    cross-encoder's logit, in (0, 1)."""

    score: float


@dataclass
class ScoringRequestOutput:
    """What LLM.score returns per pair (vLLM's ``ScoringRequestOutput``);
    prompt_token_ids is the pair as encoded ([CLS] a [SEP] b [SEP])."""

    request_id: str
    prompt_token_ids: List[int]
    outputs: ScoringOutput
    finished: bool = True

"""One cluster replica: a Ray actor holding one folio engine (AsyncLLM).

The actor's methods are asyncio coroutines (Ray runs them on the actor's
event loop, so its engine's events are read there, as AsyncLLM expects);
streams are Ray streaming generators of cumulative RequestOutputs. A
snapshot handed from a prefill replica to a decode replica travels as a
NumPy uint8 array through Ray's object store: the driver only passes its
reference on, so the bytes go from one actor to the other directly.
"""
from __future__ import annotations

import os
from typing import Any, AsyncGenerator, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import ray

from folio.async_llm import AsyncLLM
from folio.outputs import CompletionOutput, RequestOutput
from folio.sampling_params import SamplingParams


class Replica:
    """An engine for the cluster (wrapped by ray.remote in Cluster).

    model and engine_options: AsyncLLM's arguments.
    """

    def __init__(self, model: str, engine_options: Mapping[str, Any]) -> None:
        self.llm = AsyncLLM(model, **dict(engine_options))

    async def ready(self) -> Dict[str, Any]:
        """The engine's shape (model_info), this process's id and its node's
        address."""
        info = dict(self.llm.model_info)
        info["pid"] = os.getpid()
        info["node_ip"] = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]
        return info

    async def prepare(self, prompt: Any, messages: Optional[Sequence[Mapping[str, Any]]],
                      sampling_params: SamplingParams) -> Tuple[Optional[str], List[int], List[int]]:
        """Checks a request as the engine would (ValueError naming what is
        wrong) and returns (prompt text, prompt ids, extra stop ids): a chat
        is rendered with the model's template, whose end-of-turn ids then
        stop it."""
        core = self.llm._core
        stops: List[int] = []
        if messages is not None:
            [(prompt, stops)] = core.chat_prompts(messages)
        r, _ = core.make_request(prompt, sampling_params, None, stops)
        return r.prompt, list(r.prompt_token_ids), [int(t) for t in stops]

    async def generate(self, prompt_token_ids: List[int], sampling_params: SamplingParams,
                       request_id: str, resume_from: Optional[CompletionOutput] = None
                       ) -> AsyncGenerator[RequestOutput, None]:
        """Streams a request, or continues one from what its client saw
        (resume_from: its last CompletionOutput, from a replica that died)."""
        if resume_from is None:
            stream = self.llm.generate(prompt_token_ids, sampling_params, request_id)
        else:
            stream = self.llm.resume(prompt_token_ids, resume_from, sampling_params, request_id)
        async for out in stream:
            yield out

    @ray.method(num_returns=2)
    async def prefill(self, prompt_token_ids: List[int], sampling_params: SamplingParams,
                      request_id: str
                      ) -> Tuple[Optional[np.ndarray], Tuple[RequestOutput, int]]:
        """Runs the prompt to its first token and exports the request
        (AsyncLLM.prefill). Two object references: the snapshot as a uint8
        array (None when the request already finished), and (the output so
        far, the snapshot's bytes), so a caller can wait for the small one
        and pass the large one on."""
        data, out = await self.llm.prefill(prompt_token_ids, sampling_params, request_id)
        if data is None:
            return None, (out, 0)
        return np.frombuffer(data, dtype=np.uint8), (out, len(data))

    async def decode(self, snapshot: np.ndarray, request_id: str
                     ) -> AsyncGenerator[RequestOutput, None]:
        """Continues a prefill replica's snapshot here, streaming."""
        [stream] = self.llm.import_kv(snapshot.tobytes(), [request_id])  # one copy
        async for out in stream:
            yield out

    async def stats(self) -> Dict[str, float]:
        return dict(self.llm.stats())

"""folio.AsyncLLM: streaming generation for asyncio servers, in the shape of
vLLM's ``AsyncLLMEngine`` / ``AsyncLLM``.

    engine = AsyncLLM("builtin")
    async for out in engine.generate("a", SamplingParams(max_tokens=8), "req-1"):
        print(out.outputs[0].text)      # cumulative: all the text so far

Every request shares one continuous-batching engine that runs on its own C++
thread, computing with the interpreter's lock released. The thread never
calls into Python: it writes a byte to a pipe when events wait, and the
event loop (``loop.add_reader``) takes them and hands each to its request's
stream. An AsyncLLM serves one event loop at a time: the one that used it
first, or a later one once that is closed.

Outputs are cumulative (vLLM's default ``RequestOutputKind.CUMULATIVE``):
each RequestOutput holds all the text, token ids and log-probs so far. A
consumer slower than the engine gets the steps it missed merged into its
next output; nothing is lost, and the last output has ``finished`` set.
"""
from __future__ import annotations

import asyncio
import os
from typing import (Any, AsyncGenerator, Dict, List, Mapping, Optional, Sequence, Set, Tuple,
                    Type, Union)

from folio._engine import ChatMessage, EngineCore, Event, PromptType, Request, Tokenizer
from folio.outputs import (CompletionOutput, EmbeddingRequestOutput, RequestOutput,
                           ScoringRequestOutput)
from folio.pooling_params import PoolingParams
from folio.sampling_params import SamplingParams


class AsyncLLM:
    """A model and its engine for concurrent, streamed requests.

    Takes folio.LLM's arguments. Use ``async with AsyncLLM(...) as engine:``
    or call shutdown() when done.
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
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._queues: Dict[int, "asyncio.Queue[Event]"] = {}
        self._keys: Dict[str, int] = {}  # request id -> engine key, while streamed
        self._ended: Set[int] = set()  # streamed keys whose last event was taken
        self._finals: Dict[int, "asyncio.Future[None]"] = {}  # abort() waits for these
        self._closed = False

    # ------------------------------------------------------------ streams

    async def generate(self, prompt: PromptType, sampling_params: Optional[SamplingParams] = None,
                       request_id: Optional[str] = None) -> AsyncGenerator[RequestOutput, None]:
        """Streams one request's RequestOutputs until it finishes.

        prompt: text, token ids or a vLLM prompt dict. request_id: unique
        among running requests (default: a fresh number). ValueError for a
        bad request, raised before anything runs. Leaving the loop early
        (break, cancellation) aborts the request. An aborted request's last
        output has finish_reason "abort".
        """
        self._attach()
        if request_id is not None and request_id in self._keys:
            raise ValueError(f"request_id {request_id!r} is already running")
        r, native = self._core.make_request(prompt, sampling_params or SamplingParams(),
                                            request_id)
        async for out in self._stream(r, lambda: self._core.native.submit(
                r.key, r.prompt_token_ids, native)):
            yield out

    async def chat(self, messages: Sequence[ChatMessage],
                   sampling_params: Optional[SamplingParams] = None,
                   request_id: Optional[str] = None, *, chat_template: Optional[str] = None,
                   chat_template_kwargs: Optional[Dict[str, Any]] = None,
                   tools: Optional[Sequence[Mapping[str, Any]]] = None,
                   tool_choice: Union[str, Mapping[str, Any], None] = None,
                   parallel_tool_calls: Optional[bool] = None
                   ) -> AsyncGenerator[RequestOutput, None]:
        """As generate(), for one conversation prepared as LLM.chat prepares
        it, tools included. The last output (``finished``) has each
        completion's content, reasoning_content and tool_calls, read as
        LLM.chat reads them; earlier ones carry the text so far (a call is
        known only once its reply is whole)."""
        self._attach()
        if request_id is not None and request_id in self._keys:
            raise ValueError(f"request_id {request_id!r} is already running")
        fields = EngineCore.chat_fields(tools, tool_choice, parallel_tool_calls,
                                        chat_template_kwargs)
        chats = self._core.chat_requests(messages, chat_template, fields)
        if len(chats) != 1:
            raise ValueError("AsyncLLM.chat takes one conversation (a list of messages)")
        [c] = chats
        r, native = self._core.make_request(c.prompt, sampling_params or SamplingParams(),
                                            request_id, c.stops, c.grammar, c.special_text)
        async for out in self._stream(r, lambda: self._core.native.submit(
                r.key, r.prompt_token_ids, native)):
            if out.finished:
                c.read(out)
            yield out

    async def embed(self, prompt: PromptType, pooling_params: Optional[PoolingParams] = None,
                    request_id: Optional[str] = None) -> EmbeddingRequestOutput:
        """LLM.embed for one prompt: its pooled vector once its prefill is
        done, batched with everything else the engine runs."""
        self._attach()
        if request_id is not None and request_id in self._keys:
            raise ValueError(f"request_id {request_id!r} is already running")
        r, native = self._core.make_embed_request(prompt, pooling_params, request_id)
        async for _ in self._stream(r, lambda: self._core.native.submit(
                r.key, r.prompt_token_ids, native)):
            pass
        return r.embedding_output()

    async def score(self, text_1: str, text_2: str,
                    request_id: Optional[str] = None) -> ScoringRequestOutput:
        """LLM.score for one text pair: a cross-encoder's relevance, sigmoid
        of its logit, once the pair's prefill is done."""
        self._attach()
        if request_id is not None and request_id in self._keys:
            raise ValueError(f"request_id {request_id!r} is already running")
        r, native = self._core.make_score_request(text_1, text_2, request_id)
        async for _ in self._stream(r, lambda: self._core.native.submit(
                r.key, r.prompt_token_ids, native)):
            pass
        return r.score_output()

    async def _stream(self, r: Request, start: Any) -> AsyncGenerator[RequestOutput, None]:
        queue: "asyncio.Queue[Event]" = asyncio.Queue()
        self._queues[r.key] = queue
        self._keys[r.request_id] = r.key
        try:
            if start is not None:
                start()
            while not r.finished:
                r.apply(await queue.get(), self._core.token_text)
                while not queue.empty() and not r.finished:
                    r.apply(queue.get_nowait(), self._core.token_text)
                if r.error is not None:
                    raise RuntimeError(f"request {r.request_id}: {r.error}")
                yield r.output()
        finally:
            self._queues.pop(r.key, None)
            self._keys.pop(r.request_id, None)
            self._ended.discard(r.key)
            if not r.finished and not self._closed:
                self._core.native.abort(r.key)

    async def abort(self, request_id: Union[str, Sequence[str]]) -> None:
        """Ends running requests and frees their pages; returns once the
        engine has done so. Their streams end with finish_reason "abort" (or
        their own, if they finished first). Unknown ids are ignored."""
        ids = [request_id] if isinstance(request_id, str) else list(request_id)
        waits = []
        for rid in ids:
            key = self._keys.get(rid)
            if key is None or key in self._ended or self._closed:
                continue
            final = self._finals.get(key)
            if final is None:
                final = self._finals[key] = asyncio.get_running_loop().create_future()
            self._core.native.abort(key)
            waits.append(final)
        if waits:
            await asyncio.gather(*waits)

    # ------------------------------------------------------------ KV snapshots

    async def export_kv(self, request_ids: Union[str, Sequence[str]],
                        path: Union[str, "os.PathLike[str]", None] = None) -> bytes:
        """Running requests' K/V pages and state as KV snapshot bytes (also
        written to path when given); they keep running here (abort them to
        hand them off). ValueError for a request that is not running (still
        waiting for pages, finished, or unknown)."""
        ids = [request_ids] if isinstance(request_ids, str) else list(request_ids)
        keys = []
        for rid in ids:
            if rid not in self._keys:
                raise ValueError(f"request {rid!r} is not running")
            keys.append(self._keys[rid])
        loop = asyncio.get_running_loop()
        data, _ = await loop.run_in_executor(None, self._core.native.export_kv, keys, False)
        if path is not None:
            with open(os.fspath(path), "wb") as f:
                f.write(data)
        return bytes(data)

    def import_kv(self, snapshot: Union[bytes, str, "os.PathLike[str]"],
                  request_ids: Optional[Sequence[str]] = None
                  ) -> List[AsyncGenerator[RequestOutput, None]]:
        """Continues a KV snapshot's requests here; one stream each, in the
        snapshot's order. Their outputs include the tokens and text generated
        before the export; log-probs only for tokens generated here. Blocks
        the event loop for at most one engine step. ValueError when the
        snapshot does not fit this engine (nothing changes then)."""
        self._attach()
        for rid in request_ids or []:
            if rid in self._keys:
                raise ValueError(f"request_id {rid!r} is already running")
        reqs = self._core.import_requests(snapshot, request_ids)
        return [self._stream(r, None) for r in reqs]

    async def prefill(self, prompt: PromptType, sampling_params: Optional[SamplingParams] = None,
                      request_id: Optional[str] = None, *, decode_tokens: int = 1
                      ) -> Tuple[Optional[bytes], RequestOutput]:
        """Prefill here, decode elsewhere, for one request: runs it until it
        has generated decode_tokens tokens, then, between two engine steps,
        exports its K/V pages and state as KV snapshot bytes and drops it
        here. Returns (snapshot, the output so far); another engine
        continues the snapshot with import_kv bit for bit. When the request
        finishes first, the snapshot is None and the output is final.
        ValueError for a bad request (as generate) or a KV dtype snapshots
        cannot carry.
        """
        if not isinstance(decode_tokens, int) or decode_tokens < 1:
            raise ValueError(f"decode_tokens must be an integer >= 1 (got {decode_tokens!r})")
        self._attach()
        if request_id is not None and request_id in self._keys:
            raise ValueError(f"request_id {request_id!r} is already running")
        r, native = self._core.make_request(prompt, sampling_params or SamplingParams(),
                                            request_id)
        loop = asyncio.get_running_loop()
        done: "Optional[asyncio.Future[Tuple[bytes, List[int]]]]" = None

        def start() -> None:  # once the stream listens; submitted with the export
            nonlocal done
            done = loop.run_in_executor(None, self._core.native.export_when, [r.key],
                                        [r.prompt_token_ids], [native], decode_tokens)

        last: Optional[RequestOutput] = None
        try:
            async for out in self._stream(r, start):  # finished, or aborted once exported
                last = out
        finally:
            if done is not None:
                data, exported = await done
        assert last is not None
        if not exported:
            return None, last
        for c in last.outputs:  # it goes on elsewhere
            c.finish_reason = None
        last.finished = False
        return bytes(data), last

    def resume(self, prompt_token_ids: Sequence[int], output: CompletionOutput,
               sampling_params: SamplingParams, request_id: Optional[str] = None
               ) -> AsyncGenerator[RequestOutput, None]:
        """Continues a request whose engine is gone (a replica that died)
        from what its client saw: output is its last CompletionOutput
        (token_ids, text and rng_state; text_sent = the bytes of text). The
        K/V of prompt and output are recomputed here and the stream goes on
        exactly as the first engine's would have, given the same model,
        sampling_params and seed (set SamplingParams.seed: an engine draws
        its own otherwise). One stream, whose outputs include the earlier
        tokens and text; log-probs only for tokens generated here. One
        sample only (n = 1, no beam search). ValueError when it cannot
        continue (nothing changes then).
        """
        self._attach()
        if request_id is not None and request_id in self._keys:
            raise ValueError(f"request_id {request_id!r} is already running")
        if output.token_ids and output.rng_state is None:
            raise ValueError("output has tokens but no rng_state: the random stream's state "
                             "after its last token (CompletionOutput.rng_state) is needed")
        r, native = self._core.make_request(list(prompt_token_ids), sampling_params, request_id)
        rng_state = output.rng_state if output.rng_state is not None else native.seed
        tokens = [int(t) for t in output.token_ids]
        self._core.native.resume(r.key, r.prompt_token_ids, tokens, native, rng_state,
                                 len(output.text.encode("utf-8")))
        r.samples[0].token_ids = list(tokens)
        r.samples[0].text = output.text
        r.samples[0].rng_state = output.rng_state
        if r.samples[0].logprobs is not None:
            r.samples[0].logprobs = None  # earlier positions are unknown here
            r.samples[0].cumulative_logprob = None
        return self._stream(r, None)

    # ------------------------------------------------------------ the engine

    def get_tokenizer(self) -> Tokenizer:
        return self._core.tokenizer

    @property
    def tokenizer(self) -> Tokenizer:
        return self._core.tokenizer

    @property
    def model_info(self) -> Dict[str, Any]:
        return dict(self._core.info)

    def stats(self) -> Dict[str, Union[int, float]]:
        """As LLM.stats()."""
        return self._core.stats()

    def reset_prefix_cache(self) -> bool:
        return bool(self._core.native.reset_prefix_cache())

    @property
    def is_running(self) -> bool:
        return not self._closed

    def shutdown(self) -> None:
        """Aborts what is still running (each stream ends with "abort") and
        stops the engine thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._core.native.shutdown()
        self._on_events()
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._core.native.notify_fd)

    async def __aenter__(self) -> "AsyncLLM":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                        tb: Any) -> None:
        self.shutdown()

    def _attach(self) -> None:
        if self._closed:
            raise RuntimeError("the AsyncLLM was shut down")
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        if self._loop is not None and not self._loop.is_closed():
            raise RuntimeError("an AsyncLLM serves one event loop at a time (the first that "
                               "used it is still open)")
        self._loop = loop  # the first loop, or one after the last closed
        self._queues.clear()
        self._keys.clear()
        self._ended.clear()
        self._finals.clear()
        loop.add_reader(self._core.native.notify_fd, self._on_events)

    def _on_events(self) -> None:
        for event in self._core.native.take():
            key = event[0]
            queue = self._queues.get(key)
            if queue is not None:
                queue.put_nowait(event)
            if event[7]:  # its last event
                if queue is not None:
                    self._ended.add(key)
                final = self._finals.pop(key, None)
                if final is not None and not final.done():
                    final.set_result(None)

"""An OpenAI-compatible HTTP endpoint in front of a folio.cluster.Cluster.

    cluster = Cluster("model.gguf", num_replicas=4)
    server = ClusterServer(cluster, "model.gguf")
    await server.start("127.0.0.1", 8000)      # POST /v1/completions, ...

Requests are checked by `folio serve`'s own code (folio._folio.FrontEnd: the
same parser, limits and error bodies, with the model's tokenizer and chat
template loaded here, its weights never used), and replies are written by
the same response layer: whole JSON bodies, or server-sent events ending in
[DONE], with the X-Folio-Seed header. Only the generation runs elsewhere, on
the cluster's replicas. Routes: POST /v1/completions and
/v1/chat/completions, GET /v1/models, /health and /metrics (the cluster's
metrics in Prometheus' text format). A request the cluster cannot take
gets 429 (every replica full) or 503 (none alive) with Retry-After, as
folio serve answers when its queue is full. The HTTP server is aiohttp's.
"""
from __future__ import annotations

import asyncio
import os
from typing import Any, Dict, List, Optional, Tuple

from aiohttp import web

from folio import _folio
from folio.cluster.cluster import Cluster, Overloaded, Unavailable
from folio.outputs import CompletionOutput
from folio.sampling_params import SamplingParams

_Reply = Tuple[int, str, str, List[Tuple[str, str]]]


class ClusterServer:
    """The HTTP front end of one cluster.

    model: the cluster's model (a path, or "builtin"), loaded here for its
    tokenizer and chat template; served_model_name: the name requests must
    use (default: as folio serve's); default_max_tokens: a chat request's
    max_tokens when it gives none, at most (0: the rest of the context), as
    folio serve's --default-max-tokens.
    """

    def __init__(self, cluster: Cluster, model: str = "builtin", *,
                 served_model_name: Optional[str] = None, builtin_context: int = 512,
                 tokenizer_pre: Optional[str] = None, default_max_tokens: int = 4096) -> None:
        self.cluster = cluster
        info = cluster.model_info
        self.frontend = _folio.FrontEnd(
            os.fspath(model), builtin_context, tokenizer_pre, served_model_name,
            int(info["num_pages"]) * int(info["page_size"]), default_max_tokens)
        self.app = web.Application()
        self.app.add_routes([
            web.post("/v1/completions", self._completions),
            web.post("/v1/chat/completions", self._chat),
            web.get("/v1/models", self._models),
            web.get("/health", self._health),
            web.get("/metrics", self._metrics),
        ])
        self._runner: Optional[web.AppRunner] = None
        self.port: Optional[int] = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        """Listens (port 0: any free port); returns the port."""
        self._runner = web.AppRunner(self.app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, port).start()
        self.port = int(self._runner.addresses[0][1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ------------------------------------------------------------ routes

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "completions")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "chat")

    async def _models(self, request: web.Request) -> web.Response:
        return web.Response(text=self.frontend.models_body(), content_type="application/json")

    async def _health(self, request: web.Request) -> web.Response:
        up = any(self.cluster.replica_alive(i) for i in range(len(self.cluster.pids)))
        return web.json_response({"status": "ok" if up else "unavailable"},
                                 status=200 if up else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=_prometheus(await self.cluster.metrics()),
                            content_type="text/plain")

    async def _generate(self, request: web.Request, endpoint: str) -> web.StreamResponse:
        body = await request.read()
        # Tokenizing a long prompt takes a while: off the event loop.
        got = await asyncio.get_running_loop().run_in_executor(
            None, self.frontend.submit, endpoint, body)
        if isinstance(got, tuple):
            return _reply(got)
        gen = got
        p = gen.params
        if p["n"] != 1 or p["num_beams"]:
            return _refused(gen, "the cluster serves one sample per request (n = 1, no beam "
                            "search)")
        sp = SamplingParams._from_engine(p)
        stream = self.cluster.generate({"prompt_token_ids": list(gen.prompt_token_ids)}, sp)
        try:
            first = await stream.__anext__()
        except Overloaded as e:
            return _reply(self.frontend.refusal(429, str(e)))
        except Unavailable as e:
            return _reply(self.frontend.refusal(503, str(e)))
        except ValueError as e:
            return _refused(gen, str(e))
        gen.accept(len(gen.prompt_token_ids))
        response: Optional[web.StreamResponse] = None
        if gen.stream:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                                   "Cache-Control": "no-cache",
                                                   "X-Folio-Seed": str(gen.seed)})
            await response.prepare(request)
        sent: Optional[CompletionOutput] = None
        out = first
        try:
            while True:
                c = out.outputs[0]
                reply, _, data, done = gen.output(*_delta(sent, c), c.finish_reason)
                sent = c
                if response is not None and data:
                    await response.write(data.encode())
                if done:
                    if reply is not None:
                        return _reply(reply)
                    break
                out = await stream.__anext__()
        except (Overloaded, Unavailable) as e:  # mid-stream: no replica left to go on
            reply, _, data, _ = gen.error(str(e))
            if response is None:
                assert reply is not None
                return _reply(reply)
            await response.write(data.encode())
        finally:
            await stream.aclose()
        assert response is not None
        await response.write_eof()
        return response


def _delta(sent: Optional[CompletionOutput], c: CompletionOutput
           ) -> Tuple[List[int], str, List[Tuple[int, float, List[Tuple[int, float]]]]]:
    """What a cumulative output adds to the last one sent: tokens, text and
    log-probs ([(token, logprob, alternatives by rank)])."""
    n = 0 if sent is None else len(sent.token_ids)
    text_from = 0 if sent is None else len(sent.text)
    logprobs = []
    for token, pos in zip(c.token_ids[n:], (c.logprobs or [])[n:]):
        if pos is None:
            continue
        top = sorted(((t, lp) for t, lp in pos.items() if lp.rank is not None),
                     key=lambda e: e[1].rank or 0)
        logprobs.append((token, pos[token].logprob, [(t, lp.logprob) for t, lp in top]))
    return list(c.token_ids[n:]), c.text[text_from:], logprobs


def _refused(gen: _folio.FrontEndGeneration, message: str) -> web.Response:
    """A request refused before it started: folio serve's whole error reply."""
    reply = gen.error(message)[0]
    assert reply is not None
    return _reply(reply)


def _reply(r: _Reply) -> web.Response:
    status, content_type, body, headers = r
    return web.Response(status=status, body=body.encode(), content_type=content_type,
                        headers=dict(headers))


def _prometheus(m: Dict[str, Any]) -> str:
    """The cluster's metrics as Prometheus text (folio_cluster_*)."""
    lines = []
    for key, value in m.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            lines.append(f"folio_cluster_{key} {float(value)}")
    for r in m["replicas"]:
        labels = f'{{replica="{r["index"]}",role="{r["role"]}"}}'
        lines.append(f"folio_cluster_replica_alive{labels} {1.0 if r['alive'] else 0.0}")
        for key in ("in_flight", "restarts", "failures"):
            lines.append(f"folio_cluster_replica_{key}{labels} {float(r[key])}")
        for key, value in (r["engine"] or {}).items():
            lines.append(f"folio_cluster_engine_{key}{labels} {float(value)}")
    return "\n".join(lines) + "\n"

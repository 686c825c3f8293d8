"""folio.cluster.Cluster: folio engines on Ray, behind one request API.

    import ray
    from folio.cluster import Cluster
    ray.init()
    cluster = Cluster("model.gguf", num_replicas=4)             # mixed
    cluster = Cluster("model.gguf", mode="disaggregated",
                      num_prefill=1, num_decode=3)              # prefill / decode
    async for out in cluster.generate("Hello", SamplingParams(max_tokens=32)):
        print(out.outputs[0].text)

Every request gets an explicit seed here (SamplingParams.seed, or one the
cluster draws), so whichever replica runs it, and however often it moves,
it produces the tokens and log-prob bits one engine alone would with that
seed (folio's determinism contract: results never depend on batch, pages,
chunking or threads).

- Mixed (default): each replica prefills and decodes; the PrefixRouter
  sends a request to the replica likely to hold its prompt's pages.
- Disaggregated: a prefill replica (picked by prefix) runs the prompt to
  its first token and exports the request as a KV snapshot into Ray's
  object store; a decode replica (the least loaded) imports it and streams
  the rest. The driver passes the snapshot's reference, not its bytes.
- Failures: a replica that dies mid-request (Ray reports the actor dead
  or unavailable) is taken out of routing and Ray restarts it; each of its
  requests continues on another replica from what the client already got
  (AsyncLLM.resume: its K/V recomputed from prompt and tokens, its random
  stream at the last state seen), so the client sees no token twice and
  none missing. A request that had produced nothing starts over; one
  whose snapshot was lost with its node before a decoder read it goes on
  from the prefill's first token the same way.
- Overload: a replica takes at most max_in_flight requests; a request that
  finds every live replica full raises Overloaded (HTTP 429), one that
  finds none alive raises Unavailable (HTTP 503).
"""
from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from typing import (Any, AsyncGenerator, Dict, List, Mapping, Optional, Sequence, Tuple,
                    Union)

import ray
from ray.exceptions import ActorDiedError, ActorUnavailableError, ObjectLostError, RayActorError

from folio.cluster.replica import Replica
from folio.cluster.router import PrefixRouter
from folio.outputs import CompletionOutput, RequestOutput
from folio.sampling_params import SamplingParams

#: The errors that mean "this replica is gone (for now)".
_REPLICA_LOST = (RayActorError, ActorDiedError, ActorUnavailableError)


class Overloaded(RuntimeError):
    """Every live replica has max_in_flight requests (HTTP 429)."""


class Unavailable(RuntimeError):
    """No replica is alive to take the request (HTTP 503)."""


@dataclasses.dataclass
class _Slot:
    """One replica: its actor handle and what the driver knows of it."""

    index: int
    role: str  # "mixed", "prefill" or "decode"
    actor: Any
    alive: bool = True
    in_flight: int = 0
    restarts: int = 0
    failures: int = 0


@dataclasses.dataclass
class _Seen:
    """What the client got of one request so far (its one completion)."""

    prompt: Optional[str]
    prompt_token_ids: List[int]
    output: Optional[CompletionOutput] = None
    logprobs: List[Any] = dataclasses.field(default_factory=list)
    snapshot: Any = None  # disaggregated: the prefill's snapshot, in the object store
    snapshot_bytes: int = 0


class Cluster:
    """Engine replicas as Ray actors, a prefix-aware router, and streams
    that survive replica failures.

    model: as folio.LLM's (every replica loads it; a path must exist on
    every node). mode: "mixed" (num_replicas replicas) or "disaggregated"
    (num_prefill + num_decode). engine_options: AsyncLLM's keyword
    arguments for each replica (threads, kv_bytes, page_size, ...; threads
    defaults to 1). replica_cpus: Ray CPUs reserved per actor (0 lets
    small test actors share a machine). placement: more Ray actor options
    per role ("mixed", "prefill", "decode"), e.g. {"decode": {"resources":
    {"gpu_node": 0.01}}} to put decoders on the nodes that offer that
    custom resource. max_in_flight: requests per replica before it
    counts as full (a request counts until its client has read its last
    output). max_restarts: Ray restarts of a dead replica.
    seed: draws the seeds of requests that have none. ray.init must have
    run (or runs with its defaults).
    """

    def __init__(self, model: str = "builtin", *, mode: str = "mixed", num_replicas: int = 2,
                 num_prefill: int = 1, num_decode: int = 1,
                 engine_options: Optional[Mapping[str, Any]] = None, replica_cpus: float = 1.0,
                 max_in_flight: int = 64, max_restarts: int = 2, seed: int = 0,
                 placement: Optional[Mapping[str, Mapping[str, Any]]] = None) -> None:
        if mode not in ("mixed", "disaggregated"):
            raise ValueError(f"mode must be 'mixed' or 'disaggregated' (got {mode!r})")
        roles = (["mixed"] * num_replicas if mode == "mixed"
                 else ["prefill"] * num_prefill + ["decode"] * num_decode)
        if mode == "mixed" and num_replicas < 1:
            raise ValueError(f"num_replicas must be >= 1 (got {num_replicas})")
        if mode == "disaggregated" and (num_prefill < 1 or num_decode < 1):
            raise ValueError("disaggregated serving needs num_prefill >= 1 and num_decode >= 1 "
                             f"(got {num_prefill}, {num_decode})")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1 (got {max_in_flight})")
        if not ray.is_initialized():
            ray.init()
        options = {"threads": 1, **dict(engine_options or {})}
        actor = ray.remote(Replica)
        base = {"num_cpus": replica_cpus, "max_restarts": max_restarts, "max_task_retries": 0,
                "max_concurrency": 1000}
        unknown = set(placement or {}) - set(roles)
        if unknown:
            raise ValueError(f"placement names roles this cluster does not have: "
                             f"{sorted(unknown)} (roles: {sorted(set(roles))})")
        self.mode = mode
        self.max_in_flight = max_in_flight
        self.handoff_wait_s = 30.0
        self._slots = [
            _Slot(i, role, actor.options(**{**base, **(placement or {}).get(role, {})})
                  .remote(model, options))
            for i, role in enumerate(roles)]
        infos = ray.get([s.actor.ready.remote() for s in self._slots])
        self.model_info: Dict[str, Any] = dict(infos[0])
        self.model_info.pop("pid")
        self.model_info.pop("node_ip")
        self._pids = [int(i["pid"]) for i in infos]
        self.node_ips = [str(i["node_ip"]) for i in infos]  # where each replica started
        self.router = PrefixRouter(len(self._slots), int(self.model_info["page_size"]),
                                   int(self.model_info["num_pages"]))
        self._seeds = random.Random(seed)
        self._next_id = 0
        self.handoff_bytes = 0  # snapshot bytes moved prefill -> decode
        self.handoffs = 0
        self.resumed = 0  # requests continued after a replica failed
        self.lost_snapshots = 0  # hand-offs whose snapshot was lost before the read
        self._streaming: Dict[str, int] = {}  # request id -> the replica streaming it
        self.rejected = 0  # Overloaded / Unavailable

    # ------------------------------------------------------------ requests

    async def generate(self, prompt: Union[str, Sequence[int], Mapping[str, Any]],
                       sampling_params: Optional[SamplingParams] = None,
                       request_id: Optional[str] = None
                       ) -> AsyncGenerator[RequestOutput, None]:
        """Streams one request's cumulative RequestOutputs, as
        AsyncLLM.generate does, wherever it runs. ValueError for a bad
        request; Overloaded / Unavailable when it cannot be taken."""
        async for out in self._serve(prompt, None, sampling_params, request_id):
            yield out

    async def chat(self, messages: Sequence[Mapping[str, Any]],
                   sampling_params: Optional[SamplingParams] = None,
                   request_id: Optional[str] = None) -> AsyncGenerator[RequestOutput, None]:
        """As generate, for a conversation (rendered by the model's chat
        template on a replica, as AsyncLLM.chat renders it)."""
        async for out in self._serve(None, messages, sampling_params, request_id):
            yield out

    async def _serve(self, prompt: Any, messages: Optional[Sequence[Mapping[str, Any]]],
                     sampling_params: Optional[SamplingParams], request_id: Optional[str]
                     ) -> AsyncGenerator[RequestOutput, None]:
        try:
            async for out in self._request(prompt, messages, sampling_params, request_id):
                yield out
        except (Overloaded, Unavailable):
            self.rejected += 1
            raise

    async def _request(self, prompt: Any, messages: Optional[Sequence[Mapping[str, Any]]],
                       sampling_params: Optional[SamplingParams], request_id: Optional[str]
                       ) -> AsyncGenerator[RequestOutput, None]:
        sp = sampling_params or SamplingParams()
        if sp.seed is None:  # one seed wherever it runs
            sp = dataclasses.replace(sp, seed=self._seeds.getrandbits(63))
        if (sp.best_of or sp.n) > 1 or sp.use_beam_search:
            raise ValueError("the cluster serves one sample per request (n = 1, no beam search)")
        rid = request_id if request_id is not None else f"c{self._next_id}"
        self._next_id += 1
        text, ids, stops = await self._prepare(prompt, messages, sp)
        if stops:
            sp = dataclasses.replace(sp, stop_token_ids=list(sp.stop_token_ids or []) + stops)
        seen = _Seen(text, ids)
        if self.mode == "disaggregated":
            # Refused now rather than after its prefill: a decoder must have room.
            self._with_room("decode")
            done = await self._prefill(seen, sp, rid)
            if done is not None:
                yield done
                return
            if seen.output is not None:
                yield self._client_view(rid, seen, False)
        async for out in self._decode_with_failover(seen, sp, rid):
            yield out

    async def _prepare(self, prompt: Any, messages: Any, sp: SamplingParams
                       ) -> Tuple[Optional[str], List[int], List[int]]:
        """Tokenizes and checks the request on a live replica."""
        while True:
            live = [s for s in self._slots if s.alive]
            if not live:
                raise Unavailable("no replica is alive")
            slot = self._least_loaded(live)
            try:
                text, ids, stops = await slot.actor.prepare.remote(prompt, messages, sp)
                return text, ids, stops
            except _REPLICA_LOST:
                self._lost(slot)

    async def _prefill(self, seen: _Seen, sp: SamplingParams, rid: str
                       ) -> Optional[RequestOutput]:
        """Disaggregated: runs the prompt on a prefill replica and leaves
        the snapshot's reference in seen; returns the output when the
        request already finished there."""
        while True:
            slot = self._route(seen.prompt_token_ids, "prefill")
            slot.in_flight += 1
            try:
                snapshot_ref, out_ref = slot.actor.prefill.options(num_returns=2).remote(
                    seen.prompt_token_ids, sp, rid)
                out, nbytes = await out_ref
            except _REPLICA_LOST:
                self._lost(slot)
                continue
            finally:
                slot.in_flight -= 1
            self._absorb(seen, out)
            if out.finished:
                return self._client_view(rid, seen, True)
            seen.snapshot = snapshot_ref
            seen.snapshot_bytes = nbytes
            return None

    async def _decode_with_failover(self, seen: _Seen, sp: SamplingParams, rid: str
                                    ) -> AsyncGenerator[RequestOutput, None]:
        role = "decode" if self.mode == "disaggregated" else "mixed"
        while True:
            handed_off = seen.snapshot is not None
            if handed_off:
                slot = await self._decoder_for_handoff()
                stream = slot.actor.decode.remote(seen.snapshot, rid)
                self.handoffs += 1
                self.handoff_bytes += seen.snapshot_bytes
                seen.snapshot = None  # taken (or lost with the replica)
            else:
                slot = self._route(seen.prompt_token_ids, role)
                if seen.output is not None:
                    self.resumed += 1
                stream = slot.actor.generate.remote(seen.prompt_token_ids, sp, rid, seen.output)
            slot.in_flight += 1
            self._streaming[rid] = slot.index
            finished = False
            try:
                async for ref in stream:
                    out: RequestOutput = await ref
                    if self._absorb(seen, out) or out.finished:
                        finished = out.finished
                        yield self._client_view(rid, seen, finished)
                    if finished:
                        return
                return
            except _REPLICA_LOST:
                self._lost(slot)
            except ObjectLostError:
                if not handed_off:
                    raise
                # The snapshot went with its node before the decoder read it:
                # recompute from what the client saw (the prefill's tokens).
                self.lost_snapshots += 1
            finally:
                slot.in_flight -= 1
                self._streaming.pop(rid, None)
                if not finished:  # the client left, or the replica died
                    ray.cancel(stream)

    async def _decoder_for_handoff(self) -> _Slot:
        """A decode replica with room for a prefilled request: admitted
        already, it waits (up to handoff_wait_s) rather than fail when every
        decoder filled up during its prefill."""
        deadline = time.monotonic() + self.handoff_wait_s
        while True:
            try:
                return self._least_loaded(self._with_room("decode"))
            except Overloaded:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.02)

    # ------------------------------------------------------------ outputs

    @staticmethod
    def _absorb(seen: _Seen, out: RequestOutput) -> bool:
        """Takes a replica's cumulative output; True when it adds tokens.
        Log-probs of positions generated elsewhere (before a hand-off or a
        failure) are kept from before."""
        c = out.outputs[0]
        before = 0 if seen.output is None else len(seen.output.token_ids)
        if c.logprobs is not None:
            merged = list(seen.logprobs) + [None] * (len(c.token_ids) - len(seen.logprobs))
            for i, pos in enumerate(c.logprobs):
                if pos is not None:
                    merged[i] = pos
            seen.logprobs = merged[:len(c.token_ids)]
        seen.output = c
        return len(c.token_ids) > before

    @staticmethod
    def _client_view(rid: str, seen: _Seen, finished: bool) -> RequestOutput:
        c = seen.output
        assert c is not None
        logprobs = None
        cumulative = None
        if c.logprobs is not None:
            logprobs = list(seen.logprobs)
            cumulative = 0.0
            for tok, pos in zip(c.token_ids, logprobs):
                if pos is not None:
                    cumulative += pos[tok].logprob
        view = dataclasses.replace(c, token_ids=list(c.token_ids), logprobs=logprobs,
                                   cumulative_logprob=cumulative)
        return RequestOutput(request_id=rid, prompt=seen.prompt,
                             prompt_token_ids=list(seen.prompt_token_ids), outputs=[view],
                             finished=finished)

    # ------------------------------------------------------------ replicas

    def _with_room(self, role: str) -> List[_Slot]:
        """The live replicas of a role with fewer than max_in_flight
        requests. Unavailable when none of the role is alive, Overloaded
        when every one is full."""
        slots = [s for s in self._slots if s.alive and s.role == role]
        name = "" if role == "mixed" else f"{role} "
        if not slots:
            raise Unavailable(f"no {name}replica is alive")
        room = [s for s in slots if s.in_flight < self.max_in_flight]
        if not room:
            raise Overloaded(f"every {name}replica has {self.max_in_flight} requests in flight")
        return room

    @staticmethod
    def _least_loaded(slots: Sequence[_Slot]) -> _Slot:
        return min(slots, key=lambda s: (s.in_flight, s.index))

    def _route(self, token_ids: Sequence[int], role: str) -> _Slot:
        """The replica of a role the router picks for a prompt, among those
        with room."""
        room = [s.index for s in self._with_room(role)]
        route = self.router.route(token_ids, [s.in_flight for s in self._slots], room)
        return self._slots[route.replica]

    def _lost(self, slot: _Slot) -> None:
        """A call to slot's actor failed: out of routing until Ray has
        restarted it (its prefix cache is empty then)."""
        slot.failures += 1
        self.router.forget(slot.index)
        if not slot.alive:
            return
        slot.alive = False
        asyncio.get_running_loop().create_task(self._revive(slot))

    async def _revive(self, slot: _Slot) -> None:
        deadline = time.monotonic() + 120.0
        while time.monotonic() < deadline:
            try:
                info = await slot.actor.ready.remote()
            except ActorDiedError:
                return  # out of restarts: it stays out
            except _REPLICA_LOST:
                await asyncio.sleep(0.2)
                continue
            self._pids[slot.index] = int(info["pid"])
            self.node_ips[slot.index] = str(info["node_ip"])
            slot.restarts += 1
            slot.alive = True
            return

    # ------------------------------------------------------------ the cluster

    @property
    def pids(self) -> List[int]:
        """Each replica's process id (as of its last start)."""
        return list(self._pids)

    def replica_alive(self, index: int) -> bool:
        return self._slots[index].alive

    def replica_of(self, request_id: str) -> Optional[int]:
        """The replica streaming request_id now (None before its stream
        starts, between replicas, and once it ended)."""
        return self._streaming.get(request_id)

    async def replica_stats(self) -> List[Optional[Dict[str, float]]]:
        """Each replica's engine counters (LLM.stats()); None for one that
        is down."""
        out: List[Optional[Dict[str, float]]] = []
        for s in self._slots:
            if not s.alive:
                out.append(None)
                continue
            try:
                out.append(await s.actor.stats.remote())
            except _REPLICA_LOST:
                self._lost(s)
                out.append(None)
        return out

    async def metrics(self) -> Dict[str, Any]:
        """The router's decisions and predicted hit rate, hand-offs,
        failovers, and each replica's role, load and engine counters (its
        measured prefix_cache_hit_rate among them)."""
        stats = await self.replica_stats()
        return {
            "mode": self.mode,
            **self.router.metrics(),
            "handoffs": self.handoffs,
            "handoff_bytes": self.handoff_bytes,
            "resumed_requests": self.resumed,
            "lost_snapshots": self.lost_snapshots,
            "rejected_requests": self.rejected,
            "replicas": [
                {"index": s.index, "role": s.role, "alive": s.alive, "in_flight": s.in_flight,
                 "restarts": s.restarts, "failures": s.failures, "engine": st}
                for s, st in zip(self._slots, stats)],
        }

    def shutdown(self) -> None:
        """Stops every replica (their engines abort what still runs)."""
        for s in self._slots:
            ray.kill(s.actor, no_restart=True)
        self._slots = []

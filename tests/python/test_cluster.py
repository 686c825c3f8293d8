"""folio.cluster on a local Ray cluster that the tests start themselves
(ray.init with this machine's CPUs, small actors sharing them), stopped
afterwards: prefix routing, disaggregated prefill/decode through Ray's
object store, a replica killed mid-stream, overload. Every result is
compared with one engine alone on the same seed, bit for bit."""
import asyncio
import http.client
import json
import dataclasses
import os
import signal
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

pytest.importorskip("folio", reason="the folio extension is not built "
                    "(FOLIO_BUILD_PYTHON=OFF) or not on PYTHONPATH")
ray = pytest.importorskip("ray", reason="folio.cluster needs Ray (tools/setup.sh installs it)")

from folio import LLM, SamplingParams  # noqa: E402
from folio import _folio  # noqa: E402
from folio.cluster import Cluster, Overloaded, PrefixRouter, Unavailable  # noqa: E402
from folio.cluster.http import ClusterServer  # noqa: E402
from test_server import Server  # noqa: E402

# Small replicas: one compute thread each, the built-in model.
ENGINE = {"threads": 1, "page_size": 8, "num_pages": 256, "max_num_seqs": 8}
STEMS = ["The cluster routes requests by the pages of their prompts. " * 2,
         "A quite different stem that shares no page with the first one! " * 2]


@pytest.fixture(scope="module")
def ray_local():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR", configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def reference():
    """One engine alone, the replicas' configuration."""
    llm = LLM("builtin", **ENGINE)
    yield llm
    llm.shutdown()


def params(i, **kw):
    base = dict(temperature=0.8, top_k=40, seed=100 + i, max_tokens=24, logprobs=2)
    base.update(kw)
    return SamplingParams(**base)


def bits(c):
    return (c.token_ids, c.text, c.finish_reason,
            [None if p is None else sorted((t, lp.logprob) for t, lp in p.items())
             for p in c.logprobs or []])


async def collect(stream):
    """Every output of a stream, checking that each extends the last: no
    token repeated, none dropped, text only growing."""
    outs = []
    async for out in stream:
        if outs:
            prev = outs[-1].outputs[0]
            assert out.outputs[0].token_ids[:len(prev.token_ids)] == prev.token_ids
            assert out.outputs[0].text.startswith(prev.text)
        outs.append(out)
    assert outs[-1].finished
    return outs


async def settle(cluster):
    """The counters of each replica once every one is alive again and
    nothing runs (a request whose client left is aborted asynchronously)."""
    deadline = time.monotonic() + 60
    while True:
        stats = await cluster.replica_stats()
        idle = all(s is not None and s["num_running"] == 0 and s["num_waiting"] == 0
                   for s in stats)
        if idle or time.monotonic() > deadline:
            return stats
        await asyncio.sleep(0.1)


def assert_no_page_held(stats):
    for i, s in enumerate(stats):
        assert s is not None, f"replica {i} is down"
        assert s["pages_held_by_requests"] == 0, (i, s)
        assert s["num_running"] == 0 and s["num_waiting"] == 0, (i, s)


def test_router_prefers_the_pages_it_sent_and_balances():
    r = PrefixRouter(3, page_size=4, capacity_pages=6, balance_slack=2)
    a = list(range(10, 30))  # 5 whole pages
    assert r.hashes(a)[:2] == list(_folio.page_hashes(a[:8], 4))  # chained: prefix-stable
    assert r.hashes(a)[2] != r.hashes(a[:8] + [0] * 12)[2]
    first = r.route(a, [0, 0, 0], [0, 1, 2])
    assert (first.replica, first.reason, first.hit_pages) == (0, "least_loaded", 0)
    again = r.route(a + [1, 2, 3, 4], [2, 0, 0], [0, 1, 2])  # busier, but holds 5 pages
    assert (again.replica, again.reason, again.hit_pages, again.prompt_pages) == (0, "prefix", 5, 6)
    busy = r.route(a, [3, 0, 0], [0, 1, 2])  # beyond the slack: the least loaded
    assert (busy.replica, busy.reason) == (1, "balance")
    assert r.route(a, [0, 0, 0], [2]).replica == 2  # only candidates count
    other = r.route([7] * 8, [1, 1, 0], [0, 1])  # equal loads: the emptier cache
    assert (other.replica, other.reason) == (1, "least_loaded")
    assert r.held_pages(0) == 6  # capacity bounds what is remembered
    r.forget(0)
    assert r.held_pages(0) == 0
    m = r.metrics()
    assert (m["route_prefix"], m["route_balance"], m["route_least_loaded"]) == (1, 1, 3)
    assert m["predicted_hit_rate"] == 5 / 23
    with pytest.raises(ValueError):
        PrefixRouter(0, 4, 4)


def test_mixed_routes_by_prefix_and_matches_one_engine(ray_local, reference):
    prompts = [stem + tail for stem in STEMS for tail in ("one", "two", "three")]
    cluster = Cluster("builtin", num_replicas=2, engine_options=ENGINE, replica_cpus=0)
    try:
        async def main():
            outs = []
            for i, p in enumerate(prompts):  # one at a time: loads stay equal
                outs.append(await collect(cluster.generate(p, params(i))))
            return outs, await cluster.metrics(), await settle(cluster)

        outs, metrics, stats = asyncio.run(main())
    finally:
        cluster.shutdown()
    want = reference.generate(prompts, [params(i) for i in range(len(prompts))], use_tqdm=False)
    for got, w in zip(outs, want):
        assert bits(got[-1].outputs[0]) == bits(w.outputs[0])
        assert got[-1].prompt == w.prompt
    # The first of each stem goes to the least loaded replica, the rest follow it.
    assert metrics["route_prefix"] == 4 and metrics["route_least_loaded"] == 2
    hits = [r["engine"]["prefix_hit_tokens"] for r in metrics["replicas"]]
    assert all(h > 0 for h in hits), hits  # each replica served one stem's followers
    assert metrics["predicted_hit_rate"] > 0.5
    assert_no_page_held(stats)


def test_disaggregated_prefill_and_decode_equal_one_engine(ray_local, reference):
    prompts = [STEMS[0] + "x", STEMS[1] + "y", "short", STEMS[0] + "z"]
    sps = [params(0), params(1, stop=["e "]), params(2, max_tokens=1), params(3, temperature=0)]
    cluster = Cluster("builtin", mode="disaggregated", num_prefill=1, num_decode=2,
                      engine_options=ENGINE, replica_cpus=0)
    try:
        async def main():
            outs = await asyncio.gather(*[collect(cluster.generate(p, sp))
                                          for p, sp in zip(prompts, sps)])
            return outs, await cluster.metrics(), await settle(cluster)

        outs, metrics, stats = asyncio.run(main())
    finally:
        cluster.shutdown()
    want = reference.generate(prompts, sps, use_tqdm=False)
    for got, w in zip(outs, want):
        assert bits(got[-1].outputs[0]) == bits(w.outputs[0])
    # The one-token request finished on the prefill replica: 3 hand-offs.
    assert metrics["handoffs"] == 3 and metrics["handoff_bytes"] > 0
    assert outs[2][-1].outputs[0].finish_reason == "length"
    roles = [r["role"] for r in metrics["replicas"]]
    assert roles == ["prefill", "decode", "decode"]
    decode_tokens = [r["engine"]["decode_tokens"] for r in metrics["replicas"]]
    assert decode_tokens[0] == 0 and sum(decode_tokens[1:]) > 0  # prefill never decodes
    assert_no_page_held(stats)


def test_chat_renders_on_a_replica_and_equals_llm_chat(ray_local, reference):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    cluster = Cluster("builtin", mode="disaggregated", engine_options=ENGINE, replica_cpus=0)
    try:
        async def main():
            return await collect(cluster.chat(messages, params(5, max_tokens=12)))

        outs = asyncio.run(main())
        with pytest.raises(ValueError, match="role"):
            asyncio.run(collect(cluster.chat([{"role": "robot", "content": "x"}])))
        with pytest.raises(ValueError, match="one sample"):
            asyncio.run(collect(cluster.generate("x", SamplingParams(n=2))))
    finally:
        cluster.shutdown()
    [want] = reference.chat(messages, params(5, max_tokens=12), use_tqdm=False)
    assert outs[-1].prompt == want.prompt
    assert bits(outs[-1].outputs[0]) == bits(want.outputs[0])


@pytest.mark.parametrize("mode", ["mixed", "disaggregated"])
def test_a_replica_killed_mid_stream_loses_and_repeats_nothing(ray_local, reference, mode):
    """SIGKILL of the process of the replica streaming a request, once its
    client saw a few tokens (as a machine would crash): the request goes on
    on another replica from what the client saw, every token arrives once,
    and Ray restarts the replica. A second request runs beside it."""
    prompts = [STEMS[0] + "killed", STEMS[1] + "beside"]
    sps = [params(7, max_tokens=300), params(8, max_tokens=40, temperature=0)]
    kw = dict(num_replicas=2) if mode == "mixed" else \
        dict(mode="disaggregated", num_prefill=1, num_decode=2)
    # 2 ms per engine step: the request runs ~0.6 s, so its client sees it
    # mid-stream (the built-in model alone decodes 300 tokens in ~10 ms).
    cluster = Cluster("builtin", engine_options={**ENGINE, "step_delay_us": 2000},
                      replica_cpus=0, **kw)
    pids = cluster.pids
    try:
        async def main():
            killed = []

            async def run(i):
                outs = []
                async for out in cluster.generate(prompts[i], sps[i], f"r{i}"):
                    if outs:
                        prev = outs[-1].outputs[0]
                        assert out.outputs[0].token_ids[:len(prev.token_ids)] == prev.token_ids
                        assert out.outputs[0].text.startswith(prev.text)
                    outs.append(out)
                    victim = cluster.replica_of("r0")
                    if i == 0 and not killed and len(out.outputs[0].token_ids) >= 3 \
                            and not out.finished and victim is not None:
                        os.kill(pids[victim], signal.SIGKILL)
                        killed.append((victim, len(out.outputs[0].token_ids)))
                return outs

            outs = await asyncio.gather(run(0), run(1))
            return outs, killed, await settle(cluster), await cluster.metrics()

        outs, killed, stats, metrics = asyncio.run(main())
    finally:
        cluster.shutdown()
    [(victim, seen)] = killed
    assert seen < 300 and (mode == "mixed" or victim != 0)  # a decoder, mid-stream
    want = reference.generate(prompts, sps, use_tqdm=False)
    for got, w in zip(outs, want):
        assert got[-1].finished
        assert bits(got[-1].outputs[0]) == bits(w.outputs[0])
    assert metrics["resumed_requests"] == 1, metrics
    assert metrics["replicas"][victim]["failures"] >= 1
    assert metrics["replicas"][victim]["restarts"] == 1
    assert cluster.pids[victim] != pids[victim]  # Ray restarted it: a new process
    assert_no_page_held(stats)


def test_overload_and_no_replica_are_refused_clearly(ray_local):
    cluster = Cluster("builtin", num_replicas=1, engine_options=ENGINE, replica_cpus=0,
                      max_in_flight=1)
    try:
        async def main():
            # A request counts against its replica until its client has read
            # its last output, however soon the engine finished it.
            long = cluster.generate("a long one", params(0, max_tokens=400))
            first = await long.__anext__()
            with pytest.raises(Overloaded, match="1 requests in flight"):
                await collect(cluster.generate("another", params(1)))
            await long.aclose()  # the client leaves: the replica aborts it
            stats = await settle(cluster)
            with pytest.raises(ValueError, match="max_tokens"):
                await collect(cluster.generate("bad", params(2, max_tokens=10**6)))
            return first, stats

        first, stats = asyncio.run(main())
        assert first.outputs[0].token_ids
        assert_no_page_held(stats)
        ray.kill(cluster._slots[0].actor, no_restart=True)

        async def after():
            with pytest.raises(Unavailable, match="no replica is alive"):
                await collect(cluster.generate("x", params(3)))
            return await cluster.metrics()

        metrics = asyncio.run(after())
        assert metrics["rejected_requests"] == 2 and not metrics["replicas"][0]["alive"]
    finally:
        cluster.shutdown()
    with pytest.raises(ValueError, match="mode"):
        Cluster("builtin", mode="sideways")


def _call(port, method, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request(method, path, body=body if isinstance(body, (bytes, str)) or body is None
              else json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    payload = r.read()
    c.close()
    return r.status, dict(r.getheaders()), payload


def _comparable(status, headers, payload):
    """A reply without what differs between two servers by design (the
    response id and creation time)."""
    def strip(obj):
        if isinstance(obj, dict):
            obj.pop("id", None)
            obj.pop("created", None)
        return obj

    text = payload.decode()
    if headers.get("Content-Type", "").startswith("text/event-stream"):
        # How tokens fall into chunks depends on timing, in folio serve too:
        # what a client assembles from them is compared.
        events = [line[len("data: "):] for block in text.split("\n\n")
                  for line in block.splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        text, role, finish, logprobs, usage, objects = "", None, None, [], None, set()
        for e in map(json.loads, events[:-1]):
            objects.add(e["object"])
            usage = e.get("usage", usage)
            for c in e["choices"]:
                delta = c.get("delta", c)
                text += delta.get("text") or delta.get("content") or ""
                role = delta.get("role", role)
                finish = c["finish_reason"] or finish
                logprobs.append(c.get("logprobs"))
        body = (text, role, finish, [lp for lp in logprobs if lp], usage, sorted(objects))
    else:
        body = strip(json.loads(text))
    return status, headers.get("X-Folio-Seed"), headers.get("Retry-After"), body


def test_http_front_end_answers_as_folio_serve(ray_local):
    """The cluster's HTTP endpoint and `folio serve` give the same answers to
    the same bodies (ids and timestamps aside): completions and chats,
    whole and streamed, with log-probs, stop strings, usage, and the same
    error bodies for bad requests. A full cluster answers 429."""
    seeded = {"model": "builtin", "seed": 5, "max_tokens": 12, "temperature": 0.9}
    bodies = [
        ("/v1/completions", {**seeded, "prompt": STEMS[0], "logprobs": 2}),
        ("/v1/completions", {**seeded, "prompt": "abc", "stop": ["a"], "stream": True,
                             "stream_options": {"include_usage": True}}),
        ("/v1/completions", {**seeded, "prompt": [0, 70, 71], "max_tokens": 1}),
        # The declared parameters (engine/request_params.h) pass through.
        ("/v1/completions", {**seeded, "prompt": "abc", "min_p": 0.2, "stop_token_ids": [101],
                             "ignore_eos": True}),
        ("/v1/chat/completions", {**seeded, "messages": [{"role": "user", "content": "hi"}],
                                  "logprobs": True, "top_logprobs": 3}),
        ("/v1/chat/completions", {**seeded, "messages": [{"role": "user", "content": "yo"}],
                                  "stream": True}),
        ("/v1/completions", {**seeded, "prompt": "x", "max_tokens": 0}),
        ("/v1/completions", {**seeded, "prompt": "x", "temperature": "hot"}),
        ("/v1/completions", {**seeded, "model": "another", "prompt": "x"}),
        ("/v1/completions", b"{not json"),
        ("/v1/chat/completions", {**seeded, "messages": []}),
    ]
    serve = Server("--page-size", "8", "--num-pages", "256", "--max-num-seqs", "8")
    try:
        want = [_comparable(*serve.request("POST", path, body)) for path, body in bodies]
        want_models = json.loads(serve.request("GET", "/v1/models")[2])
    finally:
        serve.proc.terminate()
        serve.proc.wait(timeout=30)
    cluster = Cluster("builtin", mode="disaggregated", engine_options=ENGINE, replica_cpus=0,
                      max_in_flight=1)
    try:
        async def main():
            front = ClusterServer(cluster, "builtin")
            port = await front.start()
            try:
                got = [_comparable(*await asyncio.to_thread(_call, port, "POST", path, body))
                       for path, body in bodies]
                models = json.loads((await asyncio.to_thread(_call, port, "GET", "/v1/models",
                                                             None))[2])
                metrics = (await asyncio.to_thread(_call, port, "GET", "/metrics", None))[2]
                # Full: the one decoder with room for one holds a long request.
                long = cluster.generate("long", params(0, max_tokens=300))
                await long.__anext__()  # from the prefill replica
                await long.__anext__()  # from the decoder
                busy = await asyncio.to_thread(_call, port, "POST", "/v1/completions",
                                               {**seeded, "prompt": "x"})
                await long.aclose()
                return got, models, metrics, busy, await settle(cluster)
            finally:
                await front.stop()

        got, models, metrics, busy, stats = asyncio.run(main())
    finally:
        cluster.shutdown()
    for (path, body), g, w in zip(bodies, got, want):
        assert g == w, (path, body)
    assert [w[0] for w in want] == [200] * 6 + [400, 400, 404, 400, 400]
    assert models == want_models
    assert b"folio_cluster_handoffs 5.0" in metrics
    status, headers, payload = busy
    assert status == 429 and headers.get("Retry-After") == "1"
    assert json.loads(payload)["error"]["type"] == "rate_limit_error"
    assert_no_page_held(stats)

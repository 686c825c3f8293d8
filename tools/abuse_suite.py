#!/usr/bin/env python3
"""Hostile clients against `folio serve`, on loopback, bounded in count and
time: the abuse suite of the hardening work. A program, not a test: it
prints one JSON object (per attack: the answers seen, /health latency
while the attack runs, the server's RSS growth) and exits 1 when a target
is missed.

Attacks: slowloris, idle keep-alives, a 2 GB Content-Length, a 256 MiB
chunked body, a gzip bomb, a header flood, a body of 60,000 keys, 1 MB
one-word prompts to /tokenize, 1,500 clients that send a 1 MB body and
leave, 64 streams, slowloris past the connection
cap (its own server, --max-connections 200 at scale 1), SIGTERM under a
slow client.

Targets: /health p99 under 100 ms during every attack, a normal 4-token
completion issued every 250 ms during every attack but the 64 streams
finishing within 2x its unloaded median, server RSS growth under 64 MiB
across the suite, every attack answered with the documented status, no KV
page held afterwards (/metrics), and SIGTERM under a slow client exiting
within the drain timeout.

    python3 tools/abuse_suite.py [--folio build/bin/folio] [--scale 1.0]
                                 [--model M] [--only abandoned_1mb_bodies,keys_60k]

--scale shrinks connection counts and durations (0.2 for a quick look);
--model serves M (default: SmolLM2 when cached, else the built-in model);
--only runs just the named attacks on the main server.
"""
import argparse
import asyncio
import gzip
import json
import multiprocessing
import os
import re
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load_test import get_metrics  # noqa: E402  (tools/ is not a package)

HEALTH = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
DEFAULT_MODEL = os.path.expanduser("~/.cache/folio/SmolLM2-135M-Instruct.Q4_1.gguf")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def read_status(reader, timeout):
    """The status code of the reply on reader (None if the connection ends
    or nothing comes within timeout), after reading the whole header."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError,
            asyncio.LimitOverrunError):
        return None
    m = re.match(rb"HTTP/1\.[01] (\d+)", head)
    return int(m.group(1)) if m else None


def probe_loop(port, stop, out):
    """GET /health on a fresh connection every 50 ms until stop is set; runs
    in its own process so the attackers' event loop does not delay it."""
    import socket
    latencies, failures = [], 0
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(HEALTH)
                got = b""
                while b"\r\n\r\n" not in got:
                    chunk = sock.recv(4096)
                    if not chunk:
                        break
                    got += chunk
            if got.startswith(b"HTTP/1.1 200"):
                latencies.append(time.perf_counter() - t0)
            else:
                failures += 1
        except OSError:
            failures += 1
        time.sleep(0.05)
    out.send((latencies, failures))


COMPLETION = json.dumps({"prompt": "The capital of France is", "max_tokens": 4,
                         "temperature": 0}).encode()


def completion_seconds(port):
    """One normal 4-token completion on a fresh connection: its latency, or
    None when it fails."""
    import http.client
    t0 = time.perf_counter()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/v1/completions", COMPLETION, {"Content-Type": "application/json"})
        ok = conn.getresponse().status == 200
        conn.close()
    except OSError:
        ok = False
    return time.perf_counter() - t0 if ok else None


def completion_loop(port, stop, out):
    """A normal completion every 250 ms until stop is set (its own process,
    like probe_loop)."""
    latencies, failures = [], 0
    while not stop.is_set():
        t = completion_seconds(port)
        if t is None:
            failures += 1
        else:
            latencies.append(t)
        time.sleep(0.25)
    out.send((latencies, failures))


def latency_summary(latencies, failures, name):
    lat = sorted(latencies) or [float("inf")]
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    return {name: len(latencies), "failed": failures,
            "p50_ms": round(statistics.median(lat) * 1e3, 2), "p99_ms": round(p99 * 1e3, 2),
            "max_ms": round(lat[-1] * 1e3, 2)}


class Probe:
    """While an attack runs: /health latency (probe_loop) and, when asked,
    a normal completion's (completion_loop), each in a child process."""

    def __init__(self, port, completions=False):
        ctx = multiprocessing.get_context("fork")
        self.stop = ctx.Event()
        self.loops = []
        for loop in [probe_loop] + ([completion_loop] if completions else []):
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=loop, args=(port, self.stop, send), daemon=True)
            proc.start()
            self.loops.append((recv, proc))

    def summary(self):
        """(/health summary, completion summary or None)."""
        self.stop.set()
        out = []
        for (recv, proc), name in zip(self.loops, ["probes", "completions"]):
            out.append(latency_summary(*recv.recv(), name))
            proc.join()
        return out[0], (out[1] if len(out) > 1 else None)


async def open_conn(port):
    try:
        return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
    except (OSError, asyncio.TimeoutError):
        return None


async def slowloris(port, n, seconds):
    """n connections, each sending one header line every 2 s: the server
    must cut them at its read timeout, without an answer."""
    conns = [c for c in await asyncio.gather(*(open_conn(port) for _ in range(n))) if c]

    async def dribble(r, w):
        closed = asyncio.create_task(r.read(1))  # b"" once the server closes
        try:
            w.write(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            end = time.time() + seconds
            i = 0
            while time.time() < end and not closed.done():
                await asyncio.wait([closed], timeout=2)
                if not closed.done():
                    w.write(b"X-Slow-%d: 1\r\n" % i)
                    await w.drain()
                i += 1
        except (ConnectionError, OSError):
            pass
        finally:
            w.close()
        if not closed.done():
            closed.cancel()
            return "open"
        try:
            return "closed by server" if closed.result() == b"" else "answered"
        except (ConnectionError, OSError):
            return "closed by server"
    results = await asyncio.gather(*(dribble(r, w) for r, w in conns))
    return {"connections": len(conns), "outcomes": count(results)}


async def idle_keepalive(port, n, seconds):
    """n connections that make one request and then sit idle: the server
    closes them at its keep-alive timeout."""
    conns = [c for c in await asyncio.gather(*(open_conn(port) for _ in range(n))) if c]

    async def idle(r, w):
        w.write(HEALTH)
        status = await read_status(r, 10)
        try:
            await asyncio.wait_for(r.read(), seconds)  # the reply's body, then the end
            outcome = "closed by server"
        except asyncio.TimeoutError:
            outcome = "open"
        except (ConnectionError, OSError):
            outcome = "closed by server"
        w.close()
        return f"{status} then {outcome}"
    return {"connections": len(conns),
            "outcomes": count(await asyncio.gather(*(idle(r, w) for r, w in conns)))}


async def big_content_length(port, n):
    """n requests announcing a 2 GB body and sending a little of it."""
    async def one():
        c = await open_conn(port)
        if not c:
            return None
        r, w = c
        w.write(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Length: 2000000000\r\n\r\n" + b"a" * 65536)
        status = await read_status(r, 10)
        w.close()
        return status
    return {"requests": n, "statuses": count(await asyncio.gather(*(one() for _ in range(n))))}


async def chunked_body(port, total):
    """One chunked body of `total` bytes, sent as fast as the server reads."""
    r, w = await open_conn(port)
    w.write(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"100000\r\n" + b"a" * 0x100000 + b"\r\n"
    reply = asyncio.create_task(read_status(r, 60))  # read while sending, as curl does
    sent = 0
    try:
        while sent < total and not reply.done():
            w.write(chunk)
            await asyncio.wait_for(w.drain(), 10)
            sent += 0x100000
    except (ConnectionError, OSError, asyncio.TimeoutError):
        pass
    status = await reply
    w.close()
    return {"sent_mib_before_cut": sent >> 20, "status": status}


async def gzip_bomb(port, payload):
    """A small gzip body (payload) that would inflate to 512 MiB."""
    r, w = await open_conn(port)
    w.write(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Encoding: gzip\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(payload))
    w.write(payload)
    status = await read_status(r, 10)
    w.close()
    return {"compressed_kib": len(payload) >> 10, "status": status}


async def header_flood(port, mib):
    """Header lines without end (mib MiB offered)."""
    r, w = await open_conn(port)
    w.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    line = b"X-Flood: " + b"a" * 1000 + b"\r\n"
    reply = asyncio.create_task(read_status(r, 60))
    sent = 0
    try:
        while sent < (mib << 20) and not reply.done():
            w.write(line * 64)
            await asyncio.wait_for(w.drain(), 10)
            sent += len(line) * 64
    except (ConnectionError, OSError, asyncio.TimeoutError):
        pass
    status = await reply
    w.close()
    return {"sent_kib_before_cut": sent >> 10, "status": status}


async def streams(port, n, max_tokens):
    """n concurrent streaming completions, read to [DONE]."""
    async def one(i):
        c = await open_conn(port)
        if not c:
            return None
        r, w = c
        body = json.dumps({"prompt": "abuse", "max_tokens": max_tokens, "stream": True,
                           "seed": i}).encode()
        w.write(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body) + body)
        status = await read_status(r, 60)
        rest = await asyncio.wait_for(r.read(), 120)
        w.close()
        if status == 200 and b"[DONE]" not in rest:
            return "200 without [DONE]"
        return status
    return {"streams": n, "statuses": count(await asyncio.gather(*(one(i) for i in range(n))))}


async def post_bodies(port, path, body, clients, each):
    """`clients` connections, each POSTing `body` to `path` `each` times in a
    row (keep-alive), reading every reply."""
    head = (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (path.encode(), len(body)))

    async def one():
        c = await open_conn(port)
        if not c:
            return [None]
        r, w = c
        statuses = []
        for _ in range(each):
            w.write(head + body)
            try:
                reply = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 120)
                m = re.match(rb"HTTP/1\.[01] (\d+)", reply)
                statuses.append(int(m.group(1)) if m else None)
                length = re.search(rb"(?i)content-length: *(\d+)", reply)
                await asyncio.wait_for(r.readexactly(int(length.group(1)) if length else 0), 120)
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError,
                    asyncio.LimitOverrunError):
                statuses.append(None)
                break
        w.close()
        return statuses
    results = await asyncio.gather(*(one() for _ in range(clients)))
    return {"requests": clients * each, "statuses": count([s for r in results for s in r])}


async def abandoned_bodies(port, n, body):
    """n clients (200 at a time) each send a completion `body` and close
    without reading the reply: the server must bound what it holds and drop
    the work of clients that left."""
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
    gate = asyncio.Semaphore(200)

    async def one():
        async with gate:
            c = await open_conn(port)
            if not c:
                return "not connected"
            _, w = c
            try:
                w.write(head + body)
                await w.drain()
                w.close()
                return "sent"
            except (ConnectionError, OSError):
                return "cut by server"
    results = await asyncio.gather(*(one() for _ in range(n)))
    return {"clients": n, "outcomes": count(results)}


def count(items):
    out = {}
    for x in items:
        out[str(x)] = out.get(str(x), 0) + 1
    return out


def start_server(folio, extra=()):
    proc = subprocess.Popen([folio, "serve", "--port", "0", "--threads", "1", *extra],
                            stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        m = re.search(r"listening on http://[\d.]+:(\d+)", line)
        if m:
            break
    else:
        raise SystemExit("folio serve did not start")
    import threading
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc, int(m.group(1))


async def attack(name, make, port, pid, expect, unloaded=None, min_seconds=3.0):
    """Runs make() until min_seconds have passed (at least once), /health
    probed throughout; ok when every round met expect. With `unloaded` (a
    normal completion's median latency on the idle server), completions
    are issued throughout too, and each must finish within 2x that."""
    probe = Probe(port, completions=unloaded is not None)
    before = rss_kib(pid)
    t0 = time.perf_counter()
    rounds, all_met = 0, True
    while rounds == 0 or time.perf_counter() - t0 < min_seconds:
        result = await make()
        all_met = all_met and expect(result)
        rounds += 1
    elapsed = time.perf_counter() - t0
    health, completion = probe.summary()
    ok = all_met and health["p99_ms"] < 100 and health["failed"] == 0
    report = {"result": result, "rounds": rounds, "health": health}
    if completion is not None:
        completion["max_over_unloaded"] = round(completion["max_ms"] / (unloaded * 1e3), 2)
        ok = ok and completion["failed"] == 0 and completion["max_over_unloaded"] <= 2
        report["completion"] = completion
    return name, {**report, "seconds": round(elapsed, 1),
                  "rss_before_mib": round(before / 1024, 1),
                  "rss_after_mib": round(rss_kib(pid) / 1024, 1), "ok": ok}


async def suite(folio, scale, only, model):
    n = lambda k: max(4, int(k * scale))  # noqa: E731
    proc, port = start_server(folio, ("--model", model) if model else ())
    report = {"model": model or "built-in", "attacks": {}}
    try:
        await asyncio.sleep(0.5)
        times = [t for t in (completion_seconds(port) for _ in range(7)) if t is not None]
        if not times:
            raise SystemExit("a normal completion fails on the idle server")
        unloaded = statistics.median(times)
        report["completion_unloaded_ms"] = round(unloaded * 1e3, 2)
        rss0 = rss_kib(proc.pid)
        bomb = gzip.compress(b"\0" * (512 << 20), compresslevel=9)
        attacks = [
            ("slowloris", lambda: slowloris(port, n(1000), 16),  # past the 10 s read timeout
             lambda r: r["outcomes"].get("closed by server", 0) == r["connections"]),
            ("idle_keepalive", lambda: idle_keepalive(port, n(1000), 10),
             lambda r: r["outcomes"].get("200 then closed by server", 0) == r["connections"]),
            ("content_length_2gb", lambda: big_content_length(port, n(66)),
             lambda r: r["statuses"].get("413", 0) == r["requests"]),
            ("chunked_256mib", lambda: chunked_body(port, int(256 * scale + 8) << 20),
             lambda r: r["status"] == 413),
            ("gzip_bomb", lambda: gzip_bomb(port, bomb), lambda r: r["status"] == 415),
            ("header_flood", lambda: header_flood(port, int(200 * scale) + 4),
             lambda r: r["status"] == 431),
            # Bodies inside the 1 MiB limit that cost time to read: an object
            # of 60,000 keys (quadratic in nlohmann's ordered parser), and
            # 1 MB one-word prompts to /tokenize (tokenizer work).
            ("keys_60k", lambda: post_bodies(
                port, "/v1/completions",
                ("{" + ",".join(f'"k{i}":1' for i in range(60000)) + "}").encode(), 2, 2),
             lambda r: r["statuses"].get("400", 0) == r["requests"]),
            ("tokenize_1mb_words", lambda: post_bodies(
                port, "/tokenize", json.dumps({"prompt": "a" * 1000000}).encode(), 2,
                max(2, int(10 * scale))),
             lambda r: r["statuses"].get("200", 0) == r["requests"]),
            # 1,500 clients (at scale 1) that send a 1 MB body and leave.
            ("abandoned_1mb_bodies", lambda: abandoned_bodies(
                port, n(1500), json.dumps({"prompt": "hello", "max_tokens": 4,
                                           "user": "u" * 1000000}).encode()),
             lambda r: r["outcomes"].get("not connected", 0) == 0),
            ("streams_64", lambda: streams(port, n(64), 256),
             # past --max-queue (32) waiting requests the answer is 429
             lambda r: r["statuses"].get("200", 0) + r["statuses"].get("429", 0) == r["streams"]),
        ]
        for name, make, expect in attacks:
            if only and name not in only:
                continue
            # 64 streams are load, not hostile input: a completion waits for
            # its turn behind them by design.
            key, value = await attack(name, make, port, proc.pid, expect,
                                      unloaded=None if name == "streams_64" else unloaded)
            report["attacks"][key] = value
        m = get_metrics("127.0.0.1", port)
        report["pages_held_after"] = m["folio_kv_pages_held_by_requests"]
        report["requests_running_after"] = m["folio_requests_running"]
        report["rss_growth_mib"] = round((rss_kib(proc.pid) - rss0) / 1024, 1)
        report["rss_peak_mib"] = round(max(v["rss_after_mib"]
                                           for v in report["attacks"].values()), 1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)

    if only:
        report["ok"] = all(v["ok"] for v in report["attacks"].values())
        return report

    # Slowloris past the connection cap (a server of its own with a small
    # cap): /health must still answer every probe.
    cap = n(200)
    proc, port = start_server(folio, ("--max-connections", str(cap)))
    try:
        await asyncio.sleep(0.5)
        key, value = await attack(
            "slowloris_past_cap", lambda: slowloris(port, cap + n(100), 12), port, proc.pid,
            lambda r: r["outcomes"].get("closed by server", 0) == r["connections"])
        value["max_connections"] = cap
        report["attacks"][key] = value
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)

    # SIGTERM while a client dribbles its header.
    proc, port = start_server(folio, ("--drain-timeout", "5"))
    r, w = await open_conn(port)
    w.write(b"GET /health HTTP/1.1\r\n")
    await w.drain()
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = "hung"
    w.close()
    report["sigterm_under_slow_client"] = {"exit": rc,
                                           "seconds": round(time.perf_counter() - t0, 2),
                                           "ok": rc == 0 and time.perf_counter() - t0 < 5}
    report["ok"] = (all(v["ok"] for v in report["attacks"].values()) and
                    report["pages_held_after"] == 0 and report["rss_growth_mib"] < 64 and
                    report["sigterm_under_slow_client"]["ok"])
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folio", default=os.path.join(os.path.dirname(__file__), "..",
                                                    "build", "bin", "folio"))
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--model", default=DEFAULT_MODEL if os.path.exists(DEFAULT_MODEL) else "",
                    help="the main server's model (default: SmolLM2 when cached, so that the "
                         "completion probe runs a real forward pass; else the built-in model)")
    ap.add_argument("--only", default="",
                    help="comma-separated attack names on the main server (skips the rest)")
    args = ap.parse_args()
    only = {a for a in args.only.split(",") if a}
    report = asyncio.run(suite(args.folio, args.scale, only, args.model))
    print(json.dumps(report, indent=1))
    sys.exit(0 if report["ok"] else 1)


if __name__ == "__main__":
    main()

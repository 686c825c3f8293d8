#!/usr/bin/env python3
"""Load test for `folio serve` (standard library only).

Phases of Poisson arrivals at several rates, then a burst of simultaneous
requests; random prompt and output lengths; a fraction of clients hang up
mid-stream. Every request streams (SSE), so time to first token and the gaps
between tokens are measured at the client. Afterwards the server's /metrics
must show nothing running or waiting and no KV page held by a request
(pages used == pages only the prefix cache holds); the program exits 1
otherwise, or when any request failed other than by 429/503.

  python3 tools/load_test.py                       # starts build/bin/folio serve itself
  python3 tools/load_test.py --url http://127.0.0.1:8000 --rates 5,20 --duration 10
"""
import argparse
import http.client
import json
import platform
import random
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("page block table token cache prefix decode prefill batch queue stream "
         "kernel attention memory slot engine request").split()


def percentile(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100 * (len(xs) - 1)))))
    return xs[k]


class Result:
    def __init__(self):
        self.status = None      # HTTP status, or "error:<kind>"
        self.ttft = None
        self.gaps = []
        self.tokens = 0
        self.disconnected = False
        self.latency = None


def one_request(host, port, body, disconnect_after, timeout):
    res = Result()
    start = time.perf_counter()
    try:
        conn = http.client.HTTPConnection(host, port, timeout=timeout)
        conn.request("POST", "/v1/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        res.status = r.status
        if r.status != 200:
            r.read()
            conn.close()
            return res
        last = None
        chunks = 0
        buf = b""
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                break
            ev = json.loads(data)
            if ev.get("usage"):
                res.tokens = ev["usage"]["completion_tokens"]
            if not ev["choices"]:
                continue
            now = time.perf_counter()
            if last is None:
                res.ttft = now - start
            else:
                res.gaps.append(now - last)
            last = now
            chunks += 1
            if disconnect_after is not None and chunks >= disconnect_after:
                res.disconnected = True
                conn.sock.close()
                conn.close()
                res.latency = time.perf_counter() - start
                return res
        conn.close()
        res.latency = time.perf_counter() - start
    except Exception as e:  # noqa: BLE001 - every failure is counted by kind
        res.status = f"error:{type(e).__name__}"
    return res


def make_body(rng, args):
    n = rng.randint(*args.prompt_words)
    prompt = " ".join(rng.choice(WORDS) for _ in range(n))
    return {"prompt": prompt, "max_tokens": rng.randint(*args.max_tokens), "stream": True,
            "stream_options": {"include_usage": True},  # the token count
            "temperature": 0.8, "seed": rng.randrange(1 << 31)}


def run_phase(name, host, port, arrivals, rng, args):
    """arrivals: start offsets in seconds."""
    results = []
    lock = threading.Lock()
    threads = []
    t0 = time.perf_counter()

    def worker(body, disconnect_after):
        r = one_request(host, port, body, disconnect_after, args.timeout)
        with lock:
            results.append(r)

    for offset in arrivals:
        delay = t0 + offset - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        body = make_body(rng, args)
        cut = None
        if rng.random() < args.disconnect:
            cut = rng.randint(1, max(1, body["max_tokens"] // 2))
        t = threading.Thread(target=worker, args=(body, cut), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join(args.timeout + 5)
    wall = time.perf_counter() - t0
    ok = [r for r in results if r.status == 200 and not r.disconnected]
    ttft = [r.ttft for r in results if r.ttft is not None]
    gaps = [g for r in results for g in r.gaps]
    tokens = sum(r.tokens for r in ok)
    ms = lambda x: None if x is None else round(1000 * x, 2)  # noqa: E731
    return {
        "phase": name,
        "requests": len(arrivals),
        "offered_rate": (round(len(arrivals) / arrivals[-1], 2)
                         if len(arrivals) > 1 and arrivals[-1] > 0 else None),
        "wall_s": round(wall, 2),
        "status": dict(Counter(str(r.status) for r in results)),
        "disconnected": sum(r.disconnected for r in results),
        "completed": len(ok),
        "output_tokens": tokens,
        "throughput_tok_s": round(tokens / wall, 1),
        "throughput_req_s": round(len(ok) / wall, 2),
        "ttft_ms": {"p50": ms(percentile(ttft, 50)), "p99": ms(percentile(ttft, 99))},
        "itl_ms": {"p50": ms(percentile(gaps, 50)), "p99": ms(percentile(gaps, 99))},
    }


def get_metrics(host, port):
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def pair(text):
    a, b = text.split(",")
    return int(a), int(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running server; default: start one")
    ap.add_argument("--bin", default=str(ROOT / "build/bin/folio"))
    ap.add_argument("--server-args", default="--builtin-context 1024 --max-queue 64",
                    help="extra flags when starting the server")
    ap.add_argument("--rates", default="5,20,50", help="Poisson arrival rates, requests/s")
    ap.add_argument("--duration", type=float, default=8.0, help="seconds per rate")
    ap.add_argument("--burst", type=int, default=100, help="simultaneous requests at the end")
    ap.add_argument("--prompt-words", type=pair, default=(4, 80),
                    help="min,max (a word is ~7 tokens on the built-in model)")
    ap.add_argument("--max-tokens", type=pair, default=(8, 256), help="min,max")
    ap.add_argument("--disconnect", type=float, default=0.1, help="fraction that hang up")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the report here too")
    args = ap.parse_args()

    proc = None
    if args.url:
        u = urllib.parse.urlparse(args.url)
        host, port = u.hostname, u.port
    else:
        proc = subprocess.Popen([args.bin, "serve", "--port", "0", *args.server_args.split()],
                                stderr=subprocess.PIPE, text=True)
        host = port = None
        for line in proc.stderr:
            m = re.search(r"listening on http://([\d.]+):(\d+)", line)
            if m:
                host, port = m.group(1), int(m.group(2))
                break
        if port is None:
            sys.exit("the server did not start")
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()

    rng = random.Random(args.seed)
    phases = []
    try:
        for rate in [float(r) for r in args.rates.split(",") if r]:
            t, arrivals = 0.0, []
            while True:
                t += rng.expovariate(rate)
                if t > args.duration:
                    break
                arrivals.append(t)
            phases.append(run_phase(f"poisson {rate:g}/s", host, port, arrivals, rng, args))
            print(json.dumps(phases[-1]), flush=True)
        if args.burst:
            phases.append(run_phase(f"burst {args.burst}", host, port, [0.0] * args.burst, rng, args))
            print(json.dumps(phases[-1]), flush=True)

        # Every aborted or finished request must have given its pages back.
        deadline = time.time() + 30
        while True:
            m = get_metrics(host, port)
            idle = (m["folio_requests_running"] == 0 and m["folio_requests_waiting"] == 0)
            if idle or time.time() > deadline:
                break
            time.sleep(0.1)
        leak = {k: m[k] for k in ("folio_requests_running", "folio_requests_waiting",
                                  "folio_kv_pages_used", "folio_kv_pages_cached",
                                  "folio_kv_pages_held_by_requests", "folio_kv_pages_free",
                                  "folio_kv_pages_total")}
        report = {
            "machine": {"platform": platform.platform(), "processor": platform.processor(),
                        "python": platform.python_version()},
            "command": " ".join(sys.argv),
            "phases": phases,
            "after": leak,
            "server": {k: m[k] for k in m if k.startswith(("folio_preemptions", "folio_prefix_cache_hit_rate",
                                                           "folio_requests_finished_total",
                                                           "folio_http_responses_total"))},
        }
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=30)
    print(json.dumps(report, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    failures = []
    if not (leak["folio_requests_running"] == 0 and leak["folio_requests_waiting"] == 0):
        failures.append("requests still in flight")
    if leak["folio_kv_pages_held_by_requests"] != 0 or \
            leak["folio_kv_pages_used"] != leak["folio_kv_pages_cached"]:
        failures.append("KV pages still held by requests")
    bad = {s: n for p in phases for s, n in p["status"].items() if s not in ("200", "429", "503")}
    if bad:
        failures.append(f"failed requests: {bad}")
    if proc and proc.returncode != 0:
        failures.append(f"server exited with {proc.returncode}")
    if failures:
        sys.exit("load test FAILED: " + "; ".join(failures))
    print("load test passed: no request lost, every page free again", file=sys.stderr)


if __name__ == "__main__":
    main()

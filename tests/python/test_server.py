"""`folio serve` end to end: the real binary on a free loopback port, the
built-in model (no downloads), plain HTTP from the standard library.

Each server starts in well under a second; tests that need a slow engine
(overload, disconnects, draining) pass --step-delay-us so a request lasts
long enough to interfere with.
"""
import http.client
import json
import os
import random
import re
import resource
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

FOLIO = os.environ.get("FOLIO_BIN", str(Path(__file__).resolve().parents[2] / "build/bin/folio"))


class Server:
    def __init__(self, *flags, max_files=None):
        # max_files: the server's descriptor limit (soft and hard), as
        # `prlimit --nofile` sets it.
        limit = None if max_files is None else (
            lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (max_files, max_files)))
        self.proc = subprocess.Popen([FOLIO, "serve", "--port", "0", "--threads", "1", *flags],
                                     stderr=subprocess.PIPE, text=True, preexec_fn=limit)
        self.log = []
        deadline = time.time() + 30
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"listening on http://([\d.]+):(\d+)", line)
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                break
        else:
            self.proc.kill()
        assert hasattr(self, "port"), "".join(self.log)
        # Keep draining stderr so the server never blocks on a full pipe.
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def conn(self, timeout=30):
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None):
        c = self.conn()
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        c.request(method, path, body=data, headers=headers or {"Content-Type": "application/json"})
        r = c.getresponse()
        payload = r.read()
        c.close()
        return r.status, dict(r.getheaders()), payload

    def post(self, path, body):
        status, headers, payload = self.request("POST", path, body)
        return status, json.loads(payload)

    def stream(self, path, body):
        """The decoded SSE data payloads, [DONE] included."""
        c = self.conn()
        c.request("POST", path, body=json.dumps({**body, "stream": True}),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200, r.read()
        assert r.getheader("Content-Type").startswith("text/event-stream")
        events = []
        for block in r.read().decode().split("\n\n"):
            for line in block.splitlines():
                if line.startswith("data: "):
                    events.append(line[len("data: "):])
        c.close()
        return events

    def metrics(self):
        status, _, payload = self.request("GET", "/metrics")
        assert status == 200
        out = {}
        for line in payload.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=5)
        return rc


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    assert s.stop() == 0, "".join(s.log)


def wait_until(pred, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def test_models_and_health(server):
    status, _, body = server.request("GET", "/v1/models")
    assert status == 200
    models = json.loads(body)
    assert models["object"] == "list" and models["data"][0]["id"] == "builtin"
    status, _, body = server.request("GET", "/health")
    assert status == 200 and json.loads(body)["status"] == "ok"


def test_completion_counts_usage(server):
    status, r = server.post("/v1/completions", {"model": "builtin", "prompt": "hello",
                                                "max_tokens": 5, "seed": 1})
    assert status == 200, r
    assert r["object"] == "text_completion" and r["model"] == "builtin"
    choice = r["choices"][0]
    assert choice["finish_reason"] == "length" and isinstance(choice["text"], str)
    # The built-in model's prompt: its begin token plus one token per byte.
    assert r["usage"] == {"prompt_tokens": 6, "completion_tokens": 5, "total_tokens": 11,
                          "prompt_tokens_details": {"cached_tokens": 0}}
    # The same prompt again: its whole pages come from the prefix cache
    # (the built-in server's pages hold 16 tokens; 6 fill none).
    long_prompt = "paged attention " * 4
    first = server.post("/v1/completions", {"prompt": long_prompt, "max_tokens": 2})[1]
    again = server.post("/v1/completions", {"prompt": long_prompt, "max_tokens": 2})[1]
    cached = again["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert first["usage"]["prompt_tokens"] == again["usage"]["prompt_tokens"] == 65
    assert cached == 64, again["usage"]  # whole pages before the last token


def test_token_id_prompt(server):
    status, r = server.post("/v1/completions", {"prompt": [0, 104, 105], "max_tokens": 2})
    assert status == 200, r
    assert r["usage"]["prompt_tokens"] == 3


def test_chat_completion(server):
    status, r = server.post("/v1/chat/completions", {
        "model": "builtin", "max_tokens": 4, "seed": 3,
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]})
    assert status == 200, r
    assert r["object"] == "chat.completion"
    assert r["choices"][0]["message"]["role"] == "assistant"
    # The plain template, one token per byte, plus the begin token.
    prompt = "system: be brief\nuser: hi\nassistant:"
    assert r["usage"]["prompt_tokens"] == len(prompt) + 1
    assert r["usage"]["completion_tokens"] == 4


def test_same_seed_same_text_across_runs(server):
    body = {"prompt": "paged attention", "max_tokens": 24, "temperature": 0.9, "top_k": 50,
            "seed": 1234}
    a = server.post("/v1/completions", body)[1]["choices"][0]["text"]
    b = server.post("/v1/completions", body)[1]["choices"][0]["text"]
    assert a == b
    other = Server()
    try:
        assert other.post("/v1/completions", body)[1]["choices"][0]["text"] == a
    finally:
        assert other.stop() == 0
    different = server.post("/v1/completions", {**body, "seed": 4321})[1]["choices"][0]["text"]
    assert different != a


@pytest.mark.parametrize("endpoint", ["/v1/completions", "/v1/chat/completions"])
def test_stream_matches_the_whole_response(server, endpoint):
    body = {"max_tokens": 20, "temperature": 0.8, "seed": 77}
    if endpoint == "/v1/completions":
        body["prompt"] = "continuous batching"
    else:
        body["messages"] = [{"role": "user", "content": "tell me about pages"}]
    status, whole = server.post(endpoint, body)
    assert status == 200, whole
    # Without stream_options.include_usage every chunk has a choice (so
    # `chunk.choices[0]` never fails); with it, one more chunk with
    # choices [] carries the usage, as OpenAI does.
    plain = [json.loads(e) for e in server.stream(endpoint, body)[:-1]]
    assert all(c["choices"] and "usage" not in c for c in plain)
    events = server.stream(endpoint, {**body, "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert len(chunks) == len(plain) + 1 and chunks[-1]["choices"] == []
    if endpoint == "/v1/completions":
        text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
        assert text == whole["choices"][0]["text"]
    else:
        assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
        assert text == whole["choices"][0]["message"]["content"]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == whole["choices"][0]["finish_reason"]
    assert all(f is None for f in finishes[:-1])
    # The same counts, but the prompt's pages are cached by now.
    usage = dict(chunks[-1]["usage"])
    assert usage.pop("prompt_tokens_details")["cached_tokens"] >= \
        whole["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert usage == {k: v for k, v in whole["usage"].items() if k != "prompt_tokens_details"}


def test_stop_string_cuts_the_text(server):
    body = {"prompt": "stop here", "max_tokens": 40, "temperature": 1.0, "seed": 5}
    text = server.post("/v1/completions", body)[1]["choices"][0]["text"]
    stop = text[len(text) // 2]
    want = text[:text.index(stop)]
    status, r = server.post("/v1/completions", {**body, "stop": [stop, "never-appears"]})
    assert status == 200, r
    assert r["choices"][0]["text"] == want
    assert r["choices"][0]["finish_reason"] == "stop"
    streamed = server.stream("/v1/completions", {**body, "stop": stop})
    assert "".join(json.loads(e)["choices"][0]["text"] for e in streamed[:-1]
                   if json.loads(e)["choices"]) == want


def test_logprobs(server):
    # A fixed seed: completions' top_logprobs is keyed by token text, and two
    # byte tokens >= 0x80 both show as U+FFFD, so some draws have one key.
    status, r = server.post("/v1/completions", {"prompt": "lp", "max_tokens": 3, "logprobs": 2,
                                                "seed": 0})
    assert status == 200, r
    lp = r["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 3
    assert all(x <= 0 for x in lp["token_logprobs"])
    assert all(len(t) == 2 for t in lp["top_logprobs"])
    status, r = server.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "x"}], "max_tokens": 3, "logprobs": True,
        "top_logprobs": 4})
    assert status == 200, r
    content = r["choices"][0]["logprobs"]["content"]
    assert len(content) == 3
    assert all(len(c["top_logprobs"]) == 4 and c["logprob"] <= 0 for c in content)
    # "bytes" are the token's own: one byte per built-in token, also for the
    # bytes >= 0x80 whose text alone is U+FFFD (3 bytes of UTF-8).
    status, r = server.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "x"}], "max_tokens": 40, "logprobs": True,
        "top_logprobs": 2, "temperature": 1.0, "seed": 8})
    content = r["choices"][0]["logprobs"]["content"]
    assert any(c["bytes"][0] >= 0x80 for c in content)
    assert all(len(c["bytes"]) == 1 for c in content)
    assert all(len(t["bytes"]) == 1 for c in content for t in c["top_logprobs"])


BAD = [
    ("/v1/completions", "{not json", None),
    ("/v1/completions", [1, 2], None),
    ("/v1/completions", {"prompt": "a", "temperature": "hot"}, "temperature"),
    ("/v1/completions", {"prompt": "a", "temperature": 3}, "temperature"),
    ("/v1/completions", {"prompt": "a", "top_p": 0}, "top_p"),
    ("/v1/completions", {"prompt": "a", "top_k": -5}, "top_k"),
    ("/v1/completions", {"prompt": "a", "min_p": 2}, "min_p"),
    ("/v1/completions", {"prompt": "a", "max_tokens": 0}, "max_tokens"),
    ("/v1/completions", {"prompt": "a", "max_tokens": 100000}, "max_tokens"),
    ("/v1/completions", {"prompt": "a", "stop": ""}, "stop"),
    ("/v1/completions", {"prompt": "a", "stop": ["ok", ""]}, "stop"),
    ("/v1/completions", {"prompt": [1, 300]}, "prompt"),
    ("/v1/completions", {"prompt": 7}, "prompt"),
    ("/v1/completions", {"prompt": "a", "n": 65}, "n"),
    ("/v1/completions", {"prompt": "a", "n": 2, "best_of": 1}, "best_of"),
    ("/v1/completions", {"prompt": "a", "best_of": 2, "stream": True}, "best_of"),
    ("/v1/completions", {"prompt": "a", "logprobs": 50}, "logprobs"),
    ("/v1/completions", {"prompt": "a", "stream": 1}, "stream"),
    ("/v1/completions", {"prompt": "a", "seed": 1.5}, "seed"),
    ("/v1/completions", {"prompt": "a", "user": []}, "user"),
    ("/v1/completions", {"prompt": "a", "response_format": {"type": "xml"}},
     "response_format"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}],
                              "tools": [{"type": "function"}]}, "tools[0].function"),
    # A strict tool's grammar (the plain format: generic) beside another constraint.
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}],
                              "tools": [{"type": "function",
                                         "function": {"name": "f", "strict": True}}],
                              "response_format": {"type": "json_object"}},
     "response_format"),
    ("/v1/completions", {}, "prompt"),
    ("/v1/chat/completions", {"messages": []}, "messages"),
    ("/v1/chat/completions", {"messages": [{"role": "user"}]}, "messages[0].content"),
    ("/v1/chat/completions", {"messages": [{"role": "x", "content": "a"}]}, "messages[0].role"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}],
                              "logprobs": 3}, "logprobs"),
]


@pytest.mark.parametrize("endpoint,body,param", BAD)
def test_invalid_requests_are_400_naming_the_field(server, endpoint, body, param):
    status, _, payload = server.request("POST", endpoint, body)
    assert status == 400, payload
    err = json.loads(payload)["error"]
    assert err["type"] == "invalid_request_error"
    assert err["param"] == param and err["code"] is None and err["message"]


def test_unknown_model_is_404(server):
    status, r = server.post("/v1/completions", {"model": "gpt-4", "prompt": "a"})
    assert status == 404 and r["error"]["param"] == "model"


def test_limits_on_bodies_and_headers(server):
    status, _, payload = server.request("POST", "/v1/completions",
                                        '{"prompt": "' + "a" * (2 << 20) + '"}')
    assert status == 413 and "error" in json.loads(payload)
    headers = {f"X-Pad-{i}": "x" for i in range(100)}
    status, _, payload = server.request("POST", "/v1/completions", '{"prompt": "a"}', headers)
    assert status == 431 and "error" in json.loads(payload)
    status, _, payload = server.request("GET", "/v1/nothing")
    assert status == 404 and "error" in json.loads(payload)


def test_request_beyond_the_kv_pool_is_refused():
    s = Server("--page-size", "4", "--num-pages", "4")
    try:
        status, r = s.post("/v1/completions", {"prompt": "abc", "max_tokens": 20})
        assert status == 400 and r["error"]["param"] == "max_tokens"
        assert "KV pool" in r["error"]["message"]
        assert s.post("/v1/completions", {"prompt": "abc", "max_tokens": 10})[0] == 200
    finally:
        assert s.stop() == 0


def open_stream(s, max_tokens, seed=0):
    """A streaming request whose first chunk has arrived (it is running)."""
    sock = socket.create_connection((s.host, s.port), timeout=30)
    body = json.dumps({"prompt": "slow", "max_tokens": max_tokens, "stream": True, "seed": seed})
    sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                  f"\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
    got = b""
    while b"data: " not in got:
        chunk = sock.recv(4096)
        assert chunk, got
        got += chunk
    assert got.startswith(b"HTTP/1.1 200")
    return sock


def test_overload_answers_429_with_retry_after():
    s = Server("--max-queue", "1", "--max-num-seqs", "1", "--step-delay-us", "20000")
    try:
        running = open_stream(s, 200)
        waiting = threading.Thread(target=s.post, args=("/v1/completions",
                                                        {"prompt": "b", "max_tokens": 2}))
        waiting.start()
        assert wait_until(lambda: s.metrics()["folio_requests_waiting"] == 1)
        status, headers, payload = s.request("POST", "/v1/completions",
                                             {"prompt": "c", "max_tokens": 2})
        assert status == 429, payload
        # Whole seconds with jitter, so refused clients do not return in step.
        assert headers.get("Retry-After") in ("1", "2", "3", "4"), headers
        assert json.loads(payload)["error"]["message"]
        running.close()
        waiting.join(timeout=30)
        assert s.metrics()['folio_http_responses_total{status="429"}'] == 1
    finally:
        assert s.stop() == 0


def test_disconnect_mid_stream_aborts_and_frees_pages():
    s = Server("--step-delay-us", "5000")
    try:
        socks = [open_stream(s, 400, seed=i) for i in range(3)]
        m = s.metrics()
        assert m["folio_requests_running"] == 3 and m["folio_kv_pages_held_by_requests"] > 0
        for sock in socks:
            sock.close()
        assert wait_until(lambda: s.metrics()["folio_requests_running"] == 0)
        m = s.metrics()
        assert m['folio_requests_finished_total{reason="abort"}'] == 3
        assert m["folio_kv_pages_held_by_requests"] == 0
        assert m["folio_kv_pages_used"] == m["folio_kv_pages_cached"]
    finally:
        assert s.stop() == 0


def test_sigterm_drains_in_flight_requests():
    s = Server("--step-delay-us", "10000")
    result = {}

    def run():
        result["r"] = s.post("/v1/completions", {"prompt": "drain", "max_tokens": 40})

    t = threading.Thread(target=run)
    t.start()
    assert wait_until(lambda: s.metrics()["folio_requests_running"] == 1)
    s.proc.send_signal(signal.SIGTERM)
    t.join(timeout=30)
    status, r = result["r"]
    assert status == 200 and r["usage"]["completion_tokens"] == 40
    assert s.stop() == 0
    assert any("draining 1 requests" in line for line in s.log)


def test_request_bodies_held_at_once_are_bounded():
    """--max-held-body-bytes bounds the bodies being read or waiting to be
    parsed, across connections: past it a request gets a 503 with
    Retry-After before its body is read; once the held body is gone, the
    next one is read again."""
    s = Server("--max-held-body-bytes", "300000")
    try:
        # A short prompt in a large body ("user" is read and ignored).
        body = json.dumps({"prompt": "ab", "max_tokens": 1, "user": "u" * 200000}).encode()
        assert 150000 < len(body) < 300000
        slow = socket.create_connection((s.host, s.port), timeout=30)
        slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: %s:%d\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                     % (s.host.encode(), s.port, len(body)) + body[:1000])
        time.sleep(0.2)  # its header read: its bytes are held
        status, headers, payload = s.request("POST", "/v1/completions", body)
        assert status == 503, payload
        assert "too many request bodies" in json.loads(payload)["error"]["message"]
        assert int(headers["Retry-After"]) >= 1
        slow.close()
        assert wait_until(lambda: s.request("POST", "/v1/completions", body)[0] == 200)
    finally:
        assert s.stop() == 0


def test_a_second_sigterm_ends_streams_with_an_error_not_an_abort_finish():
    """The second SIGTERM stops at once: a stream still running ends with an
    error event (server_error, saying why) and [DONE]; no choice gets finish_reason
    "abort", which is no OpenAI value."""
    s = Server("--step-delay-us", "20000", "--drain-timeout", "60")
    result = {}

    def run():
        result["events"] = s.stream("/v1/completions",
                                    {"prompt": "stop", "max_tokens": 400, "ignore_eos": True})

    t = threading.Thread(target=run)
    t.start()
    assert wait_until(lambda: s.metrics()["folio_requests_running"] == 1)
    s.proc.send_signal(signal.SIGTERM)
    assert wait_until(lambda: any("draining 1 requests" in line for line in s.log))
    s.proc.send_signal(signal.SIGTERM)
    t.join(timeout=30)
    events = result["events"]
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["type"] == "server_error"
    assert "stopped before the request finished" in error["message"]
    finishes = [c.get("finish_reason") for e in events[:-2] for c in json.loads(e)["choices"]]
    assert "abort" not in finishes and len(finishes) < 400
    s.proc.wait(timeout=30)


def test_random_and_mutated_bodies_never_break_the_server(server):
    rng = random.Random(11)
    seeds = [json.dumps(b) for _, b, _ in BAD if not isinstance(b, str)] + [
        json.dumps({"prompt": "ok", "max_tokens": 2}),
        json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                    "stream": True})]
    for i in range(150):
        body = bytearray(rng.choice(seeds).encode())
        for _ in range(rng.randint(1, 6)):
            op = rng.random()
            pos = rng.randrange(len(body) + 1)
            if op < 0.4 and body:
                body[min(pos, len(body) - 1)] = rng.randrange(256)
            elif op < 0.7:
                body[pos:pos] = bytes(rng.choice(b'{}[]",:0123456789-.etrufalsn\\') for _ in
                                      range(rng.randint(1, 4)))
            elif body:
                del body[pos:pos + rng.randint(1, 8)]
        if i % 10 == 0:
            body = bytearray(rng.randbytes(rng.randint(0, 64)))
        endpoint = rng.choice(["/v1/completions", "/v1/chat/completions"])
        status, headers, payload = server.request("POST", endpoint, bytes(body))
        assert status in (200, 400, 404), (status, body, payload)
        if status != 200:
            assert "error" in json.loads(payload)
    status, _, _ = server.request("GET", "/health")
    assert status == 200
    m = server.metrics()
    assert m["folio_requests_running"] == 0 and m["folio_kv_pages_held_by_requests"] == 0


def test_unknown_fields_are_refused_by_name_and_the_documented_ones_ignored(server):
    body = {"prompt": "a", "max_tokens": 2, "seed": 9}
    want = server.post("/v1/completions", body)[1]["choices"][0]["text"]
    status, r = server.post("/v1/completions", {**body, "frobnicate": True})
    assert status == 400 and r["error"]["param"] == "frobnicate", r
    status, r = server.post("/v1/completions", {**body, "store": False, "user": "u",
                                                "metadata": {"a": "b"}, "service_tier": "auto",
                                                "response_format": {"type": "text"}})
    assert status == 200, r
    assert r["choices"][0]["text"] == want


def test_a_request_without_a_seed_gets_a_random_one_reported_back(server):
    body = {"prompt": "random", "max_tokens": 16, "temperature": 1.0}
    seeds, texts = set(), set()
    for _ in range(3):
        status, headers, payload = server.request("POST", "/v1/completions", body)
        assert status == 200
        seeds.add(int(headers["X-Folio-Seed"]))
        texts.add(json.loads(payload)["choices"][0]["text"])
    assert len(seeds) == 3 and len(texts) > 1
    # The reported seed reproduces the text.
    seed = seeds.pop()
    status, headers, payload = server.request("POST", "/v1/completions", {**body, "seed": seed})
    assert int(headers["X-Folio-Seed"]) == seed
    again = server.post("/v1/completions", {**body, "seed": seed})[1]["choices"][0]["text"]
    assert json.loads(payload)["choices"][0]["text"] == again


def test_model_by_id_and_tokenize_detokenize(server):
    status, _, body = server.request("GET", "/v1/models/builtin")
    assert status == 200 and json.loads(body)["id"] == "builtin"
    status, _, body = server.request("GET", "/v1/models/gpt-4")
    assert status == 404 and json.loads(body)["error"]["code"] == "model_not_found"
    status, r = server.post("/tokenize", {"prompt": "hi"})
    assert status == 200, r
    completion = server.post("/v1/completions", {"prompt": "hi", "max_tokens": 1})[1]
    assert r["count"] == len(r["tokens"]) == completion["usage"]["prompt_tokens"]
    messages = [{"role": "user", "content": "hi"}]
    status, chat = server.post("/tokenize", {"messages": messages})
    chat_completion = server.post("/v1/chat/completions", {"messages": messages,
                                                           "max_tokens": 1})[1]
    assert chat["count"] == chat_completion["usage"]["prompt_tokens"]
    status, r = server.post("/detokenize", {"tokens": [104 + 2, 105 + 2]})
    assert status == 200 and r == {"prompt": "hi"}
    status, r = server.post("/detokenize", {"tokens": [-1]})
    assert status == 400 and r["error"]["param"] == "tokens"


def test_api_key_and_aliases():
    s = Server("--api-key", "s3cret", "--served-model-name", "main", "alias")
    try:
        status, _, body = s.request("GET", "/v1/models")
        assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"
        for auth in ("Bearer wrong", "Bearer s3cre", "s3cret", "Bearer s3cret2", "Basic s3cret",
                     "Bearers3cret", "Bearer"):
            status, _, _ = s.request("GET", "/v1/models", headers={"Authorization": auth})
            assert status == 401, auth
        # The scheme is case-insensitive (RFC 9110 11.1), spaces after it are.
        for auth in ("bearer s3cret", "BEARER  s3cret"):
            status, _, _ = s.request("GET", "/v1/models", headers={"Authorization": auth})
            assert status == 200, auth
        assert s.request("GET", "/health")[0] == 200  # open unless --auth-health
        good = {"Authorization": "Bearer s3cret", "Content-Type": "application/json"}
        status, _, body = s.request("GET", "/v1/models", headers=good)
        assert status == 200
        assert [m["id"] for m in json.loads(body)["data"]] == ["main", "alias"]
        status, _, body = s.request("POST", "/v1/completions",
                                    json.dumps({"model": "alias", "prompt": "a",
                                                "max_tokens": 1}), headers=good)
        assert status == 200 and json.loads(body)["model"] == "main"
    finally:
        assert s.stop() == 0


def test_a_public_address_needs_a_key_or_an_explicit_opt_out():
    out = subprocess.run([FOLIO, "serve", "--host", "0.0.0.0", "--port", "0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "--insecure-no-auth" in out.stderr


def test_browser_origins_and_foreign_hosts_are_refused(server):
    body = json.dumps({"prompt": "a", "max_tokens": 1})
    ok = {"Content-Type": "application/json"}
    assert server.request("POST", "/v1/completions", body, ok)[0] == 200
    # A web page's "simple" cross-origin POST carries its Origin.
    status, _, payload = server.request(
        "POST", "/v1/completions", body, {"Content-Type": "text/plain",
                                          "Origin": "https://evil.example"})
    assert status == 403 and "evil.example" in json.loads(payload)["error"]["message"]
    # DNS rebinding: the page's own name, resolved to 127.0.0.1.
    status, _, _ = server.request("POST", "/v1/completions", body,
                                  {**ok, "Host": "evil.example:8000"})
    assert status == 403
    for host in ("localhost:1234", "127.0.0.1", "[::1]:80"):
        assert server.request("GET", "/health", None, {"Host": host})[0] == 200, host
    s = Server("--allowed-origins", "https://app.example")
    try:
        status, _, _ = s.request("POST", "/v1/completions", body,
                                 {**ok, "Origin": "https://app.example"})
        assert status == 200
    finally:
        assert s.stop() == 0


def raw_request(s, head, body=b""):
    """Sends raw bytes, returns (status, body) of the reply."""
    with socket.create_connection((s.host, s.port), timeout=30) as sock:
        sock.sendall(head.encode() + body)
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
        head_bytes, _, rest = got.partition(b"\r\n\r\n")
        status = int(head_bytes.split(b" ")[1])
        length = re.search(rb"Content-Length: (\d+)", head_bytes)
        while length and len(rest) < int(length.group(1)):
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        return status, rest


def test_bodies_are_bounded_before_they_are_read(server):
    pre = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    # A 2 GB announcement is refused at once, before any body byte.
    status, body = raw_request(server, pre + "Content-Length: 2000000000\r\n\r\n")
    assert status == 413 and "error" in json.loads(body)
    status, body = raw_request(server, pre + "Content-Length: 12abc\r\n\r\n")
    assert status == 400 and "byte count" in json.loads(body)["error"]["message"]
    # Chunked bodies are read within the same limit (they were refused with
    # 411 before the event-driven front end, which bounds them while reading).
    payload = b'{"prompt": "a", "max_tokens": 1, "seed": 3}'
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(payload[i:i + 7]), payload[i:i + 7])
                       for i in range(0, len(payload), 7)) + b"0\r\n\r\n"
    status, body = raw_request(server, pre + "Transfer-Encoding: chunked\r\n\r\n", chunked)
    assert status == 200 and json.loads(body)["usage"]["completion_tokens"] == 1
    big = b"".join(b"10000\r\n" + b"a" * 0x10000 + b"\r\n" for _ in range(24)) + b"0\r\n\r\n"
    status, body = raw_request(server, pre + "Transfer-Encoding: chunked\r\n\r\n", big)
    assert status == 413 and "larger than" in json.loads(body)["error"]["message"]
    payload = b'{"prompt": "a", "max_tokens": 1}'
    status, body = raw_request(server, pre + "Content-Encoding: gzip\r\n"
                               f"Content-Length: {len(payload)}\r\n\r\n", payload)
    assert status == 415
    # A transfer coding other than chunked is refused, not ignored.
    status, body = raw_request(server, pre + "Transfer-Encoding: gzip\r\n"
                               f"Content-Length: {len(payload)}\r\n\r\n", payload)
    assert status == 501 and "Transfer-Encoding" in json.loads(body)["error"]["message"]
    # HTTP/1.1 needs exactly one Host (RFC 9112 3.2): 400, not 403.
    no_host = "POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\n"
    status, body = raw_request(server, no_host + f"Content-Length: {len(payload)}\r\n\r\n",
                               payload)
    assert status == 400 and "Host" in json.loads(body)["error"]["message"]
    status, body = raw_request(server, pre + "Host: 127.0.0.1\r\n"
                               f"Content-Length: {len(payload)}\r\n\r\n", payload)
    assert status == 400 and "Host" in json.loads(body)["error"]["message"]
    # Range is ignored: the whole reply, not a multipart of byte ranges.
    ranges = ",".join(f"{i}-{i}" for i in range(0, 40, 2))
    full = server.request("GET", "/metrics")[2]
    status, _, body = server.request("GET", "/metrics", None, {"Range": f"bytes={ranges}"})
    assert status == 200 and body.startswith(b"#") and len(body) < 2 * len(full)


def test_header_bytes_and_form_bodies(server):
    status, _, payload = server.request("POST", "/v1/completions", '{"prompt": "a"}',
                                        {"X-Big": "x" * (20 << 10)})
    assert status == 431 and "header" in json.loads(payload)["error"]["message"]
    # A JSON body is JSON whatever its Content-Type says (curl -d sends
    # form-urlencoded); no limit below --max-body-bytes applies.
    body = json.dumps({"prompt": "a", "max_tokens": 1}) + " " * (9 << 10)
    status, _, payload = server.request("POST", "/v1/completions", body,
                                        {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 200, payload


def test_expect_100_continue(server):
    body = json.dumps({"prompt": "a", "max_tokens": 1}).encode()
    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
        got = sock.recv(4096)
        assert got.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), got
        sock.sendall(body)
        got = b""
        while b"[DONE]" not in got and b'"usage"' not in got:
            chunk = sock.recv(65536)
            assert chunk, got
            got += chunk
        assert got.startswith(b"HTTP/1.1 200")


def read_reply(f):
    """One HTTP reply with a Content-Length or chunked body: (status, body).
    f: the connection's one buffered reader (sock.makefile("rb"))."""
    status = int(f.readline().split(b" ")[1])
    headers = {}
    while (line := f.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while (size := int(f.readline(), 16)) > 0:
            body += f.read(size)
            f.readline()
        f.readline()
    else:
        body = f.read(int(headers.get("content-length", 0)))
    return status, body


def test_keep_alive_and_pipelining_across_generations(server):
    """Requests after a whole reply, after a stream, and pipelined behind a
    running generation, all on one connection. The first two come in one
    send: /health is answered on the front thread, and the completion
    behind it moves the connection, its bytes already read, to the bulk
    threads."""
    plain = json.dumps({"prompt": "a", "max_tokens": 3, "seed": 1})
    stream = json.dumps({"prompt": "a", "max_tokens": 3, "seed": 1, "stream": True})
    health = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

    def post(body):
        return (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Content-Length: {len(body)}\r\n\r\n{body}").encode()

    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        f = sock.makefile("rb")
        sock.sendall(health + post(plain))
        assert read_reply(f)[0] == 200
        status, first = read_reply(f)
        assert status == 200
        sock.sendall(post(stream))
        status, events = read_reply(f)
        assert status == 200 and events.rstrip().endswith(b"data: [DONE]")
        sock.sendall(post(plain) + post(plain) + b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        replies = [read_reply(f) for _ in range(3)]
    assert [r[0] for r in replies] == [200, 200, 200]
    texts = [json.loads(b)["choices"][0]["text"] for b in (first, replies[0][1], replies[1][1])]
    assert texts[0] == texts[1] == texts[2]


@pytest.mark.parametrize("stream,n", [(False, 1), (True, 3), (False, 2)])
def test_disconnect_aborts_every_sample_and_frees_its_pages(stream, n):
    """A client that leaves, streamed or not, aborts its request (every
    parallel sample of it) at once; no page stays held."""
    s = Server("--step-delay-us", "5000")
    try:
        body = json.dumps({"prompt": "slow", "max_tokens": 300, "seed": 0, "n": n,
                           "stream": stream})
        sock = socket.create_connection((s.host, s.port), timeout=30)
        sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
        assert wait_until(lambda: s.metrics()["folio_requests_running"] == n)
        sock.close()
        assert wait_until(lambda: s.metrics()["folio_requests_running"] == 0)
        m = s.metrics()
        assert m['folio_requests_finished_total{reason="abort"}'] == 1
        assert m["folio_kv_pages_held_by_requests"] == 0
    finally:
        assert s.stop() == 0


def test_slow_and_idle_clients_cost_no_service():
    """Hundreds of connections that dribble a header or sit idle: /health
    still answers, the dribblers are cut at --read-timeout, idle keep-alive
    connections at --keep-alive-timeout, and SIGTERM still stops the server."""
    s = Server("--read-timeout", "2", "--keep-alive-timeout", "1")
    socks = []
    try:
        for i in range(300):
            sock = socket.create_connection((s.host, s.port), timeout=30)
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nX-Slow: 1\r\n")
            socks.append(sock)
        status, _, payload = s.request("GET", "/health")
        assert status == 200 and json.loads(payload)["status"] == "ok"
        idle = socket.create_connection((s.host, s.port), timeout=30)
        idle.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert read_reply(idle.makefile("rb"))[0] == 200
        # Cut: the server closes each connection (recv sees the end).
        assert socks[0].recv(4096) == b""
        assert socks[-1].recv(4096) == b""
        assert idle.recv(4096) == b""
        # A dribbling client does not hold up shutdown.
        slow = socket.create_connection((s.host, s.port), timeout=30)
        slow.sendall(b"GET /health HTTP/1.1\r\n")
        assert s.stop(timeout=20) == 0
    finally:
        for sock in socks:
            sock.close()
        if s.proc.poll() is None:
            s.proc.kill()


def test_connections_beyond_the_cap_get_503():
    """A request beyond the cap gets the 503 (/health is the exception, see
    below); a freed slot serves again."""
    s = Server("--max-connections", "4", "--read-timeout", "60")  # the held ones stay
    held = []
    body = {"prompt": "ab", "max_tokens": 1}
    try:
        for _ in range(4):
            held.append(socket.create_connection((s.host, s.port), timeout=30))
        status, _, payload = s.request("POST", "/v1/completions", body)
        assert status == 503 and "too many open connections" in json.loads(payload)["error"]["message"]
        held.pop().close()
        assert wait_until(lambda: s.request("POST", "/v1/completions", body)[0] == 200)
    finally:
        for sock in held:
            sock.close()
        assert s.stop() == 0


def test_connection_cap_fits_the_descriptor_limit():
    """Under `ulimit -n 128` the cap is lowered (and the log says so), so the
    connection past it is answered, not a failed accept(): 128 descriptors
    less 64 for the server itself and 16 for connections past the cap."""
    s = Server("--max-connections", "2048", max_files=128)
    held = []
    try:
        assert any("--max-connections 2048 lowered to 48" in line for line in s.log), s.log
        for _ in range(48):
            held.append(socket.create_connection((s.host, s.port), timeout=30))
        status, _, payload = s.request("POST", "/v1/completions", {"prompt": "ab", "max_tokens": 1})
        assert status == 503 and "too many open connections" in json.loads(payload)["error"]["message"]
        held.pop().close()
        assert wait_until(lambda: s.request("POST", "/v1/completions", {"prompt": "ab", "max_tokens": 1})[0] == 200)
    finally:
        for sock in held:
            sock.close()
        assert s.stop() == 0


def test_at_the_connection_cap_health_answers_and_every_refusal_is_a_503():
    """Past --max-connections the server still reads a few connections'
    requests: /health answers 200, anything else a JSON 503 with
    Retry-After, also when the client sent a body it never got to send in
    full (no reset). Clients that hold those few open in silence cannot
    keep a probe out: a newcomer evicts the oldest of them."""
    s = Server("--max-connections", "4", "--read-timeout", "60")  # the held ones stay
    held = []
    try:
        for _ in range(4):
            held.append(socket.create_connection((s.host, s.port), timeout=30))
        status, _, payload = s.request("GET", "/health")
        assert status == 200 and json.loads(payload) == {"status": "ok"}
        big = {"prompt": "x" * 200_000, "max_tokens": 1}
        for _ in range(30):
            status, headers, payload = s.request("POST", "/v1/completions", big)
            assert status == 503, payload
            assert "too many open connections" in json.loads(payload)["error"]["message"]
            assert int(headers["Retry-After"]) >= 1
        # 40 silent clients past the cap, more than the slice holds: each
        # newcomer evicted an older one, and the probe is answered.
        silent = [socket.create_connection((s.host, s.port), timeout=30) for _ in range(40)]
        held.extend(silent)
        for _ in range(5):
            status, _, payload = s.request("GET", "/health")
            assert status == 200, payload
        # The evicted ones were closed by the server (they read EOF).
        silent[0].settimeout(10)
        assert silent[0].recv(1) == b""
    finally:
        for sock in held:
            sock.close()
        assert s.stop() == 0


def test_speculative_decoding_never_changes_the_output():
    """--speculative-tokens drafts by prompt lookup; per-request
    num_draft_tokens overrides it. Text and log-probs are plain decoding's."""
    s = Server("--speculative-tokens", "4")
    try:
        replies = {}
        for k in (0, None, 2, 16):
            for temperature in (0.0, 0.9):
                body = {"prompt": "abcabcabcabcabcabc", "max_tokens": 40, "seed": 5,
                        "temperature": temperature, "logprobs": 2}
                if k is not None:
                    body["num_draft_tokens"] = k
                status, r = s.post("/v1/completions", body)
                assert status == 200, r
                replies[(k, temperature)] = (r["choices"][0]["text"], r["choices"][0]["logprobs"])
        for temperature in (0.0, 0.9):
            got = [replies[(k, temperature)] for k in (0, None, 2, 16)]
            assert all(g == got[0] for g in got)
        m = s.metrics()
        assert m["folio_spec_verifications_total"] > 0
        assert 0 < m["folio_spec_accepted_tokens_total"] <= m["folio_spec_draft_tokens_total"]
        assert m["folio_kv_pages_held_by_requests"] == 0
        status, r = s.post("/v1/completions", {"prompt": "a", "num_draft_tokens": 17})
        assert status == 400 and r["error"]["param"] == "num_draft_tokens"
    finally:
        assert s.stop() == 0


def test_n_parallel_samples(server):
    """n choices from one prefill: choice 0 is the one-sample request with the
    same seed; streaming interleaves choices by index; usage counts all."""
    body = {"prompt": "parallel", "max_tokens": 12, "seed": 9, "temperature": 1.0, "n": 3}
    status, r = server.post("/v1/completions", body)
    assert status == 200, r
    assert [c["index"] for c in r["choices"]] == [0, 1, 2]
    assert all(c["finish_reason"] == "length" for c in r["choices"])
    assert r["usage"]["completion_tokens"] == 36
    status, one = server.post("/v1/completions", {**body, "n": 1})
    assert one["choices"][0]["text"] == r["choices"][0]["text"]
    assert len({c["text"] for c in r["choices"]}) > 1  # distinct streams
    events = server.stream("/v1/completions", {**body, "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    texts, finishes = ["", "", ""], [None, None, None]
    for e in events[:-2]:
        for c in json.loads(e)["choices"]:
            texts[c["index"]] += c["text"]
            finishes[c["index"]] = c["finish_reason"] or finishes[c["index"]]
    assert texts == [c["text"] for c in r["choices"]] and finishes == ["length"] * 3
    assert json.loads(events[-2])["usage"]["completion_tokens"] == 36
    status, chat = server.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "n": 2, "seed": 1})
    assert status == 200 and [c["index"] for c in chat["choices"]] == [0, 1]
    status, r = server.post("/v1/completions", {"prompt": "a", "n": 9})
    assert status == 400 and "max_num_seqs" in r["error"]["message"]
    m = server.metrics()
    assert m["folio_requests_running"] == 0 and m["folio_kv_pages_held_by_requests"] == 0


def test_best_of_returns_the_most_likely_samples(server):
    """best_of 4, n 2: the two of the four samples (the same four that n = 4
    gives for this seed) with the highest summed log-probability, best first."""
    body = {"prompt": "rank", "max_tokens": 8, "seed": 21, "temperature": 1.0}
    status, four = server.post("/v1/completions", {**body, "n": 4, "logprobs": 0})
    assert status == 200, four
    scored = sorted(((sum(c["logprobs"]["token_logprobs"]), -c["index"], c["text"])
                     for c in four["choices"]), reverse=True)
    status, best = server.post("/v1/completions", {**body, "n": 2, "best_of": 4})
    assert status == 200, best
    assert [c["text"] for c in best["choices"]] == [scored[0][2], scored[1][2]]
    assert [c["index"] for c in best["choices"]] == [0, 1]
    assert best["choices"][0]["logprobs"] is None
    assert best["usage"]["completion_tokens"] == 32


@pytest.mark.parametrize("beam", [
    {"num_beams": 4, "length_penalty": 1.0, "early_stopping": False},
    {"num_beams": 3, "length_penalty": -0.5, "early_stopping": True},
])
def test_beam_search_on_the_built_in_model_matches_a_numpy_reference(server, beam):
    """The beam_search extension on the built-in model (no stop token: every
    hypothesis runs to max_tokens) against the NumPy beam search over folio's
    own logits (`folio logits`, one run per beam prefix): the same
    hypotheses, in order, with the same scores. SmolLM2's chat turn checks
    the end-token path (test_smollm2.py)."""
    import numpy as np
    import beam_reference
    prompt = [0] + [2 + b for b in b"Paged attention"]
    max_tokens, n = 6, 3
    status, reply = server.post("/v1/completions", {"prompt": prompt, "n": n,
                                                    "max_tokens": max_tokens,
                                                    "beam_search": beam})
    assert status == 200, reply
    assert reply["usage"]["completion_tokens"] == n * max_tokens

    def logits(ids):
        out = subprocess.run([FOLIO, "logits", "--tokens", ",".join(map(str, ids))],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["logits"][-1]

    want = beam_reference.beam_search(logits, prompt, beam["num_beams"], max_tokens, set(),
                                      beam["length_penalty"], beam["early_stopping"], n)
    got = [(c["text"], c["finish_reason"]) for c in reply["choices"]]
    # Byte-level: token t is byte t - 2; 0 and 1 (begin, end) have no text.
    assert got == [(bytes(t - 2 for t in tokens if t >= 2).decode("utf-8", "replace"), "length")
                   for tokens, _, _ in want]
    np.testing.assert_allclose([c["beam_score"] for c in reply["choices"]],
                               [score for _, score, _ in want], rtol=1e-9)


def test_a_draft_model_leaves_completions_unchanged(server):
    """--draft-model (here the built-in model drafting for itself): the same
    completion as without speculation, for a sampled and a greedy request,
    with drafts proposed and accepted; a missing draft model is refused."""
    s = Server("--draft-model", "builtin", "--speculative-tokens", "4")
    try:
        for body in ({"prompt": "paged", "max_tokens": 24, "seed": 5, "temperature": 0.9},
                     {"prompt": "paged", "max_tokens": 24, "temperature": 0}):
            status, want = server.post("/v1/completions", body)
            assert status == 200, want
            status, got = s.post("/v1/completions", body)
            assert status == 200, got
            assert got["choices"][0]["text"] == want["choices"][0]["text"]
        m = s.metrics()
        assert m["folio_spec_draft_tokens_total"] > 0
        assert m["folio_spec_accepted_tokens_total"] > 0
    finally:
        assert s.stop() == 0
    bad = subprocess.run([FOLIO, "serve", "--port", "0", "--draft-model", "/nonexistent"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "--draft-model" in bad.stderr

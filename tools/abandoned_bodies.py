#!/usr/bin/env python3
"""N clients send a 1 MB completion body each and close without reading.
Prints, for each folio binary, the server's RSS (start, peak, after) and a
normal 4-token completion's latency unloaded and right after the attack.

    python3 tools/abandoned_bodies.py BIN[,BIN2] N MODEL prompt|user

`prompt`: a one-word 1 MB prompt; `user`: a short prompt in a body padded
to 1 MB by the ignored "user" field (cheap to parse).
"""
import asyncio, json, re, subprocess, sys, threading, time, urllib.request
MODEL = sys.argv[3]
def serve(binary):
    p = subprocess.Popen([binary, "serve", "--model", MODEL, "--port", "0", "--threads", "1"], stderr=subprocess.PIPE, text=True)
    while True:
        line = p.stderr.readline()
        if not line:
            sys.exit(f"{binary} serve did not start")
        m = re.search(r"listening on http://[\d.]+:(\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, int(m.group(1))
def rss(pid, key):
    for l in open(f"/proc/{pid}/status"):
        if l.startswith(key): return int(l.split()[1]) // 1024
def normal(port):
    t = time.time()
    body = json.dumps({"prompt": "The capital of France is", "max_tokens": 4, "temperature": 0}).encode()
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"}), timeout=300).read()
    return time.time() - t
async def one(port, payload):
    try:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(payload))
        w.write(payload)
        await w.drain()
        w.close()
    except OSError:
        pass
async def attack(port, n, payload):
    sem = asyncio.Semaphore(200)
    async def lim():
        async with sem:
            await one(port, payload)
    await asyncio.gather(*(lim() for _ in range(n)))
n = int(sys.argv[2])
payload = json.dumps({"prompt": "a" * 1000000, "max_tokens": 4} if sys.argv[4] == "prompt" else {"prompt": "hello", "max_tokens": 4, "user": "u" * 1000000}).encode()
for binary in sys.argv[1].split(","):
    p, port = serve(binary)
    time.sleep(0.5)
    unloaded = min(normal(port) for _ in range(3))
    base = rss(p.pid, "VmRSS")
    t0 = time.time()
    asyncio.run(attack(port, n, payload))
    sent = time.time() - t0
    during = normal(port)
    time.sleep(1)
    print(f"{binary}: {n} abandoned 1 MB bodies sent in {sent:.1f} s; RSS start {base} MiB, peak {rss(p.pid,'VmHWM')} MiB, after {rss(p.pid,'VmRSS')} MiB; normal completion {unloaded*1000:.0f} ms unloaded, {during*1000:.0f} ms right after", flush=True)
    p.terminate(); p.wait()

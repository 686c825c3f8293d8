#!/usr/bin/env python3
"""How much KV memory one long request holds on a model with sliding-window
layers, against what it would hold with every layer global. Prints JSON.

    python3 bench/window_memory.py --folio build/bin/folio \\
        --model ~/.cache/folio/gemma-3-270m-q4_k_m.gguf --context 8192

It starts `folio serve`, sends one greedy completion whose prompt is about
--context tokens, and polls /metrics while the request runs. The request's
pages are folio_kv_pages_held_by_requests (the prefix cache's are apart),
at their peak and at the last poll (decoding); a page costs
folio_kv_page_bytes. /metrics is published between steps: within a prefill
step of C tokens a windowed group also holds the step's own rows, at most
ceil((W - 1 + C) / page_size) + 1 pages, which the rule gives as
"within_step_bound" (C = --step-tokens). Every layer global would hold
ceil(tokens / page_size) pages of all the model's layers: the layer groups
from `folio info` say how many layers one page holds.
"""
import argparse, json, math, re, subprocess, sys, threading, time, urllib.error, urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("--folio", default="build/bin/folio")
ap.add_argument("--model", required=True)
ap.add_argument("--context", type=int, default=8192)
ap.add_argument("--max-tokens", type=int, default=16)
ap.add_argument("--page-size", type=int, default=16)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--step-tokens", type=int, default=512, help="--max-num-batched-tokens")
a = ap.parse_args()

info = json.loads(subprocess.run([a.folio, "info", a.model], check=True,
                                 capture_output=True, text=True).stdout)
groups = info["kv_layer_groups"]
layers_per_page = len(groups[0]["layers"])

p = subprocess.Popen([a.folio, "serve", "--model", a.model, "--port", "0", "--threads",
                      str(a.threads), "--page-size", str(a.page_size),
                      "--max-num-batched-tokens", str(a.step_tokens), "--num-pages", "4096"],
                     stderr=subprocess.PIPE, text=True)
port = None
while port is None:
    line = p.stderr.readline()
    if not line:
        sys.exit("folio serve did not start")
    m = re.search(r"listening on http://[\d.]+:(\d+)", line)
    if m:
        port = int(m.group(1))
threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()

def metrics():
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    return {k: float(v) for k, v in re.findall(r"^(folio_kv_\w+) (\S+)$", text, re.M)}

# Words of varied length, so the prompt's token count grows steadily.
words = ["river", "stone", "lantern", "quietly", "northern", "harvest", "window", "copper",
         "meadow", "signal", "between", "orchard", "thunder", "paper", "silver", "morning"]
prompt = " ".join(words[(i * 7 + i // 16) % len(words)] for i in range(a.context))
body = {"prompt": prompt, "max_tokens": a.max_tokens, "temperature": 0, "ignore_eos": True}
tok = json.loads(urllib.request.urlopen(urllib.request.Request(
    f"http://127.0.0.1:{port}/tokenize", json.dumps({"prompt": prompt}).encode(),
    {"Content-Type": "application/json"}), timeout=120).read())
n_prompt = tok["count"]
if n_prompt > a.context:  # trim to about the context asked for
    body["prompt"] = prompt[: int(len(prompt) * a.context / n_prompt)]

peak = {"held": 0.0, "used": 0.0, "last": 0.0}
done = threading.Event()
def poll():
    while not done.is_set():
        m = metrics()
        held = m.get("folio_kv_pages_held_by_requests", 0)
        peak["held"] = max(peak["held"], held)
        if held > 0:
            peak["last"] = held  # while decoding, once the prompt is in
        peak["used"] = max(peak["used"], m.get("folio_kv_pages_used", 0))
        peak["page_bytes"] = m["folio_kv_page_bytes"]
        time.sleep(0.05)
threading.Thread(target=poll, daemon=True).start()
t0 = time.time()
try:
    reply = json.loads(urllib.request.urlopen(urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/completions", json.dumps(body).encode(),
        {"Content-Type": "application/json"}), timeout=3600).read())
except urllib.error.HTTPError as e:
    p.terminate()
    sys.exit(f"completion refused: {e.code} {e.read().decode()}")
seconds = time.time() - t0
time.sleep(0.3)
done.set()
p.terminate()
p.wait()

usage = reply["usage"]
tokens = usage["prompt_tokens"] + usage["completion_tokens"] - 1  # the last is never fed
all_global_pages = math.ceil(tokens / a.page_size) * info["layers"] / layers_per_page
# Within a prefill step (the peak is the prompt's last step: the global
# groups then hold the whole prompt).
prompt_pages = math.ceil(usage["prompt_tokens"] / a.page_size)
within_step = sum(prompt_pages if g["window"] == 0 else
                  min(prompt_pages, math.ceil((g["window"] - 1 + a.step_tokens) / a.page_size) + 1)
                  for g in groups)
out = {
    "model": a.model,
    "layers": info["layers"],
    "kv_layer_groups": len(groups),
    "layers_per_page": layers_per_page,
    "windows": sorted({g["window"] for g in groups}),
    "page_size": a.page_size,
    "page_bytes": peak["page_bytes"],
    "prompt_tokens": usage["prompt_tokens"],
    "completion_tokens": usage["completion_tokens"],
    "request_pages_peak": peak["held"],
    "request_bytes_peak": peak["held"] * peak["page_bytes"],
    "all_global_bytes": all_global_pages * peak["page_bytes"],
    "ratio_peak": peak["held"] / all_global_pages,
    "request_pages_decoding": peak["last"],
    "ratio_decoding": peak["last"] / all_global_pages,
    "step_tokens": a.step_tokens,
    "request_pages_within_step_bound": within_step,
    "ratio_within_step_bound": within_step / all_global_pages,
    "pool_pages_used_peak": peak["used"],
    "seconds": round(seconds, 1),
}
print(json.dumps(out, indent=2))

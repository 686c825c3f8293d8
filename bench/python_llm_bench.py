"""What the Python API costs over the C++ engine alone (docs/performance.md,
"The engine from Python").

    PYTHONPATH=build/python python3 bench/python_llm_bench.py --model M.gguf \\
        [--folio build/bin/folio] [--num-seqs 64] [--input-len 32] [--output-len 32]

1. Batch throughput: `folio bench serve`'s paged mode (the engine driven
   by C++, step time only) against LLM.generate (wall time, Python
   included) on the same workload: num_seqs prompts of input_len random
   token ids, each generating exactly output_len tokens greedily (the
   bench stops a request at its drawn length, LLM uses ignore_eos and
   max_tokens), all submitted at once, max_num_seqs = num_seqs,
   max_num_batched_tokens = prefill_step, page size 16, f32 K/V, no prefix
   caching (random prompts share nothing), a pool of num_seqs full-length
   requests, every core.
2. Streaming latency: one request of stream_tokens tokens on AsyncLLM,
   consumed token by token, against the same request through
   LLM.generate: the difference per token is what streaming adds (the
   event-loop wake-up, building each cumulative RequestOutput).
Prints one JSON object.
"""
import argparse
import asyncio
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

from folio import LLM, AsyncLLM, SamplingParams


def cpp_bench(a):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "serve.json")
        cmd = [a.folio, "bench", "serve", "--model", a.model, "--num-seqs", str(a.num_seqs),
               "--batch-size", str(a.num_seqs), "--min-input-len", str(a.input_len),
               "--max-input-len", str(a.input_len), "--min-output-len", str(a.output_len),
               "--max-output-len", str(a.output_len), "--prefill-step", str(a.prefill_step),
               "--no-sweep", "--repeats", "1", "--threads", "0", "-o", out]
        subprocess.run(cmd, check=True, capture_output=True, timeout=3600)
        with open(out) as f:
            report = json.load(f)
    return " ".join(cmd), report


def python_batch(a):
    pages = a.num_seqs * math.ceil((a.input_len + a.output_len) / 16)
    llm = LLM(a.model, prefix_caching=False, max_num_seqs=a.num_seqs,
              max_num_batched_tokens=a.prefill_step, page_size=16, num_pages=pages,
              kv_dtype="f32", threads=0)
    vocab = llm.model_info["vocab_size"]
    rng = random.Random(7)
    prompts = [[rng.randrange(vocab) for _ in range(a.input_len)] for _ in range(a.num_seqs)]
    params = SamplingParams(temperature=0, max_tokens=a.output_len, ignore_eos=True)
    llm.generate(prompts[:2], SamplingParams(temperature=0, max_tokens=2), use_tqdm=False)
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    seconds = time.perf_counter() - t0
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    llm.shutdown()
    return {"output_tokens": tokens, "seconds": seconds,
            "output_tokens_per_second": tokens / seconds}


def streaming(a):
    params = SamplingParams(temperature=0, max_tokens=a.stream_tokens, ignore_eos=True)
    prompt = "The capital of France is"
    llm = LLM(a.model, threads=0)
    llm.generate(prompt, SamplingParams(max_tokens=2), use_tqdm=False)
    runs = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        llm.generate(prompt, params, use_tqdm=False)
        runs.append((time.perf_counter() - t0) / a.stream_tokens)
    llm.shutdown()
    plain = statistics.median(runs)

    async def stream_once(engine):
        gaps, last, n = [], time.perf_counter(), 0
        t0 = last
        async for out in engine.generate(prompt, params):
            now = time.perf_counter()
            k = len(out.outputs[0].token_ids)
            gaps.extend([(now - last) / (k - n)] * (k - n))
            last, n = now, k
        return (time.perf_counter() - t0) / a.stream_tokens, gaps

    async def main():
        async with AsyncLLM(a.model, threads=0) as engine:
            await stream_once(engine)
            return [await stream_once(engine) for _ in range(a.repeats)]

    streamed = asyncio.run(main())
    per_token = statistics.median(s for s, _ in streamed)
    gaps = sorted(g for _, gs in streamed for g in gs[1:])
    return {"tokens": a.stream_tokens, "generate_s_per_token": plain,
            "asyncllm_s_per_token": per_token,
            "added_us_per_token": (per_token - plain) * 1e6,
            "asyncllm_inter_token_p50_ms": gaps[len(gaps) // 2] * 1e3,
            "asyncllm_inter_token_p99_ms": gaps[int(len(gaps) * 0.99)] * 1e3}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--folio", default="build/bin/folio")
    ap.add_argument("--num-seqs", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--prefill-step", type=int, default=512)
    ap.add_argument("--stream-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-cpp", action="store_true")
    a = ap.parse_args()
    result = {"model": a.model, "num_seqs": a.num_seqs, "input_len": a.input_len,
              "output_len": a.output_len, "prefill_step": a.prefill_step,
              "cpu_count": os.cpu_count()}
    if not a.skip_cpp:
        cmd, report = cpp_bench(a)
        result["cpp_command"] = cmd
        result["cpp_paged"] = report["modes"]["paged"] if "modes" in report else report
    result["python_generate"] = python_batch(a)
    result["streaming"] = streaming(a)
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()

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
   The two run alternately, --rounds times each, and the medians and the
   paired ratios are reported: the machine is shared, so only runs close
   in time compare.
2. Streaming latency: one request of stream_tokens tokens on AsyncLLM,
   consumed token by token, against the same request through
   LLM.generate, alternately: the difference per token is what streaming
   adds (the event loop's wake-up, building each cumulative
   RequestOutput). On the built-in model (a step costs microseconds, so
   the difference is the overhead itself) and on --model.
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


def python_batch(a, llm):
    vocab = llm.model_info["vocab_size"]
    rng = random.Random(7)
    prompts = [[rng.randrange(vocab) for _ in range(a.input_len)] for _ in range(a.num_seqs)]
    params = SamplingParams(temperature=0, max_tokens=a.output_len, ignore_eos=True)
    llm.generate(prompts[:2], SamplingParams(temperature=0, max_tokens=2), use_tqdm=False)
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params, use_tqdm=False)
    seconds = time.perf_counter() - t0
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    return {"output_tokens": tokens, "seconds": seconds,
            "output_tokens_per_second": tokens / seconds}


def streaming(model, tokens, rounds):
    params = SamplingParams(temperature=0, max_tokens=tokens, ignore_eos=True)
    prompt = "The capital of France is"
    llm = LLM(model, threads=0)
    engine = AsyncLLM(model, threads=0)

    async def stream_once():
        gaps, last, n = [], time.perf_counter(), 0
        t0 = last
        async for out in engine.generate(prompt, params):
            now = time.perf_counter()
            k = len(out.outputs[0].token_ids)
            gaps.extend([(now - last) / (k - n)] * (k - n))
            last, n = now, k
        return (time.perf_counter() - t0) / tokens, gaps

    plain, streamed, gaps = [], [], []

    async def alternate():
        for r in range(rounds + 1):  # the first round warms up
            t0 = time.perf_counter()
            llm.generate(prompt, params, use_tqdm=False)
            p = (time.perf_counter() - t0) / tokens
            s, g = await stream_once()
            if r:
                plain.append(p)
                streamed.append(s)
                gaps.extend(g[1:])

    asyncio.run(alternate())
    llm.shutdown()
    engine.shutdown()
    gaps.sort()
    return {"model": model, "tokens": tokens, "rounds": rounds,
            "generate_us_per_token": statistics.median(plain) * 1e6,
            "asyncllm_us_per_token": statistics.median(streamed) * 1e6,
            "added_us_per_token_paired_median":
                statistics.median(s - p for s, p in zip(streamed, plain)) * 1e6,
            "asyncllm_inter_token_p50_us": gaps[len(gaps) // 2] * 1e6,
            "asyncllm_inter_token_p99_us": gaps[int(len(gaps) * 0.99)] * 1e6}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--folio", default="build/bin/folio")
    ap.add_argument("--num-seqs", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=32)
    ap.add_argument("--output-len", type=int, default=32)
    ap.add_argument("--prefill-step", type=int, default=512)
    ap.add_argument("--stream-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    result = {"model": a.model, "num_seqs": a.num_seqs, "input_len": a.input_len,
              "output_len": a.output_len, "prefill_step": a.prefill_step,
              "cpu_count": os.cpu_count()}
    pages = a.num_seqs * math.ceil((a.input_len + a.output_len) / 16)
    llm = LLM(a.model, prefix_caching=False, max_num_seqs=a.num_seqs,
              max_num_batched_tokens=a.prefill_step, page_size=16, num_pages=pages,
              kv_dtype="f32", threads=0)
    cpp, py = [], []
    for _ in range(a.rounds):
        cmd, report = cpp_bench(a)
        cpp.append(report["modes"]["paged"]["output_tokens_per_second"])
        py.append(python_batch(a, llm)["output_tokens_per_second"])
    llm.shutdown()
    result["cpp_command"] = cmd
    result["batch"] = {"cpp_output_tokens_per_second": cpp,
                       "python_output_tokens_per_second": py,
                       "cpp_median": statistics.median(cpp),
                       "python_median": statistics.median(py),
                       "python_over_cpp_paired_median":
                           statistics.median(p / c for p, c in zip(py, cpp))}
    print(json.dumps(result["batch"]), file=sys.stderr, flush=True)  # progress
    result["streaming_builtin"] = streaming("builtin", 480, 5)
    result["streaming_model"] = streaming(a.model, a.stream_tokens, a.rounds)
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()

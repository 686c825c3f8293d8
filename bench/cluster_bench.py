#!/usr/bin/env python3
"""folio.cluster: what a prefill -> decode hand-off costs on a local Ray
cluster, against mixed serving in the same run.

For each model and prompt length, one request (greedy, 3 tokens) is served
by a mixed cluster (one replica) and by a disaggregated one (one prefill and
one decode replica), alternating, `--rounds` times each. Per mode: time to
the first token (TTFT) and to the first decoded token (the second one:
after the hand-off when disaggregated), and the snapshot's bytes. Then the
transport alone: arrays of the sizes a ~1B Llama's snapshots would have
(16 layers, 8 K/V heads of 64, f32 and bf16 pages) put by one actor and
read by another through Ray's object store (mapped, then copied once, as a
decode replica imports a snapshot). Prints JSON; medians with min and max.

usage: bench/cluster_bench.py [--model PATH ...] [--synthetic-1b PATH]
                              [--lengths 1024,8000] [--rounds 3] [--threads 1]
--synthetic-1b PATH serves a ~1B Llama shape too (16 layers, hidden 2048,
32 heads, 8 K/V heads of 64, FFN 8192; a 258-token byte-level BPE
vocabulary; random Q8_0 weights), written to PATH first when it is not there (~1.1 GB).
Needs Ray (tools/setup.sh installs it). The replicas share this machine's
cores: on 2 cores, set --threads 1.
"""
import argparse
import asyncio
import json
import os
import platform
import statistics
import time

import numpy as np
import ray

from folio import SamplingParams
from folio.cluster import Cluster

SMOLLM2 = os.path.join(os.environ.get("FOLIO_MODEL_CACHE", os.path.expanduser("~/.cache/folio")),
                       "SmolLM2-135M-Instruct.Q4_1.gguf")


def write_synthetic_1b(path):
    """A ~1B-parameter Llama GGUF with random Q8_0 weights: for timing
    only."""
    import gguf
    hidden, layers, heads, kv_heads, ffn, vocab = 2048, 16, 32, 8, 8192, 258
    head_dim = hidden // heads
    rng = np.random.default_rng(1)
    w = gguf.GGUFWriter(path + ".part", "llama")
    w.add_context_length(8448)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    # A byte-level BPE vocabulary (GPT-2's byte symbols, no merges) and two
    # special tokens: the benchmark sends token ids, this only has to load.
    byte_chars = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) \
        + list(range(ord("\u00ae"), ord("\u00ff") + 1))
    symbols, extra = {}, 0
    for b in range(256):
        if b in byte_chars:
            symbols[b] = chr(b)
        else:
            symbols[b] = chr(256 + extra)
            extra += 1
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list([symbols[b] for b in range(256)] + ["<s>", "</s>"])
    w.add_token_merges([])
    w.add_bos_token_id(256)
    w.add_eos_token_id(257)

    def q8_0(rows, cols):  # blocks of 32: an f16 scale, then 32 int8
        blocks = np.empty((rows, cols // 32, 34), dtype=np.uint8)
        blocks[:, :, :2] = np.full((rows, cols // 32, 1), 0.02 / 127,
                                   dtype=np.float16).view(np.uint8)
        blocks[:, :, 2:] = rng.integers(-127, 128, size=(rows, cols // 32, 32),
                                        dtype=np.int8).view(np.uint8)
        return blocks.reshape(rows, -1)

    w.add_tensor("token_embd.weight", rng.uniform(-0.05, 0.05, (vocab, hidden)).astype(np.float32))
    w.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    q8 = gguf.GGMLQuantizationType.Q8_0
    for i in range(layers):
        for name, (rows, cols) in {"attn_q": (hidden, hidden), "attn_k": (kv_heads * head_dim, hidden),
                                   "attn_v": (kv_heads * head_dim, hidden),
                                   "attn_output": (hidden, hidden), "ffn_gate": (ffn, hidden),
                                   "ffn_up": (ffn, hidden), "ffn_down": (hidden, ffn)}.items():
            w.add_tensor(f"blk.{i}.{name}.weight", q8_0(rows, cols), raw_dtype=q8)
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".part", path)


def spread(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


async def one_request(cluster, prompt_ids, rid):
    sp = SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)
    t0 = time.perf_counter()
    ttft = second = None
    tokens = None
    async for out in cluster.generate({"prompt_token_ids": prompt_ids}, sp, rid):
        n = len(out.outputs[0].token_ids)
        now = time.perf_counter() - t0
        if ttft is None and n >= 1:
            ttft = now
        if second is None and n >= 2:
            second = now
        tokens = out.outputs[0].token_ids
    return ttft, second, tokens


def run_model(model, lengths, rounds, threads):
    rows = []
    opts = {"threads": threads, "kv_dtype": "f32", "kv_bytes": 1 << 30}
    mixed = Cluster(model, num_replicas=1, engine_options={**opts, "max_num_batched_tokens": 512},
                    replica_cpus=0)
    disagg = Cluster(model, mode="disaggregated", num_prefill=1, num_decode=1,
                     engine_options={**opts, "max_num_batched_tokens": 512}, replica_cpus=0)
    info = mixed.model_info
    vocab = int(info["vocab_size"])
    try:
        for length in lengths:
            if length + 3 > int(info["max_positions"]):
                rows.append({"prompt_tokens": length, "skipped": "beyond the model's context"})
                continue
            rng = np.random.default_rng(length)
            times = {"mixed": ([], []), "disaggregated": ([], [])}
            outputs = {}
            bytes_before = disagg.handoff_bytes
            for r in range(rounds):
                # Fresh tokens each round: no prefix cache hit.
                ids = [int(t) for t in rng.integers(2, vocab, size=length)]
                for name, c in (("mixed", mixed), ("disaggregated", disagg)):
                    ttft, second, toks = asyncio.run(one_request(c, ids, f"{name}-{length}-{r}"))
                    times[name][0].append(ttft)
                    times[name][1].append(second)
                    outputs.setdefault(r, []).append(toks)
            snapshot_bytes = (disagg.handoff_bytes - bytes_before) / rounds
            row = {"prompt_tokens": length, "snapshot_bytes": snapshot_bytes,
                   "outputs_identical": all(a == b for a, b in outputs.values())}
            for name, (ttft, second) in times.items():
                row[name] = {"ttft_s": spread(ttft), "first_decode_token_s": spread(second)}
            # The hand-off's share: disaggregated minus mixed, per round.
            extra = [d2 - m2 for m2, d2 in zip(times["mixed"][1], times["disaggregated"][1])]
            row["handoff_extra_s"] = spread(extra)
            row["handoff_s_per_mib"] = statistics.median(extra) / (snapshot_bytes / 2**20)
            rows.append(row)
    finally:
        mixed.shutdown()
        disagg.shutdown()
    return {"model": model, "kv_dtype": "f32", "page_size": info["page_size"],
            "kv_bytes_per_token": info["page_bytes"] / info["page_size"], "rows": rows}


@ray.remote(num_cpus=0)
class Holder:
    def make(self, nbytes):
        return np.ones(nbytes, dtype=np.uint8)

    def read(self, arr):
        # As a decode replica reads a snapshot: the object store maps it
        # (zero-copy), the import takes one copy.
        return len(arr.tobytes())


def transport(rounds):
    """Object-store transport of snapshot-sized arrays between two actors."""
    a, b = Holder.remote(), Holder.remote()
    per_token = {"f32": 16 * 2 * 8 * 64 * 4, "bf16": 16 * 2 * 8 * 64 * 2}
    rows = []
    for dtype, bpt in per_token.items():
        for tokens in (1024, 8192):
            nbytes = bpt * tokens
            ts = []
            for _ in range(rounds):
                ref = a.make.remote(nbytes)
                ray.wait([ref])
                t0 = time.perf_counter()
                ray.get(b.read.remote(ref))
                ts.append(time.perf_counter() - t0)
                del ref
            rows.append({"model": "~1B Llama shape (16 layers, 8 K/V heads x 64)",
                         "kv_dtype": dtype, "prompt_tokens": tokens, "bytes": nbytes,
                         "actor_to_actor_s": spread(ts),
                         "gib_per_s": nbytes / statistics.median(ts) / 2**30})
    return rows


def driver_stream(rounds):
    """Streaming through the driver: one long greedy request on the built-in
    model (fast, so per-output costs show) via a one-replica cluster against
    the same engine in-process (AsyncLLM), alternating."""
    from folio import AsyncLLM
    opts = {"threads": 1, "builtin_context": 4096}
    cluster = Cluster("builtin", num_replicas=1, engine_options=opts, replica_cpus=0)
    local = AsyncLLM("builtin", **opts)
    sp = SamplingParams(temperature=0, max_tokens=2000, ignore_eos=True)

    async def run(gen):
        t0 = time.perf_counter()
        outs = 0
        async for _ in gen:
            outs += 1
        return time.perf_counter() - t0, outs

    rows = {"cluster": [], "in_process": []}
    try:
        for r in range(rounds):
            rows["cluster"].append(asyncio.run(run(cluster.generate("x", sp, f"s{r}"))))

            async def direct():
                return await run(local.generate("x", sp))
            rows["in_process"].append(asyncio.run(direct()))
    finally:
        cluster.shutdown()
        local.shutdown()
    out = {"tokens": 2000}
    for name, rs in rows.items():
        out[name] = {"tokens_per_s": spread([2000 / t for t, _ in rs]),
                     "outputs": spread([n for _, n in rs])}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", action="append")
    ap.add_argument("--lengths", default="1024,8000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--synthetic-1b")
    args = ap.parse_args()
    models = args.model or ([SMOLLM2] if os.path.exists(SMOLLM2) else ["builtin"])
    if args.synthetic_1b:
        if not os.path.exists(args.synthetic_1b):
            write_synthetic_1b(args.synthetic_1b)
        models = (args.model or []) + [args.synthetic_1b]
    lengths = [int(x) for x in args.lengths.split(",") if x]  # "": transport only
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    try:
        report = {
            "machine": {"cpu": platform.processor() or platform.machine(),
                        "cores": os.cpu_count(), "ray": ray.__version__},
            "serving": [run_model(m, lengths, args.rounds, args.threads)
                        for m in models] if lengths else [],
            "transport": transport(args.rounds),
            "driver_stream": driver_stream(args.rounds),
        }
    finally:
        ray.shutdown()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Decode attention: folio's paged kernel against ONNX Runtime's fused CPU
GroupQueryAttention (com.microsoft), on the same K/V in the same run.

ONNX Runtime reads the K/V densely, [batch, kv_heads, context, head_dim]
f32, with its past and present buffers shared (IO binding), so a call does
one decode step over `context` keys and copies nothing. folio reads the same
values through a block table from a pool of 16-token pages dealt in a
shuffled order, as f32 and as bf16 pages (folio.paged_attention, the same
kernel the engine runs). Rounds alternate the three, so a slow spell of the
machine hits them alike. Prints JSON: per (batch, context) the median time
of each, the bytes each read, and folio's time over ONNX Runtime's per round
(median, min, max).

A benchmark-only dependency: `make bench-setup` installs onnxruntime and
onnx; `make test` never needs them.

    PYTHONPATH=build/python python3 bench/ort_attention_bench.py --threads 2
"""
import argparse
import json
import platform
import statistics
import sys
import time

import numpy as np

try:
    import onnxruntime as ort
    from onnx import TensorProto, helper
except ImportError:
    sys.exit("bench/ort_attention_bench.py needs onnxruntime and onnx: run `make bench-setup`")
import folio


def gqa_session(batch, q_heads, kv_heads, head_dim, context, threads):
    f32, i32 = TensorProto.FLOAT, TensorProto.INT32
    node = helper.make_node(
        "GroupQueryAttention",
        ["query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length"],
        ["output", "present_key", "present_value"], domain="com.microsoft",
        num_heads=q_heads, kv_num_heads=kv_heads, scale=head_dim ** -0.5)
    cache = [batch, kv_heads, context, head_dim]
    graph = helper.make_graph([node], "gqa", [
        helper.make_tensor_value_info("query", f32, [batch, 1, q_heads * head_dim]),
        helper.make_tensor_value_info("key", f32, [batch, 1, kv_heads * head_dim]),
        helper.make_tensor_value_info("value", f32, [batch, 1, kv_heads * head_dim]),
        helper.make_tensor_value_info("past_key", f32, cache),
        helper.make_tensor_value_info("past_value", f32, cache),
        helper.make_tensor_value_info("seqlens_k", i32, [batch]),
        helper.make_tensor_value_info("total_sequence_length", i32, [1]),
    ], [
        helper.make_tensor_value_info("output", f32, [batch, 1, q_heads * head_dim]),
        helper.make_tensor_value_info("present_key", f32, cache),
        helper.make_tensor_value_info("present_value", f32, cache),
    ])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                     helper.make_opsetid("com.microsoft", 1)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])


def bf16_bits(x):
    u = x.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def time_call(fn, min_seconds=0.05):
    """Seconds per call: as many calls as fill min_seconds."""
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / n


def run_config(batch, context, args):
    hq, hkv, d, page = args.q_heads, args.kv_heads, args.head_dim, args.page_size
    rng = np.random.default_rng(args.seed)
    keys = rng.uniform(-1, 1, (batch, hkv, context, d)).astype(np.float32)
    values = rng.uniform(-1, 1, (batch, hkv, context, d)).astype(np.float32)
    query = rng.uniform(-1, 1, (batch, hq, 1, d)).astype(np.float32)

    # ONNX Runtime: the new token is the cache's last row, written in place.
    sess = gqa_session(batch, hq, hkv, d, context, args.threads)
    io = sess.io_binding()
    past_k = ort.OrtValue.ortvalue_from_numpy(keys.copy())
    past_v = ort.OrtValue.ortvalue_from_numpy(values.copy())
    q_in = np.ascontiguousarray(query.reshape(batch, 1, hq * d))
    k_in = np.ascontiguousarray(keys[:, :, context - 1, :].reshape(batch, 1, hkv * d))
    v_in = np.ascontiguousarray(values[:, :, context - 1, :].reshape(batch, 1, hkv * d))
    for name, arr in [("query", q_in), ("key", k_in), ("value", v_in),
                      ("seqlens_k", np.full((batch,), context - 1, np.int32)),
                      ("total_sequence_length", np.array([context], np.int32))]:
        io.bind_cpu_input(name, arr)
    io.bind_ortvalue_input("past_key", past_k)
    io.bind_ortvalue_input("past_value", past_v)
    ort_out = np.zeros((batch, 1, hq * d), np.float32)
    io.bind_output("output", "cpu", 0, np.float32, ort_out.shape, ort_out.ctypes.data)
    io.bind_ortvalue_output("present_key", past_k)
    io.bind_ortvalue_output("present_value", past_v)

    # folio: the same rows in 16-token pages, dealt in a shuffled order.
    pages_per_seq = -(-context // page)
    perm = rng.permutation(batch * pages_per_seq).astype(np.int32)
    table = perm.reshape(batch, pages_per_seq)
    padded = pages_per_seq * page
    pool_k = np.zeros((batch * pages_per_seq, hkv, page, d), np.float32)
    pool_v = np.zeros_like(pool_k)
    for b in range(batch):
        kb = np.zeros((hkv, padded, d), np.float32)
        vb = np.zeros_like(kb)
        kb[:, :context], vb[:, :context] = keys[b], values[b]
        for lp in range(pages_per_seq):
            pool_k[table[b, lp]] = kb[:, lp * page:(lp + 1) * page]
            pool_v[table[b, lp]] = vb[:, lp * page:(lp + 1) * page]
    pools = {"folio_f32": (pool_k, pool_v),
             "folio_bf16": (bf16_bits(pool_k), bf16_bits(pool_v))}
    lens = np.full((batch,), context, np.int32)

    def folio_call(kind):
        kp, vp = pools[kind]
        return folio.paged_attention(query, kp, vp, table, lens, page,
                                     num_threads=args.threads)

    calls = {"onnxruntime_gqa": lambda: sess.run_with_iobinding(io),
             "folio_f32": lambda: folio_call("folio_f32"),
             "folio_bf16": lambda: folio_call("folio_bf16")}
    # Same answer first (f32 against f32).
    sess.run_with_iobinding(io)
    mine = np.asarray(folio_call("folio_f32")).reshape(batch, 1, hq * d)
    max_diff = float(np.abs(mine - ort_out).max())
    for fn in calls.values():  # warm-up
        fn()
    samples = {name: [] for name in calls}
    for r in range(args.rounds):
        order = list(calls) if r % 2 == 0 else list(reversed(calls))
        for name in order:
            samples[name].append(time_call(calls[name]))
    elems = 2 * batch * hkv * context * d
    row = {"batch": batch, "context": context, "max_abs_diff_f32": max_diff}
    for name, s in samples.items():
        bytes_read = elems * (2 if name == "folio_bf16" else 4)
        med = statistics.median(s)
        row[name] = {"median_us": med * 1e6, "min_us": min(s) * 1e6,
                     "bytes_read": bytes_read, "gbps": bytes_read / med / 1e9}
    for name in ("folio_f32", "folio_bf16"):
        ratios = [a / b for a, b in zip(samples[name], samples["onnxruntime_gqa"])]
        row[name]["time_vs_onnxruntime"] = {"median": statistics.median(ratios),
                                            "min": min(ratios), "max": max(ratios)}
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--contexts", default="1024,4096,16384")
    p.add_argument("--batches", default="1,8")
    p.add_argument("--q-heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--page-size", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("-o", "--json-output")
    args = p.parse_args()
    rows = []
    for batch in [int(x) for x in args.batches.split(",")]:
        for context in [int(x) for x in args.contexts.split(",")]:
            row = run_config(batch, context, args)
            print(f"batch {batch} context {context}: ort "
                  f"{row['onnxruntime_gqa']['median_us']:.0f} us, folio f32 "
                  f"{row['folio_f32']['median_us']:.0f} us "
                  f"(x{row['folio_f32']['time_vs_onnxruntime']['median']:.2f}), bf16 "
                  f"{row['folio_bf16']['median_us']:.0f} us "
                  f"(x{row['folio_bf16']['time_vs_onnxruntime']['median']:.2f})",
                  file=sys.stderr)
            rows.append(row)
    report = {"benchmark": "ort-attention", "command": " ".join(sys.argv),
              "onnxruntime": ort.__version__, "threads": args.threads,
              "shape": {"q_heads": args.q_heads, "kv_heads": args.kv_heads,
                        "head_dim": args.head_dim, "page_size": args.page_size},
              "machine": platform.processor() or platform.machine(), "rows": rows}
    text = json.dumps(report, indent=2)
    if args.json_output:
        with open(args.json_output, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()

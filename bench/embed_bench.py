"""Embeddings per second: a batch of short inputs through LLM.embed at once
against the same inputs one at a time (docs/performance.md, "Embeddings").

    PYTHONPATH=build/python python3 bench/embed_bench.py --model M.gguf \\
        [--inputs 64] [--min-len 16] [--max-len 128] [--rounds 3] [--threads 2]
        [--max-num-batched-tokens 512]

The inputs are random token ids (seeded), lengths uniform in [min-len,
max-len]; last-token pooling, normalized. "Batched" submits every input in
one LLM.embed call (the engine packs them into steps of
max_num_batched_tokens); "one at a time" calls LLM.embed once per input.
Both run on the same LLM, alternately, --rounds times; medians and the
paired ratio are reported, with the prefill floor: the tokens over the
model's prefill rate measured here on one long prompt (for an encoder, as
long as one step takes). With --torch (a Hugging Face folder), the same
inputs through transformers' AutoModel on torch's CPU kernels, fed as
sentence-transformers' encode feeds it (sorted by length, batches of 32
padded to their longest, with an attention mask), on the same number of
threads: the alternative measured in the same run. Prints one JSON object.
"""
import argparse
import json
import random
import statistics
import time

from folio import LLM, PoolingParams

import bench_machine


def torch_rounds(args, inputs, batch_size=32):
    """transformers' AutoModel on the same inputs as sentence-transformers'
    encode feeds it: sorted by length, batches of 32 padded to their
    longest, with an attention mask."""
    import torch
    import transformers
    torch.set_num_threads(args.threads)
    model = transformers.AutoModel.from_pretrained(args.model).eval()
    ordered = sorted(inputs, key=len, reverse=True)
    batches = []
    for b in range(0, len(ordered), batch_size):
        chunk = ordered[b:b + batch_size]
        longest = len(chunk[0])
        batches.append((torch.tensor([i + [0] * (longest - len(i)) for i in chunk]),
                        torch.tensor([[1] * len(i) + [0] * (longest - len(i)) for i in chunk])))
    times = []
    with torch.no_grad():
        model(input_ids=batches[-1][0][:4], attention_mask=batches[-1][1][:4])  # warm-up
        for _ in range(args.rounds):
            t = time.perf_counter()
            for ids, mask in batches:
                model(input_ids=ids, attention_mask=mask)
            times.append(time.perf_counter() - t)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--inputs", type=int, default=64)
    ap.add_argument("--min-len", type=int, default=16)
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-num-batched-tokens", type=int, default=512)
    ap.add_argument("--torch", action="store_true",
                    help="also time transformers' AutoModel on the same inputs (a folder)")
    args = ap.parse_args()
    rng = random.Random(44)
    llm = LLM(args.model, threads=args.threads, max_num_seqs=args.inputs,
              max_num_batched_tokens=args.max_num_batched_tokens, prefix_caching=False)
    vocab = int(llm.model_info["vocab_size"])
    inputs = [[rng.randrange(vocab) for _ in range(rng.randint(args.min_len, args.max_len))]
              for _ in range(args.inputs)]
    tokens = sum(len(i) for i in inputs)
    prompts = [{"prompt_token_ids": i} for i in inputs]
    params = PoolingParams()
    llm.embed(prompts[:4], params, use_tqdm=False)  # warm-up
    batched, single, ratios = [], [], []
    for _ in range(args.rounds):
        t = time.perf_counter()
        together = llm.embed(prompts, params, use_tqdm=False)
        b = time.perf_counter() - t
        t = time.perf_counter()
        apart = [llm.embed(p, params, use_tqdm=False)[0] for p in prompts]
        s = time.perf_counter() - t
        assert [o.outputs.embedding for o in together] == [o.outputs.embedding for o in apart]
        batched.append(b)
        single.append(s)
        ratios.append(s / b)
    long_len = tokens // 8
    if llm.model_info.get("encoder"):  # computed in one step: at most a step, at most the context
        long_len = min(long_len, args.max_num_batched_tokens, int(llm.model_info["max_positions"]))
    long_prompt = {"prompt_token_ids": [rng.randrange(vocab) for _ in range(long_len)]}
    t = time.perf_counter()
    llm.embed(long_prompt, params, use_tqdm=False)
    prefill_rate = long_len / (time.perf_counter() - t)
    torch_s = torch_rounds(args, inputs) if args.torch else None
    out = {
        "benchmark": "embeddings",
        "command": "PYTHONPATH=build/python python3 bench/embed_bench.py --model "
                   f"{args.model} --inputs {args.inputs} --min-len {args.min_len} "
                   f"--max-len {args.max_len} --rounds {args.rounds} --threads {args.threads} "
                   f"--max-num-batched-tokens {args.max_num_batched_tokens}"
                   + (" --torch" if args.torch else ""),
        "machine": bench_machine.describe(),
        "model": args.model,
        "inputs": args.inputs,
        "tokens": tokens,
        "threads": args.threads,
        "batched_s_median": statistics.median(batched),
        "one_at_a_time_s_median": statistics.median(single),
        "batched_embeddings_per_s": args.inputs / statistics.median(batched),
        "one_at_a_time_embeddings_per_s": args.inputs / statistics.median(single),
        "speedup_paired_median": statistics.median(ratios),
        "prefill_tokens_per_s_one_long_prompt": prefill_rate,
        "batched_share_of_prefill_floor": (tokens / prefill_rate) / statistics.median(batched),
        "same_vectors_batched_and_alone": True,
    }
    if torch_s is not None:
        out["torch_batched_s_median"] = statistics.median(torch_s)
        out["torch_embeddings_per_s"] = args.inputs / statistics.median(torch_s)
        out["folio_batched_over_torch"] = statistics.median(torch_s) / statistics.median(batched)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

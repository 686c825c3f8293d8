"""What a JSON Schema constraint costs in decode throughput
(docs/structured-output.md, "Measured"): the same requests through
folio.LLM with and without `structured_outputs`, at 1 and 16 streams.

    PYTHONPATH=build/python python3 bench/structured_decode_bench.py \\
        --model M.gguf [--streams 1,16] [--max-tokens 96] [--rounds 3]

Every request generates exactly max_tokens tokens, so the two runs do the
same model work: the unconstrained one with ignore_eos, the constrained one
under a schema whose shortest instance is longer than that (an array of at
least 100 objects with a bounded string and a number: counted repeats, the
costly case for the matcher, as MaskBench's maxLength schemas are). Sampled
at temperature 0.8 with a seed per request. The two run alternately,
--rounds times each (the first round of each is a warm-up, dropped: it
compiles the grammar and fills the memo tables a server keeps warm), and
the medians of tokens/s and the paired ratios are reported. Prints one JSON
object.
"""
import argparse
import json
import os
import statistics
import time

from folio import LLM, SamplingParams

import bench_machine

SCHEMA = {
    "type": "object",
    "properties": {"items": {"type": "array", "minItems": 100, "items": {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 40},
                       "score": {"type": "number"}},
        "required": ["name", "score"], "additionalProperties": False}}},
    "required": ["items"], "additionalProperties": False,
}
PROMPT = "List the fruits you know as JSON, each with a score:\n"


def run(llm, streams, max_tokens, constrained, round_index):
    params = []
    for i in range(streams):
        kw = dict(temperature=0.8, seed=1000 * round_index + i, max_tokens=max_tokens)
        if constrained:
            kw["structured_outputs"] = {"json": SCHEMA}
        else:
            kw["ignore_eos"] = True
        params.append(SamplingParams(**kw))
    t0 = time.perf_counter()
    outs = llm.generate([PROMPT] * streams, params, use_tqdm=False)
    wall = time.perf_counter() - t0
    tokens = sum(len(o.outputs[0].token_ids) for o in outs)
    assert tokens == streams * max_tokens, (tokens, [o.outputs[0].finish_reason for o in outs])
    return tokens / wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--streams", default="1,16")
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="0 = every core")
    a = ap.parse_args()
    results = []
    for streams in [int(x) for x in a.streams.split(",")]:
        llm = LLM(a.model, threads=a.threads, max_num_seqs=max(streams, 1))
        free, constrained, ratios = [], [], []
        for r in range(a.rounds + 1):
            f = run(llm, streams, a.max_tokens, False, r)
            c = run(llm, streams, a.max_tokens, True, r)
            if r == 0:
                continue  # warm-up
            free.append(f)
            constrained.append(c)
            ratios.append(c / f)
        results.append({
            "streams": streams,
            "unconstrained_tokens_per_s": statistics.median(free),
            "json_schema_tokens_per_s": statistics.median(constrained),
            "ratio_median": statistics.median(ratios),
            "ratio_min": min(ratios), "ratio_max": max(ratios),
            "rounds": a.rounds,
        })
        del llm
    print(json.dumps({
        "benchmark": "structured_decode",
        "model": os.path.basename(a.model),
        "machine": bench_machine.describe(),
        "max_tokens": a.max_tokens,
        "schema": SCHEMA,
        "results": results,
    }, indent=2))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Times two folio builds side by side on the quick benchmarks.

    tools/bench_ab.py OLD/bin/folio NEW/bin/folio [--rounds 5] [--benches serve,decode,attention]

Each round runs every benchmark once with each binary, the order alternating
from round to round, so drift in the machine's speed falls on both alike.
For every metric it prints, as JSON, the median of each side and the
new/old ratio of each round (min, median, max), oriented so that a ratio
above 1 means the new build is faster. The machine is shared: read the
spread before the median.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def serve_metrics(d):
    paged = d["modes"]["paged"]
    return {
        "serve.paged.output_tokens_per_second": (paged["output_tokens_per_second"], True),
        "serve.paged.prefill_tokens_per_second": (paged["prefill_tokens_per_second"], True),
        "serve.paged.decode_step_median_ms": (paged["decode_step_median_ms"], False),
    }


def decode_metrics(d):
    out = {}
    for run in d["runs"]:
        t = run["threads"]
        out[f"decode.t{t}.decode_tokens_per_second"] = (run["decode_tokens_per_second"], True)
        out[f"decode.t{t}.prefill_tokens_per_second"] = (run["prefill_tokens_per_second"], True)
    return out


def attention_metrics(d):
    out = {}
    for row in d["rows"]:
        key = f"attention.{row['mode']}.{row['kv_dtype']}.b{row['batch']}.ctx{row['context']}"
        out[key + ".median_us"] = (row["median_us"], False)
    return out


BENCHES = {
    "serve": (["bench", "serve", "--quick", "-o"], serve_metrics),
    "decode": (["bench", "decode", "--quick", "-o"], decode_metrics),
    "attention": (["bench", "attention", "--quick", "-o"], attention_metrics),
}


def run(binary, bench, out_dir):
    args, metrics = BENCHES[bench]
    out = Path(out_dir) / f"{bench}.json"
    subprocess.run([binary, *args, str(out)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return metrics(json.loads(out.read_text()))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--benches", default="serve,decode,attention")
    a = p.parse_args()
    benches = a.benches.split(",")
    for b in benches:
        if b not in BENCHES:
            sys.exit(f"unknown bench {b!r}; choose from {', '.join(BENCHES)}")
    samples = {}  # metric -> {"old": [...], "new": [...], "higher": bool}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = [("old", a.old), ("new", a.new)]
            if r % 2:
                order.reverse()
            for bench in benches:
                for side, binary in order:
                    print(f"round {r + 1}/{a.rounds}: {bench} ({side})", file=sys.stderr)
                    for name, (value, higher) in run(binary, bench, tmp).items():
                        m = samples.setdefault(name, {"old": [], "new": [], "higher": higher})
                        m[side].append(value)
    report = {"old": a.old, "new": a.new, "rounds": a.rounds, "metrics": {}}
    for name, m in sorted(samples.items()):
        pairs = list(zip(m["old"], m["new"]))
        ratios = [(n / o if m["higher"] else o / n) for o, n in pairs if o > 0 and n > 0]
        report["metrics"][name] = {
            "old_median": statistics.median(m["old"]),
            "new_median": statistics.median(m["new"]),
            "speed_ratio_new_over_old": {
                "min": min(ratios), "median": statistics.median(ratios), "max": max(ratios)},
        }
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()

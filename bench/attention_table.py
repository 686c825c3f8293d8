#!/usr/bin/env python3
"""Markdown tables from `folio bench attention` JSON (docs/performance-log.md
holds them for the run docs/performance.md reports).

usage: bench/attention_table.py REPORT.json
Prints the machine summary, the per-configuration floors, the per-row
results (out of cache, the fraction of bandwidth paired round by round
with the probe too) and the target verdicts.
"""
import json
import sys


def mib(n):
    v = n / 2**20
    return f"{v:.1f}" if v < 10 else f"{v:.0f}"


def main(path):
    r = json.load(open(path))
    bw = r["memory_bandwidth_gbps"]
    m = r["machine"]
    mb = r["memory_bandwidth"]
    print(f"- cpu: {m['cpu_model']}, {m['cores']} logical cores, LLC "
          f"{m['llc_bytes'] / 2**20:.0f} MiB, SIMD target {m['simd_target']}")
    print(f"- threads {r['threads']}; read bandwidth {bw:.2f} GB/s (best pass; "
          f"start {mb['start']['best_gbps']:.2f}, end {mb['end']['best_gbps']:.2f})")
    print(f"- other processes' load over the run: {m['other_load_cores']:.2f} cores")
    print(f"- outputs bit-identical across layouts: {r['outputs_identical']}")
    print()
    print("| dtype | batch | context | K+V MiB | in cache | floor µs |")
    print("|---|---:|---:|---:|:-:|---:|")
    for row in r["rows"]:
        if row["mode"] == "contiguous":
            print(f"| {row['kv_dtype']} | {row['batch']} | {row['context']} "
                  f"| {mib(row['bytes_read'])} | {'yes' if row['in_cache'] else 'no'} "
                  f"| {row['floor_us']:.0f} |")
    print()
    print("| dtype | batch | context | mode | median µs | p10–p90 µs | GB/s "
          "| of bandwidth | × contiguous |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for row in r["rows"]:
        vs = row.get("paired_time_vs_contiguous", row["time_vs_contiguous"])
        vs_text = "1" if row["mode"] == "contiguous" else f"{vs:.2f}"
        of_bw = f"{100 * row['fraction_of_bandwidth']:.0f}%"
        if "paired_fraction_of_bandwidth" in row:
            of_bw += (f" (paired {100 * row['paired_fraction_of_bandwidth']:.0f}%, "
                      f"{100 * row['paired_fraction_p10']:.0f}–"
                      f"{100 * row['paired_fraction_p90']:.0f}%)")
        print(f"| {row['kv_dtype']} | {row['batch']} | {row['context']} "
              f"| {row['mode']} | {row['median_us']:.0f} "
              f"| {row['p10_us']:.0f}–{row['p90_us']:.0f} | {row['gbps']:.1f} "
              f"| {of_bw} | {vs_text} |")
    print()
    for name, t in r["targets"].items():
        worst = {k: round(v, 3) for k, v in t.items()
                 if k.startswith("worst") and k != "worst_config"}
        line = (f"- {name}: met={t['met']} over {t['configs']} configs; "
                f"worst {worst} at {t.get('worst_config')}")
        paired = t.get("paired")
        if paired:
            pw = {k: round(v, 3) for k, v in paired.items()
                  if k.startswith("worst") and k != "worst_config"}
            line += f"; paired: met={paired['met']}, worst {pw} at {paired.get('worst_config')}"
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])

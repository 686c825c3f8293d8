#!/usr/bin/env python3
"""folio beside llama.cpp's own llama-bench, on the same GGUF files, as one JSON.

    python3 bench/peer_bench.py [--folio build/bin/folio] [--rounds 2]
        [--types Q4_1,Q8_0,...] [--model FILE ...] [--folio-activations q8,f32]
        [--synthetic] [--json-output out.json]

llama.cpp's tools come from bench/peer_build.sh (the llama-cpp-python sdist's
vendored tree, built natively once, cached under ~/.cache/folio/peer). The
derived quantization types are written once by that build's llama-quantize
from the cached SmolLM2-135M Q4_1 file into ~/.cache/folio/peer/models.
With --synthetic the source is instead a ~0.9B Llama-shaped f16 file whose
rows are whole K-quant super-blocks and whose weights do not fit the last-level
cache (bench/synthetic_gguf.py, made once into the same cache; default types
SYNTHETIC_TYPES).

Per file and round: folio's prefill (`folio bench decode --prompt-tokens
512 --decode-tokens 4`) and decode (`--prompt-tokens 4 --decode-tokens
128`), then `llama-bench -p 512 -n 128` once per flash-attention setting;
rounds alternate the engines and each figure is the median of the rounds.
A file folio refuses is kept in the JSON as skipped, with the reason.
Standard library only; docs/benchmarks.md describes the JSON.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

import bench_machine

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.expanduser("~/.cache/folio")
SOURCE_MODEL = os.path.join(CACHE, "SmolLM2-135M-Instruct.Q4_1.gguf")
SOURCE_TYPE = "Q4_1"
DEFAULT_TYPES = "Q4_1,Q8_0,Q4_0,Q5_0,Q4_K_M,Q5_K_M,Q6_K,IQ4_NL,IQ4_XS,F16"
SYNTHETIC_TYPES = "Q4_K_M,Q8_0,Q4_0,Q6_K,IQ4_XS,F16"
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
SIMD_FLAG_PREFIXES = (
    "sse", "ssse3", "avx", "fma", "f16c", "amx", "vnni", "bmi", "neon", "asimd", "sve"
)
RUN_TIMEOUT_S = 1800


class BenchError(Exception):
    """A step that failed; the message names the step and why."""


def log(message):
    print(f"peer_bench: {message}", file=sys.stderr, flush=True)


def tail(text, lines=15):
    return "\n".join(text.strip().splitlines()[-lines:])


def run(argv, what, timeout=RUN_TIMEOUT_S):
    """Runs argv and returns its stdout; a failure raises BenchError naming `what`."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise BenchError(f"{what}: {argv[0]} not found")
    except subprocess.TimeoutExpired:
        raise BenchError(f"{what}: no answer in {timeout} s")
    if proc.returncode != 0:
        raise BenchError(f"{what}: exit {proc.returncode}: {tail(proc.stderr or proc.stdout, 4)}")
    return proc.stdout


# ---- machine ----


def simd_flags():
    """The SIMD-related CPU flags /proc/cpuinfo lists (x86 and Arm names)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    flags = line.split(":", 1)[1].split()
                    return sorted(f for f in flags if f.startswith(SIMD_FLAG_PREFIXES))
    except OSError:
        pass
    return []


def machine(load_before):
    info = bench_machine.describe()
    info["simd_flags"] = simd_flags()
    info["load_average_before"] = [round(x, 2) for x in load_before]
    info["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return info


# ---- llama.cpp's tools ----


def build_llama_tools(peer_dir):
    """bench/peer_build.sh (builds once, then only checks); returns the bin directory."""
    env = dict(os.environ, FOLIO_PEER_DIR=peer_dir)
    env["LLAMA_CPP_PYTHON_VERSION"] = LLAMA_CPP_PYTHON_VERSION
    script = os.path.join(REPO, "bench", "peer_build.sh")
    proc = subprocess.run(["bash", script], stdout=subprocess.PIPE, text=True, env=env)
    if proc.returncode != 0:
        raise BenchError(f"building llama.cpp's tools failed ({script}, exit {proc.returncode}); "
                         "see the log above")
    return proc.stdout.strip().splitlines()[-1]


def llama_build_info(bin_dir):
    """What bench/peer_build.sh recorded of its build (its stamp file) and what
    llama-bench --version says of itself."""
    info = {"llama_cpp_python": LLAMA_CPP_PYTHON_VERSION, "bin_dir": bin_dir}
    try:
        tool = os.path.join(bin_dir, "llama-bench")
        proc = subprocess.run([tool, "--version"], capture_output=True, text=True)
        info["version"] = " ".join((proc.stdout + proc.stderr).split())
    except OSError as e:
        info["version"] = f"unknown ({e})"
    try:
        with open(os.path.join(bin_dir, "stamp")) as f:
            for line in f:
                if line.startswith("llama.cpp commit "):
                    info["commit"] = line.split()[-1] if len(line.split()) > 2 else "unknown"
                elif line.startswith("cmake "):
                    info["cmake_flags"] = line[len("cmake ") :].split()
    except OSError:
        pass
    return info


def derive_model(quantize, source, type_name, models_dir):
    """The source file requantized to type_name by llama-quantize, made once and cached."""
    stem = os.path.basename(source).rsplit(".", 2)[0]
    out = os.path.join(models_dir, f"{stem}.{type_name}.gguf")
    if os.path.exists(out):
        return out
    os.makedirs(models_dir, exist_ok=True)
    partial = out + ".partial"
    log(f"llama-quantize {os.path.basename(source)} -> {type_name}")
    argv = [quantize, "--allow-requantize", source, partial, type_name, "2"]
    run(argv, f"llama-quantize to {type_name}")
    os.replace(partial, out)
    return out


def llama_bench(tool, model, args, fa_modes):
    """{fa mode: {"pp512": tok/s, "tg128": tok/s}} from one llama-bench run (avg_ts of its reps)."""
    argv = [tool, "-m", model, "-p", str(args.prompt_tokens), "-n", str(args.decode_tokens)]
    argv += ["-t", str(args.threads), "-r", str(args.llama_reps)]
    argv += ["-fa", ",".join(fa_modes), "-o", "json"] + shlex.split(args.llama_bench_args)
    out = run(argv, f"llama-bench on {model}")
    try:
        tests = json.loads(out)
    except json.JSONDecodeError as e:
        raise BenchError(f"llama-bench on {model}: its JSON does not parse ({e}): {tail(out, 5)}")
    result = {}
    for t in tests:
        label = llama_variant(t["flash_attn"])
        metric = pp_label(args) if t["n_gen"] == 0 else tg_label(args)
        result.setdefault(label, {})[metric] = t["avg_ts"]
    return result


def llama_variant(flash_attn):
    return {0: "fa_off", 1: "fa_on"}.get(int(flash_attn), "fa_auto")


# ---- folio ----


def pp_label(args):
    return f"pp{args.prompt_tokens}"


def tg_label(args):
    return f"tg{args.decode_tokens}"


def folio_info(folio, model):
    """`folio info`'s JSON for the file; BenchError (with folio's reason) when folio refuses it."""
    out = run([folio, "info", model], f"folio info {model}", timeout=300)
    try:
        return json.loads(out)
    except json.JSONDecodeError as e:
        raise BenchError(f"folio info {model}: its JSON does not parse ({e})")


def weight_types(info):
    """{type: tensors} of the file's matrices: K-quant files of narrow models are mostly
    other types (llama-quantize falls back where a row is not a multiple of 256)."""
    return {t: v.get("tensors") for t, v in sorted(info.get("weight_types", {}).items())}


def folio_decode_bench(folio, model, args, prompt_tokens, decode_tokens, extra=()):
    """One `folio bench decode` run: {activation label: its run's JSON}. The label is
    "default" unless --folio-activations named the paths."""
    argv = [folio, "bench", "decode", "--model", model, "--no-matmul-only"]
    argv += ["--threads-list", str(args.threads), "--prompt-tokens", str(prompt_tokens)]
    argv += ["--decode-tokens", str(decode_tokens)]
    argv += ["--bandwidth-passes", "1", "--bandwidth-mib", "64"]
    if args.folio_activations:
        argv += ["--matmul-activations", ",".join(args.folio_activations)]
    report = json.loads(run(argv + list(extra), f"folio bench decode on {model}"))
    runs = {}
    for r in report["runs"]:
        runs[r["matmul_activations"] if args.folio_activations else "default"] = r
    return runs


def folio_round(folio, model, args):
    """{activation label: {"pp512": tok/s, "tg128": tok/s, "matmul_activations": path}}."""
    prefill = folio_decode_bench(folio, model, args, args.prompt_tokens, 4)
    decode = folio_decode_bench(folio, model, args, 4, args.decode_tokens)
    result = {}
    for label, r in prefill.items():
        result[label] = {
            pp_label(args): r["prefill_tokens_per_second"],
            tg_label(args): decode[label]["decode_tokens_per_second"],
            "matmul_activations": r["matmul_activations"],
        }
    return result


# ---- batched decode (--batched 2,4,8,16) ----


def batched_label(args, sequences):
    return f"batched{sequences}_tg{args.batched_decode}"


def batched_labels(args):
    return [batched_label(args, b) for b in args.batched]


def folio_batched(folio, model, args):
    """{activation label: {batchedB_tgN: tok/s over all B sequences}}: `folio bench decode
    --batch-sizes`, each sequence prefilled with the same --batched-prompt tokens."""
    sizes = ["--batch-sizes", ",".join(map(str, args.batched))]
    runs = folio_decode_bench(folio, model, args, args.batched_prompt, args.batched_decode, sizes)
    result = {}
    for label, r in runs.items():
        rows = r.get("batched_decode", [])
        result[label] = {batched_label(args, b["sequences"]): b["tokens_per_second"] for b in rows}
    return result


def llama_batched(tool, model, args, fa_mode):
    """{variant: {batchedB_tgN: S_TG}} from llama-batched-bench (a separate prompt per sequence)."""
    context = max(args.batched) * (args.batched_prompt + args.batched_decode)
    argv = [tool, "-m", model, "-c", str(context), "-b", "2048", "-ub", "512"]
    argv += ["-t", str(args.threads), "-npp", str(args.batched_prompt)]
    argv += ["-ntg", str(args.batched_decode), "-npl", ",".join(map(str, args.batched))]
    argv += ["-fa", {"0": "off", "1": "on"}.get(fa_mode, fa_mode)]
    argv += ["--output-format", "jsonl"]
    out = run(argv, f"llama-batched-bench on {model}")
    result = {}
    for line in out.splitlines():
        if line.startswith("{") and "speed_tg" in line:
            row = json.loads(line)
            result[batched_label(args, row["pl"])] = row["speed_tg"]
    missing = [b for b in args.batched if batched_label(args, b) not in result]
    if missing:
        raise BenchError(f"llama-batched-bench on {model}: no row for {missing} sequences: "
                         f"{tail(out, 5)}")
    return {llama_variant(fa_mode): result}


def merge(into, more):
    for variant, metrics in more.items():
        into.setdefault(variant, {}).update(metrics)
    return into


# ---- rounds and summary ----


def collect(rounds_list, metrics):
    """Per variant: the median of the rounds per metric, and the rounds themselves."""
    summary = {}
    for variant in rounds_list[0]:
        entry = {}
        for m in metrics:
            values = [r[variant][m] for r in rounds_list if variant in r and m in r[variant]]
            if values:
                entry[m] = round(statistics.median(values), 2)
                entry[f"{m}_rounds"] = [round(v, 2) for v in values]
        for key, value in rounds_list[0][variant].items():
            if key not in metrics:
                entry[key] = value
        summary[variant] = entry
    return summary


def ratios(folio_summary, llama_summary, metrics):
    """folio / llama.cpp per activation path and metric: against llama.cpp's faster
    flash-attention setting ("ratio"), and against each setting."""
    out = {}
    for label, f in folio_summary.items():
        best, by_variant = {}, {}
        for m in metrics:
            peers = {v: s[m] for v, s in llama_summary.items() if s.get(m)}
            if m not in f or not peers:
                continue
            best[m] = round(f[m] / max(peers.values()), 3)
            for v, tps in peers.items():
                by_variant.setdefault(v, {})[m] = round(f[m] / tps, 3)
        out[label] = {"ratio": best, "ratio_by_llama_variant": by_variant}
    return out


def model_files(args, quantize, models_dir):
    """[(label, path or None, skip reason or None)] in the order they are measured."""
    files = []
    for type_name in (t.upper() for t in args.types):
        if type_name == args.source_type:
            files.append((args.source_type, args.source, None))
            continue
        try:
            path = derive_model(quantize, args.source, type_name, models_dir)
            files.append((type_name, path, None))
        except BenchError as e:
            files.append((type_name, None, str(e)))
    for path in args.model:
        files.append((os.path.basename(path), os.path.abspath(path), None))
    return files


def folio_measure(folio, model, args):
    """One round of folio on one file: pp/tg, and batched decode when asked."""
    result = folio_round(folio, model, args)
    if args.batched:
        merge(result, folio_batched(folio, model, args))
    return result


def llama_measure(llama, model, args):
    """One round of llama.cpp on one file: llama-bench, and llama-batched-bench when asked."""
    result = llama_bench(llama["bench"], model, args, args.llama_fa)
    for fa_mode in args.llama_fa if args.batched else []:
        merge(result, llama_batched(llama["batched"], model, args, fa_mode))
    return result


def check_file(entry, folio):
    """Fills bytes and weight_types; returns why the file is skipped, or None."""
    if not os.path.isfile(entry["path"]):
        return "no such file"
    entry["bytes"] = os.path.getsize(entry["path"])
    try:
        entry["weight_types"] = weight_types(folio_info(folio, entry["path"]))
    except BenchError as e:
        return f"folio refuses it: {e}"
    return None


def measure(files, folio, llama, args):
    """Runs the rounds, folio then llama.cpp per file; one JSON entry per file. An engine
    that fails on a file is recorded under errors and not run on it again; the other
    engine's figures still count."""
    engines = {
        "folio": lambda path: folio_measure(folio, path, args),
        "llama_cpp": lambda path: llama_measure(llama, path, args),
    }
    entries, live = [], []
    for label, path, skip in files:
        entry = {"file": label, "path": path}
        skip = skip or check_file(entry, folio)
        if skip:
            entry["skipped"] = skip
            log(f"{label}: skipped: {skip}")
        else:
            live.append((entry, {name: [] for name in engines}))
        entries.append(entry)

    for round_index in range(args.rounds):
        for entry, rounds in live:
            log(f"round {round_index + 1}/{args.rounds}: {entry['file']}")
            for name, bench in engines.items():
                if name in entry.get("errors", {}):
                    continue
                try:
                    rounds[name].append(bench(entry["path"]))
                except BenchError as e:
                    entry.setdefault("errors", {})[name] = str(e)
                    log(f"{entry['file']}: {e}")

    metrics = [pp_label(args), tg_label(args)] + batched_labels(args)
    for entry, rounds in live:
        for name in engines:
            if name not in entry.get("errors", {}):
                entry[name] = collect(rounds[name], metrics)
        if "folio" in entry and "llama_cpp" in entry:
            entry["ratio_folio_over_llama"] = ratios(entry["folio"], entry["llama_cpp"], metrics)
    return entries


def split_list(text):
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--folio", default=os.path.join(REPO, "build", "bin", "folio"),
                   help="folio binary (build/bin/folio)")
    p.add_argument("--model", action="append", default=[],
                   help="also measure this GGUF file (repeatable)")
    p.add_argument("--types", help=f"types derived from the source file (default {DEFAULT_TYPES}; "
                   "none when --model is given alone)")
    p.add_argument("--source", default=SOURCE_MODEL, help="the file the types are derived from")
    p.add_argument("--source-type", default=SOURCE_TYPE,
                   help=f"the source file's own type, measured as it is ({SOURCE_TYPE})")
    p.add_argument("--synthetic", action="store_true",
                   help="derive the types from a synthetic ~0.9B f16 Llama "
                        f"(bench/synthetic_gguf.py; default types {SYNTHETIC_TYPES})")
    p.add_argument("--folio-activations", help="folio's --matmul-activations paths, e.g. q8,f32 "
                   "(default: pass none, measure folio's default)")
    p.add_argument("--llama-fa", default="0,1",
                   help="llama-bench flash-attention settings (default 0,1)")
    p.add_argument("--llama-bench-args", default="",
                   help='more llama-bench options, e.g. "--poll 0" (default none)')
    p.add_argument("--rounds", type=int, default=2,
                   help="rounds per engine; the median counts (default 2)")
    p.add_argument("--llama-reps", type=int, default=2, help="llama-bench -r (default 2)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--decode-tokens", type=int, default=128)
    p.add_argument("--batched", default="", help="also batched decode at these sequence counts, "
                   "e.g. 2,4,8,16 (folio bench decode --batch-sizes vs llama-batched-bench; "
                   "default none)")
    p.add_argument("--batched-prompt", type=int, default=128,
                   help="batched: prompt tokens per sequence (128)")
    p.add_argument("--batched-decode", type=int, default=32, help="batched: decode steps (32)")
    p.add_argument("--peer-dir",
                   default=os.environ.get("FOLIO_PEER_DIR", os.path.join(CACHE, "peer")),
                   help="llama.cpp cache (FOLIO_PEER_DIR, else ~/.cache/folio/peer)")
    p.add_argument("-o", "--json-output", help="also write the JSON here")
    args = p.parse_args()
    if args.synthetic:
        args.source = os.path.join(args.peer_dir, "models", "synthetic-llama-0.9b.F16.gguf")
        args.source_type = "F16"
    if args.types is None:
        args.types = "" if args.model else SYNTHETIC_TYPES if args.synthetic else DEFAULT_TYPES
    args.types = split_list(args.types)
    args.folio_activations = split_list(args.folio_activations or "")
    args.llama_fa = split_list(args.llama_fa)
    args.batched = [int(b) for b in split_list(args.batched)]
    if any(b < 2 for b in args.batched):
        p.error("--batched sequence counts must be at least 2")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    return args


def main():
    args = parse_args()
    load_before = os.getloadavg()
    started = time.time()
    if not os.access(args.folio, os.X_OK):
        raise BenchError(f"no folio binary at {args.folio} (make build, or --folio PATH)")
    if args.synthetic and not os.path.exists(args.source):
        import synthetic_gguf
        log(f"writing the synthetic model {args.source} (about a minute)")
        os.makedirs(os.path.dirname(args.source), exist_ok=True)
        synthetic_gguf.write(args.source, SOURCE_MODEL)
    if args.types and not os.path.exists(args.source):
        raise BenchError(f"no source model at {args.source} (make setup caches it)")
    bin_dir = build_llama_tools(args.peer_dir)
    quantize = os.path.join(bin_dir, "llama-quantize")
    files = model_files(args, quantize, os.path.join(args.peer_dir, "models"))
    llama = {
        "bench": os.path.join(bin_dir, "llama-bench"),
        "batched": os.path.join(bin_dir, "llama-batched-bench"),
    }
    entries = measure(files, args.folio, llama, args)
    report = {
        "benchmark": "peer",
        "command": " ".join(sys.argv),
        "machine": machine(load_before),
        "settings": {
            "threads": args.threads,
            "prompt_tokens": args.prompt_tokens,
            "decode_tokens": args.decode_tokens,
            "rounds": args.rounds,
            "llama_reps": args.llama_reps,
            "llama_flash_attn": args.llama_fa,
            "llama_bench_args": args.llama_bench_args,
            "folio_activations": args.folio_activations or ["default"],
            "batched_sequences": args.batched,
            "batched_prompt_tokens": args.batched_prompt,
            "batched_decode_tokens": args.batched_decode,
        },
        "folio": {"binary": os.path.abspath(args.folio)},
        "llama_cpp": llama_build_info(bin_dir),
        "files": entries,
        "seconds": round(time.time() - started, 1),
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json_output:
        with open(args.json_output, "w") as f:
            f.write(text + "\n")
    return 1 if any("errors" in e for e in entries) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        log(str(e))
        sys.exit(1)

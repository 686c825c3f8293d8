#!/usr/bin/env python3
"""folio's logits beside llama.cpp's on the same GGUF file, as one JSON.

What the default 8-bit activations cost, measured against the engine that
computes the same way: llama.cpp (through llama-cpp-python, which
`make bench-setup` builds from source) multiplies quantized weights with
8-bit activations too. For each file, on the same token ids:
  - perplexity of a text (windows of --window tokens, every next token
    scored) in llama.cpp and in folio with each --folio-activations mode;
  - the logits of the first --logit-tokens tokens: the largest and mean
    |folio - llama.cpp| and how often their argmax agrees;
  - the greedy answer to one chat question, when the file has a template.
folio's KV cache is f16 by default here, as llama.cpp's is.

  python3 bench/peer_logits.py --model ~/.cache/folio/SmolLM2-135M-Instruct.Q4_1.gguf
"""

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import bench_machine  # noqa: E402

CACHE = Path(os.environ.get("FOLIO_MODEL_CACHE", Path.home() / ".cache" / "folio"))
DEFAULT_MODELS = [CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf", CACHE / "gemma-3-270m-q4_k_m.gguf"]
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def log_softmax(rows):
    rows = np.asarray(rows, dtype=np.float64)
    top = rows.max(axis=1, keepdims=True)
    return rows - top - np.log(np.exp(rows - top).sum(axis=1, keepdims=True))


def folio_json(args, model, ids, *extra):
    cmd = [args.folio, "logits", "--model", str(model), "--tokens", ",".join(map(str, ids)),
           "--threads", str(args.threads), "--kv-dtype", args.kv_dtype, *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} ...: {out.stderr.strip()}")
    return json.loads(out.stdout)


class LlamaCpp:
    """One llama.cpp context on the file, logits for every position."""

    def __init__(self, model, n_ctx, threads):
        from llama_cpp import Llama
        self.llm = Llama(str(model), n_ctx=n_ctx, n_batch=n_ctx, n_threads=threads,
                         logits_all=True, verbose=False)

    def logits(self, ids):
        self.llm.reset()
        self.llm.eval(ids)
        return np.array(self.llm.scores[:len(ids)], dtype=np.float64)

    def greedy(self, ids, steps):
        self.llm.reset()
        self.llm.eval(ids)
        out = []
        for _ in range(steps):
            out.append(int(np.argmax(self.llm.scores[self.llm.n_tokens - 1])))
            self.llm.eval([out[-1]])
        return out

    def text(self, ids):
        return self.llm.detokenize(ids).decode("utf-8", errors="replace")


def chat_ids(model, llama):
    """The question rendered with the file's own template, or None."""
    import gguf
    import jinja2
    fields = gguf.GGUFReader(str(model)).fields
    if "tokenizer.chat_template" not in fields:
        return None
    template = jinja2.Environment().from_string(fields["tokenizer.chat_template"].contents())
    text = template.render(messages=QUESTION, add_generation_prompt=True, bos_token="",
                           eos_token="")
    return llama.llm.tokenize(text.encode(), add_bos=False, special=True)


def measure(args, model):
    llama = LlamaCpp(model, max(args.window, args.logit_tokens, 512), args.threads)
    text = Path(args.corpus).read_text(encoding="utf-8")
    ids = llama.llm.tokenize(text.encode(), add_bos=False)
    windows = [ids[i * args.window:(i + 1) * args.window]
               for i in range(min(args.windows, len(ids) // args.window))]
    if not windows:
        raise RuntimeError(f"{args.corpus} has {len(ids)} tokens, fewer than one window")
    scored = sum(len(w) - 1 for w in windows)

    def nll_of(logprob_rows, w):
        return -sum(logprob_rows[i][w[i + 1]] for i in range(len(w) - 1))

    llama_nll = sum(nll_of(log_softmax(llama.logits(w)), w) for w in windows)
    head = ids[:args.logit_tokens]
    llama_head = llama.logits(head)
    question = chat_ids(model, llama)
    result = {
        "file": str(model),
        "corpus_tokens_scored": scored,
        "llama_cpp": {"perplexity": math.exp(llama_nll / scored)},
        "folio": {},
    }
    if question:
        answer = llama.greedy(question, args.greedy)
        result["chat_question"] = QUESTION[0]["content"]
        result["llama_cpp"]["chat_answer"] = llama.text(answer)
    for mode in args.folio_activations:
        flag = ["--matmul-activations", mode]
        nll = 0.0
        for w in windows:
            # token_logprobs[i] is the logprob of token i + 1 given the ones before
            nll -= folio_json(args, model, w, "--token-logprobs", *flag)["sum"]
        got = np.array(folio_json(args, model, head, *flag)["logits"], dtype=np.float64)
        diff = np.abs(got - llama_head)
        row = {
            "perplexity": math.exp(nll / scored),
            "perplexity_vs_llama_cpp": math.exp((nll - llama_nll) / scored) - 1.0,
            "logit_max_abs_diff": float(diff.max()),
            "logit_mean_abs_diff": float(diff.mean()),
            "argmax_agreement": float((got.argmax(1) == llama_head.argmax(1)).mean()),
        }
        if question:
            greedy = folio_json(args, model, question, "--greedy", str(args.greedy), *flag)
            row["chat_answer"] = llama.text(greedy["greedy"])
            row["chat_answer_equals_llama_cpp"] = row["chat_answer"] == \
                result["llama_cpp"]["chat_answer"]
        result["folio"][mode] = row
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", action="append", type=Path,
                   help="a GGUF file (repeatable; default: SmolLM2 Q4_1 and Gemma 3 270M)")
    p.add_argument("--folio", default=str(ROOT / "build" / "bin" / "folio"))
    p.add_argument("--folio-activations", default="q8,f32", type=lambda s: s.split(","))
    p.add_argument("--corpus", default=str(ROOT / "bench" / "data" / "kv_corpus.txt"))
    p.add_argument("--window", type=int, default=256)
    p.add_argument("--windows", type=int, default=4)
    p.add_argument("--logit-tokens", type=int, default=32)
    p.add_argument("--greedy", type=int, default=16)
    p.add_argument("--kv-dtype", default="f16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("-o", "--json-output")
    args = p.parse_args()
    try:
        import llama_cpp
    except ImportError:
        sys.exit("peer_logits: llama-cpp-python is not installed (make bench-setup builds it)")
    models = args.model or [m for m in DEFAULT_MODELS if m.exists()]
    if not models:
        sys.exit("peer_logits: no model (make setup caches SmolLM2 and Gemma 3 270M)")
    load_before = os.getloadavg()
    files = [measure(args, m) for m in models]
    report = {
        "benchmark": "peer-logits",
        "command": " ".join(sys.argv),
        "llama_cpp_python": llama_cpp.__version__,
        "settings": {k: v for k, v in vars(args).items() if k not in ("model", "json_output")},
        "machine": {**bench_machine.describe(), "load_average_before": load_before,
                    "load_average_after": os.getloadavg()},
        "files": files,
    }
    text = json.dumps(report, indent=2, ensure_ascii=False)
    if args.json_output:
        Path(args.json_output).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()

"""Structured output on MaskBench: folio beside llguidance and xgrammar, on
the same vocabulary and the same token sequences, in one run.

    python3 bench/grammar_oracles.py --folio build/bin/folio --maskbench DIR \\
        --model SmolLM2-135M-Instruct.Q4_1.gguf [--limit N] [--differential] \\
        [--whitespace strict|flexible] [--oracles llguidance,xgrammar] -o out.json

DIR is a MaskBench folder (github guidance-ai/jsonschemabench, maskbench/data):
JSON files of {schema, tests: [{description, valid, data}], meta}; the
split is the file name before "---" (or before the last "_").

`folio bench grammar` runs first (--folio BIN; or --folio-json, --trace and
--vocab name the files of an earlier run). It writes the token bytes its
grammar matcher sees (--dump-vocab) and, per test instance, the token ids
(the instance written as strict mode writes JSON, tokenized by folio) and,
per step, the allowed count and set hash (--trace). Both oracles are built
over those bytes: llguidance's LLTokenizer from a TokenizerWrapper (special
tokens as b"\\xff" + their text, as llguidance's own llama.cpp bridge does),
xgrammar's TokenizerInfo (raw bytes; special tokens empty). Each compiles
every schema with folio's whitespace: strict is llguidance's
{whitespace_flexible: false, item_separator ", ", key_separator ": "} and
xgrammar's any_whitespace=False, separators (", ", ": "); flexible is
llguidance's default whitespace and xgrammar's any_whitespace=True.
xgrammar runs with strict_mode=False (JSON Schema's own defaults: additional
properties allowed unless the schema says otherwise) and one compile
thread, without its compile cache.

Each instance is walked on a fresh matcher (llguidance: a deep copy of the
untouched compiled matcher; xgrammar: a new GrammarMatcher): the mask is
timed (time.perf_counter_ns around the one call that fills it, so a
Python call's overhead, about a microsecond, is included), the token's bit
checked, the token consumed. A valid instance must be accepted to the end
and the grammar must be able to finish (llguidance: is_accepting();
xgrammar: the end-of-sequence bit in the last mask); an invalid one must be
refused somewhere. Coverage is the share of schemas compiled (llguidance:
no error; xgrammar: no exception).

--differential compares, at every step of every valid instance of a schema
both compiled, folio's allowed set (count and hash from the trace) with
llguidance's (its end-of-sequence token left out: folio leaves that to the
caller). For the first --classify-files schemas with a difference, folio is
run again with --trace-full on them alone, and each differing step is
classified exactly (tokens only llguidance allows, tokens only folio
allows), with the first few examples per schema and the tokens' text.

Prints (or writes to -o) one JSON object with `folio`, `llguidance` and
`xgrammar` sections side by side, `summary` (one row per engine) and, with
--differential, `differential`.
"""
import argparse
import collections
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

import bench_machine

TOP_REASONS = 30
MAX_LISTED = 200
M64 = (1 << 64) - 1

def split_of(name):
    stem = name[:-5] if name.endswith(".json") else name
    if "---" in stem:
        return stem.split("---", 1)[0]
    u = stem.rfind("_")
    return stem[:u] if u > 0 else stem


def mix64(x):
    """SplitMix64(x).NextU64() for an array of uint64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def percentiles(values):
    if not values:
        return {"count": 0}
    a = np.asarray(values, dtype=np.float64)
    return {"count": int(a.size), "p50": float(np.quantile(a, 0.5)),
            "p90": float(np.quantile(a, 0.9)), "p99": float(np.quantile(a, 0.99)),
            "max": float(a.max()), "mean": float(a.mean())}


def printable(b):
    """Bytes as readable text: invalid UTF-8 and unprintable characters
    escaped (\\xHH, \\uHHHH), so a DEL or a control byte shows."""
    text = b.decode("utf-8", errors="backslashreplace")
    return "".join(c if c.isprintable() or c == " " else
                   (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
                   for c in text)


def normalize_reason(msg):
    """An oracle's error, shortened for a histogram: its first line, the
    JSON pointers and numbers elided."""
    line = msg.strip().splitlines()[0] if msg.strip() else "(empty)"
    line = re.sub(r"#/[^\s,;:'\"]*", "#/...", line)
    line = re.sub(r"\d+(\.\d+)?", "N", line)
    return line[:120]


class Vocab:
    def __init__(self, path):
        with open(path) as f:
            v = json.load(f)
        self.size = v["vocab_size"]
        self.tokens = [bytes.fromhex(h) for h in v["tokens_hex"]]
        self.special = set(v["special"])
        self.special_text = {int(k): t for k, t in v["special_text"].items()}
        self.eos = v["eos_token_id"]
        self.bos = v["bos_token_id"]
        self.mixed = mix64(np.arange(self.size, dtype=np.uint64))
        self.by_bytes = {}
        for i, t in enumerate(self.tokens):
            if t and i not in self.special:
                self.by_bytes.setdefault(t, i)
        self.longest = max(len(t) for t in self.tokens)

    def text(self, ids):
        return printable(b"".join(self.tokens[i] for i in ids))

    def token_text(self, i):
        if i in self.special:
            return self.special_text.get(i, f"<special {i}>")
        return printable(self.tokens[i])

    def greedy(self, data):
        """Longest-match tokenization (what a TokenizerWrapper must offer;
        the walks never use it: their token ids come from folio)."""
        out, i = [], 0
        while i < len(data):
            for n in range(min(self.longest, len(data) - i), 0, -1):
                t = self.by_bytes.get(data[i:i + n])
                if t is not None:
                    out.append(t)
                    i += n
                    break
            else:
                i += 1
        return out

    def set_of(self, words_u32):
        """(count, hash, ids) of a bitmask of 32-bit words, the end-of-sequence
        token left out."""
        bits = np.unpackbits(words_u32.view(np.uint8), bitorder="little")[:self.size]
        if self.eos is not None:
            bits[self.eos] = 0
        ids = np.flatnonzero(bits)
        return int(ids.size), int(self.mixed[ids].sum(dtype=np.uint64)), ids


def read_trace(path):
    """Yields (schema line, [instance lines]) per file, in the trace's order."""
    with open(path) as f:
        header = json.loads(f.readline())
        assert header.get("trace") == "folio bench grammar", header
        current, instances = None, []
        for line in f:
            rec = json.loads(line)
            if "schema_file" in rec:
                if current is not None:
                    yield current, instances
                current, instances = rec, []
            else:
                instances.append(rec)
        if current is not None:
            yield current, instances


class Stats:
    def __init__(self):
        self.schemas = self.compiled = 0
        self.reasons = collections.Counter()
        self.valid_total = self.valid_accepted = 0
        self.invalid_total = self.invalid_rejected = 0
        self.instances_of_refused = 0
        self.disagreements = 0
        self.mask_us, self.cold_us, self.warm_us, self.compile_ms = [], [], [], []

    def add(self, o):
        for k in ("schemas", "compiled", "valid_total", "valid_accepted", "invalid_total",
                  "invalid_rejected", "instances_of_refused", "disagreements"):
            setattr(self, k, getattr(self, k) + getattr(o, k))
        self.reasons.update(o.reasons)
        for k in ("mask_us", "cold_us", "warm_us", "compile_ms"):
            getattr(self, k).extend(getattr(o, k))

    def to_json(self):
        def pct(a, b):
            return 100.0 * a / b if b else 0.0
        return {
            "schemas": self.schemas, "compiled": self.compiled,
            "coverage_pct": pct(self.compiled, self.schemas),
            "refusal_reasons_top30": [{"reason": r, "count": n}
                                      for r, n in self.reasons.most_common(TOP_REASONS)],
            "refusal_reasons_distinct": len(self.reasons),
            "valid": {"total": self.valid_total, "accepted": self.valid_accepted},
            "soundness_pct": pct(self.valid_accepted, self.valid_total),
            "invalid": {"total": self.invalid_total, "rejected": self.invalid_rejected},
            "invalid_rejected_pct": pct(self.invalid_rejected, self.invalid_total),
            "instances_of_refused_schemas": self.instances_of_refused,
            "steps": len(self.mask_us),
            "mask_accept_disagreements": self.disagreements,
            "mask_us": percentiles(self.mask_us),
            "mask_us_cold_first_step": percentiles(self.cold_us),
            "mask_us_warm": percentiles(self.warm_us),
            "compile_ms": percentiles(self.compile_ms),
        }


class LlguidanceOracle:
    name = "llguidance"

    def __init__(self, vocab, whitespace, args):
        import llguidance as llg
        self.llg = llg
        self.version = llg.__version__
        self.tok, self.tokenizer_source = self.make_tokenizer(vocab, args)
        # The same vocabulary as folio's trie: every token's bytes compared.
        mismatched = [i for i in range(vocab.size)
                      if (b"" if self.tok.is_special_token(i) else
                          self.tok.decode_bytes([i])) != vocab.tokens[i]]
        self.tokenizer_check = {"source": self.tokenizer_source,
                                "token_bytes_differing_from_folio": len(mismatched),
                                "first_differing_ids": mismatched[:10]}
        self.options = ({"whitespace_flexible": False, "item_separator": ", ",
                         "key_separator": ": "} if whitespace == "strict" else {})
        self.words = (vocab.size + 31) // 32
        self.buf = np.zeros(self.words, dtype=np.uint32)
        self.eos = vocab.eos

    def make_tokenizer(self, vocab, args):
        """llguidance tokenizes the bytes a grammar forces (it allows only their
        canonical tokenization there), so it gets the model's real tokenizer
        where one can be built: --hf-tokenizer, or for a GGUF of SmolLM2's
        family (tokenizer.ggml.pre "smollm") Hugging Face `tokenizers` set up
        as SmolLM2's tokenizer.json is, from the file's vocabulary and merges.
        Otherwise the token bytes with a longest-match tokenizer (where a
        token that is the lone byte 0xFF cannot be told from a special
        token: llguidance marks those with a leading 0xFF)."""
        llg = self.llg
        if args.hf_tokenizer:
            with open(args.hf_tokenizer) as f:
                return (llg.LLTokenizer(f.read(), n_vocab=vocab.size, eos_token=vocab.eos),
                        "tokenizer.json " + os.path.basename(args.hf_tokenizer))
        if args.model.endswith(".gguf"):
            import gguf
            r = gguf.GGUFReader(args.model)
            pre = r.fields["tokenizer.ggml.pre"].contents() \
                if "tokenizer.ggml.pre" in r.fields else ""
            if pre == "smollm" and r.fields["tokenizer.ggml.model"].contents() == "gpt2":
                from tokenizers import Tokenizer, decoders, models, pre_tokenizers
                tokens = r.fields["tokenizer.ggml.tokens"].contents()
                merges = [tuple(m.split(" "))
                          for m in r.fields["tokenizer.ggml.merges"].contents()]
                types = r.fields["tokenizer.ggml.token_type"].contents()
                tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
                tok.pre_tokenizer = pre_tokenizers.Sequence([
                    pre_tokenizers.Digits(individual_digits=True),
                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
                tok.decoder = decoders.ByteLevel()
                tok.add_special_tokens([t for t, ty in zip(tokens, types) if ty == 3])
                return (llg.LLTokenizer(tok.to_str(), n_vocab=vocab.size, eos_token=vocab.eos),
                        "Hugging Face tokenizers from the GGUF (pre-tokenizer smollm)")
        tokens = [(b"\xff" + vocab.special_text.get(i, f"<special {i}>").encode())
                  if i in vocab.special else t for i, t in enumerate(vocab.tokens)]

        class Wrapped:
            eos_token_id = vocab.eos
            bos_token_id = vocab.bos
            special_token_ids = sorted(vocab.special)

            def __init__(self):
                self.tokens = tokens

            def __call__(self, data):
                return vocab.greedy(data if isinstance(data, bytes) else data.encode())

        return (llg.LLTokenizer(llg.TokenizerWrapper(Wrapped()), n_vocab=vocab.size),
                "token bytes with longest-match tokenization (no tokenizer.json)")

    def forced(self, m):
        return len(m.compute_ff_bytes())

    def error(self, m):
        return m.get_error()

    def compile(self, schema):
        try:
            grammar = self.llg.LLMatcher.grammar_from_json_schema(
                schema, overrides=self.options or None)
        except Exception as e:  # a schema that is not a JSON object
            return None, str(e)
        m = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            return None, m.get_error()
        return m, None

    def fresh(self, compiled):
        return compiled.deep_copy()

    def fill(self, m):
        t0 = time.perf_counter_ns()
        m.unsafe_compute_mask_ptr(self.buf.ctypes.data, self.buf.nbytes)
        return (time.perf_counter_ns() - t0) / 1000.0

    def bit(self, t):
        return bool((int(self.buf[t >> 5]) >> (t & 31)) & 1)

    def consume(self, m, t):
        return m.consume_token(t)

    def can_finish(self, m):
        return m.is_accepting()


class XgrammarOracle:
    name = "xgrammar"

    def __init__(self, vocab, whitespace, args):
        del args
        import torch
        import xgrammar as xgr
        self.xgr = xgr
        from importlib.metadata import version
        self.version = version("xgrammar")
        tokens = [b"" if i in vocab.special else t for i, t in enumerate(vocab.tokens)]
        stop = [vocab.eos] if vocab.eos is not None else None
        info = xgr.TokenizerInfo(tokens, xgr.VocabType.RAW, vocab_size=vocab.size,
                                 stop_token_ids=stop)
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self.strict = whitespace == "strict"
        self.tensor = xgr.allocate_token_bitmask(1, vocab.size)
        self.buf = self.tensor.numpy().view(np.uint32)[0]
        self.torch = torch
        self.eos = vocab.eos

    def compile(self, schema):
        try:
            if self.strict:
                g = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=False,
                                                      separators=(", ", ": "),
                                                      strict_mode=False)
            else:
                g = self.compiler.compile_json_schema(json.dumps(schema), any_whitespace=True,
                                                      strict_mode=False)
        except Exception as e:
            return None, f"{type(e).__name__}: {e}"
        return g, None

    def fresh(self, compiled):
        return self.xgr.GrammarMatcher(compiled)

    def fill(self, m):
        t0 = time.perf_counter_ns()
        m.fill_next_token_bitmask(self.tensor, 0)
        return (time.perf_counter_ns() - t0) / 1000.0

    def bit(self, t):
        return bool((int(self.buf[t >> 5]) >> (t & 31)) & 1)

    def consume(self, m, t):
        return m.accept_token(t)

    def error(self, m):
        del m
        return ""

    def can_finish(self, m):
        # After the last token the mask was just filled: the end may come
        # exactly when its bit is set.
        return self.eos is not None and self.bit(self.eos)


class OracleRun:
    """One oracle over every file of the trace."""

    def __init__(self, oracle, vocab):
        self.o = oracle
        self.vocab = vocab
        self.splits = collections.defaultdict(Stats)
        self.failures, self.failures_count = [], 0
        self.invalid_accepted, self.invalid_accepted_count = [], 0
        self.disagreement_examples = []
        self.compiled_files = set()
        # Per file: compile ms, and each walked instance's verdict and mask times,
        # for the comparison on the schemas every engine compiled.
        self.compile_ms = {}
        self.outcomes = collections.defaultdict(list)  # file -> [(valid, ok)]
        self.file_mask_us = collections.defaultdict(list)  # file -> [(step, us)]

    def compile(self, name, schema):
        s = self.splits[split_of(name)]
        s.schemas += 1
        t0 = time.perf_counter()
        g, err = self.o.compile(schema)
        ms = (time.perf_counter() - t0) * 1000.0
        if g is None:
            s.reasons[normalize_reason(err)] += 1
            return None
        s.compiled += 1
        s.compile_ms.append(ms)
        self.compiled_files.add(name)
        self.compile_ms[name] = ms
        return g

    def walk(self, name, g, inst, want_sets=False):
        """Walks one instance; returns the per-step (count, hash, ids) of the
        allowed sets when want_sets, else None."""
        s = self.splits[split_of(name)]
        if g is None:
            s.instances_of_refused += 1
            return None
        tokens = inst["tokens"]
        m = self.o.fresh(g)
        sets = [] if want_sets else None
        accepted = 0
        for i in range(len(tokens) + 1):
            us = self.o.fill(m)
            s.mask_us.append(us)
            self.file_mask_us[name].append((i, us))
            (s.cold_us if i == 0 else s.warm_us).append(us)
            if want_sets:
                sets.append(self.vocab.set_of(self.o.buf) + (self.o.forced(m),))
            if i == len(tokens):
                break
            t = tokens[i]
            bit = self.o.bit(t)
            ok = self.o.consume(m, t)
            if bit != ok:
                s.disagreements += 1
                if len(self.disagreement_examples) < 20:
                    self.disagreement_examples.append(
                        {"file": name, "test": inst["test"], "step": i, "token": t,
                         "token_text": self.vocab.token_text(t), "mask_bit": bit,
                         "accepted": ok, "before": self.vocab.text(tokens[:i])[-60:]})
            if not ok:
                break
            accepted += 1
        done = accepted == len(tokens)
        finish = done and self.o.can_finish(m)
        self.outcomes[name].append((inst["valid"], finish))
        if inst["valid"]:
            s.valid_total += 1
            if finish:
                s.valid_accepted += 1
            else:
                self.failures_count += 1
                if len(self.failures) < MAX_LISTED:
                    f = {"file": name, "test": inst["test"], "step": accepted}
                    if done:
                        f["where"] = "end: every token accepted, but the grammar cannot finish"
                    else:
                        f["where"] = "token refused"
                        f["token"] = tokens[accepted]
                        f["token_text"] = self.vocab.token_text(tokens[accepted])
                        f["before"] = self.vocab.text(tokens[:accepted])[-60:]
                    error = self.o.error(m)
                    if error:
                        f["error"] = error[:300]
                    self.failures.append(f)
        else:
            s.invalid_total += 1
            if not finish:
                s.invalid_rejected += 1
            else:
                self.invalid_accepted_count += 1
                if len(self.invalid_accepted) < MAX_LISTED:
                    self.invalid_accepted.append(
                        {"file": name, "test": inst["test"],
                         "text": self.vocab.text(tokens)[:400]})
        return sets

    def report(self):
        total = Stats()
        splits = {}
        for name in sorted(self.splits):
            splits[name] = self.splits[name].to_json()
            total.add(self.splits[name])
        return {"version": self.o.version,
                "tokenizer": getattr(self.o, "tokenizer_check", "folio's token bytes"),
                "splits": splits, "total": total.to_json(),
                "soundness_failures_count": self.failures_count,
                "soundness_failures": self.failures,
                "invalid_accepted_count": self.invalid_accepted_count,
                "invalid_accepted": self.invalid_accepted,
                "mask_accept_disagreement_examples": self.disagreement_examples}


def run_folio(args, files=None, trace_full=False, tmp=None):
    out = os.path.join(tmp, "folio_full.json" if trace_full else "folio.json")
    trace = os.path.join(tmp, "trace_full.jsonl" if trace_full else "trace.jsonl")
    vocab = os.path.join(tmp, "vocab.json")
    cmd = [args.folio, "bench", "grammar", "--maskbench", args.maskbench,
           "--whitespace", args.whitespace, "-o", out, "--trace", trace, "--dump-vocab", vocab]
    if args.model:
        cmd += ["--model", args.model]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    if files:
        cmd += ["--files", ",".join(files)]
    if trace_full:
        cmd += ["--trace-full"]
    print("grammar_oracles: " + " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    return out, trace, vocab


def differential(args, vocab, llg_oracle, schemas, trace_path, tmp):
    """Folio's allowed sets against llguidance's, step by step. A step where
    llguidance sees forced bytes (compute_ff_bytes() not empty) is counted
    apart: there llguidance allows only the canonical tokenization of the
    forced bytes, by design, where folio allows every token the grammar
    does."""
    llg = OracleRun(llg_oracle, vocab)  # a separate run: its timings are not reported
    equal = different = 0
    by_count = collections.Counter()
    compared_instances = 0
    differing_files = collections.OrderedDict()
    for head, instances in read_trace(trace_path):
        name = head["schema_file"]
        if not head["compiled"]:
            continue
        g = llg.compile(name, schemas[name])
        if g is None:
            continue
        for inst in instances:
            if not inst["valid"]:
                continue
            sets = llg.walk(name, g, inst, want_sets=True)
            compared_instances += 1
            for (fc, fh), (lc, lh, _, forced) in zip(inst["masks"], sets):
                if fc == lc and int(fh, 16) == lh:
                    equal += 1
                    continue
                different += 1
                where = "forced bytes" if forced else "free"
                how = ("llguidance allows more" if lc > fc else
                       "folio allows more" if fc > lc else "same count, other tokens")
                by_count[f"{where}: {how}"] += 1
                if not forced:
                    # [steps not explained by one token more on folio's side (in a
                    # string, DEL, which llguidance leaves out), all steps]
                    score = differing_files.setdefault(name, [0, 0])
                    score[0] += fc - lc != 1
                    score[1] += 1
    result = {"compared_instances": compared_instances, "steps_equal": equal,
              "steps_different": different, "differences": dict(by_count),
              "schemas_with_differences_outside_forced_bytes": len(differing_files),
              "by_split": dict(collections.Counter(split_of(n) for n in differing_files))}
    if not differing_files or not args.folio:
        return result
    # The schemas with the most differing free steps first.
    chosen = sorted(differing_files, key=lambda n: [-x for x in differing_files[n]])
    chosen = chosen[:args.classify_files]
    _, full_trace, _ = run_folio(args, files=chosen, trace_full=True, tmp=tmp)
    classes = collections.Counter()
    only_llg_tokens, only_folio_tokens = collections.Counter(), collections.Counter()
    examples = []
    for head, instances in read_trace(full_trace):
        name = head["schema_file"]
        g = llg.compile(name, schemas[name])
        shown = set()
        for inst in instances:
            if not inst["valid"]:
                continue
            sets = llg.walk(name, g, inst, want_sets=True)
            for step, (ids, (fc, fh), (_, _, lids, forced)) in enumerate(
                    zip(inst["allowed_ids"], inst["masks"], sets)):
                if isinstance(ids, dict):  # {"not": the ids not allowed}
                    keep = np.ones(vocab.size, dtype=bool)
                    keep[np.asarray(ids["not"], dtype=np.int64)] = False
                    f = np.flatnonzero(keep)
                else:
                    f = np.asarray(ids, dtype=np.int64)
                # The ids agree with the count and hash of the same step.
                assert f.size == fc and int(vocab.mixed[f].sum(dtype=np.uint64)) == int(fh, 16)
                if forced:
                    continue
                only_l = np.setdiff1d(lids, f)
                only_f = np.setdiff1d(f, lids)
                if only_l.size == 0 and only_f.size == 0:
                    continue
                kind = ("both ways" if only_l.size and only_f.size else
                        "only llguidance allows some" if only_l.size else
                        "only folio allows some")
                classes[kind] += 1
                only_llg_tokens.update(vocab.token_text(int(t)) for t in only_l)
                only_folio_tokens.update(vocab.token_text(int(t)) for t in only_f)
                signature = (tuple(vocab.token_text(int(t)) for t in only_l[:5]),
                             tuple(vocab.token_text(int(t)) for t in only_f[:5]))
                if len(shown) < args.examples and signature not in shown:
                    shown.add(signature)
                    examples.append({
                        "file": name, "test": inst["test"], "step": step,
                        "before": vocab.text(inst["tokens"][:step])[-80:],
                        "next_token": (vocab.token_text(inst["tokens"][step])
                                       if step < len(inst["tokens"]) else None),
                        "folio_allowed": int(f.size), "llguidance_allowed": int(lids.size),
                        "only_llguidance": [vocab.token_text(int(t)) for t in only_l[:12]],
                        "only_llguidance_count": int(only_l.size),
                        "only_folio": [vocab.token_text(int(t)) for t in only_f[:12]],
                        "only_folio_count": int(only_f.size)})
    result["classified_schemas"] = chosen
    result["classified_free_steps"] = dict(classes)
    result["tokens_only_llguidance_allows_top"] = only_llg_tokens.most_common(30)
    result["tokens_only_folio_allows_top"] = only_folio_tokens.most_common(30)
    result["examples"] = examples
    return result


def folio_from_trace(trace_path):
    """Folio's per-file compile times, verdicts and mask times, from the trace."""
    compile_ms, outcomes = {}, collections.defaultdict(list)
    mask_us = collections.defaultdict(list)
    for head, instances in read_trace(trace_path):
        name = head["schema_file"]
        if not head["compiled"]:
            continue
        compile_ms[name] = head["compile_ms"]
        for inst in instances:
            ok = inst["accepted"] == len(inst["tokens"]) and inst["can_finish"]
            outcomes[name].append((inst["valid"], ok))
            mask_us[name].extend((i, ns / 1000.0) for i, ns in enumerate(inst["mask_ns"]))
    return compile_ms, outcomes, mask_us


def on_common_schemas(trace_path, runs):
    """Every engine on the schemas all of them compiled: the same instances
    and the same steps, so the numbers compare directly."""
    engines = {"folio": folio_from_trace(trace_path)}
    for name, run in runs.items():
        engines[name] = (run.compile_ms, run.outcomes, run.file_mask_us)
    common = set.intersection(*(set(e[0]) for e in engines.values()))
    out = {"schemas": len(common), "by_split": dict(collections.Counter(
        split_of(n) for n in common)), "engines": {}}
    for name, (compile_ms, outcomes, mask_us) in engines.items():
        verdicts = [v for f in common for v in outcomes.get(f, [])]
        valid = [ok for is_valid, ok in verdicts if is_valid]
        invalid = [ok for is_valid, ok in verdicts if not is_valid]
        steps = [x for f in common for x in mask_us.get(f, [])]
        out["engines"][name] = {
            "valid": {"total": len(valid), "accepted": sum(valid)},
            "soundness_pct": 100.0 * sum(valid) / len(valid) if valid else 0.0,
            "invalid": {"total": len(invalid), "rejected": len(invalid) - sum(invalid)},
            "invalid_rejected_pct": (100.0 * (len(invalid) - sum(invalid)) / len(invalid)
                                     if invalid else 0.0),
            "mask_us": percentiles([us for _, us in steps]),
            "mask_us_cold_first_step": percentiles([us for i, us in steps if i == 0]),
            "compile_ms": percentiles([compile_ms[f] for f in common]),
        }
    return out


def summary_row(name, total):
    def g(d, k):
        return d.get(k)
    return {"engine": name, "schemas": total["schemas"], "compiled": total["compiled"],
            "coverage_pct": total["coverage_pct"],
            "valid_accepted": total["valid"]["accepted"], "valid_total": total["valid"]["total"],
            "soundness_pct": total["soundness_pct"],
            "invalid_rejected_pct": total["invalid_rejected_pct"],
            "mask_us_p50": g(total["mask_us"], "p50"), "mask_us_p99": g(total["mask_us"], "p99"),
            "mask_us_cold_p50": g(total["mask_us_cold_first_step"], "p50"),
            "compile_ms_p50": g(total["compile_ms"], "p50"),
            "compile_ms_p99": g(total["compile_ms"], "p99")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--maskbench", required=True, help="a MaskBench folder")
    ap.add_argument("--model", default="", help="the GGUF (or folder) whose tokenizer folio uses")
    ap.add_argument("--folio", default="", help="folio binary: run `folio bench grammar` first")
    ap.add_argument("--folio-json", help="an earlier run's `folio bench grammar` JSON")
    ap.add_argument("--trace", help="an earlier run's --trace file")
    ap.add_argument("--vocab", help="an earlier run's --dump-vocab file")
    ap.add_argument("--hf-tokenizer", help="the model's tokenizer.json, for llguidance")
    ap.add_argument("--limit", type=int, default=0, help="files per split (default: all)")
    ap.add_argument("--whitespace", choices=["strict", "flexible"], default="strict")
    ap.add_argument("--oracles", default="llguidance,xgrammar")
    ap.add_argument("--differential", action="store_true")
    ap.add_argument("--classify-files", type=int, default=40,
                    help="--differential: schemas with differences classified exactly")
    ap.add_argument("--examples", type=int, default=3,
                    help="examples per classified schema (differing in different tokens)")
    ap.add_argument("-o", "--output", help="write the JSON here (default: stdout)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="grammar_oracles_") as tmp:
        if args.folio:
            folio_json, trace_path, vocab_path = run_folio(args, tmp=tmp)
        elif args.folio_json and args.trace and args.vocab:
            folio_json, trace_path, vocab_path = args.folio_json, args.trace, args.vocab
        else:
            ap.error("give --folio BIN, or --folio-json, --trace and --vocab")
        with open(folio_json) as f:
            folio_report = json.load(f)
        vocab = Vocab(vocab_path)

        schemas = {}
        for head, _ in read_trace(trace_path):
            with open(os.path.join(args.maskbench, head["schema_file"])) as f:
                schemas[head["schema_file"]] = json.load(f)["schema"]

        makers = {"llguidance": LlguidanceOracle, "xgrammar": XgrammarOracle}
        runs = {}
        for name in [n for n in args.oracles.split(",") if n]:
            t0 = time.perf_counter()
            run = OracleRun(makers[name](vocab, args.whitespace, args), vocab)
            for head, instances in read_trace(trace_path):
                g = run.compile(head["schema_file"], schemas[head["schema_file"]])
                for inst in instances:
                    run.walk(head["schema_file"], g, inst)
                del g
            runs[name] = run
            print(f"grammar_oracles: {name} done in {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr)

        report = {
            "benchmark": "grammar_oracles",
            "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
            "model": args.model or "byte-level",
            "vocab_size": vocab.size,
            "whitespace": args.whitespace,
            "limit_per_split": args.limit,
            "machine": {"cpu_model": bench_machine.cpu_name(), "cores": os.cpu_count(),
                        "python": platform.python_version()},
            "timing": "mask_us: one mask per step on a fresh matcher per instance, every step "
                      "(before each token and after the last), the first step (cold) and the "
                      "rest (warm); folio in C++ with steady_clock, the oracles through their "
                      "Python bindings with perf_counter_ns (a call's overhead included). "
                      "compile_ms: per compiled schema.",
            "folio": folio_report,
        }
        for name, run in runs.items():
            report[name] = run.report()
        report["summary"] = [summary_row("folio", folio_report["total"])] + [
            summary_row(n, report[n]["total"]) for n in runs]
        report["on_schemas_all_compile"] = on_common_schemas(trace_path, runs)
        if args.differential:
            if "llguidance" not in runs:
                ap.error("--differential needs llguidance in --oracles")
            report["differential"] = differential(args, vocab, runs["llguidance"].o, schemas,
                                                  trace_path, tmp)
    text = json.dumps(report, indent=1, ensure_ascii=False)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()

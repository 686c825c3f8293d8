"""`folio quantize` on the real model (SmolLM2-135M-Instruct, Q4_1 GGUF;
tests/python/smollm2.py), checked with code folio did not write: the `gguf`
package reads every output (GGUFReader), its quantizer must produce the
same bytes for the legacy and element types (gguf.quants.quantize of the
same dequantized source), and its dequantization of what folio wrote must
give the RMS errors folio reports. Every test skips, saying why, when the
model is absent.

Every type is checked on the real model's weights cut to three of its
layers (0, 15, 29, renumbered) and the first 4096 rows of its embedding,
written with the gguf package: the whole model takes ~4 s per type in the
gguf package's reader and quantizer alone. FOLIO_QUANTIZE_FULL=1 checks
every type on the whole model instead (about 2.5 minutes on two cores).
The whole model is quantized to q8_0, q4_k_m and f16, read back, and must
still say " Paris" after "The capital of France is".

pytest -s prints each type's errors beside gguf's (docs/design.md quotes
the whole model's).
"""
import ctypes
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import smollm2

FOLIO = os.environ.get("FOLIO_BIN", str(Path(__file__).resolve().parents[2] / "build/bin/folio"))
FULL = os.environ.get("FOLIO_QUANTIZE_FULL") == "1"
LAYERS = (0, 15, 29)  # the real layers the cut model keeps, as blk.0, blk.1, blk.2
VOCAB = 4096  # the embedding rows it keeps

TYPES = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k",
         "iq4_nl", "iq4_xs", "q4_k_m", "q5_k_m"]
# Types gguf.quants.quantize writes: folio's bytes must equal its bytes.
GGUF_QUANTIZES = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"}
# Types only llama.cpp's own quantizer writes (ggml_quantize_chunk, as
# llama-quantize runs it without an importance matrix): folio's bytes must
# equal those, checked where llama-cpp-python is installed (make setup).
GGML_QUANTIZES = {"q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs"}
GENERATES = ["q8_0", "q4_k_m", "f16"]
BLOCK = {"f32": 1, "f16": 1, "bf16": 1, "q8_0": 32, "q4_0": 32, "q4_1": 32, "q5_0": 32,
         "q5_1": 32, "q4_k": 256, "q5_k": 256, "q6_k": 256, "iq4_nl": 32, "iq4_xs": 256}
BLOCK_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "q8_0": 34, "q4_0": 18, "q4_1": 20, "q5_0": 22,
               "q5_1": 24, "q4_k": 144, "q5_k": 176, "q6_k": 210, "iq4_nl": 18, "iq4_xs": 136}
FILE_TYPE = {"f32": 0, "f16": 1, "bf16": 32, "q8_0": 7, "q4_0": 2, "q4_1": 3, "q5_0": 8,
             "q5_1": 9, "q4_k": 14, "q5_k": 16, "q6_k": 18, "iq4_nl": 25, "iq4_xs": 30,
             "q4_k_m": 15, "q5_k_m": 17}

SUMMARY = {}  # type -> the figures printed at the end


def qtype(name):
    import gguf
    return gguf.GGMLQuantizationType[name.upper()]


def wanted_type(scheme, name, shape, n_layers, tied):
    """The type the scheme asks for, restated from llama.cpp's rules
    (llama_tensor_get_type) rather than from folio's code."""
    if len(shape) == 1:
        return "f32"
    if not scheme.endswith("_m"):
        return scheme
    base = scheme[:-2]
    if name == "output.weight" or (tied and name == "token_embd.weight"):
        return "q6_k"
    m = re.fullmatch(r"blk\.(\d+)\.(attn_v|ffn_down)\.weight", name)
    if m:
        i, n = int(m.group(1)), n_layers
        if i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2:
            return "q6_k"
    return base


def written_type(wanted, cols):
    if cols % BLOCK[wanted] == 0:
        return wanted
    nxt = {"q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0", "iq4_xs": "iq4_nl"}.get(wanted, "f16")
    return nxt if cols % BLOCK[nxt] == 0 else "f16"


@pytest.fixture(scope="module")
def real():
    import gguf
    path = smollm2.require()
    return path, gguf.GGUFReader(str(path))


def write_cut_model(real_reader, path):
    """The real model's metadata (but its tokenizer) and the tensors of
    LAYERS, renumbered, with the first VOCAB embedding rows, bytes as
    stored: a small GGUF file of real weights."""
    import gguf
    w = gguf.GGUFWriter(str(path), "llama")
    for key, field in real_reader.fields.items():
        if key.startswith(("GGUF.", "tokenizer.")) or key == "general.architecture":
            continue
        value = field.contents()
        if key == "llama.block_count":
            value = len(LAYERS)
        elif key == "llama.vocab_size":
            value = VOCAB
        w.add_key_value(key, value, field.types[0], field.types[1] if len(field.types) > 1 else None)
    for t in real_reader.tensors:
        m = re.fullmatch(r"blk\.(\d+)\.(.*)", t.name)
        name, data = t.name, np.asarray(t.data)
        if m:
            if int(m.group(1)) not in LAYERS:
                continue
            name = f"blk.{LAYERS.index(int(m.group(1)))}.{m.group(2)}"
        elif t.name == "token_embd.weight":
            data = data[:VOCAB]
        w.add_tensor(name, data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def source(real, tmp_path_factory):
    """The model every type is checked on (the cut model, or the whole one
    with FOLIO_QUANTIZE_FULL=1): its path, reader and every tensor as gguf
    dequantizes it."""
    import gguf
    path, reader = real
    if not FULL:
        path = tmp_path_factory.mktemp("cut") / "smollm2-cut.gguf"
        write_cut_model(reader, path)
        reader = gguf.GGUFReader(str(path))
    weights = {t.name: gguf.quants.dequantize(t.data, t.tensor_type) for t in reader.tensors}
    return path, reader, weights


@pytest.fixture(scope="module", autouse=True)
def print_summary():
    yield
    if not SUMMARY:
        return
    print("\nRMS relative error vs the source weights (folio | gguf.quants.quantize):")
    for name in TYPES:
        if name in SUMMARY:
            s = SUMMARY[name]
            per_type = ", ".join(f"{t} {e:.6f}" for t, e in s["types"].items())
            gguf_figure = f" | {s['gguf']:.6f}" if "gguf" in s else ""
            print(f"  {name:7s} {s['overall']:.6f}{gguf_figure}  "
                  f"({s['bits_per_weight']:.3f} bits/weight, {s['seconds']:.1f} s; {per_type})")


def fields(reader):
    return {k: f for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def quantize(src_path, out_path, scheme):
    """Runs folio quantize; returns its JSON report and gguf's reader of the
    output."""
    import gguf
    run = subprocess.run([FOLIO, "quantize", str(src_path), str(out_path), "--type", scheme,
                          "--threads", "2"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert not Path(str(out_path) + ".tmp").exists()
    return json.loads(run.stdout), gguf.GGUFReader(str(out_path))


def ggml_quantizer():
    """llama.cpp's quantizer, ggml_quantize_chunk of the libggml-base that
    llama-cpp-python ships (no importance matrix: what llama-quantize
    runs), as a function (f32 matrix, gguf type) -> bytes; None when
    llama-cpp-python is not installed."""
    try:
        import llama_cpp
    except ImportError:
        return None
    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                        ctypes.c_void_p]
    lib.ggml_row_size.restype = ctypes.c_size_t
    lib.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]

    def quantize(w, qtype):
        w = np.ascontiguousarray(w, dtype=np.float32).reshape(-1, w.shape[-1])
        rows, cols = w.shape
        out = np.zeros(rows * lib.ggml_row_size(int(qtype), cols), np.uint8)
        written = lib.ggml_quantize_chunk(int(qtype), w.ctypes.data, out.ctypes.data, 0, rows,
                                          cols, None)
        assert written == out.size
        return out
    return quantize


def check_structure(scheme, src, out, report):
    """Every key of the source, in order, with the same value but
    general.file_type (the scheme's); the same tensors in the same order and
    shapes, with the types llama.cpp's rules give, and each fallback
    reported."""
    src_fields, out_fields = fields(src), fields(out)
    assert list(out_fields) == list(src_fields)
    for key, field in src_fields.items():
        if key != "general.file_type":
            assert out_fields[key].contents() == field.contents(), key
    assert out_fields["general.file_type"].contents() == FILE_TYPE[scheme]

    tied = all(t.name != "output.weight" for t in src.tensors)
    n_layers = src_fields["llama.block_count"].contents()
    assert [t.name for t in out.tensors] == [t.name for t in src.tensors]
    fallbacks = {}
    for t_src, t in zip(src.tensors, out.tensors):
        shape = list(reversed([int(d) for d in t.shape]))
        assert shape == list(reversed([int(d) for d in t_src.shape])), t.name
        want = wanted_type(scheme, t.name, shape, n_layers, tied)
        got = written_type(want, shape[-1])
        assert t.tensor_type == qtype(got), (t.name, t.tensor_type.name, got)
        if got != want:
            fallbacks[t.name] = (want, got)
    assert {f["tensor"]: (f["wanted"], f["used"]) for f in report["fallbacks"]} == fallbacks


@pytest.mark.parametrize("scheme", TYPES)
def test_every_type_on_real_weights(scheme, source, tmp_path):
    import gguf
    src_path, src, weights = source
    report, out = quantize(src_path, tmp_path / f"{scheme}.gguf", scheme)
    check_structure(scheme, src, out, report)
    ggml = ggml_quantizer()

    # gguf's dequantization of folio's bytes gives folio's reported errors,
    # per type and overall; for the types gguf can quantize, its bytes are
    # folio's.
    num, den = {}, {}
    for t in out.tensors:
        name = t.tensor_type.name.lower()
        w = weights[t.name]
        if name in GGUF_QUANTIZES:
            mine = np.asarray(t.data).view(np.uint8).ravel()
            theirs = np.asarray(gguf.quants.quantize(w, t.tensor_type)).view(np.uint8).ravel()
            assert np.array_equal(mine, theirs), f"{t.name}: folio's {name} bytes differ from gguf's"
        if name in GGML_QUANTIZES and ggml is not None:
            mine = np.asarray(t.data).view(np.uint8).ravel()
            differ = np.count_nonzero(mine != ggml(w, t.tensor_type))
            assert differ == 0, f"{t.name}: {differ} of folio's {name} bytes differ from ggml's"
        q = gguf.quants.dequantize(t.data, t.tensor_type).reshape(w.shape)
        # q - w is exact in f32 where q is near w; the sums are float64.
        num[name] = num.get(name, 0.0) + float(np.square((q - w).astype(np.float64)).sum())
        den[name] = den.get(name, 0.0) + float(np.square(w.astype(np.float64)).sum())
    assert set(report["types"]) == set(num)
    for name, figures in report["types"].items():
        rms = np.sqrt(num[name] / den[name])
        assert figures["rms_relative_error"] == pytest.approx(rms, rel=1e-6, abs=1e-12), name
        assert figures["bits_per_weight"] == pytest.approx(8 * BLOCK_BYTES[name] / BLOCK[name])
    overall = np.sqrt(sum(num.values()) / sum(den.values()))
    assert report["rms_relative_error"] == pytest.approx(overall, rel=1e-6, abs=1e-12)

    SUMMARY[scheme] = {"overall": report["rms_relative_error"],
                       "bits_per_weight": report["bits_per_weight"],
                       "seconds": report["seconds"],
                       "types": {k: v["rms_relative_error"] for k, v in report["types"].items()}}
    if scheme in GGUF_QUANTIZES:  # the same bytes, so gguf's figure is these sums
        SUMMARY[scheme]["gguf"] = overall
    if ggml is None and set(report["types"]) & GGML_QUANTIZES:
        pytest.skip(f"every check but one passed; {sorted(set(report['types']) & GGML_QUANTIZES)} "
                    "bytes not compared with llama.cpp's: llama-cpp-python is not installed "
                    "(make setup installs it)")


@pytest.mark.parametrize("scheme", GENERATES)
def test_the_whole_model_quantized_still_says_paris(scheme, real, tmp_path):
    src_path, src = real
    out_path = tmp_path / f"{scheme}.gguf"
    report, out = quantize(src_path, out_path, scheme)
    check_structure(scheme, src, out, report)
    gen = subprocess.run([FOLIO, "generate", "--model", str(out_path), "--prompt",
                          "The capital of France is", "--max-tokens", "3", "--threads", "2"],
                         capture_output=True, text=True, timeout=120)
    assert gen.returncode == 0, gen.stderr
    assert gen.stdout.startswith("The capital of France is Paris"), gen.stdout


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_a_hugging_face_folder_becomes_a_gguf_file_llama_cpp_reads(arch, tmp_path):
    """A random Hugging Face checkpoint (tests/python/checkpoints.py) in,
    q8_0 out: llama.cpp's metadata keys, llama.cpp's tensor names, Q/K rows
    permuted as its converter does for llama, and each matrix's bytes equal
    to gguf.quants.quantize of the permuted f32 weights."""
    import gguf

    import checkpoints as ck
    a = ck.Arch(name=arch, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=96)
    w = ck.random_weights(a, seed=3)
    ck.write_hf(tmp_path / "hf", a, w, "f32")
    report, out = quantize(tmp_path / "hf", tmp_path / "out.gguf", "q8_0")
    assert report["source_format"] == "folder" and report["fallbacks"] == []
    f = {k: v.contents() for k, v in fields(out).items()}
    assert f["general.architecture"] == arch and f["general.file_type"] == 7
    assert f["general.quantization_version"] == 2
    assert (f[f"{arch}.embedding_length"], f[f"{arch}.block_count"],
            f[f"{arch}.feed_forward_length"], f[f"{arch}.attention.head_count"],
            f[f"{arch}.attention.head_count_kv"], f[f"{arch}.context_length"],
            f[f"{arch}.rope.dimension_count"]) == (64, 2, 96, 4, 2, 128, 16)
    assert f[f"{arch}.attention.layer_norm_rms_epsilon"] == pytest.approx(a.eps, rel=1e-6)
    assert f[f"{arch}.rope.freq_base"] == a.rope_theta
    tensors = {t.name: t for t in out.tensors}
    assert set(tensors) == {ck.gguf_name(n) for n in w}
    for hf_name, x in w.items():
        t = tensors[ck.gguf_name(hf_name)]
        x = x.astype(np.float32)
        if arch == "llama" and hf_name.endswith("q_proj.weight"):
            x = ck.permute_for_gguf(x, a.heads)
        elif arch == "llama" and hf_name.endswith("k_proj.weight"):
            x = ck.permute_for_gguf(x, a.kv_heads)
        want_type = "F32" if x.ndim == 1 else "Q8_0"
        assert t.tensor_type.name == want_type, hf_name
        want = np.asarray(gguf.quants.quantize(x, t.tensor_type)).view(np.uint8).ravel()
        assert np.array_equal(np.asarray(t.data).view(np.uint8).ravel(), want), hf_name


def test_a_refused_type_and_a_missing_input_write_nothing(tmp_path):
    out = tmp_path / "x.gguf"
    bad = subprocess.run([FOLIO, "quantize", str(tmp_path / "absent"), str(out), "--type", "q8_0"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "no model at" in bad.stderr
    model = smollm2.require()
    bad = subprocess.run([FOLIO, "quantize", str(model), str(out), "--type", "q2_k"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "q4_k_m" in bad.stderr  # the list of names
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("family", ["llama-bpe", "smollm"])
def test_a_folder_tokenizer_json_is_written_as_gguf_keys(family, tmp_path):
    """A Hugging Face folder's tokenizer.json (a byte-level BPE trained here
    with HF `tokenizers`, split as Llama-3 or SmolLM2 split) becomes
    llama.cpp's tokenizer.ggml.* keys: the report names the pre-tokenizer,
    the vocabulary is padded to the embedding with unused tokens, and the
    GGUF file's tokenizer encodes awkward strings to the ids HF `tokenizers`
    gives for the tokenizer.json."""
    import gguf
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    import checkpoints as ck
    llama3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
              r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
    if family == "llama-bpe":
        steps = [pre_tokenizers.Split(Regex(llama3), "isolated"),
                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        tok = Tokenizer(models.BPE(ignore_merges=True))
    else:
        steps = [pre_tokenizers.Digits(individual_digits=True),
                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
        tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tok.decoder = decoders.ByteLevel()
    corpus = ["The quick brown fox jumps over the lazy dog. It's 2024, isn't it?",
              "def main():\n    return 42  # the answer\n", "你好，世界！ 🚀 naïve café"] * 50
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=290, special_tokens=["<|end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    a = ck.Arch(name="llama", hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=96, vocab=300)
    ck.write_hf(tmp_path / "hf", a, ck.random_weights(a, seed=4), "f32")
    tok.save(str(tmp_path / "hf" / "tokenizer.json"))
    n = tok.get_vocab_size()
    assert n < a.vocab

    report, out = quantize(tmp_path / "hf", tmp_path / "out.gguf", "q8_0")
    assert report["tokenizer"] == f"pre-tokenizer {family}, {a.vocab} tokens"
    f = {k: v.contents() for k, v in fields(out).items()}
    assert f["tokenizer.ggml.model"] == "gpt2" and f["tokenizer.ggml.pre"] == family
    tokens, types = f["tokenizer.ggml.tokens"], f["tokenizer.ggml.token_type"]
    assert len(tokens) == len(types) == a.vocab
    assert tokens[n:] == [f"[PAD{i}]" for i in range(n, a.vocab)] and set(types[n:]) == {5}
    assert types[tok.token_to_id("<|end|>")] == 3
    for text in ["The quick brown fox, 12345 times!", "  two  spaces\n\n\tx", "isn't it 3.14?",
                 "你好🚀 café naïve", "x = f(y) ** 2  # 0x1F", "<|end|> after"]:
        got = subprocess.run([FOLIO, "tokenize", "--model", str(tmp_path / "out.gguf"), "--no-special",
                              "--text", text], capture_output=True, text=True, check=True)
        assert json.loads(got.stdout)["ids"] == tok.encode(text, add_special_tokens=False).ids, text

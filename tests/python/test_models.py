"""folio's logits and greedy tokens against an independent NumPy forward pass,
on small random checkpoints written by the `safetensors`-format writer and
the `gguf` package: several architectures, formats and weight types.

folio computes in float32 and the reference in float64 on the same stored
weights, so logits agree to float32 accuracy: we allow 1e-4 of the logits'
scale (max |logit|, at least 1) — two layers of ~100-term float32 dot
products land near 1e-5 of it. Greedy tokens must match exactly; each
fixture's seed is the first whose every greedy step wins by ten times the
tolerance, so the comparison tests folio rather than a coin flip.
"""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import checkpoints as ck

FOLIO = os.environ.get("FOLIO_BIN", str(Path(__file__).resolve().parents[2] / "build/bin/folio"))
PROMPT = [5, 17, 250, 3, 99, 42, 7, 181, 64, 2, 11]
STEPS = 6


def run_folio(model: Path, *extra):
    out = subprocess.run(
        [FOLIO, "logits", "--model", str(model), "--tokens", ",".join(map(str, PROMPT)),
         "--greedy", str(STEPS), *extra],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def gguf_stored(w, dtype):
    import gguf
    qtype = ck.gguf_qtype(dtype)
    out = {}
    for name, x in w.items():
        x32 = x.astype(np.float32)
        if x.ndim == 1 or dtype == "f32":
            out[name] = x32.astype(np.float64)
        elif dtype in ck.KQUANT_DTYPES:  # random blocks, see ck.kquant_blocks
            q = ck.kquant_blocks(x, dtype)
            out[name] = gguf.quants.dequantize(q, qtype).reshape(x.shape).astype(np.float64)
        else:
            q = gguf.quants.quantize(x32, qtype)
            out[name] = gguf.quants.dequantize(q, qtype).reshape(x.shape).astype(np.float64)
    return out


def tolerance(logits):
    return 1e-4 * max(1.0, np.abs(logits).max())


def greedy_margins_are_wide(a, w_ref):
    """Every greedy step of the reference wins by far more than the
    tolerance, so an exact token comparison tests folio, not a coin flip."""
    ids = list(PROMPT)
    tol = tolerance(ck.forward(a, w_ref, PROMPT))
    for _ in range(STEPS):
        row = ck.forward(a, w_ref, ids)[-1]
        top2 = np.sort(row)[-2:]
        if top2[1] - top2[0] <= 10 * tol:
            return False
        ids.append(int(np.argmax(row)))
    return True


def decisive(a, base_seed, stored):
    """The first seed from base_seed whose stored weights make every greedy
    step decisive; returns (weights, weights as folio will read them)."""
    for seed in range(base_seed, base_seed + 50):
        w = ck.random_weights(a, seed)
        w_ref = stored(w)
        if greedy_margins_are_wide(a, w_ref):
            return w, w_ref
    raise AssertionError("no decisive fixture in 50 seeds")


def check(a, w_ref, result):
    want = ck.forward(a, w_ref, PROMPT)
    got = np.array(result["logits"], dtype=np.float64)
    assert got.shape == want.shape
    tol = tolerance(want)
    err = np.abs(got - want).max()
    assert err <= tol, f"max |folio - numpy| = {err:.3g} > {tol:.3g}"
    assert result["greedy"] == ck.greedy(a, w_ref, PROMPT, STEPS)


HF_CASES = [
    ("llama", "f32", {}, 1),
    ("llama", "bf16", {}, 3),  # sharded with an index
    ("llama", "f32", {"rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                        "original_max_position_embeddings": 16}}, 1),
    ("mistral", "f16", {"window": 5}, 1),
    ("qwen2", "bf16", {"tie": True}, 1),
    ("qwen3", "f32", {}, 1),
]


@pytest.mark.parametrize("name,dtype,extra,shards", HF_CASES,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(HF_CASES)])
def test_hugging_face_folder(tmp_path, name, dtype, extra, shards):
    a = ck.Arch(name=name, **extra)
    w, w_ref = decisive(a, sum(map(ord, name + dtype)) + shards, lambda w: ck.stored(w, dtype))
    ck.write_hf(tmp_path / "m", a, w, dtype, shards)
    check(a, w_ref, run_folio(tmp_path / "m"))


@pytest.mark.parametrize("name,dtype", [("llama", "bf16"), ("qwen3", "f32")])
def test_reference_backend_matches_numpy_and_the_cpu_backend(tmp_path, name, dtype):
    """The backend seam on real checkpoints: `--backend reference` runs the
    scalar references (double-accumulating matmul, float64 attention) behind
    the same seam as the SIMD kernels. Both pass the float64 NumPy check, so
    they agree within twice its tolerance, and greedy tokens are equal."""
    a = ck.Arch(name=name)
    w, w_ref = decisive(a, 40 + len(name), lambda w: ck.stored(w, dtype))
    ck.write_hf(tmp_path / "m", a, w, dtype)
    ref = run_folio(tmp_path / "m", "--backend", "reference")
    cpu = run_folio(tmp_path / "m")
    check(a, w_ref, ref)
    assert ref["greedy"] == cpu["greedy"]
    got, want = np.array(ref["logits"]), np.array(cpu["logits"])
    assert np.abs(got - want).max() <= 2 * tolerance(ck.forward(a, w_ref, PROMPT))


def test_unknown_backend_is_refused_by_name(tmp_path):
    a = ck.Arch(name="llama")
    ck.write_hf(tmp_path / "m", a, ck.random_weights(a, 1), "f32")
    out = subprocess.run([FOLIO, "logits", "--model", str(tmp_path / "m"), "--tokens", "1,2",
                          "--backend", "cuda"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "--backend" in out.stderr and "cuda" in out.stderr


def test_last_logits_prints_the_last_row_alone(tmp_path):
    a = ck.Arch(name="llama")
    ck.write_hf(tmp_path / "m", a, ck.random_weights(a, 1), "f32")
    every, last = run_folio(tmp_path / "m"), run_folio(tmp_path / "m", "--last-logits")
    assert len(every["logits"]) == len(PROMPT) and len(last["logits"]) == 1
    assert last["logits"][0] == every["logits"][-1] and last["greedy"] == every["greedy"]
    out = subprocess.run([FOLIO, "logits", "--model", str(tmp_path / "m"), "--tokens", "1,2",
                          "--last-logits", "--token-logprobs"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "--last-logits" in out.stderr, out.stderr


GGUF_CASES = [("llama", "q8_0"), ("llama", "f16"), ("qwen2", "f32"), ("qwen3", "bf16"),
              ("qwen3", "q8_0"), ("llama", "q4_0"), ("qwen2", "q4_1"), ("qwen3", "q5_0"),
              ("llama", "q5_1"), ("llama", "q4_k"), ("qwen3", "q5_k"), ("qwen2", "q6_k"),
              ("qwen2", "q2_k"), ("llama", "q3_k"), ("qwen3", "iq4_nl"), ("llama", "iq4_xs"),
              ("qwen3", "mxfp4")]
# The types that run on 8-bit activations by default (ops/packed_matmul.h).
PACKED_DTYPES = {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k",
                 "iq4_nl", "iq4_xs", "mxfp4"}
# K-quant and IQ4_XS rows are whole 256-element super-blocks: every
# matrix's input width (hidden, heads * head_dim, ffn) is 256 in those cases.
KQUANT_ARCH = {"hidden": 256, "head_dim": 64, "ffn": 256}


@pytest.mark.parametrize("name,dtype", GGUF_CASES, ids=[f"{n}-{d}" for n, d in GGUF_CASES])
def test_gguf_file(tmp_path, name, dtype):
    a = ck.Arch(name=name, **(KQUANT_ARCH if dtype in ck.KQUANT_DTYPES else {}))
    w, w_ref = decisive(a, 7 + len(name), lambda w: gguf_stored(w, dtype))
    ck.write_gguf(tmp_path / "m.gguf", a, w, dtype)
    # The exact mode: the file's blocks decode to the values gguf reads.
    exact = run_folio(tmp_path / "m.gguf", "--matmul-activations", "f32")
    check(a, w_ref, exact)
    # The default, 8-bit activations: on for the types with a packed
    # kernel (other logits), off for the rest (the same bits), and near the
    # reference either way (the activation rounding is a few percent of the
    # logits' scale on these random weights; a lost scale or bias is not).
    default = run_folio(tmp_path / "m.gguf")
    assert (default["logits"] != exact["logits"]) == (dtype in PACKED_DTYPES)
    want = ck.forward(a, w_ref, PROMPT)
    err = np.abs(np.array(default["logits"]) - want).max()
    assert err <= 0.1 * max(1.0, np.abs(want).max()), err


def test_kv_dtypes_and_threads_agree(tmp_path):
    """bf16 K/V rounds keys and values, so it is close to, not equal to, f32;
    the thread count never changes a bit."""
    a = ck.Arch(name="llama")
    w = ck.random_weights(a, seed=3)
    ck.write_hf(tmp_path / "m", a, w, "f32")
    one = run_folio(tmp_path / "m", "--threads", "1")
    two = run_folio(tmp_path / "m", "--threads", "2")
    assert one == two
    bf16 = run_folio(tmp_path / "m", "--kv-dtype", "bf16")
    got, want = np.array(bf16["logits"]), np.array(one["logits"])
    assert np.abs(got - want).max() <= 2e-2 * max(1.0, np.abs(want).max())


@pytest.mark.parametrize("tokens", ["abc", "-1", "1,,2"])
def test_bad_tokens_error_names_the_tokens_flag(tmp_path, tokens):
    a = ck.Arch(name="llama")
    ck.write_hf(tmp_path / "m", a, ck.random_weights(a, seed=3), "f32")
    out = subprocess.run([FOLIO, "logits", "--model", str(tmp_path / "m"), "--tokens", tokens],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    bad = {"abc": "abc", "-1": "-1", "1,,2": ""}[tokens]
    assert f"--tokens entry '{bad}' is not a non-negative integer" in out.stderr, out.stderr
    assert "--page-table" not in out.stderr


def test_info_reports_bits_per_weight_by_type(tmp_path):
    """A Q8_0 block is 32 int8 quants and an f16 scale: 34 bytes for 32
    weights, 8.5 bits each; f32 tensors (the norms) are 32."""
    a = ck.Arch(name="llama")
    ck.write_gguf(tmp_path / "m.gguf", a, ck.random_weights(a, 2), "q8_0")
    out = subprocess.run([FOLIO, "info", str(tmp_path / "m.gguf")], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    types = info["weight_types"]
    assert types["q8_0"]["bits_per_weight"] == 8.5
    assert types["q8_0"]["bytes"] * 8 == types["q8_0"]["elements"] * 8.5
    if "f32" in types:
        assert types["f32"]["bits_per_weight"] == 32.0
    total = sum(t["bytes"] for t in types.values())
    assert total == info["weight_bytes"]
    elements = sum(t["elements"] for t in types.values())
    assert info["bits_per_weight"] == 8 * total / elements


@pytest.mark.parametrize("dtype,field,bits", [("q4_1", 2, 0x7c00), ("q4_k", 0, 0x7e00),
                                              ("q6_k", 208, 0xfc00), ("mxfp4", 0, 0xff)])
def test_a_non_finite_block_scale_is_refused_at_load_naming_the_tensor(tmp_path, dtype, field,
                                                                      bits):
    """A NaN or infinite f16 scale would make its whole block NaN or inf;
    the loader reads every block's scales and names the tensor, the block
    and the field instead of loading it. MXFP4's scale is one E8M0 byte,
    whose 0xff is NaN."""
    import gguf
    a = ck.Arch(name="llama", **(KQUANT_ARCH if dtype in ck.KQUANT_DTYPES else {}))
    path = tmp_path / "m.gguf"
    ck.write_gguf(path, a, ck.random_weights(a, 4), dtype)
    target = "blk.0.ffn_up.weight"
    t = next(t for t in gguf.GGUFReader(str(path)).tensors if t.name == target)
    block_bytes = gguf.GGML_QUANT_SIZES[t.tensor_type][1]
    raw = bytearray(path.read_bytes())
    at = t.data_offset + 2 * block_bytes + field
    width = 1 if dtype == "mxfp4" else 2
    raw[at:at + width] = bits.to_bytes(width, "little")
    path.write_bytes(bytes(raw))
    out = subprocess.run([FOLIO, "logits", "--model", str(path), "--tokens", "1,2"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert target in out.stderr and "block 2 of" in out.stderr and "non-finite" in out.stderr, \
        out.stderr

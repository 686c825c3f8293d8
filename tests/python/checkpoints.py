"""Small random checkpoints in the formats people bring, and an independent
NumPy forward pass to check folio against.

Nothing here comes from folio: weights are drawn with NumPy, written with
the `safetensors` and `gguf` packages (plus a few lines for BF16, which NumPy
lacks), and the reference forward pass follows Hugging Face's modeling code
for Llama, Mistral, Qwen2 and Qwen3 in float64.
"""
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class Arch:
    name: str                 # llama, mistral, qwen2, qwen3
    hidden: int = 64
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    ffn: int = 96
    layers: int = 2
    vocab: int = 300
    max_positions: int = 128
    rope_theta: float = 10000.0
    eps: float = 1e-6
    tie: bool = False
    window: int = 0
    rope_scaling: dict = field(default_factory=dict)

    @property
    def bias(self):
        return self.name == "qwen2"

    @property
    def qk_norm(self):
        return self.name == "qwen3"

    @property
    def hf_class(self):
        return {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}[self.name]


def random_weights(a: Arch, seed: int):
    """Hugging Face names -> float64 arrays; scaled so activations stay O(1)
    and greedy margins are wide."""
    rng = np.random.default_rng(seed)
    q, kv = a.heads * a.head_dim, a.kv_heads * a.head_dim

    def lin(out_f, in_f):
        return rng.standard_normal((out_f, in_f)) / np.sqrt(in_f)

    w = {"model.embed_tokens.weight": rng.standard_normal((a.vocab, a.hidden))}
    for i in range(a.layers):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(a.hidden)
        w[p + "self_attn.q_proj.weight"] = lin(q, a.hidden)
        w[p + "self_attn.k_proj.weight"] = lin(kv, a.hidden)
        w[p + "self_attn.v_proj.weight"] = lin(kv, a.hidden)
        if a.bias:
            w[p + "self_attn.q_proj.bias"] = 0.1 * rng.standard_normal(q)
            w[p + "self_attn.k_proj.bias"] = 0.1 * rng.standard_normal(kv)
            w[p + "self_attn.v_proj.bias"] = 0.1 * rng.standard_normal(kv)
        if a.qk_norm:
            w[p + "self_attn.q_norm.weight"] = 1 + 0.1 * rng.standard_normal(a.head_dim)
            w[p + "self_attn.k_norm.weight"] = 1 + 0.1 * rng.standard_normal(a.head_dim)
        w[p + "self_attn.o_proj.weight"] = lin(a.hidden, q)
        w[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(a.hidden)
        w[p + "mlp.gate_proj.weight"] = lin(a.ffn, a.hidden)
        w[p + "mlp.up_proj.weight"] = lin(a.ffn, a.hidden)
        w[p + "mlp.down_proj.weight"] = lin(a.hidden, a.ffn)
    w["model.norm.weight"] = 1 + 0.1 * rng.standard_normal(a.hidden)
    if not a.tie:
        w["lm_head.weight"] = lin(a.vocab, a.hidden)
    return w


# ---- storage types, and what a reader sees after storing --------------------

def to_bf16_bits(x):
    """float64 -> bfloat16 bits, round to nearest even (as torch does)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def q8_0_roundtrip(x):
    """What a Q8_0 reader recovers: blocks of 32 along rows, f16 scale."""
    x = np.asarray(x, dtype=np.float32)
    blocks = x.reshape(-1, 32)
    d = np.abs(blocks).max(axis=1) / 127.0
    d16 = d.astype(np.float16)
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0.0)
    q = np.round(blocks * inv[:, None]).astype(np.int8)
    return (q.astype(np.float64) * d16.astype(np.float64)[:, None]).reshape(x.shape)


def stored(w, dtype):
    """The weights as folio will read them back from a `dtype` checkpoint."""
    out = {}
    for name, x in w.items():
        if dtype == "f32" or x.ndim == 1:
            out[name] = x.astype(np.float32).astype(np.float64)
        elif dtype == "f16":
            out[name] = x.astype(np.float16).astype(np.float64)
        elif dtype == "bf16":
            out[name] = from_bf16_bits(to_bf16_bits(x))
        elif dtype == "q8_0":
            out[name] = q8_0_roundtrip(x)
        else:
            raise ValueError(dtype)
    return out


# ---- writers ------------------------------------------------------------------

def write_safetensors(path: Path, tensors: dict):
    """name -> (safetensors dtype string, raw little-endian bytes, shape)."""
    header, offset, blobs = {}, 0, []
    for name, (dtype, raw, shape) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def encode(x, dtype):
    if dtype == "f32" or x.ndim == 1:
        return "F32", x.astype("<f4").tobytes()
    if dtype == "f16":
        return "F16", x.astype("<f2").tobytes()
    if dtype == "bf16":
        return "BF16", to_bf16_bits(x).astype("<u2").tobytes()
    raise ValueError(dtype)


def write_hf(dir_: Path, a: Arch, w: dict, dtype: str, shards: int = 1):
    dir_.mkdir(parents=True, exist_ok=True)
    config = {
        "architectures": [a.hf_class], "model_type": a.name,
        "hidden_size": a.hidden, "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads, "head_dim": a.head_dim,
        "intermediate_size": a.ffn, "num_hidden_layers": a.layers,
        "max_position_embeddings": a.max_positions, "vocab_size": a.vocab,
        "rope_theta": a.rope_theta, "rms_norm_eps": a.eps,
        "tie_word_embeddings": a.tie, "hidden_act": "silu",
        "torch_dtype": {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[dtype],
    }
    if a.name == "mistral":
        config["sliding_window"] = a.window or None
    if a.name in ("qwen2", "qwen3"):
        config["use_sliding_window"] = False
        config["sliding_window"] = 4096
    if a.name == "qwen3":
        config["attention_bias"] = False
    if a.rope_scaling:
        config["rope_scaling"] = a.rope_scaling
    (dir_ / "config.json").write_text(json.dumps(config, indent=1))
    names = list(w)
    if shards == 1:
        write_safetensors(dir_ / "model.safetensors",
                          {n: (*encode(w[n], dtype), w[n].shape) for n in names})
        return
    weight_map = {}
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = names[s::shards]
        write_safetensors(dir_ / file, {n: (*encode(w[n], dtype), w[n].shape) for n in part})
        weight_map.update({n: file for n in part})
    (dir_ / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": weight_map}))


def permute_for_gguf(w, n_head):
    """llama.cpp's convert_hf_to_gguf permutation of Q/K rows (llama only)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


GGUF_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def gguf_name(hf):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    _, _, i, rest = hf.split(".", 3)
    return f"blk.{i}.{GGUF_NAMES[rest]}"


GGUF_DTYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
               "q4_k", "q5_k", "q6_k", "q2_k", "q3_k", "iq4_nl", "iq4_xs", "mxfp4")
# The K-quants and IQ4 types, which the gguf package decodes but cannot
# encode; rows must be whole 256-element super-blocks (32 for iq4_nl).
KQUANT_DTYPES = ("q4_k", "q5_k", "q6_k", "q2_k", "q3_k", "iq4_nl", "iq4_xs")
# Per type: the byte offset of the block's f16 d, and for the types with
# mins the mean quant times sc that dmin (right after d) is scaled by so
# that the weights centre near 0 (None: no dmin).
KQUANT_SCALES = {"q4_k": (0, 7.5), "q5_k": (0, 15.5), "q6_k": (208, None),
                 "q2_k": (80, 1.5), "q3_k": (108, None), "iq4_nl": (0, None),
                 "iq4_xs": (0, None)}


def gguf_qtype(dtype: str):
    """The gguf package's type for a storage name: f32, f16, bf16, q8_0, the
    legacy 4- and 5-bit blocks q4_0, q4_1, q5_0, q5_1 and mxfp4 (quantized
    by the package over rows of whole 32-element blocks), the K-quants and
    IQ4."""
    import gguf
    if dtype not in GGUF_DTYPES:
        raise ValueError(dtype)
    return gguf.GGMLQuantizationType[dtype.upper()]


def kquant_blocks(x, dtype: str):
    """K-quant (or IQ4) blocks standing for the 2-D weight x: random bytes
    (seeded by x's bytes, so the same x gives the same blocks), with each
    block's f16 super-block scale d set to a finite value, c * U(0.5, 1.5),
    and for the types with mins dmin to d times KQUANT_SCALES' mean, so the
    weights centre near 0; c makes their spread match x's. Returns uint8
    rows for GGUFWriter's raw_dtype; gguf.quants.dequantize of them is the
    weight."""
    import zlib
    import gguf
    qtype = gguf_qtype(dtype)
    block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    assert x.ndim == 2 and x.shape[1] % block == 0, x.shape
    n = x.size // block
    rng = np.random.default_rng(zlib.crc32(np.ascontiguousarray(x).tobytes()))
    raw = rng.integers(0, 256, size=(n, block_bytes), dtype=np.uint8)
    u = rng.uniform(0.5, 1.5, size=n)
    d_at, mean_q = KQUANT_SCALES[dtype]

    def f16_bytes(v):
        return v.astype(np.float16).view(np.uint8).reshape(n, 2)

    def with_scale(c):
        b = raw.copy()
        b[:, d_at:d_at + 2] = f16_bytes(c * u)
        if mean_q is not None:  # dmin follows d
            b[:, d_at + 2:d_at + 4] = f16_bytes(c * u * mean_q)
        return b.reshape(x.shape[0], -1)

    unit = gguf.quants.dequantize(with_scale(1.0), qtype)
    return with_scale(float(np.std(x) / np.std(unit)))


def write_gguf(path: Path, a: Arch, w: dict, dtype: str):
    import gguf
    arch = "llama" if a.name in ("llama", "mistral") else a.name
    wr = gguf.GGUFWriter(str(path), arch)
    wr.add_context_length(a.max_positions)
    wr.add_embedding_length(a.hidden)
    wr.add_block_count(a.layers)
    wr.add_feed_forward_length(a.ffn)
    wr.add_head_count(a.heads)
    wr.add_head_count_kv(a.kv_heads)
    wr.add_key_length(a.head_dim)
    wr.add_value_length(a.head_dim)
    wr.add_rope_dimension_count(a.head_dim)
    wr.add_rope_freq_base(a.rope_theta)
    wr.add_layer_norm_rms_eps(a.eps)
    qtype = gguf_qtype(dtype)
    for name, x in w.items():
        def rows(r):  # rows of x, or of its blocks, in the file's order
            if arch == "llama" and name.endswith("q_proj.weight"):
                return permute_for_gguf(r, a.heads)
            if arch == "llama" and name.endswith("k_proj.weight"):
                return permute_for_gguf(r, a.kv_heads)
            return r
        x32 = rows(x).astype(np.float32)
        if x.ndim == 1 or dtype == "f32":
            wr.add_tensor(gguf_name(name), x32)
        elif dtype in KQUANT_DTYPES:
            # The blocks stand for x as the reference reads it, unpermuted.
            wr.add_tensor(gguf_name(name), rows(kquant_blocks(x, dtype)), raw_dtype=qtype)
        else:
            data = gguf.quants.quantize(x32, qtype)
            wr.add_tensor(gguf_name(name), data, raw_dtype=qtype)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


# ---- the reference forward pass (Hugging Face semantics, float64) -------------

def inv_freq(a: Arch):
    f = a.rope_theta ** (-np.arange(0, a.head_dim, 2, dtype=np.float64) / a.head_dim)
    s = a.rope_scaling
    if s.get("rope_type") == "linear":
        f = f / s["factor"]
    elif s.get("rope_type") == "llama3":
        old, lo, hi, fac = (s["original_max_position_embeddings"], s["low_freq_factor"],
                            s["high_freq_factor"], s["factor"])
        wavelen = 2 * np.pi / f
        scaled = np.where(wavelen > old / lo, f / fac, f)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / fac + smooth * scaled
        medium = (wavelen >= old / hi) & (wavelen <= old / lo)
        f = np.where(medium, smoothed, scaled)
    return f


def rms(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def rope(x, positions, freqs):
    """NeoX (rotate_half) rotation of x [n, heads, head_dim]."""
    half = x.shape[-1] // 2
    ang = positions[:, None] * freqs[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def forward(a: Arch, w: dict, tokens):
    n = len(tokens)
    pos = np.arange(n, dtype=np.float64)
    freqs = inv_freq(a)
    x = w["model.embed_tokens.weight"][np.array(tokens)]
    group = a.heads // a.kv_heads
    for i in range(a.layers):
        p = f"model.layers.{i}."
        h = rms(x, w[p + "input_layernorm.weight"], a.eps)
        q = h @ w[p + "self_attn.q_proj.weight"].T
        k = h @ w[p + "self_attn.k_proj.weight"].T
        v = h @ w[p + "self_attn.v_proj.weight"].T
        if a.bias:
            q = q + w[p + "self_attn.q_proj.bias"]
            k = k + w[p + "self_attn.k_proj.bias"]
            v = v + w[p + "self_attn.v_proj.bias"]
        q = q.reshape(n, a.heads, a.head_dim)
        k = k.reshape(n, a.kv_heads, a.head_dim)
        v = v.reshape(n, a.kv_heads, a.head_dim)
        if a.qk_norm:
            q = rms(q, w[p + "self_attn.q_norm.weight"], a.eps)
            k = rms(k, w[p + "self_attn.k_norm.weight"], a.eps)
        q, k = rope(q, pos, freqs), rope(k, pos, freqs)
        out = np.zeros((n, a.heads, a.head_dim))
        for hq in range(a.heads):
            g = hq // group
            s = q[:, hq, :] @ k[:, g, :].T / np.sqrt(a.head_dim)
            mask = np.tril(np.ones((n, n), dtype=bool))
            if a.window:
                mask &= (np.arange(n)[:, None] - np.arange(n)[None, :]) < a.window
            s = np.where(mask, s, -np.inf)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            out[:, hq, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, g, :]
        x = x + out.reshape(n, -1) @ w[p + "self_attn.o_proj.weight"].T
        h = rms(x, w[p + "post_attention_layernorm.weight"], a.eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms(x, w["model.norm.weight"], a.eps)
    head = w["model.embed_tokens.weight"] if a.tie else w["lm_head.weight"]
    return x @ head.T


def greedy(a: Arch, w: dict, prompt, steps):
    ids = list(prompt)
    for _ in range(steps):
        ids.append(int(np.argmax(forward(a, w, ids)[-1])))
    return ids[len(prompt):]

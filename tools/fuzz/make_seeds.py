"""Seed corpora for the parser fuzzers: small valid files of each format.

Usage: make_seeds.py OUT_DIR   (writes OUT_DIR/{gguf,safetensors}/...)
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests/python"))
import checkpoints as ck  # noqa: E402

out = Path(sys.argv[1])
for sub in ("gguf", "safetensors"):
    (out / sub).mkdir(parents=True, exist_ok=True)
a = ck.Arch(name="qwen2", hidden=32, heads=2, kv_heads=1, head_dim=16, ffn=32,
            layers=1, vocab=64)
w = ck.random_weights(a, 1)
for dtype in ("f32", "f16", "q8_0"):
    ck.write_gguf(out / "gguf" / f"tiny-{dtype}.gguf", a, w, dtype)
for dtype in ("f32", "bf16"):
    ck.write_hf(out / "hf", a, w, dtype)
    (out / "hf" / "model.safetensors").rename(out / "safetensors" / f"tiny-{dtype}.safetensors")

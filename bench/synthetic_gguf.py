#!/usr/bin/env python3
"""A synthetic Llama-shaped GGUF file of about 0.9B parameters, f16, for
benchmarks that need a model beyond the last-level cache whose rows are
whole K-quant super-blocks (hidden 2048, ffn 5632: multiples of 256), as
folio's own synthetic model (`folio bench decode` without --model) is:
hidden 2048, 32 heads of 64, 8 K/V heads, ffn 5632, 16 layers, untied
head. The weights are seeded Gaussians (std 0.02), the norms 1; the
tokenizer (its vocabulary sets vocab_size) is copied from a real GGUF file,
so llama.cpp loads the file as it loads any model.

    python3 bench/synthetic_gguf.py OUT.gguf [--tokenizer-from SmolLM2.gguf]
        [--layers 16] [--seed 0] [--experts 32 --experts-per-token 4 --expert-ffn 768]

With --experts the file is a Qwen3-MoE (GGUF qwen3moe: q/k RMSNorm, a
router and 3-D expert stacks in place of each MLP), the shape of `folio
bench decode --experts 32 --experts-per-token 4 --expert-ffn 768`: 2.8B
parameters, 0.7B of them read per token.

Takes about a minute and writes ~1.8 GB; bench/peer_bench.py --synthetic
makes it once into its cache.
"""
import argparse
import os

import numpy as np

HIDDEN, HEADS, KV_HEADS, FFN = 2048, 32, 8, 5632
HEAD_DIM = HIDDEN // HEADS


def write(out, tokenizer_from, layers=16, seed=0, experts=0, experts_per_token=0, expert_ffn=0):
    """Writes the file to out (atomically: out + ".partial" first)."""
    import gguf
    src = gguf.GGUFReader(tokenizer_from)
    tokens = src.fields["tokenizer.ggml.tokens"]
    vocab = len(tokens.data)
    partial = out + ".partial"
    arch = "qwen3moe" if experts else "llama"
    w = gguf.GGUFWriter(partial, arch)
    w.add_name(f"folio synthetic {arch} {layers}x{HIDDEN}")
    w.add_context_length(4096)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(layers)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_file_type(1)  # MOSTLY_F16
    if experts:
        w.add_key_length(HEAD_DIM)
        w.add_value_length(HEAD_DIM)
        w.add_expert_count(experts)
        w.add_expert_used_count(experts_per_token)
        w.add_expert_feed_forward_length(expert_ffn)
    for key, field in src.fields.items():
        if key.startswith("tokenizer."):
            w.add_key_value(key, field.contents(), field.types[0],
                            field.types[1] if len(field.types) > 1 else None)
    rng = np.random.default_rng(seed)

    def matrix(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)

    ones = np.ones(HIDDEN, np.float32)
    w.add_tensor("token_embd.weight", matrix(vocab, HIDDEN))
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.attn_q.weight", matrix(HIDDEN, HIDDEN))
        w.add_tensor(f"blk.{i}.attn_k.weight", matrix(KV_HEADS * HEAD_DIM, HIDDEN))
        w.add_tensor(f"blk.{i}.attn_v.weight", matrix(KV_HEADS * HEAD_DIM, HIDDEN))
        w.add_tensor(f"blk.{i}.attn_output.weight", matrix(HIDDEN, HIDDEN))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        if experts:
            w.add_tensor(f"blk.{i}.attn_q_norm.weight", np.ones(HEAD_DIM, np.float32))
            w.add_tensor(f"blk.{i}.attn_k_norm.weight", np.ones(HEAD_DIM, np.float32))
            w.add_tensor(f"blk.{i}.ffn_gate_inp.weight",
                         rng.standard_normal((experts, HIDDEN), dtype=np.float32))
            w.add_tensor(f"blk.{i}.ffn_gate_exps.weight", matrix(experts, expert_ffn, HIDDEN))
            w.add_tensor(f"blk.{i}.ffn_up_exps.weight", matrix(experts, expert_ffn, HIDDEN))
            w.add_tensor(f"blk.{i}.ffn_down_exps.weight", matrix(experts, HIDDEN, expert_ffn))
            continue
        w.add_tensor(f"blk.{i}.ffn_gate.weight", matrix(FFN, HIDDEN))
        w.add_tensor(f"blk.{i}.ffn_up.weight", matrix(FFN, HIDDEN))
        w.add_tensor(f"blk.{i}.ffn_down.weight", matrix(HIDDEN, FFN))
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", matrix(vocab, HIDDEN))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(partial, out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--tokenizer-from",
                   default=os.path.expanduser("~/.cache/folio/SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--experts", type=int, default=0, help="a Qwen3-MoE with this many experts")
    p.add_argument("--experts-per-token", type=int, default=4)
    p.add_argument("--expert-ffn", type=int, default=768)
    args = p.parse_args()
    write(args.out, args.tokenizer_from, args.layers, args.seed, args.experts,
          args.experts_per_token, args.expert_ffn)


if __name__ == "__main__":
    main()

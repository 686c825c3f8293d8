"""folio against Hugging Face transformers on small random checkpoints of
the families whose block is not Llama's: Gemma 3 (sandwich norms with
(1 + w) gains, GeGLU, a scaled embedding, QK-norm, query_pre_attn_scalar,
and sliding-window layers between global ones, each kind with its own RoPE
base), Gemma 2 (the same block without QK-norm, alternating windows on
one RoPE, soft-capped attention scores and logits), Phi-3 (fused qkv and
gate_up projections, partial rotary embeddings, a sliding window), the
mixtures of experts Qwen3-MoE, Mixtral, Qwen2-MoE, gpt-oss (attention
sinks, biases, clamped SwiGLU, top-k-then-softmax routing) and dots1
(sigmoid routing with a selection bias and expert groups, a routed scale,
ungated shared experts, a leading dense layer), and YaRN RoPE.

transformers builds the model (Gemma3ForCausalLM, eager attention, float32)
and writes it with save_pretrained; the same weights also go into a GGUF
file written with the `gguf` package the way llama.cpp's converter writes
Gemma 3 (norm gains with the 1 added). folio's prompt logits must match
transformers' at every position of a sequence long enough for the windows
to slide, under several page sizes, prefill chunk sizes, both backends and
two threads: 1e-4 of the logits' scale, the float32 accuracy of a few
layers of short dot products (tests/python/test_models.py makes the same
argument). Greedy continuations must match token for token.
"""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

FOLIO = os.environ.get("FOLIO_BIN", str(Path(__file__).resolve().parents[2] / "build/bin/folio"))
WINDOW = 8
PROMPT_LEN = 44
GREEDY = 6


def prompt(vocab, seed=7):
    return np.random.default_rng(seed).integers(0, vocab, PROMPT_LEN).tolist()


def randomize(model, seed):
    """Random weights everywhere, norms included (their init is all zeros,
    which would hide the (1 + w))."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            scale = 0.3 if "norm" in name else 0.15
            p.copy_(torch.randn_like(p) * scale)
    return model.eval()


def gemma2(layers=5, seed=0, attn_cap=2.0, final_cap=1.5):
    # Small caps, so that they bend these small random scores and logits.
    cfg = transformers.Gemma2Config(
        vocab_size=320, hidden_size=64, intermediate_size=96, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
        sliding_window=WINDOW, query_pre_attn_scalar=16, attn_logit_softcapping=attn_cap,
        final_logit_softcapping=final_cap, rope_parameters={"rope_type": "default",
                                                            "rope_theta": 100.0},
        attn_implementation="eager")
    return randomize(transformers.Gemma2ForCausalLM(cfg), seed)


def phi3(partial=0.5, window=WINDOW, seed=0, longrope=None, max_positions=256):
    """longrope: None, or the original context length: factors drawn at
    random, max_positions / original the scaling factor."""
    rope = {"rope_type": "default", "rope_theta": 100.0}
    original = max_positions
    if longrope is not None:
        original = longrope
        pairs = int(16 * partial) // 2
        rng = np.random.default_rng(seed + 100)
        rope = {"rope_type": "longrope", "rope_theta": 100.0,
                "short_factor": rng.uniform(1.0, 2.0, pairs).tolist(),
                "long_factor": rng.uniform(2.0, 8.0, pairs).tolist(),
                "original_max_position_embeddings": original}
    cfg = transformers.Phi3Config(
        vocab_size=320, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
        original_max_position_embeddings=original, partial_rotary_factor=partial, pad_token_id=0,
        sliding_window=window, rope_parameters=rope, attn_implementation="eager")
    return randomize(transformers.Phi3ForCausalLM(cfg), seed)


DEFAULT_ROPE = {"rope_type": "default", "rope_theta": 100.0}
# YaRN with an original length of 4096 at base 10000 over 16 features: the
# ramp runs from pair 2 (floor 2.6) to pair 6 (ceil 5.6), so pairs keep,
# blend and slow their frequencies; factor 4 scales cos and sin by
# 1 + 0.1 ln 4.
YARN_ROPE = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
             "original_max_position_embeddings": 4096}


def qwen3moe(norm_topk_prob=True, seed=0, rope=None):
    cfg = transformers.Qwen3MoeConfig(
        vocab_size=320, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        num_experts=8, num_experts_per_tok=2, norm_topk_prob=norm_topk_prob,
        max_position_embeddings=256, rope_parameters=dict(rope or DEFAULT_ROPE),
        attn_implementation="eager")
    return randomize(transformers.Qwen3MoeForCausalLM(cfg), seed)


def mixtral(seed=0):
    cfg = transformers.MixtralConfig(
        vocab_size=320, hidden_size=64, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
        max_position_embeddings=256, rope_parameters={"rope_type": "default", "rope_theta": 100.0},
        attn_implementation="eager")
    return randomize(transformers.MixtralForCausalLM(cfg), seed)


def write_moe_gguf(model, path, experts=None, arch="qwen3moe", keys=None):
    """Qwen3-MoE, Qwen2-MoE or dots1 as llama.cpp's converter writes them:
    the router as ffn_gate_inp (dots1's selection bias as exp_probs_b.bias),
    each projection's experts stacked into one 3-D ffn_{gate,up,down}_exps
    tensor, a shared expert as ffn_*_shexp (Qwen2-MoE's gate
    ffn_gate_inp_shexp [hidden]), dots1's leading dense layers as
    ffn_{gate,up,down}. experts(name, x), when given, returns what to store
    for the stacked f32 tensor x: (array, None) or (raw blocks, their gguf
    quantization type). keys: metadata keys (without the architecture's
    prefix) to add or replace, None to leave one out."""
    import gguf
    cfg = model.config
    w = gguf_writer(path, arch, cfg)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    rope = cfg.rope_parameters
    w.add_rope_freq_base(rope["rope_theta"])
    if rope["rope_type"] == "yarn":  # as llama.cpp's converter writes it
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rope["factor"])
        w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    n_experts = getattr(cfg, "num_experts", None) or cfg.n_routed_experts
    meta = {"expert_count": n_experts, "expert_used_count": cfg.num_experts_per_tok,
            "expert_feed_forward_length": cfg.moe_intermediate_size}
    if getattr(cfg, "shared_expert_intermediate_size", 0):
        meta["expert_shared_feed_forward_length"] = cfg.shared_expert_intermediate_size
    if arch == "dots1":  # conversion/dots1.py and the base class's expert keys
        meta.update({"expert_group_count": cfg.n_group, "expert_group_used_count": cfg.topk_group,
                     "expert_gating_func": int(gguf.ExpertGatingFuncType.SIGMOID),
                     "leading_dense_block_count": cfg.first_k_dense_replace,
                     "expert_shared_count": cfg.n_shared_experts,
                     "expert_weights_scale": float(cfg.routed_scaling_factor),
                     "expert_weights_norm": bool(cfg.norm_topk_prob)})
    meta.update(keys or {})
    for k, v in meta.items():
        if v is None:
            continue
        elif isinstance(v, bool):
            w.add_bool(f"{arch}.{k}", v)
        elif isinstance(v, float):
            w.add_float32(f"{arch}.{k}", v)
        else:
            w.add_uint32(f"{arch}.{k}", v)
    sd = {k: v.detach().float().numpy().copy() for k, v in model.state_dict().items()}
    names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
             "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
             "mlp.gate": "ffn_gate_inp", "mlp.shared_expert.gate_proj": "ffn_gate_shexp",
             "mlp.shared_expert.up_proj": "ffn_up_shexp",
             "mlp.shared_expert.down_proj": "ffn_down_shexp",
             "mlp.shared_expert_gate": "ffn_gate_inp_shexp",
             "mlp.shared_experts.gate_proj": "ffn_gate_shexp",
             "mlp.shared_experts.up_proj": "ffn_up_shexp",
             "mlp.shared_experts.down_proj": "ffn_down_shexp",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    f = cfg.moe_intermediate_size
    for name, x in sd.items():
        parts = name.split(".")
        if name in GLOBAL_TENSORS:
            w.add_tensor(GLOBAL_TENSORS[name], x)
        elif ".experts." in name:
            continue  # stacked below
        elif name.endswith(".mlp.gate.e_score_correction_bias"):
            w.add_tensor(f"blk.{parts[2]}.exp_probs_b.bias", x)
        else:
            role = names['.'.join(parts[3:-1])]
            if role == "ffn_gate_inp_shexp":
                x = x.reshape(-1)  # [hidden], as llama.cpp reads it
            w.add_tensor(f"blk.{parts[2]}.{role}.{parts[-1]}", x)
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}.mlp.experts."
        if p + "gate_up_proj" in sd:  # transformers' fused 3-D form
            gate_up = sd[p + "gate_up_proj"]
            gate, up, down = gate_up[:, :f], gate_up[:, f:], sd[p + "down_proj"]
        elif f"{p}0.gate_proj.weight" in sd:
            stack = lambda r: np.stack([sd[f"{p}{j}.{r}.weight"] for j in range(n_experts)])
            gate, up, down = stack("gate_proj"), stack("up_proj"), stack("down_proj")
        else:
            continue  # a dense layer (dots1's leading ones)
        for role, x in (("gate", gate), ("up", up), ("down", down)):
            add_expert_stack(w, experts, f"blk.{i}.ffn_{role}_exps.weight", x)
    finish(w)


def qwen2moe(seed=0, norm_topk_prob=False):
    cfg = transformers.Qwen2MoeConfig(
        vocab_size=320, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
        shared_expert_intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_experts=8, num_experts_per_tok=2,
        norm_topk_prob=norm_topk_prob, max_position_embeddings=256,
        rope_parameters=dict(DEFAULT_ROPE), attn_implementation="eager")
    return randomize(transformers.Qwen2MoeForCausalLM(cfg), seed)


def test_qwen2moe_folder_and_gguf_match_transformers(tmp_path):
    # The shared expert and its sigmoid gate, q/k/v biases, no
    # renormalisation (Qwen2-MoE's default; llama.cpp never renormalises
    # its files' weights).
    model = qwen2moe(seed=31)
    ids = prompt(model.config.vocab_size, seed=97)
    want, want_greedy = hf_logits(model, ids), hf_greedy(model, ids, GREEDY)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    write_moe_gguf(model, tmp_path / "m.gguf", arch="qwen2moe")
    for path in (tmp_path / "m", tmp_path / "m.gguf"):
        check_every_schedule(path, ids, want, want_greedy)
        info = json.loads(subprocess.run([FOLIO, "info", str(path)], capture_output=True,
                                         text=True, timeout=120, check=True).stdout)
        assert info["parameters"] == sum(p.numel() for p in model.parameters())


def test_qwen2moe_shared_expert_matters(tmp_path):
    # Zeroing the shared expert's gate (sigmoid 0.5 instead of its value)
    # moves transformers' logits; folio follows.
    model = qwen2moe(seed=32)
    ids = prompt(model.config.vocab_size, seed=101)
    want = hf_logits(model, ids)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mlp.shared_expert_gate.weight.zero_()
    assert np.abs(hf_logits(model, ids) - want).max() > 1e-2
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    check(run_folio(tmp_path / "m", ids), hf_logits(model, ids), hf_greedy(model, ids, GREEDY))


def dots1(seed=0, norm_topk_prob=True, n_group=4, topk_group=2, layers=3, **extra):
    """dots.llm1's block: Qwen3's attention; a leading dense layer, then
    mixtures of 8 experts (2 per token) routed by sigmoid scores plus a
    random selection bias within the best 2 of 4 groups, weights times 2.5,
    and two ungated shared experts."""
    cfg = transformers.Dots1Config(
        vocab_size=320, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=2, first_k_dense_replace=1,
        n_group=n_group, topk_group=topk_group, norm_topk_prob=norm_topk_prob,
        routed_scaling_factor=2.5, max_position_embeddings=256,
        rope_parameters=dict(DEFAULT_ROPE), attn_implementation="eager", **extra)
    model = randomize(transformers.Dots1ForCausalLM(cfg), seed)
    # The bias is a buffer (zeros at init), not a parameter: as large as
    # the scores' spread, so that it moves the choice.
    gen = torch.Generator().manual_seed(seed + 1000)
    with torch.no_grad():
        for layer in model.model.layers[cfg.first_k_dense_replace:]:
            bias = layer.mlp.gate.e_score_correction_bias
            bias.copy_((torch.rand(bias.shape, generator=gen) - 0.5) * 0.2)
    return model


def dots1_choices(model, ids):
    """transformers' chosen experts, per mixture layer and token."""
    chosen = []
    hooks = [layer.mlp.gate.register_forward_hook(
                 lambda mod, args, out: chosen.append(out[2].sort(dim=-1).values.clone()))
             for layer in model.model.layers[model.config.first_k_dense_replace:]]
    hf_logits(model, ids)
    for h in hooks:
        h.remove()
    return torch.stack(chosen)


def stored_elements(model):
    """Parameters and persistent buffers: what a checkpoint stores (the
    router's selection bias is a buffer)."""
    return sum(v.numel() for v in model.state_dict().values())


@pytest.mark.parametrize("norm", [True, False], ids=["norm-topk", "raw-topk"])
def test_dots1_folder_and_gguf_match_transformers(tmp_path, norm):
    model = dots1(seed=41, norm_topk_prob=norm)
    ids = prompt(model.config.vocab_size, seed=103)
    want, want_greedy = hf_logits(model, ids), hf_greedy(model, ids, GREEDY)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    write_moe_gguf(model, tmp_path / "m.gguf", arch="dots1")
    for path in (tmp_path / "m", tmp_path / "m.gguf"):
        check_every_schedule(path, ids, want, want_greedy)
        assert folio_info(path)["parameters"] == stored_elements(model)


def test_dots1_selection_bias_chooses_and_folio_follows(tmp_path):
    # Zeroing the selection bias changes which experts transformers runs
    # (and so its logits); folio, reading the zeros, follows.
    model = dots1(seed=43)
    ids = prompt(model.config.vocab_size, seed=107)
    want, choices = hf_logits(model, ids), dots1_choices(model, ids)
    with torch.no_grad():
        for layer in model.model.layers[model.config.first_k_dense_replace:]:
            layer.mlp.gate.e_score_correction_bias.zero_()
    assert not torch.equal(dots1_choices(model, ids), choices)
    zeroed = hf_logits(model, ids)
    assert np.abs(zeroed - want).max() > 1e-2
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    write_moe_gguf(model, tmp_path / "m.gguf", arch="dots1")
    for path in (tmp_path / "m", tmp_path / "m.gguf"):
        check(run_folio(path, ids), zeroed, hf_greedy(model, ids, GREEDY))


def test_dots1_expert_groups_choose_and_folio_follows(tmp_path):
    # All four groups open instead of the best two: other experts run.
    model = dots1(seed=47)
    ids = prompt(model.config.vocab_size, seed=109)
    choices = dots1_choices(model, ids)
    open_groups = dots1(seed=47, topk_group=4)
    assert not torch.equal(dots1_choices(open_groups, ids), choices)
    open_groups.save_pretrained(tmp_path / "m", safe_serialization=True)
    check(run_folio(tmp_path / "m", ids), hf_logits(open_groups, ids),
          hf_greedy(open_groups, ids, GREEDY))


def test_dots1_sliding_layers_and_attention_bias_match_transformers(tmp_path):
    # Layers from max_window_layers on slide (Dots1Config's layer_types),
    # and attention_bias biases q, k, v and o.
    model = dots1(seed=53, layers=4, sliding_window=WINDOW, max_window_layers=2,
                  attention_bias=True)
    assert model.config.layer_types == ["full_attention"] * 2 + ["sliding_attention"] * 2
    ids = prompt(model.config.vocab_size, seed=113)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    want, want_greedy = hf_logits(model, ids), hf_greedy(model, ids, GREEDY)
    check(run_folio(tmp_path / "m", ids, "--page-size", "4", "--prefill-chunk", "5"), want,
          want_greedy)
    assert folio_info(tmp_path / "m")["layer_windows"] == [0, 0, WINDOW, WINDOW]
    # Without layer_types (configs before transformers 5), the same layers.
    cfg_path = tmp_path / "m" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    del cfg["layer_types"]
    cfg_path.write_text(json.dumps(cfg))
    check(run_folio(tmp_path / "m", ids), want, want_greedy)


def test_dots1_info_reports_the_router(tmp_path):
    model = dots1(seed=59)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    write_moe_gguf(model, tmp_path / "m.gguf", arch="dots1")
    cfg = model.config
    d, f, e, k = cfg.hidden_size, cfg.moe_intermediate_size, cfg.n_routed_experts, 2
    for path in (tmp_path / "m", tmp_path / "m.gguf"):
        info = folio_info(path)
        assert info["architecture"] == "dots1"
        assert info["experts"] == {
            "num_experts": e, "experts_per_token": k, "expert_ffn_size": f,
            "routing": "sigmoid-topk", "norm_topk_prob": True, "selection_bias": True,
            "expert_groups": 4, "expert_groups_used": 2, "routed_scale": 2.5,
            "leading_dense_layers": 1, "num_shared_experts": 2, "shared_expert_ffn_size": 2 * f,
            "expert_weight_bytes": 4 * 2 * e * 3 * d * f}
        # Two mixture layers each run 2 of their 8 experts.
        assert info["active_parameters"] == stored_elements(model) - 2 * (e - k) * 3 * d * f


@pytest.mark.parametrize("change,named", [
    ({"scoring_func": "softmax"}, "scoring_func \"softmax\""),
    ({"topk_method": "greedy"}, "topk_method \"greedy\""),
    ({"moe_layer_freq": 2}, "moe_layer_freq 2"),
    ({"n_group": 3}, "\"n_group\" 3 must split the 8 experts"),
    ({"topk_group": 5}, "\"topk_group\" 5 must be in [1, 4]"),
    ({"routed_scaling_factor": 0}, "\"routed_scaling_factor\" must be finite and > 0"),
    ({"first_k_dense_replace": 9}, "\"first_k_dense_replace\" 9 exceeds the 3 layers"),
    ({"n_shared_experts": None}, "missing key \"n_shared_experts\""),
    ({"layer_types": ["full_attention", "chunked_attention", "full_attention"]},
     "layer_types[1]"),
], ids=["scoring", "topk-method", "layer-freq", "groups", "groups-used", "scale",
        "dense-layers", "shared", "layer-types"])
def test_dots1_configs_folio_cannot_run_are_refused_by_key(tmp_path, change, named):
    model = dots1(seed=61)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    cfg_path = tmp_path / "m" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    for k, v in change.items():
        if v is None:
            del cfg[k]
        else:
            cfg[k] = v
    cfg_path.write_text(json.dumps(cfg))
    out = subprocess.run([FOLIO, "logits", "--model", str(tmp_path / "m"), "--tokens", "1,2"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert named in out.stderr, out.stderr


@pytest.mark.parametrize("arch,keys,named", [
    ("dots1", {"expert_gating_func": 4}, "dots1.expert_gating_func 4"),
    ("dots1", {"expert_gating_func": 3}, "dots1.expert_gating_func 3"),
    ("dots1", {"expert_shared_count": None}, "missing key dots1.expert_shared_count"),
    ("dots1", {"expert_group_count": 3}, "dots1.expert_group_count 3 must split"),
    ("dots1", {"expert_group_used_count": None}, "missing key dots1.expert_group_used_count"),
    ("dots1", {"expert_weights_scale": -1.0}, "dots1.expert_weights_scale must be finite"),
    ("dots1", {"leading_dense_block_count": 4}, "dots1.leading_dense_block_count 4 exceeds"),
    ("dots1", {"expert_shared_feed_forward_length": 64},
     "dots1.expert_shared_feed_forward_length"),
    ("dots1", {"attention.sliding_window": 8}, "dots1.attention.sliding_window"),
    ("qwen3moe", {"expert_gating_func": 2}, "qwen3moe.expert_gating_func 2"),
    ("qwen3moe", {"expert_shared_count": 1}, "qwen3moe.expert_shared_count"),
    ("qwen3moe", {"expert_weights_scale": 2.0}, "qwen3moe.expert_weights_scale"),
    ("qwen3moe", {"expert_group_count": 2}, "qwen3moe.expert_group_count"),
    ("qwen3moe", {"leading_dense_block_count": 1}, "qwen3moe.leading_dense_block_count"),
], ids=["dots1-gating-4", "dots1-gating-3", "dots1-shared", "dots1-groups",
        "dots1-groups-used", "dots1-scale", "dots1-dense", "dots1-shared-ffn", "dots1-window",
        "qwen3moe-sigmoid", "qwen3moe-shared", "qwen3moe-scale", "qwen3moe-groups",
        "qwen3moe-dense"])
def test_moe_gguf_router_keys_folio_cannot_run_are_refused_by_key(tmp_path, arch, keys, named):
    model = dots1(seed=67) if arch == "dots1" else qwen3moe(True, seed=67)
    write_moe_gguf(model, tmp_path / "m.gguf", arch=arch, keys=keys)
    out = subprocess.run([FOLIO, "logits", "--model", str(tmp_path / "m.gguf"), "--tokens",
                          "1,2"], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert named in out.stderr, out.stderr


def test_moe_gguf_gating_func_that_agrees_is_read(tmp_path):
    # qwen3moe and qwen2moe files may say softmax (llama.cpp's gating 1);
    # dots1 files run what they say: sigmoid when absent, softmax when 1.
    for arch, build in (("qwen3moe", lambda: qwen3moe(True, seed=71)),
                        ("qwen2moe", lambda: qwen2moe(seed=71))):
        model = build()
        ids = prompt(model.config.vocab_size, seed=127)
        write_moe_gguf(model, tmp_path / f"{arch}.gguf", arch=arch, keys={"expert_gating_func": 1})
        check(run_folio(tmp_path / f"{arch}.gguf", ids), hf_logits(model, ids),
              hf_greedy(model, ids, GREEDY))
    model = dots1(seed=73)
    ids = prompt(model.config.vocab_size, seed=131)
    write_moe_gguf(model, tmp_path / "absent.gguf", arch="dots1", keys={"expert_gating_func": None})
    check(run_folio(tmp_path / "absent.gguf", ids), hf_logits(model, ids),
          hf_greedy(model, ids, GREEDY))
    write_moe_gguf(model, tmp_path / "softmax.gguf", arch="dots1", keys={"expert_gating_func": 1})
    assert folio_info(tmp_path / "softmax.gguf")["experts"]["routing"] == "softmax-topk"


def gemma3(layer_types, query_pre_attn_scalar=24, seed=0, tie=True):
    cfg = transformers.Gemma3TextConfig(
        vocab_size=320, hidden_size=64, intermediate_size=96, num_hidden_layers=len(layer_types),
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
        sliding_window=WINDOW, layer_types=list(layer_types),
        query_pre_attn_scalar=query_pre_attn_scalar, tie_word_embeddings=tie,
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10.0}},
        attn_implementation="eager")
    return randomize(transformers.Gemma3ForCausalLM(cfg), seed)


def hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].double().numpy()


def hf_greedy(model, ids, steps):
    ids = list(ids)
    out = []
    for _ in range(steps):
        nxt = int(np.argmax(hf_logits(model, ids)[-1]))
        out.append(nxt)
        ids.append(nxt)
    return out


def run_folio(model_path, ids, *extra):
    out = subprocess.run(
        [FOLIO, "logits", "--model", str(model_path), "--tokens", ",".join(map(str, ids)),
         "--greedy", str(GREEDY), *extra],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


# folio's default run, and one with small pages, chunked prefill and two
# threads: the determinism contract says both give the same bits.
SCHEDULES = ([], ["--page-size", "4", "--prefill-chunk", "5", "--threads", "2"])


def check_every_schedule(model_path, ids, want, want_greedy):
    """Every schedule's logits equal the default's bit for bit, and those
    agree with transformers (check)."""
    results = [run_folio(model_path, ids, *schedule) for schedule in SCHEDULES]
    for result in results[1:]:
        assert result == results[0]
    check(results[0], want, want_greedy)


def check(result, want, want_greedy):
    got = np.array(result["logits"], dtype=np.float64)
    assert got.shape == want.shape
    tol = 1e-4 * max(1.0, np.abs(want).max())
    err = np.abs(got - want).max()
    assert err <= tol, f"max |folio - transformers| = {err:.3g} > {tol:.3g}"
    assert result["greedy"] == want_greedy


# The tensors every family's GGUF file names alike.
GLOBAL_TENSORS = {"model.embed_tokens.weight": "token_embd.weight",
                  "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}


def add_expert_stack(w, experts, name, x):
    """One [experts, rows, cols] stack, stored by `experts` (name, array) ->
    (data, raw dtype) when given (a quantized stack), else as it is."""
    x = np.ascontiguousarray(x)
    data, raw = experts(name, x) if experts else (x, None)
    w.add_tensor(name, np.ascontiguousarray(data), raw_dtype=raw)


def gguf_writer(path, arch, cfg):
    """A GGUFWriter with the keys every family's file carries."""
    import gguf
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    return w


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_phi3_gguf(model, path):
    """Phi-3 as llama.cpp's converter writes it: fused attn_qkv and ffn_up
    (gate rows first), NeoX Q/K as they are, rope.dimension_count for the
    partial rotation."""
    cfg = model.config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    w = gguf_writer(path, "phi3", cfg)
    w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    w.add_rope_dimension_count(int(head_dim * cfg.partial_rotary_factor))
    if cfg.sliding_window:
        w.add_uint32("phi3.attention.sliding_window", cfg.sliding_window)
    rope = cfg.rope_parameters
    if rope["rope_type"] == "longrope":
        w.add_uint32("phi3.rope.scaling.original_context_length",
                     rope["original_max_position_embeddings"])
        w.add_tensor("rope_factors_long.weight", np.array(rope["long_factor"], np.float32))
        w.add_tensor("rope_factors_short.weight", np.array(rope["short_factor"], np.float32))
    names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
             "self_attn.qkv_proj": "attn_qkv", "self_attn.o_proj": "attn_output",
             "mlp.gate_up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for name, p in model.state_dict().items():
        x = p.detach().float().numpy().copy()
        if name in GLOBAL_TENSORS:
            gname = GLOBAL_TENSORS[name]
        else:
            parts = name.split(".")
            gname = f"blk.{parts[2]}.{names['.'.join(parts[3:-1])]}.weight"
        w.add_tensor(gname, x)
    finish(w)


def write_gguf(model, path, pattern=None):
    """The model as llama.cpp's converter writes Gemma 2 and 3: NeoX Q/K as
    they are, norm gains + 1, f32 tensors. pattern: the per-layer bool
    array (True = sliding) of attention.sliding_window_pattern, or None to
    rely on the family's default period (6 for Gemma 3, 2 for Gemma 2)."""
    cfg = model.config
    arch = cfg.model_type.replace("_text", "")
    w = gguf_writer(path, arch, cfg)
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_uint32(f"{arch}.attention.sliding_window", cfg.sliding_window)
    if arch == "gemma3":
        w.add_rope_freq_base(cfg.rope_parameters["full_attention"]["rope_theta"])
        w.add_float32("gemma3.rope.freq_base_swa",
                      cfg.rope_parameters["sliding_attention"]["rope_theta"])
    else:
        w.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
        w.add_float32("gemma2.attn_logit_softcapping", cfg.attn_logit_softcapping)
        w.add_float32("gemma2.final_logit_softcapping", cfg.final_logit_softcapping)
    if pattern is not None:
        w.add_array(f"{arch}.attention.sliding_window_pattern", list(pattern))
    names = {
        "input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
        "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
        "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
        "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down"}
    for name, p in model.state_dict().items():
        x = p.detach().float().numpy().copy()
        if name.endswith("norm.weight"):
            x = x + 1.0
        if name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        if name in GLOBAL_TENSORS:
            gname = GLOBAL_TENSORS[name]
        else:
            parts = name.split(".")  # model.layers.{i}.<module...>.weight
            module = ".".join(parts[3:-1])
            gname = f"blk.{parts[2]}.{names[module]}.weight"
        w.add_tensor(gname, x)
    finish(w)


MIXED = ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    model = gemma3(MIXED)
    path = tmp_path_factory.mktemp("gemma3") / "m"
    model.save_pretrained(path, safe_serialization=True)
    ids = prompt(model.config.vocab_size)
    return path, ids, hf_logits(model, ids), hf_greedy(model, ids, GREEDY)


@pytest.mark.parametrize("extra", [
    [],
    ["--page-size", "4", "--prefill-chunk", "5"],
    ["--page-size", "16", "--prefill-chunk", "16", "--threads", "2"],
    ["--backend", "reference", "--page-size", "8"],
], ids=["default", "pages4-chunk5", "pages16-chunk16-threads2", "reference"])
def test_gemma3_folder_matches_transformers(folder, extra):
    path, ids, want, want_greedy = folder
    check(run_folio(path, ids, *extra), want, want_greedy)


def test_gemma3_untied_head_and_head_dim_scale(tmp_path):
    # query_pre_attn_scalar = head_dim (the common case) and an untied head.
    model = gemma3(MIXED, query_pre_attn_scalar=16, seed=3, tie=False)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    ids = prompt(model.config.vocab_size, seed=11)
    check(run_folio(tmp_path / "m", ids), hf_logits(model, ids), hf_greedy(model, ids, GREEDY))


@pytest.mark.parametrize("explicit_pattern", [False, True], ids=["default-period", "bool-array"])
def test_gemma3_gguf_matches_transformers(tmp_path, explicit_pattern):
    # Seven layers: with llama.cpp's default period of 6, layer 5 is global.
    types = ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(7)]
    model = gemma3(types, query_pre_attn_scalar=16, seed=5)  # GGUF: the scalar is head_dim
    pattern = [t == "sliding_attention" for t in types] if explicit_pattern else None
    write_gguf(model, tmp_path / "m.gguf", pattern)
    ids = prompt(model.config.vocab_size, seed=13)
    check(run_folio(tmp_path / "m.gguf", ids, "--page-size", "4"), hf_logits(model, ids),
          hf_greedy(model, ids, GREEDY))


@pytest.mark.parametrize("extra", [[], ["--page-size", "4", "--prefill-chunk", "7"]],
                         ids=["default", "pages4-chunk7"])
def test_gemma2_folder_matches_transformers(tmp_path, extra):
    model = gemma2()
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    ids = prompt(model.config.vocab_size, seed=19)
    check(run_folio(tmp_path / "m", ids, *extra), hf_logits(model, ids),
          hf_greedy(model, ids, GREEDY))


def test_gemma2_gguf_matches_transformers(tmp_path):
    model = gemma2(seed=4)
    write_gguf(model, tmp_path / "m.gguf")
    ids = prompt(model.config.vocab_size, seed=23)
    check(run_folio(tmp_path / "m.gguf", ids, "--page-size", "4"), hf_logits(model, ids),
          hf_greedy(model, ids, GREEDY))


def test_gemma2_soft_caps_matter(tmp_path):
    # The same weights without caps give other logits: the caps are not
    # lost on the way (transformers agrees on both).
    capped = gemma2(seed=6)
    uncapped = gemma2(seed=6, attn_cap=None, final_cap=None)
    ids = prompt(capped.config.vocab_size, seed=29)
    assert np.abs(hf_logits(capped, ids) - hf_logits(uncapped, ids)).max() > 1e-2
    uncapped.save_pretrained(tmp_path / "m", safe_serialization=True)
    check(run_folio(tmp_path / "m", ids), hf_logits(uncapped, ids),
          hf_greedy(uncapped, ids, GREEDY))


@pytest.mark.parametrize("partial,window", [(0.5, WINDOW), (1.0, None)],
                         ids=["partial-rotary-window", "full-rotary-global"])
def test_phi3_folder_matches_transformers(tmp_path, partial, window):
    model = phi3(partial, window)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    ids = prompt(model.config.vocab_size, seed=31)
    check(run_folio(tmp_path / "m", ids, "--page-size", "4", "--prefill-chunk", "9"),
          hf_logits(model, ids), hf_greedy(model, ids, GREEDY))


def test_phi3_gguf_matches_transformers(tmp_path):
    model = phi3(seed=2)
    write_phi3_gguf(model, tmp_path / "m.gguf")
    ids = prompt(model.config.vocab_size, seed=37)
    check(run_folio(tmp_path / "m.gguf", ids), hf_logits(model, ids),
          hf_greedy(model, ids, GREEDY))


def test_phi3_longrope_short_factors_match_transformers(tmp_path):
    # The model's context is the original one: both use the short factors
    # (and an attention factor of 1) at every length.
    model = phi3(longrope=256, seed=8)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    ids = prompt(model.config.vocab_size, seed=41)
    check(run_folio(tmp_path / "m", ids, "--page-size", "4"), hf_logits(model, ids),
          hf_greedy(model, ids, GREEDY))


def test_phi3_longrope_long_factors_match_transformers_past_the_original_length(tmp_path):
    # A context 8x the original (16): folio takes the long factors and the
    # attention factor sqrt(1 + ln 8 / ln 16) for every position;
    # transformers does the same for a sequence longer than 16, which a
    # 44-token prefill is (prompt logits only: its greedy loop would too).
    model = phi3(longrope=16, max_positions=128, seed=10)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    ids = prompt(model.config.vocab_size, seed=43)
    want = hf_logits(model, ids)
    got = run_folio(tmp_path / "m", ids, "--prefill-chunk", "11")
    check({"logits": got["logits"], "greedy": []}, want, [])
    # The same file written as GGUF, the factors as llama.cpp's converter
    # writes them (rope_factors_long/short tensors).
    write_phi3_gguf(model, tmp_path / "m.gguf")
    got = run_folio(tmp_path / "m.gguf", ids)
    check({"logits": got["logits"], "greedy": []}, want, [])


@pytest.mark.parametrize("key,value,named", [
    ("intermediate_size", 80, "mlp.gate_up_proj.weight"),
    ("num_key_value_heads", 4, "self_attn.qkv_proj.weight"),
])
def test_phi3_fused_tensor_of_the_wrong_shape_is_named(tmp_path, key, value, named):
    model = phi3()
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    cfg_path = tmp_path / "m" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg[key] = value
    cfg_path.write_text(json.dumps(cfg))
    out = subprocess.run([FOLIO, "logits", "--model", str(tmp_path / "m"), "--tokens", "1,2"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert named in out.stderr, out.stderr


@pytest.mark.parametrize("norm", [True, False], ids=["norm-topk", "raw-topk"])
def test_qwen3moe_folder_matches_transformers(tmp_path, norm):
    model = qwen3moe(norm, seed=12)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    ids = prompt(model.config.vocab_size, seed=47)
    want, want_greedy = hf_logits(model, ids), hf_greedy(model, ids, GREEDY)
    check_every_schedule(tmp_path / "m", ids, want, want_greedy)


def test_qwen3moe_gguf_matches_transformers(tmp_path):
    model = qwen3moe(True, seed=14)
    write_moe_gguf(model, tmp_path / "m.gguf")
    ids = prompt(model.config.vocab_size, seed=53)
    check(run_folio(tmp_path / "m.gguf", ids), hf_logits(model, ids),
          hf_greedy(model, ids, GREEDY))


def qwen3(rope, seed=0):
    cfg = transformers.Qwen3Config(
        vocab_size=320, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
        rope_parameters=dict(rope), attn_implementation="eager")
    return randomize(transformers.Qwen3ForCausalLM(cfg), seed)


@pytest.mark.parametrize("rope", [
    YARN_ROPE,
    # gpt-oss's form: bounds not rounded, betas given.
    dict(YARN_ROPE, truncate=False, beta_fast=16.0, beta_slow=2.0),
    # DeepSeek's attention factor, from mscale and mscale_all_dim.
    dict(YARN_ROPE, mscale=1.0, mscale_all_dim=0.5),
], ids=["default", "untruncated-betas", "mscale"])
def test_qwen3_yarn_folder_matches_transformers(tmp_path, rope):
    model = qwen3(rope, seed=61)
    yarn = qwen3(YARN_ROPE, seed=61)
    plain = qwen3({"rope_type": "default", "rope_theta": YARN_ROPE["rope_theta"]}, seed=61)
    ids = prompt(model.config.vocab_size, seed=67)
    want = hf_logits(model, ids)
    # Each variant moves the logits: a reading that dropped it would fail.
    assert np.abs(want - hf_logits(plain, ids)).max() > 1e-3
    if rope is not YARN_ROPE:
        assert np.abs(want - hf_logits(yarn, ids)).max() > 1e-3
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    check(run_folio(tmp_path / "m", ids, "--page-size", "4", "--prefill-chunk", "9"), want,
          hf_greedy(model, ids, GREEDY))


def test_qwen3moe_yarn_folder_and_gguf_match_transformers(tmp_path):
    model = qwen3moe(True, seed=18, rope=YARN_ROPE)
    ids = prompt(model.config.vocab_size, seed=71)
    want, want_greedy = hf_logits(model, ids), hf_greedy(model, ids, GREEDY)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    check(run_folio(tmp_path / "m", ids), want, want_greedy)
    write_moe_gguf(model, tmp_path / "m.gguf")
    check(run_folio(tmp_path / "m.gguf", ids, "--page-size", "4"), want, want_greedy)


def set_qwen3moe_experts(model, layer, gate, up, down):
    """Puts stacked [experts, rows, cols] gate, up and down weights into the
    transformers model (fused or per-expert form, as write_moe_gguf reads)."""
    mlp = model.model.layers[layer].mlp
    with torch.no_grad():
        if hasattr(mlp.experts, "gate_up_proj"):
            mlp.experts.gate_up_proj.copy_(torch.from_numpy(np.concatenate([gate, up], axis=1)))
            mlp.experts.down_proj.copy_(torch.from_numpy(down))
        else:
            for j, e in enumerate(mlp.experts):
                e.gate_proj.weight.copy_(torch.from_numpy(gate[j]))
                e.up_proj.weight.copy_(torch.from_numpy(up[j]))
                e.down_proj.weight.copy_(torch.from_numpy(down[j]))


def mxfp4_experts():
    """The experts callbacks of the GGUF writers for MXFP4: `quantized`
    stores each stacked tensor as MXFP4 blocks (the gguf package's
    quantizer, kept in `stored` by name), `dequantized` as the f32 values
    those blocks decode to (call it after `quantized` wrote the same file's
    tensors)."""
    import gguf
    mx = gguf.GGMLQuantizationType.MXFP4
    stored = {}

    def quantized(name, x):
        stored[name] = gguf.quants.quantize(x.astype(np.float32), mx)
        return stored[name], mx

    def dequantized(name, x):
        return gguf.quants.dequantize(stored[name], mx).reshape(x.shape), None

    return stored, quantized, dequantized


def test_qwen3moe_gguf_mxfp4_experts_compute_on_their_values(tmp_path):
    # Experts stored as MXFP4 by the gguf package (rows of 64 and 32, whole
    # blocks) against the same file with those tensors stored as the f32
    # values the package dequantizes them to: in the exact mode the same
    # math on the same values, so folio's logits are equal bit for bit, and
    # transformers run on those values agrees. On the default 8-bit
    # activations the MXFP4 experts take the packed kernel (other bits than
    # the f32 file's float kernel), near the same reference.
    import gguf
    mx = gguf.GGMLQuantizationType.MXFP4
    model = qwen3moe(True, seed=15)
    stored, quantized, dequantized = mxfp4_experts()
    write_moe_gguf(model, tmp_path / "mx.gguf", quantized)
    write_moe_gguf(model, tmp_path / "f32.gguf", dequantized)
    ids = prompt(model.config.vocab_size, seed=59)
    want = hf_logits(model, ids)
    for i in range(model.config.num_hidden_layers):
        set_qwen3moe_experts(model, i, *(
            gguf.quants.dequantize(stored[f"blk.{i}.ffn_{r}_exps.weight"], mx)
            for r in ("gate", "up", "down")))
    rounded = hf_logits(model, ids)
    tol = 1e-4 * max(1.0, np.abs(rounded).max())
    assert np.abs(rounded - want).max() > 100 * tol  # MXFP4 moved the values
    for extra in SCHEDULES:
        got = run_folio(tmp_path / "mx.gguf", ids, "--matmul-activations", "f32", *extra)
        assert got == run_folio(tmp_path / "f32.gguf", ids, "--matmul-activations", "f32", *extra)
        check(got, rounded, hf_greedy(model, ids, GREEDY))
    packed = run_folio(tmp_path / "mx.gguf", ids)
    assert packed["logits"] != run_folio(tmp_path / "f32.gguf", ids)["logits"]
    assert packed == run_folio(tmp_path / "mx.gguf", ids, "--page-size", "4", "--prefill-chunk",
                               "5", "--threads", "2")
    err = np.abs(np.array(packed["logits"]) - rounded).max()
    assert err <= 0.1 * max(1.0, np.abs(rounded).max()), err
    # 4.25 bits a weight: 17 bytes per 32.
    info = folio_info(tmp_path / "mx.gguf")
    cfg = model.config
    elements = cfg.num_hidden_layers * cfg.num_experts * 3 * cfg.hidden_size * \
        cfg.moe_intermediate_size
    assert info["weight_types"]["mxfp4"] == {
        "tensors": cfg.num_hidden_layers * cfg.num_experts * 3, "elements": elements,
        "bytes": elements // 32 * 17, "bits_per_weight": 4.25}
    assert info["experts"]["expert_weight_bytes"] == elements // 32 * 17


def folio_info(path):
    out = subprocess.run([FOLIO, "info", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_info_reports_experts_and_what_a_token_reads(tmp_path):
    model = qwen3moe(True, seed=12)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    cfg = model.config
    info = folio_info(tmp_path / "m")
    total = sum(p.numel() for p in model.parameters())
    d, f, e, k = cfg.hidden_size, cfg.moe_intermediate_size, cfg.num_experts, cfg.num_experts_per_tok
    per_expert = 3 * d * f
    assert info["experts"] == {"num_experts": e, "experts_per_token": k, "expert_ffn_size": f,
                               "routing": "softmax-topk", "norm_topk_prob": True,
                               "expert_weight_bytes": 4 * cfg.num_hidden_layers * e * per_expert}
    assert info["parameters"] == total
    assert info["active_parameters"] == total - cfg.num_hidden_layers * (e - k) * per_expert
    # f32 weights: the active ones, less the untied embedding's unread rows.
    unread_rows = (cfg.vocab_size - 1) * d
    assert info["active_weight_bytes_per_token"] == 4 * (info["active_parameters"] - unread_rows)
    # A dense model reads all of itself (tied: the embedding is the head).
    dense = gemma2(seed=1)
    dense.save_pretrained(tmp_path / "d", safe_serialization=True)
    info = folio_info(tmp_path / "d")
    assert "experts" not in info
    assert info["active_parameters"] == info["parameters"]
    assert info["active_weight_bytes_per_token"] == info["weight_bytes"]


def test_mixtral_folder_matches_transformers(tmp_path):
    model = mixtral(seed=16)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    ids = prompt(model.config.vocab_size, seed=59)
    check(run_folio(tmp_path / "m", ids, "--page-size", "4", "--prefill-chunk", "7"),
          hf_logits(model, ids), hf_greedy(model, ids, GREEDY))


def test_gemma3_legacy_config_keys(tmp_path):
    # Hub configs written before transformers 5: rope_theta,
    # rope_local_base_freq and sliding_window_pattern instead of
    # rope_parameters and layer_types.
    types = ["sliding_attention", "full_attention"] * 2
    model = gemma3(types, seed=9)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    cfg_path = tmp_path / "m" / "config.json"
    cfg = json.loads(cfg_path.read_text())
    del cfg["layer_types"], cfg["rope_parameters"]
    cfg.update(rope_theta=1000.0, rope_local_base_freq=10.0, sliding_window_pattern=2,
               rope_scaling=None)
    cfg_path.write_text(json.dumps(cfg))
    ids = prompt(model.config.vocab_size, seed=17)
    check(run_folio(tmp_path / "m", ids), hf_logits(model, ids), hf_greedy(model, ids, GREEDY))


@pytest.mark.parametrize("change,named", [
    ({"final_logit_softcapping": 30.0}, "final_logit_softcapping"),
    ({"attn_logit_softcapping": 50.0}, "attn_logit_softcapping"),
    ({"hidden_activation": "gelu"}, "hidden_activation"),
    ({"layer_types": ["sliding_attention"]}, "layer_types"),
    ({"layer_types": ["sliding_attention", "chunked_attention", "full_attention",
                      "sliding_attention"]}, "layer_types[1]"),
    ({"query_pre_attn_scalar": None}, "query_pre_attn_scalar"),
    # Dynamic NTK rescales with the sequence's length: a cached key would
    # rotate differently from the same key recomputed.
    ({"rope_parameters": {"full_attention": {"rope_type": "dynamic", "rope_theta": 1e4,
                                             "factor": 2.0},
                          "sliding_attention": {"rope_type": "default", "rope_theta": 10.0}}},
     "dynamic"),
    ({"use_bidirectional_attention": True}, "use_bidirectional_attention"),
])
def test_gemma3_configs_folio_cannot_run_are_refused_by_key(folder, tmp_path, change, named):
    src, ids, _, _ = folder
    dst = tmp_path / "m"
    dst.mkdir()
    (dst / "model.safetensors").symlink_to(src / "model.safetensors")
    cfg = json.loads((src / "config.json").read_text())
    for k, v in change.items():
        if v is None:
            del cfg[k]
        else:
            cfg[k] = v
    (dst / "config.json").write_text(json.dumps(cfg))
    out = subprocess.run([FOLIO, "logits", "--model", str(dst), "--tokens", "1,2"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert named in out.stderr, out.stderr


def gpt_oss(seed=0, layers=4, limit=7.0):
    # Alternating sliding (window 8) and full layers, YaRN as gpt-oss ships
    # it (untruncated ramp), 8 experts of which 2 per token.
    cfg = transformers.GptOssConfig(
        vocab_size=320, hidden_size=64, intermediate_size=32, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
        num_local_experts=8, num_experts_per_tok=2, sliding_window=WINDOW, swiglu_limit=limit,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                         "original_max_position_embeddings": 4096},
        attn_implementation="eager")
    return randomize(transformers.GptOssForCausalLM(cfg), seed)


@pytest.mark.parametrize("extra", [[], ["--page-size", "4", "--prefill-chunk", "5",
                                        "--threads", "2"]], ids=["default", "pages4-chunk5"])
def test_gpt_oss_folder_matches_transformers(tmp_path, extra):
    # Sinks, biases everywhere, top-k-then-softmax routing and a clamp that
    # bites (random weights of 0.15 give pre-activations beyond 0.5).
    model = gpt_oss(seed=21, limit=0.5)
    model.save_pretrained(tmp_path / "m", safe_serialization=True)
    ids = prompt(model.config.vocab_size, seed=73)
    check(run_folio(tmp_path / "m", ids, *extra), hf_logits(model, ids),
          hf_greedy(model, ids, GREEDY))


def test_gpt_oss_sinks_and_clamp_matter(tmp_path):
    # The same weights with other sinks, or another clamp, give other
    # logits in transformers: folio must follow both (so neither is lost).
    model = gpt_oss(seed=22, limit=0.5)
    ids = prompt(model.config.vocab_size, seed=79)
    want = hf_logits(model, ids)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.add_(3.0)
    assert np.abs(hf_logits(model, ids) - want).max() > 1e-2
    model.save_pretrained(tmp_path / "sinks", safe_serialization=True)
    check(run_folio(tmp_path / "sinks", ids), hf_logits(model, ids),
          hf_greedy(model, ids, GREEDY))
    loose = gpt_oss(seed=22, limit=7.0)
    assert np.abs(hf_logits(loose, ids) - want).max() > 1e-2
    loose.save_pretrained(tmp_path / "loose", safe_serialization=True)
    check(run_folio(tmp_path / "loose", ids), hf_logits(loose, ids),
          hf_greedy(loose, ids, GREEDY))


def write_gpt_oss_gguf(model, path, experts=None):
    """gpt-oss as llama.cpp's converter writes it: the router as
    ffn_gate_inp (+ bias), transformers' fused gate_up_proj [E, d, 2f]
    (gate and up interleaved by column) cut into ffn_gate_exps and
    ffn_up_exps [E, f, d] and their biases, down_proj transposed to
    ffn_down_exps [E, d, f], sinks as attn_sinks.weight, the pre-MLP norm as
    post_attention_norm; the window, the experts' width and YaRN as keys.
    experts(name, x) as write_moe_gguf takes it, for the expert weights."""
    import gguf
    cfg = model.config
    w = gguf_writer(path, "gpt-oss", cfg)
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    rope = cfg.rope_parameters
    w.add_rope_freq_base(rope["rope_theta"])
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(rope["factor"])
    w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
    w.add_expert_count(cfg.num_local_experts)
    w.add_expert_used_count(cfg.num_experts_per_tok)
    w.add_uint32("gpt-oss.expert_feed_forward_length", cfg.intermediate_size)
    w.add_sliding_window(cfg.sliding_window)
    sd = {k: v.detach().float().numpy().copy() for k, v in model.state_dict().items()}
    names = {"input_layernorm.weight": "attn_norm.weight",
             "post_attention_layernorm.weight": "post_attention_norm.weight",
             "self_attn.sinks": "attn_sinks.weight",
             "mlp.router.weight": "ffn_gate_inp.weight", "mlp.router.bias": "ffn_gate_inp.bias"}
    for p in "qkvo":
        for kind in ("weight", "bias"):
            names[f"self_attn.{p}_proj.{kind}"] = \
                f"attn_{'output' if p == 'o' else p}.{kind}"
    c = np.ascontiguousarray

    for name, x in sd.items():
        if name in GLOBAL_TENSORS:
            w.add_tensor(GLOBAL_TENSORS[name], x)
        elif ".mlp.experts." in name:
            i = name.split(".")[2]
            role = name.split(".mlp.experts.")[1]
            if role == "gate_up_proj":
                t = x.transpose(0, 2, 1)  # [E, 2f, d]
                add_expert_stack(w, experts, f"blk.{i}.ffn_gate_exps.weight", t[:, 0::2])
                add_expert_stack(w, experts, f"blk.{i}.ffn_up_exps.weight", t[:, 1::2])
            elif role == "gate_up_proj_bias":
                w.add_tensor(f"blk.{i}.ffn_gate_exps.bias", c(x[:, 0::2]))
                w.add_tensor(f"blk.{i}.ffn_up_exps.bias", c(x[:, 1::2]))
            elif role == "down_proj":
                add_expert_stack(w, experts, f"blk.{i}.ffn_down_exps.weight", x.transpose(0, 2, 1))
            else:
                assert role == "down_proj_bias", name
                w.add_tensor(f"blk.{i}.ffn_down_exps.bias", x)
        else:
            parts = name.split(".")
            w.add_tensor(f"blk.{parts[2]}.{names['.'.join(parts[3:])]}", x)
    finish(w)


@pytest.mark.parametrize("extra", [[], ["--page-size", "4", "--prefill-chunk", "5",
                                        "--threads", "2"]], ids=["default", "pages4-chunk5"])
def test_gpt_oss_gguf_matches_transformers(tmp_path, extra):
    # The same checks as the folder's, on the file llama.cpp's converter
    # would write (limit 7.0: llama.cpp's graph fixes it, so the file has
    # no key for it).
    model = gpt_oss(seed=26, limit=7.0)
    write_gpt_oss_gguf(model, tmp_path / "m.gguf")
    ids = prompt(model.config.vocab_size, seed=83)
    check(run_folio(tmp_path / "m.gguf", ids, *extra), hf_logits(model, ids),
          hf_greedy(model, ids, GREEDY))


def test_gpt_oss_gguf_mxfp4_experts_compute_on_their_values(tmp_path):
    # As the published gpt-oss GGUF files store them: experts in MXFP4
    # (written by the gguf package) give the bits of the same file holding
    # the f32 values those blocks decode to.
    model = gpt_oss(seed=28, limit=7.0)
    _, quantized, dequantized = mxfp4_experts()
    write_gpt_oss_gguf(model, tmp_path / "mx.gguf", quantized)
    write_gpt_oss_gguf(model, tmp_path / "f32.gguf", dequantized)
    ids = prompt(model.config.vocab_size, seed=89)
    for extra in SCHEDULES:
        got = run_folio(tmp_path / "mx.gguf", ids, "--matmul-activations", "f32", *extra)
        assert got == run_folio(tmp_path / "f32.gguf", ids, "--matmul-activations", "f32", *extra)
    write_gpt_oss_gguf(model, tmp_path / "unrounded.gguf")
    assert got != run_folio(tmp_path / "unrounded.gguf", ids, *extra)  # MXFP4 moved the values


def test_gpt_oss_gguf_reads_what_the_folder_says(tmp_path):
    # folio info of the file and of the folder agree: even layers slide
    # with the window, the same experts and parameter counts.
    model = gpt_oss(seed=27, layers=2, limit=7.0)
    write_gpt_oss_gguf(model, tmp_path / "m.gguf")
    model.save_pretrained(tmp_path / "f", safe_serialization=True)
    info = lambda m: json.loads(subprocess.run(
        [FOLIO, "info", str(m)], capture_output=True, text=True, timeout=120,
        check=True).stdout)
    g, f = info(tmp_path / "m.gguf"), info(tmp_path / "f")
    assert g["architecture"] == f["architecture"] == "gpt-oss"
    assert g["layer_windows"] == f["layer_windows"] == [WINDOW, 0]
    for k in ("kv_layer_groups", "experts", "parameters", "active_parameters"):
        assert g[k] == f[k], k


# E2M1's values by code (sign bit 3), as transformers' FP4_VALUES lists them.
FP4_VALUES = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6])


def mxfp4_hf(w):
    """Our own MXFP4 writer in transformers' packed layout, for w [experts,
    rows, cols] (a row is an output): per 32 elements of a row the smallest
    power-of-two scale that brings the largest |value| within E2M1's 6
    (stored E8M0: exponent + 127), then each element's nearest code.
    Returns blocks [experts, rows, cols / 32, 16] u8 (element 2i in the
    low nibble of byte i, 2i + 1 in the high) and scales [experts, rows,
    cols / 32] u8."""
    *lead, cols = w.shape
    b = w.reshape(*lead, cols // 32, 32).astype(np.float64)
    amax = np.abs(b).max(-1)
    e = np.clip(np.ceil(np.log2(np.maximum(amax, 2.0 ** -126) / 6)) + 127, 0, 254)
    scaled = b / 2.0 ** (e - 127)[..., None]
    code = np.abs(scaled[..., None] - FP4_VALUES).argmin(-1).astype(np.uint8)
    # Contiguous: safetensors' numpy writer stores an array's memory as it
    # lies, and e inherits the strides of w's transposed view.
    return (np.ascontiguousarray(code[..., 0::2] | code[..., 1::2] << 4),
            np.ascontiguousarray(e.astype(np.uint8)))


def write_gpt_oss_mxfp4(model, path):
    """Saves model as the published gpt-oss checkpoints are: expert weights
    as mlp.experts.{gate_up,down}_proj_{blocks,scales} (biases as they
    were) and a quantization_config, and puts into model the values
    transformers' own reader (convert_moe_packed_tensors) makes of those
    blocks. Returns the saved tensors."""
    from safetensors.numpy import load_file, save_file
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    model.save_pretrained(path, safe_serialization=True)
    f = path / "model.safetensors"
    tensors = load_file(str(f))
    for i, layer in enumerate(model.model.layers):
        for proj in ("gate_up_proj", "down_proj"):
            name = f"model.layers.{i}.mlp.experts.{proj}"
            x = tensors.pop(name)  # [experts, in, out]
            blocks, scales = mxfp4_hf(np.swapaxes(x, 1, 2))
            tensors[name + "_blocks"], tensors[name + "_scales"] = blocks, scales
            got = convert_moe_packed_tensors(torch.from_numpy(blocks), torch.from_numpy(scales),
                                             dtype=torch.float32).numpy()
            assert got.shape == x.shape
            # Transformers reads our blocks back as the values we meant:
            # each within half the widest E2M1 gap (1 of 6) of the scale
            # that its block's largest |value| sets, a third of it.
            per_block = lambda a: np.swapaxes(a, 1, 2).reshape(*blocks.shape[:3], 32)
            amax = np.abs(per_block(x)).max(-1, keepdims=True)
            assert (np.abs(per_block(got) - per_block(x)) <= amax / 3 + 1e-30).all()
            with torch.no_grad():
                getattr(layer.mlp.experts, proj).copy_(torch.from_numpy(got))
    save_file(tensors, str(f), metadata={"format": "pt"})
    cfg = json.loads((path / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": [
        "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}
    (path / "config.json").write_text(json.dumps(cfg))
    return tensors


@pytest.mark.parametrize("extra", [[], ["--page-size", "4", "--prefill-chunk", "5",
                                        "--threads", "2"]],
                         ids=["default", "pages4-chunk5"])
def test_gpt_oss_mxfp4_folder_matches_transformers(tmp_path, extra):
    # The experts' MXFP4 blocks are read as they are (re-packed, never
    # widened) and computed with the values transformers makes of them (the
    # exact mode); on the default 8-bit activations, which run MXFP4's
    # packed kernel, near them, with the same bits however paged or split.
    model = gpt_oss(seed=24, limit=0.5)
    ids = prompt(model.config.vocab_size, seed=83)
    before = hf_logits(model, ids)
    write_gpt_oss_mxfp4(model, tmp_path / "m")
    want = hf_logits(model, ids)
    assert np.abs(want - before).max() > 100 * 1e-4 * max(1.0, np.abs(want).max())
    check(run_folio(tmp_path / "m", ids, "--matmul-activations", "f32", *extra), want,
          hf_greedy(model, ids, GREEDY))
    packed = run_folio(tmp_path / "m", ids)
    if extra:
        assert run_folio(tmp_path / "m", ids, *extra) == packed
    err = np.abs(np.array(packed["logits"]) - want).max()
    assert 0 < err <= 0.1 * max(1.0, np.abs(want).max()), err


def test_gpt_oss_mxfp4_info_counts_17_bytes_per_32_weights(tmp_path):
    model = gpt_oss(seed=25, layers=2)
    write_gpt_oss_mxfp4(model, tmp_path / "m")
    cfg = model.config
    elements = cfg.num_hidden_layers * cfg.num_local_experts * 3 * cfg.hidden_size * \
        cfg.intermediate_size
    info = folio_info(tmp_path / "m")
    assert info["weight_types"]["mxfp4"] == {
        "tensors": cfg.num_hidden_layers * cfg.num_local_experts * 3, "elements": elements,
        "bytes": elements // 32 * 17, "bits_per_weight": 4.25}


def drop_last_block(t, name):
    t[name + "_scales"] = np.ascontiguousarray(t[name + "_scales"][..., :-1])


def drop(t, name):
    del t[name + "_scales"]


def nan_scale(t, name):
    t[name + "_scales"][3, 5, 1] = 0xff


def f32_blocks(t, name):
    t[name + "_blocks"] = t[name + "_blocks"].astype(np.float32)


@pytest.mark.parametrize("change,named", [
    (drop_last_block, "gate_up_proj_scales has shape [8,64,1], expected [8,64,2]"),
    (drop, "missing tensor model.layers.1.mlp.experts.gate_up_proj_scales"),
    (nan_scale, "gate_up_proj_scales: expert 3 row 5 block 1 has the E8M0 scale 0xff"),
    (f32_blocks, "gate_up_proj_blocks is f32; MXFP4 blocks and scales are U8"),
], ids=["scales-shape", "no-scales", "nan-scale", "float-blocks"])
def test_gpt_oss_bad_mxfp4_experts_are_refused_by_name(tmp_path, change, named):
    from safetensors.numpy import save_file
    model = gpt_oss(seed=23, layers=2)
    tensors = write_gpt_oss_mxfp4(model, tmp_path / "m")
    change(tensors, "model.layers.1.mlp.experts.gate_up_proj")
    save_file(tensors, str(tmp_path / "m" / "model.safetensors"), metadata={"format": "pt"})
    out = subprocess.run([FOLIO, "logits", "--model", str(tmp_path / "m"), "--tokens", "1,2"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert named in out.stderr, out.stderr

"""Pooled embeddings (folio.LLM.embed, AsyncLLM.embed, /v1/embeddings,
`folio embed`) against Hugging Face transformers.

transformers builds small random Qwen3 and Llama models (float32, eager
attention) and writes them with save_pretrained; their `last_hidden_state`
(after the final norm, the output head's input) pooled by NumPy is the
oracle: the last position's, the mean, or the first position's, cut to
`dimensions` and L2-normalized as asked. folio's vectors, embedded many at
a time with prompts of different lengths, chunked prefill and small pages,
must be within cosine 0.99999 and 1e-5 per feature (normalized vectors of
64 features; float32 through two layers), and each prompt's vector must be
the same bits alone as batched.
"""
import asyncio
import base64
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from folio import LLM, AsyncLLM, PoolingParams  # noqa: E402
from test_model_families import randomize  # noqa: E402

FOLIO = os.environ.get("FOLIO_BIN", str(Path(__file__).resolve().parents[2] / "build/bin/folio"))
VOCAB = 258  # folio's byte-level vocabulary: no tokenizer file needed


def build(family, seed=0):
    common = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                  max_position_embeddings=256, attn_implementation="eager",
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    if family == "qwen3":
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**common))
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    return randomize(model, seed)


def prompts(count=9, seed=3):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, VOCAB, int(rng.integers(2, 41))).tolist() for _ in range(count)]


def hf_pooled(model, ids, pooling, dimensions=None, normalize=True):
    with torch.no_grad():
        h = model.model(torch.tensor([ids])).last_hidden_state[0].double().numpy()
    v = {"last": h[-1], "mean": h.mean(axis=0), "cls": h[0]}[pooling]
    if dimensions:
        v = v[:dimensions]
    if normalize:
        v = v / max(np.linalg.norm(v), 1e-12)
    return v


def close(got, want):
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == want.shape
    cosine = got @ want / (np.linalg.norm(got) * np.linalg.norm(want))
    assert cosine >= 0.99999, cosine
    scale = max(1.0, float(np.abs(want).max()))
    assert np.abs(got - want).max() <= 1e-5 * scale, np.abs(got - want).max()


@pytest.fixture(scope="module", params=["qwen3", "llama"])
def checkpoint(request, tmp_path_factory):
    model = build(request.param)
    path = tmp_path_factory.mktemp(request.param)
    model.save_pretrained(path)
    return model, path


def test_llm_embed_matches_transformers(checkpoint):
    model, path = checkpoint
    ps = prompts()
    llm = LLM(str(path), threads=2, page_size=8, max_num_batched_tokens=32, max_num_seqs=4)
    for params in (PoolingParams(), PoolingParams(pooling="mean"), PoolingParams(pooling="cls"),
                   PoolingParams(pooling="mean", dimensions=16),
                   PoolingParams(pooling="last", normalize=False)):
        outs = llm.embed([{"prompt_token_ids": p} for p in ps], params, use_tqdm=False)
        assert [o.prompt_token_ids for o in outs] == ps
        for o, p in zip(outs, ps):
            close(o.outputs.embedding,
                  hf_pooled(model, p, params.pooling or "last", params.dimensions, params.normalize))
    # Bits: one prompt alone, on one thread, equals the batched vector.
    batched = llm.embed([{"prompt_token_ids": p} for p in ps], PoolingParams(pooling="mean"),
                        use_tqdm=False)
    alone_llm = LLM(str(path), threads=1, max_num_seqs=1)
    for p, b in zip(ps, batched):
        [a] = alone_llm.embed({"prompt_token_ids": p}, PoolingParams(pooling="mean"),
                              use_tqdm=False)
        assert np.array_equal(np.float32(a.outputs.embedding), np.float32(b.outputs.embedding))


def test_async_llm_embed_and_refusals(checkpoint):
    model, path = checkpoint
    ps = prompts(4, seed=5)

    async def main():
        async with AsyncLLM(str(path), threads=1) as engine:
            outs = await asyncio.gather(*(engine.embed({"prompt_token_ids": p}) for p in ps))
            return [o.outputs.embedding for o in outs]

    for got, p in zip(asyncio.run(main()), ps):
        close(got, hf_pooled(model, p, "last"))
    llm = LLM(str(path), threads=1)
    with pytest.raises(ValueError, match="dimensions"):
        llm.embed({"prompt_token_ids": [1, 2]}, PoolingParams(dimensions=65))
    with pytest.raises(ValueError, match="pooling"):
        PoolingParams(pooling="max")
    with pytest.raises(ValueError, match="prompt 1"):
        llm.embed([{"prompt_token_ids": [1]}, {"prompt_token_ids": [VOCAB + 5]}])


def test_server_embeddings_with_the_openai_client(checkpoint):
    """/v1/embeddings: the openai client's default request (base64, decoded
    by the SDK) and an explicit float one give the same float32 bits, the
    same bits as LLM.embed and transformers' vectors; usage counts the
    tokens /tokenize counts; bad input is a 400 naming the field."""
    openai = pytest.importorskip("openai")
    from test_server import Server
    model, path = checkpoint
    s = Server("--model", str(path))
    try:
        client = openai.OpenAI(base_url=f"http://{s.host}:{s.port}/v1", api_key="none")
        name = client.models.list().data[0].id
        ps = prompts(5, seed=9)
        default = client.embeddings.create(model=name, input=ps)
        floats = client.embeddings.create(model=name, input=ps, encoding_format="float")
        raw = client.embeddings.create(model=name, input=ps, encoding_format="base64")
        assert [d.index for d in floats.data] == list(range(len(ps)))
        assert floats.usage.prompt_tokens == sum(len(p) for p in ps)
        want = LLM(str(path), threads=1).embed([{"prompt_token_ids": p} for p in ps],
                                               use_tqdm=False)
        for p, d, f, r, w in zip(ps, default.data, floats.data, raw.data, want):
            bits = np.float32(w.outputs.embedding)
            assert np.array_equal(np.float32(f.embedding), bits)
            assert np.array_equal(np.float32(d.embedding), bits)
            assert np.array_equal(np.frombuffer(base64.b64decode(r.embedding), dtype="<f4"), bits)
            close(f.embedding, hf_pooled(model, p, "last"))
        # Text, pooling and Matryoshka dimensions.
        text = client.embeddings.create(model=name, input="hello there", dimensions=8,
                                        extra_body={"pooling": "mean"})
        assert len(text.data[0].embedding) == 8
        status, tokens = s.post("/tokenize", {"prompt": "hello there"})
        assert text.usage.prompt_tokens == len(tokens["tokens"])
        close(text.data[0].embedding, hf_pooled(model, tokens["tokens"], "mean", dimensions=8))

        def refused(body):
            status, reply = s.post("/v1/embeddings", body)
            assert status == 400, reply
            return reply["error"]["param"]

        assert refused({"input": []}) == "input"
        assert refused({"input": ""}) == "input"
        assert refused({"input": [[1, 2], [VOCAB + 3]]}) == "input[1]"
        assert refused({"input": "x", "dimensions": 65}) == "dimensions"
        assert refused({"input": "x", "pooling": "max"}) == "pooling"
        assert refused({"input": "x", "encoding_format": "hex"}) == "encoding_format"
        assert refused({"input": "x", "temperature": 0}) == "temperature"
        assert refused({"input": [1] * 300}) == "input"
        status, reply = s.post("/v1/embeddings", {"input": [1] * 300,
                                                  "truncate_prompt_tokens": 10})
        assert status == 200 and reply["usage"]["prompt_tokens"] == 10, reply
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_folio_embed_prints_the_server_s_json(checkpoint):
    model, path = checkpoint
    out = subprocess.run([FOLIO, "embed", "--model", str(path), "--tokens", "5,6,7",
                          "--tokens", "9,10", "--pooling", "cls", "--threads", "1"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert [d["index"] for d in reply["data"]] == [0, 1]
    assert reply["usage"]["prompt_tokens"] == 5
    for d, p in zip(reply["data"], ([5, 6, 7], [9, 10])):
        close(d["embedding"], hf_pooled(model, p, "cls"))
    bad = subprocess.run([FOLIO, "embed", "--model", str(path), "--tokens", "1",
                          "--dimensions", "99"], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "dimensions" in bad.stderr, bad.stderr

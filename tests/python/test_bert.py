"""BERT encoders (Block::kBert) against Hugging Face transformers' BertModel.

transformers builds small BertModels with every weight random (biases and
LayerNorm gains included) and writes them with save_pretrained; their
`last_hidden_state`, pooled by NumPy, is the oracle. folio's vectors, many
prompts of different lengths embedded at once on small pages, must be within
cosine 0.99999 and 1e-5 per feature, and each prompt's vector the same bits
alone as batched. The real all-MiniLM-L6-v2 (sentence-transformers' folder,
cached by `make setup`) must give transformers' mean-pooled, normalized
vectors (cosine >= 0.9999) on a few hundred sentences and the same ranking
on a small retrieval example; it skips, saying why, without the model or
without folio's WordPiece tokenizer.
"""
import json
import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from folio import LLM, PoolingParams  # noqa: E402
from test_embeddings import close  # noqa: E402
from test_model_families import randomize  # noqa: E402

VOCAB = 258  # folio's byte-level vocabulary: no tokenizer file needed
MINILM = Path(os.environ.get("FOLIO_MODEL_CACHE", Path.home() / ".cache/folio")) / \
    "all-MiniLM-L6-v2"


def bert(hidden_act="gelu", seed=0):
    cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=96,
                                  max_position_embeddings=128, type_vocab_size=2,
                                  hidden_act=hidden_act, attn_implementation="eager")
    return randomize(transformers.BertModel(cfg), seed)


def prompts(count=9, seed=3):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, VOCAB, int(rng.integers(1, 41))).tolist() for _ in range(count)]


def hf_pooled(model, ids, pooling, normalize=True):
    with torch.no_grad():
        h = model(torch.tensor([ids])).last_hidden_state[0].double().numpy()
    v = {"last": h[-1], "mean": h.mean(axis=0), "cls": h[0]}[pooling]
    return v / max(np.linalg.norm(v), 1e-12) if normalize else v


@pytest.fixture(scope="module", params=["gelu", "gelu_new"])
def checkpoint(request, tmp_path_factory):
    model = bert(request.param)
    path = tmp_path_factory.mktemp("bert-" + request.param)
    model.save_pretrained(path)
    return model, path


def test_llm_embed_matches_transformers_bert(checkpoint):
    model, path = checkpoint
    ps = prompts()
    llm = LLM(str(path), threads=2, page_size=8, max_num_batched_tokens=64, max_num_seqs=4)
    for pooling in ("cls", "mean", "last"):
        outs = llm.embed([{"prompt_token_ids": p} for p in ps], PoolingParams(pooling=pooling),
                         use_tqdm=False)
        for o, p in zip(outs, ps):
            close(o.outputs.embedding, hf_pooled(model, p, pooling))
    raw = llm.embed({"prompt_token_ids": ps[0]}, PoolingParams(pooling="mean", normalize=False),
                    use_tqdm=False)
    close(raw[0].outputs.embedding, hf_pooled(model, ps[0], "mean", normalize=False))
    # Bits: one prompt alone, on one thread, with other pages, equals the
    # batched vector.
    batched = llm.embed([{"prompt_token_ids": p} for p in ps], PoolingParams(pooling="mean"),
                        use_tqdm=False)
    alone = LLM(str(path), threads=1, max_num_seqs=1, page_size=16)
    for p, b in zip(ps, batched):
        [a] = alone.embed({"prompt_token_ids": p}, PoolingParams(pooling="mean"),
                          use_tqdm=False)
        assert np.array_equal(np.float32(a.outputs.embedding), np.float32(b.outputs.embedding))


def test_an_encoder_pools_as_its_files_say_and_generates_nothing(checkpoint, tmp_path):
    model, path = checkpoint
    p = prompts(1, seed=11)[0]
    # No sentence-transformers files: BERT's convention, the [CLS] position.
    [cls] = LLM(str(path), threads=1).embed({"prompt_token_ids": p}, use_tqdm=False)
    close(cls.outputs.embedding, hf_pooled(model, p, "cls"))
    # sentence-transformers' modules.json naming a Pooling module of mean.
    folder = tmp_path / "st"
    model.save_pretrained(folder)
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling/config.json").write_text(json.dumps(
        {"word_embedding_dimension": 64, "pooling_mode_cls_token": False,
         "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False}))
    llm = LLM(str(folder), threads=1)
    [mean] = llm.embed({"prompt_token_ids": p}, use_tqdm=False)
    close(mean.outputs.embedding, hf_pooled(model, p, "mean"))
    with pytest.raises(ValueError, match="encoder"):
        llm.generate({"prompt_token_ids": p})
    # A pooling folio does not compute is refused at load, by name.
    (folder / "1_Pooling/config.json").write_text(json.dumps(
        {"pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
         "pooling_mode_max_tokens": True}))
    with pytest.raises(Exception, match="max_tokens"):
        LLM(str(folder), threads=1)


def test_bert_config_refusals(tmp_path):
    for key, value, named in (("position_embedding_type", "relative_key", "relative_key"),
                              ("is_decoder", True, "is_decoder"),
                              ("hidden_act", "relu", "relu")):
        model = bert()
        folder = tmp_path / key
        model.save_pretrained(folder)
        cfg = json.loads((folder / "config.json").read_text())
        cfg[key] = value
        (folder / "config.json").write_text(json.dumps(cfg))
        with pytest.raises(Exception, match=named):
            LLM(str(folder), threads=1)


def test_server_serves_an_encoder_s_embeddings_only(checkpoint):
    """folio serve on a BERT folder: /v1/embeddings (the openai client)
    gives LLM.embed's bits; completions and chat are a 400 naming the
    model; --task generate refuses to start."""
    openai = pytest.importorskip("openai")
    from test_server import Server, FOLIO
    import subprocess
    model, path = checkpoint
    s = Server("--model", str(path))
    try:
        client = openai.OpenAI(base_url=f"http://{s.host}:{s.port}/v1", api_key="none")
        name = client.models.list().data[0].id
        ps = prompts(4, seed=21)
        got = client.embeddings.create(model=name, input=ps)
        want = LLM(str(path), threads=1).embed([{"prompt_token_ids": p} for p in ps],
                                               use_tqdm=False)
        for g, w in zip(got.data, want):
            assert np.array_equal(np.float32(g.embedding), np.float32(w.outputs.embedding))
        status, reply = s.post("/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 2})
        assert status == 400 and reply["error"]["param"] == "model", reply
        assert "embeddings only" in reply["error"]["message"]
    finally:
        assert s.stop() == 0, "".join(s.log)
    out = subprocess.run([FOLIO, "serve", "--model", str(path), "--task", "generate"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and "encoder" in out.stderr, out.stderr


SENTENCES = [
    "A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
    "A man is riding a horse.", "A woman is playing violin.", "Two men pushed carts through "
    "the woods.", "A man is riding a white horse on an enclosed ground.", "A monkey is playing "
    "drums.", "Someone in a gorilla costume is playing a set of drums.",
    "The new movie is awesome!", "The cat sits outside.", "A man is playing guitar.",
    "The new movie is so great!", "Do you like pizza?", "The dog plays in the garden.",
    "I love pasta.", "Paris is the capital of France.", "Berlin ist die Hauptstadt "
    "Deutschlands.", "Café crème brûlée — naïve résumé.", "東京は日本の首都です。",
    "Emoji 🙂 and symbols #42 @home & more...", "Don't stop believing, it's 3:00 p.m.",
    "   leading and trailing spaces   ", "UPPER CASE TEXT SHOULD BE LOWERED",
]


def minilm_or_skip():
    if not (MINILM / "model.safetensors").exists():
        pytest.skip(f"all-MiniLM-L6-v2 is not cached at {MINILM} (make setup fetches it)")
    try:
        return LLM(str(MINILM), threads=2, max_num_batched_tokens=512, max_num_seqs=16)
    except Exception as e:  # noqa: BLE001
        if "WordPiece" in str(e) or "bert" in str(e):
            pytest.skip(f"folio cannot read MiniLM's tokenizer yet: {e}")
        raise


def test_all_minilm_l6_v2_matches_transformers():
    llm = minilm_or_skip()
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(MINILM / "tokenizer.json"))
    tok.no_padding()  # the file pads and truncates batches to 128; folio does neither
    tok.no_truncation()
    hf = transformers.BertModel.from_pretrained(MINILM, attn_implementation="eager").eval()
    rng = np.random.default_rng(7)
    words = " ".join(SENTENCES).split()
    texts = SENTENCES + [" ".join(rng.choice(words, int(rng.integers(1, 40))))
                         for _ in range(276)]
    outs = llm.embed(texts, use_tqdm=False)  # the folder's own pooling: mean, normalized
    worst = 1.0
    for text, o in zip(texts, outs):
        ids = tok.encode(text).ids
        assert o.prompt_token_ids == ids, text
        with torch.no_grad():
            h = hf(torch.tensor([ids])).last_hidden_state[0].double().numpy()
        want = h.mean(axis=0)
        want /= np.linalg.norm(want)
        got = np.asarray(o.outputs.embedding, dtype=np.float64)
        worst = min(worst, float(got @ want))
    assert worst >= 0.9999, worst
    # Retrieval: each query's best document is transformers' best.
    queries = ["Who plays the drums?", "What is the capital of France?", "Tell me about food"]
    q = np.array([o.outputs.embedding for o in llm.embed(queries, use_tqdm=False)])
    d = np.array([o.outputs.embedding for o in outs[:len(SENTENCES)]])

    def hf_vec(text):
        with torch.no_grad():
            h = hf(torch.tensor([tok.encode(text).ids])).last_hidden_state[0].double().numpy()
        v = h.mean(axis=0)
        return v / np.linalg.norm(v)

    hq = np.array([hf_vec(t) for t in queries])
    hd = np.array([hf_vec(t) for t in SENTENCES])
    assert list(np.argsort(-(q @ d.T), axis=1)[:, :3].tolist()) == \
        list(np.argsort(-(hq @ hd.T), axis=1)[:, :3].tolist())


GGUF_NAMES = {  # BertModel's names -> llama.cpp's (its converter's tensor map)
    "embeddings.word_embeddings": "token_embd", "embeddings.position_embeddings": "position_embd",
    "embeddings.token_type_embeddings": "token_types", "embeddings.LayerNorm": "token_embd_norm",
    "attention.self.query": "attn_q", "attention.self.key": "attn_k",
    "attention.self.value": "attn_v", "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm", "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down", "output.LayerNorm": "layer_output_norm",
}


def write_bert_gguf_model(model, tokenizer_json, path, pooling_type):
    """A GGUF as llama.cpp's converter writes a BERT: its keys, its tensor
    names (f32), and the vocabulary in its phantom-space form."""
    gguf = pytest.importorskip("gguf")
    from test_wordpiece import CONTROL, phantom_vocab
    cfg = model.config
    w = gguf.GGUFWriter(str(path), "bert")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_layer_norm_eps(cfg.layer_norm_eps)
    w.add_causal_attention(False)
    w.add_pooling_type(gguf.PoolingType(pooling_type))
    tokens, types = phantom_vocab(tokenizer_json)
    ids = {t: i for i, t in enumerate(tokens) if types[i] == CONTROL}
    w.add_tokenizer_model("bert")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_bos_token_id(ids["[CLS]"])
    w.add_eos_token_id(ids["[SEP]"])
    w.add_sep_token_id(ids["[SEP]"])
    w.add_unk_token_id(ids["[UNK]"])
    w.add_pad_token_id(ids["[PAD]"])
    for name, p in model.state_dict().items():
        if name.startswith("pooler.") or name.endswith("position_ids"):
            continue
        base, kind = name.rsplit(".", 1)
        if base.startswith("encoder.layer."):
            i, rest = base[len("encoder.layer."):].split(".", 1)
            gname = f"blk.{i}.{GGUF_NAMES[rest]}.{kind}"
        else:
            gname = f"{GGUF_NAMES[base]}.{kind}"
        w.add_tensor(gname, p.detach().float().numpy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_a_gguf_bert_gives_its_folder_s_vectors(tmp_path):
    """The same random BERT and WordPiece vocabulary as a folder and as the
    GGUF llama.cpp's converter writes (pooling_type mean): the GGUF's own
    pooling is read, and on lower-case ASCII text (where llama.cpp's WPM and
    `tokenizers` split alike) both give the same token ids and the same bits."""
    from test_rerank import wordpiece
    tok = wordpiece()
    cfg = transformers.BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=64,
                                  num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=96, max_position_embeddings=128,
                                  attn_implementation="eager")
    model = randomize(transformers.BertModel(cfg), 9)
    folder = tmp_path / "folder"
    model.save_pretrained(folder)
    tok.save(str(folder / "tokenizer.json"))
    path = tmp_path / "bert.gguf"
    write_bert_gguf_model(model, folder / "tokenizer.json", path, pooling_type=1)
    texts = ["paris is the capital of france", "a monkey is playing drums", "who plays drums"]
    from_gguf = LLM(str(path), threads=1).embed(texts, use_tqdm=False)  # its pooling: mean
    from_folder = LLM(str(folder), threads=1).embed(texts, PoolingParams(pooling="mean"),
                                                    use_tqdm=False)
    for g, f, text in zip(from_gguf, from_folder, texts):
        assert g.prompt_token_ids == f.prompt_token_ids == tok.encode(text).ids
        assert np.array_equal(np.float32(g.outputs.embedding), np.float32(f.outputs.embedding))
        close(g.outputs.embedding, hf_pooled(model, g.prompt_token_ids, "mean"))


def test_folio_info_describes_an_encoder(checkpoint):
    import subprocess
    from test_embeddings import FOLIO
    model, path = checkpoint
    out = subprocess.run([FOLIO, "info", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["architecture"] == "bert" and info["encoder"] is True
    assert info["positions"] == "absolute" and "rope" not in info
    assert info["type_vocab_size"] == 2
    assert info["parameters"] == sum(p.numel() for n, p in model.named_parameters()
                                     if not n.startswith("pooler."))
    # A token reads one row of the token and position tables, and the rest.
    cfg = model.config
    row = cfg.hidden_size * 4
    assert info["active_weight_bytes_per_token"] == info["weight_bytes"] - \
        row * (cfg.vocab_size - 1) - row * (cfg.max_position_embeddings - 1)


def test_serve_gives_an_encoder_a_step_as_long_as_its_context(tmp_path):
    """An encoder computes an input in one step, so `folio serve` makes the
    step budget its context unless --max-num-batched-tokens says otherwise."""
    from test_server import Server
    cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=48,
                                  max_position_embeddings=384)
    randomize(transformers.BertModel(cfg), 3).save_pretrained(tmp_path)
    long_input = [2 + i % 250 for i in range(300)]  # more than the general default of 256
    for flags, status_want in (((), 200), (("--max-num-batched-tokens", "256"), 400)):
        s = Server("--model", str(tmp_path), *flags)
        try:
            status, reply = s.post("/v1/embeddings", {"input": long_input})
            assert status == status_want, reply
            if status == 400:
                assert reply["error"]["param"] == "input" and \
                    "max_num_batched_tokens" in reply["error"]["message"], reply
        finally:
            assert s.stop() == 0, "".join(s.log)
    # `folio embed` sizes its step for its longest input likewise.
    import subprocess
    from test_embeddings import FOLIO
    out = subprocess.run([FOLIO, "embed", "--model", str(tmp_path), "--threads", "1", "--tokens",
                          ",".join(map(str, long_input))], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["data"][0]["embedding"]) == 32

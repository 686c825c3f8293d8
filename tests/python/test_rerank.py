"""Cross-encoder reranking (BertForSequenceClassification with one label):
LLM.score, /v1/rerank and /v1/score against transformers.

A WordPiece tokenizer trained with `tokenizers` on text of our own (BERT's
normalizer and pre-tokenizer, its pair template) and a small random
BertForSequenceClassification saved with save_pretrained beside it: folio
must encode each pair as `tokenizers` does (ids and token types) and score
it sigmoid(logit) within 1e-5 of transformers' logits, batched or alone.
"""
import math

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from folio import LLM  # noqa: E402
from test_model_families import randomize  # noqa: E402

CORPUS = [
    "the quick brown fox jumps over the lazy dog", "paris is the capital of france",
    "a monkey is playing drums", "berlin is the capital of germany", "i love pasta and pizza",
    "the cat sits outside on the mat", "a man is riding a white horse", "who plays the drums",
    "what is the capital of france", "tell me about food", "rivers flow into the sea",
] * 20
QUERY = "what is the capital of france"
DOCS = ["paris is the capital of france", "a monkey is playing drums",
        "berlin is the capital of germany", "i love pasta", "the lazy dog sleeps"]


def wordpiece():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(CORPUS, trainers.WordPieceTrainer(
        vocab_size=200, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.decoder = tokenizers.decoders.WordPiece()
    return tok


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory):
    tok = wordpiece()
    cfg = transformers.BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=64,
                                  num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=96, max_position_embeddings=128,
                                  num_labels=1, attn_implementation="eager")
    model = randomize(transformers.BertForSequenceClassification(cfg), 5)
    path = tmp_path_factory.mktemp("cross-encoder")
    model.save_pretrained(path)
    tok.save(str(path / "tokenizer.json"))
    return model, tok, path


def hf_score(model, tok, a, b):
    e = tok.encode(a, b)
    with torch.no_grad():
        logit = model(torch.tensor([e.ids]), token_type_ids=torch.tensor([e.type_ids])).logits
    return 1.0 / (1.0 + math.exp(-float(logit[0, 0]))), e.ids


def test_llm_score_matches_transformers(cross_encoder):
    model, tok, path = cross_encoder
    llm = LLM(str(path), threads=2, page_size=8, max_num_batched_tokens=64, max_num_seqs=4)
    outs = llm.score(QUERY, DOCS, use_tqdm=False)
    assert len(outs) == len(DOCS)
    for o, d in zip(outs, DOCS):
        want, ids = hf_score(model, tok, QUERY, d)
        assert o.prompt_token_ids == ids
        assert abs(o.outputs.score - want) <= 1e-5, (o.outputs.score, want)
    # Two lists pair by index; one pair alone gives the batched bits.
    pairs = llm.score([QUERY, "who plays the drums"], [DOCS[0], DOCS[1]], use_tqdm=False)
    assert abs(pairs[1].outputs.score - hf_score(model, tok, "who plays the drums", DOCS[1])[0]) \
        <= 1e-5
    alone = LLM(str(path), threads=1, max_num_seqs=1)
    for o, d in zip(outs, DOCS):
        assert alone.score(QUERY, d, use_tqdm=False)[0].outputs.score == o.outputs.score
    with pytest.raises(ValueError, match="pair by index"):
        llm.score(["a", "b"], ["c"])


def test_async_llm_score(cross_encoder):
    import asyncio
    from folio import AsyncLLM
    model, tok, path = cross_encoder

    async def main():
        async with AsyncLLM(str(path), threads=1) as engine:
            return await asyncio.gather(*(engine.score(QUERY, d) for d in DOCS))

    for o, d in zip(asyncio.run(main()), DOCS):
        want, ids = hf_score(model, tok, QUERY, d)
        assert o.prompt_token_ids == ids and abs(o.outputs.score - want) <= 1e-5


def test_server_rerank_and_score(cross_encoder):
    from test_server import Server
    model, tok, path = cross_encoder
    # The server's scores are LLM.score's, bit for bit (one engine, one
    # determinism contract); both within 1e-5 of transformers.
    mine = [o.outputs.score for o in LLM(str(path), threads=2).score(QUERY, DOCS, use_tqdm=False)]
    s = Server("--model", str(path))
    try:
        want = [hf_score(model, tok, QUERY, d)[0] for d in DOCS]
        status, reply = s.post("/v1/rerank", {"query": QUERY, "documents": DOCS, "top_n": 3})
        assert status == 200, reply
        order = sorted(range(len(DOCS)), key=lambda i: -want[i])[:3]
        assert [r["index"] for r in reply["results"]] == order
        for r in reply["results"]:
            assert abs(r["relevance_score"] - want[r["index"]]) <= 1e-5
            assert r["relevance_score"] == mine[r["index"]]
            assert r["document"]["text"] == DOCS[r["index"]]
        assert reply["usage"]["prompt_tokens"] == sum(len(tok.encode(QUERY, d).ids) for d in DOCS)
        status, reply = s.post("/rerank", {"query": QUERY, "return_documents": False,
                                           "documents": [{"text": d} for d in DOCS]})
        assert status == 200 and len(reply["results"]) == len(DOCS), reply
        assert "document" not in reply["results"][0]
        status, reply = s.post("/v1/score", {"text_1": QUERY, "text_2": DOCS})
        assert status == 200, reply
        assert [d["index"] for d in reply["data"]] == list(range(len(DOCS)))
        for d in reply["data"]:
            assert d["object"] == "score" and abs(d["score"] - want[d["index"]]) <= 1e-5
            assert d["score"] == mine[d["index"]]

        def refused(route, body):
            status, reply = s.post(route, body)
            assert status == 400, reply
            return reply["error"]["param"]

        assert refused("/v1/rerank", {"documents": DOCS}) == "query"
        assert refused("/v1/rerank", {"query": QUERY, "documents": []}) == "documents"
        assert refused("/v1/rerank", {"query": QUERY, "documents": ["a", ""]}) == "documents[1]"
        assert refused("/v1/rerank", {"query": QUERY, "documents": ["a"], "top_n": 0}) == "top_n"
        assert refused("/v1/rerank", {"query": QUERY, "documents": ["a"], "rank": 1}) == "rank"
        assert refused("/v1/rerank", {"query": QUERY, "documents": [" ".join(["paris"] * 200)]}) \
            == "documents[0]"
        assert refused("/v1/score", {"text_1": ["a", "b"], "text_2": ["c"]}) == "text_2"
        assert refused("/v1/score", {"text_1": "a"}) == "text_2"
        # A cross-encoder still embeds; it generates nothing.
        status, reply = s.post("/v1/embeddings", {"input": "paris"})
        assert status == 200, reply
        status, reply = s.post("/v1/completions", {"prompt": "paris", "max_tokens": 2})
        assert status == 400 and reply["error"]["param"] == "model", reply
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_a_model_without_a_relevance_head_scores_nothing(tmp_path):
    from test_server import Server
    tok = wordpiece()
    cfg = transformers.BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32,
                                  num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=48, max_position_embeddings=64)
    randomize(transformers.BertModel(cfg), 1).save_pretrained(tmp_path)
    tok.save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(ValueError, match="cross-encoder"):
        LLM(str(tmp_path), threads=1).score("a", "b")
    s = Server("--model", str(tmp_path))
    try:
        status, reply = s.post("/v1/rerank", {"query": "a", "documents": ["b"]})
        assert status == 400 and reply["error"]["param"] == "model", reply
    finally:
        assert s.stop() == 0, "".join(s.log)


@pytest.fixture(scope="module")
def qwen3_reranker(tmp_path_factory):
    """A small random Qwen3ForSequenceClassification (one label: the
    converted Qwen3-Reranker form) on folio's byte-level vocabulary."""
    cfg = transformers.Qwen3Config(vocab_size=258, hidden_size=64, intermediate_size=96,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, head_dim=16,
                                   max_position_embeddings=256, num_labels=1,
                                   attn_implementation="eager")
    model = randomize(transformers.Qwen3ForSequenceClassification(cfg), 13)
    path = tmp_path_factory.mktemp("qwen3-reranker")
    model.save_pretrained(path)
    return model, path


def hf_decoder_score(model, ids):
    with torch.no_grad():
        logit = model(torch.tensor([ids])).logits  # the last position's score
    return 1.0 / (1.0 + math.exp(-float(logit[0, 0])))


def test_qwen3_reranker_scores_like_transformers(qwen3_reranker):
    from test_server import Server
    model, path = qwen3_reranker
    llm = LLM(str(path), threads=2, page_size=8, max_num_batched_tokens=32, max_num_seqs=4)
    outs = llm.score(QUERY, DOCS, use_tqdm=False)
    tok = llm.get_tokenizer()
    for o, d in zip(outs, DOCS):
        # A decoder's pair is its two texts' ids one after the other.
        assert o.prompt_token_ids == tok.encode(QUERY, add_special_tokens=False) + \
            tok.encode(d, add_special_tokens=False)
        assert abs(o.outputs.score - hf_decoder_score(model, o.prompt_token_ids)) <= 1e-5
    with pytest.raises(ValueError, match="sequence classifier"):
        llm.generate({"prompt_token_ids": [1, 2, 3]})
    s = Server("--model", str(path))
    try:
        status, reply = s.post("/v1/rerank", {"query": QUERY, "documents": DOCS})
        assert status == 200, reply
        for r in reply["results"]:
            assert r["relevance_score"] == outs[r["index"]].outputs.score  # bits
        status, reply = s.post("/v1/chat/completions",
                               {"messages": [{"role": "user", "content": "hi"}]})
        assert status == 400 and reply["error"]["param"] == "model", reply
    finally:
        assert s.stop() == 0, "".join(s.log)
    import subprocess
    from test_server import FOLIO
    out = subprocess.run([FOLIO, "serve", "--model", str(path), "--task", "generate"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0 and "sequence classifier" in out.stderr, out.stderr

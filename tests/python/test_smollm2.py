"""folio on a real downloaded checkpoint: SmolLM2-135M-Instruct, Q4_1 GGUF
(tests/python/smollm2.py says where it comes from; every test here skips,
saying why, when it is absent)."""
import functools
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import beam_reference
import smollm2

FOLIO = os.environ.get("FOLIO_BIN", str(Path(__file__).resolve().parents[2] / "build/bin/folio"))

# Awkward strings: digits (split one by one by this pre-tokenizer), CJK,
# emoji, contractions, whitespace runs, code, a chat marker.
TEXTS = [
    "The capital of France is",
    "In 2024, 1234567 people paid $3.50 each (+12.5%).",
    "東京は日本の首都です。北京是中国的首都。",
    "emoji 🙂👍🏽 and flags 🇫🇷🇩🇪",
    "I'm sure you'll see they'd've done it; it's 'quoted'.",
    "tabs\tand  double  spaces   and\n\n\nnewlines  \n end ",
    "def f(x):\n    return {'a': [1, 2, 3]}  # comment\n",
    "<|im_start|>user\nhi<|im_end|>",
    "",
]


def hf_tokenizer(gguf_path):
    """A Hugging Face `tokenizers` tokenizer built from the file's own
    vocabulary and merges, configured as SmolLM2's tokenizer.json is
    (Digits(individual) then ByteLevel): an implementation folio did not
    write."""
    import gguf
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    r = gguf.GGUFReader(str(gguf_path))
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    merges = [tuple(m.split(" ")) for m in r.fields["tokenizer.ggml.merges"].contents()]
    types = r.fields["tokenizer.ggml.token_type"].contents()
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    # Control tokens (type 3) are matched whole, as the file marks them.
    tok.add_special_tokens([t for t, ty in zip(tokens, types) if ty == 3])
    return tok


def folio_tokenize(model, text):
    out = subprocess.run([FOLIO, "tokenize", "--model", str(model), "--no-special"],
                         input=text, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["ids"]


def test_tokenization_matches_hugging_face_tokenizers():
    model = smollm2.require()
    hf = hf_tokenizer(model)
    for text in TEXTS:
        want = hf.encode(text, add_special_tokens=False).ids
        assert folio_tokenize(model, text) == want, text
        out = subprocess.run([FOLIO, "tokenize", "--model", str(model), "--decode",
                              "--no-special", "--text", ",".join(map(str, want))],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["text"] == text


def test_the_file_names_its_pre_tokenizer_and_template():
    import gguf
    model = smollm2.require()
    r = gguf.GGUFReader(str(model))
    assert r.fields["tokenizer.ggml.pre"].contents() == "smollm"
    assert "<|im_start|>" in r.fields["tokenizer.chat_template"].contents()


PROMPTS = ["The capital of France is", "def add(a, b):\n    return", "Water boils at"]


@pytest.fixture(scope="module")
def ref():
    return smollm2.reference(smollm2.require())


def folio_logits(model, ids, steps, *extra):
    out = subprocess.run([FOLIO, "logits", "--model", str(model), "--tokens",
                          ",".join(map(str, ids)), "--greedy", str(steps), "--threads", "2",
                          *extra], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def greedy_agrees(ck, a, w, ids, greedy, margin, prompt):
    """folio's greedy tokens after ids are the reference's argmax, step by
    step, until the reference's top two come within `margin` (from there on
    either token is a fair answer)."""
    seq = list(ids)
    for step, token in enumerate(greedy):
        row = ck.forward(a, w, seq)[-1]
        top2 = np.sort(row)[-2:]
        if top2[1] - top2[0] <= margin:
            break
        assert token == int(np.argmax(row)), (prompt, step)
        seq.append(token)


def test_logits_and_greedy_tokens_match_a_float64_reference(ref):
    """folio's logits (Q4_1 and Q8_0 blocks decoded as ggml does, f32
    compute) against a float64 forward pass over the `gguf` package's own
    dequantization: within the bound every model test uses, 1e-4 of the
    logits' scale (f32 rounding over 30 layers measured ~1.5e-6 of it).
    Greedy tokens equal the reference's wherever the reference's top two
    differ by more than ten times that bound (else the comparison stops
    there: a near-tie is a coin flip, not a test)."""

    import checkpoints as ck
    a, w = ref
    model = smollm2.require()
    for prompt in PROMPTS:
        ids = folio_tokenize(model, prompt)
        got = folio_logits(model, ids, 6, "--matmul-activations", "f32")
        want = ck.forward(a, w, ids)
        tol = 1e-4 * max(1.0, np.abs(want).max())
        assert np.abs(np.array(got["logits"]) - want).max() <= tol, prompt
        greedy_agrees(ck, a, w, ids, got["greedy"], 10 * tol, prompt)


def test_q8_activations_stay_near_the_float64_reference(ref):
    """--matmul-activations q8 (8-bit activation blocks, integer dot
    products: ggml's numerics) moves SmolLM2's logits by about one logit
    (measured 1.0-1.7, 4-6% of the logits' scale; a float64 emulation of the
    same activation rounding gives the same size, so it is the rounding, not
    the kernel). The bound, 10% of the scale, catches any kernel error of
    the weights' own size (a lost bias, a wrong scale), and the greedy
    tokens agree with the reference wherever its top two differ by more
    than twice the bound."""

    import checkpoints as ck
    a, w = ref
    model = smollm2.require()
    for prompt in PROMPTS:
        ids = folio_tokenize(model, prompt)
        got = folio_logits(model, ids, 4, "--matmul-activations", "q8")
        exact = folio_logits(model, ids, 0, "--matmul-activations", "f32")
        want = ck.forward(a, w, ids)
        scale = max(1.0, np.abs(want).max())
        err = np.abs(np.array(got["logits"]) - want).max()
        assert 1e-3 * scale < err <= 0.1 * scale, (prompt, err)  # q8 is really on
        assert got["logits"] != exact["logits"]
        greedy_agrees(ck, a, w, ids, got["greedy"], 0.2 * scale, prompt)


@pytest.mark.parametrize("activations", ["f32", "q8"])
def test_the_capital_of_france_is_paris(activations):
    model = smollm2.require()
    out = subprocess.run([FOLIO, "generate", "--model", str(model), "--prompt",
                          "The capital of France is", "--max-tokens", "3", "--threads", "2",
                          "--matmul-activations", activations],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("The capital of France is Paris"), out.stdout


def test_info_reads_its_own_metadata():
    model = smollm2.require()
    out = subprocess.run([FOLIO, "info", str(model)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["architecture"] == "llama"
    assert (info["layers"], info["hidden_size"], info["vocab_size"]) == (30, 576, 49152)
    assert set(info["weight_types"]) == {"q4_1", "q8_0", "f32"}
    assert info["weight_types"]["q4_1"]["bits_per_weight"] == 5.0  # 20 bytes per 32 weights


def test_generate_and_serve_take_a_pre_tokenizer_override():
    """--tokenizer-pre reaches generate: "deepseek-llm" splits this prompt
    into more pieces than SmolLM2's own "smollm" (its regexes isolate
    punctuation and newlines that smollm keeps with their neighbours), so
    the same prompt has more tokens, as `folio tokenize` with the same
    override counts; an unknown name is refused by generate and serve,
    naming it."""
    model = smollm2.require()

    def prompt_tokens(*extra):
        out = subprocess.run([FOLIO, "generate", "--model", str(model), "--prompt",
                              PROMPT, "--max-tokens", "1", *extra],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        summary = [line for line in out.stderr.splitlines() if "prompt +" in line][-1]
        return int(summary.lstrip("[").split()[0])

    def tokenize(pre):
        out = subprocess.run([FOLIO, "tokenize", "--model", str(model), "--tokenizer-pre", pre],
                             input=PROMPT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return len(json.loads(out.stdout)["ids"])

    PROMPT = "I'M SURE   it's  fine\n\n\n  x"
    own = prompt_tokens()
    assert prompt_tokens("--tokenizer-pre", "smollm") == own == tokenize("smollm")
    other = prompt_tokens("--tokenizer-pre", "deepseek-llm")
    assert other == tokenize("deepseek-llm") and other > own
    for command in (["generate", "--prompt", "x"], ["serve", "--port", "0"]):
        out = subprocess.run([FOLIO, *command, "--model", str(model), "--tokenizer-pre",
                              "no-such-pre"], capture_output=True, text=True, timeout=120)
        assert out.returncode != 0 and "no-such-pre" in out.stderr, (command, out.stderr)


def test_serve_and_chat_render_the_model_s_own_template():
    """The server's chat prompt is the model's own template (which adds
    SmolLM's default system prompt) rendered as jinja2 renders it and
    tokenized as Hugging Face tokenizes it: the issue counted 37 tokens for
    this question; `folio chat` keeps the conversation, and /reset drops it."""
    import gguf
    from test_chat_templates import oracle
    model = smollm2.require()
    r = gguf.GGUFReader(str(model))
    source = r.fields["tokenizer.chat_template"].contents()
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    bos = tokens[r.fields["tokenizer.ggml.bos_token_id"].contents()]
    eos = tokens[r.fields["tokenizer.ggml.eos_token_id"].contents()]
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    want = oracle(source, json.dumps(messages), True, bos, eos).text
    want_ids = hf_tokenizer(model).encode(want, add_special_tokens=False).ids
    assert "You are a helpful AI assistant named SmolLM" in want and len(want_ids) == 37

    from test_server import Server
    # The exact mode: on the default 8-bit activations SmolLM2 answers this
    # question as llama.cpp does on the same file, "L'Étoile, la Cité, ..."
    # (bench/peer_logits.py), not with Paris.
    s = Server("--model", str(model), "--matmul-activations", "f32")
    try:
        status, reply = s.post("/v1/chat/completions", {"messages": messages, "max_tokens": 12,
                                                        "temperature": 0})
        assert status == 200, reply
        assert reply["usage"]["prompt_tokens"] == len(want_ids)
        assert "Paris" in reply["choices"][0]["message"]["content"]
        assert reply["choices"][0]["finish_reason"] == "stop"  # <|im_end|> ends the turn
        status, ids = s.post("/tokenize", {"messages": messages})
        assert ids["tokens"] == want_ids
        models = json.loads(s.request("GET", "/v1/models")[2])
        assert models["data"][0]["chat_template"] == "model"
    finally:
        assert s.stop() == 0

    out = subprocess.run([FOLIO, "chat", "--model", str(model), "--max-tokens", "24",
                          "--matmul-activations", "f32"],
                         input="What is the capital of France?\nAnd of Germany?\n/reset\n"
                               "And of Germany?\n",
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    replies = out.stdout.splitlines()
    assert "Paris" in replies[0] and "Berlin" in replies[1], replies
    assert "(conversation reset)" in out.stderr
    assert "chat template model" in out.stderr


def test_ignore_eos_and_stop_token_ids_act_the_same_in_every_front_end():
    """The declared request parameters (engine/request_params.h) reach the
    engine from HTTP, folio.LLM and the CLI alike: a chat reply ends on the
    template's <|im_end|> unless ignore_eos, in which case it runs on to
    max_tokens with the same first tokens; stop_token_ids ends it early."""
    from folio import LLM, SamplingParams
    from test_server import Server
    model = smollm2.require()
    # (asked for one sentence, SmolLM2 ends its answer in both matmul modes)
    messages = [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]
    llm = LLM(str(model), threads=2)
    [im_end] = llm.get_tokenizer().encode("<|im_end|>", add_special_tokens=False)
    plain = llm.chat(messages, SamplingParams(temperature=0, max_tokens=40),
                     use_tqdm=False)[0].outputs[0]
    assert plain.finish_reason == "stop" and plain.token_ids[-1] == im_end, plain
    long = llm.chat(messages, SamplingParams(temperature=0, max_tokens=40, ignore_eos=True),
                    use_tqdm=False)[0].outputs[0]
    assert long.finish_reason == "length" and len(long.token_ids) == 40
    assert long.token_ids[:len(plain.token_ids)] == plain.token_ids
    cut = plain.token_ids[2]
    early = llm.chat(messages, SamplingParams(temperature=0, max_tokens=40, ignore_eos=True,
                                              stop_token_ids=[cut]), use_tqdm=False)
    assert early[0].outputs[0].token_ids == plain.token_ids[:3]
    completion = llm.generate("The capital of France is", SamplingParams(
        temperature=0, max_tokens=24), use_tqdm=False)[0].outputs[0]
    short = llm.generate("The capital of France is", SamplingParams(
        temperature=0, max_tokens=24, stop_token_ids=[completion.token_ids[1]]),
        use_tqdm=False)[0].outputs[0]
    assert short.token_ids == completion.token_ids[:2]
    del llm

    s = Server("--model", str(model))
    try:
        for extra, want in (({}, plain.token_ids), ({"ignore_eos": True}, long.token_ids),
                            ({"ignore_eos": True, "stop_token_ids": [cut]},
                             plain.token_ids[:3])):
            status, reply = s.post("/v1/chat/completions", {
                "messages": messages, "max_tokens": 40, "temperature": 0, "logprobs": True,
                **extra})
            assert status == 200, reply
            assert reply["usage"]["completion_tokens"] == len(want), (extra, reply)
        status, reply = s.post("/v1/completions", {"prompt": "a", "stop_token_ids": [10**7]})
        assert status == 400 and reply["error"]["param"] == "stop_token_ids", reply
    finally:
        assert s.stop() == 0

    out = subprocess.run([FOLIO, "generate", "--model", str(model), "--prompt",
                          "The capital of France is", "--max-tokens", "24", "--threads", "2",
                          "--stop-token-ids", str(completion.token_ids[1])],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "stop: end_token" in out.stderr
    assert out.stdout == "The capital of France is" + short.text + "\n"


def test_an_unknown_matmul_mode_is_refused_by_name():
    for command in (["generate", "--prompt", "x"], ["chat"]):
        out = subprocess.run([FOLIO, *command, "--matmul-activations", "int4"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode != 0
        assert "--matmul-activations" in out.stderr and "int4" in out.stderr, out.stderr


@functools.lru_cache(maxsize=None)
def last_logits(model, ids):
    return folio_logits(model, list(ids), 0, "--last-logits")["logits"][-1]


@pytest.mark.parametrize("beam", [
    {"num_beams": 3, "length_penalty": 1.0, "early_stopping": False},
    {"num_beams": 2, "length_penalty": 0.5, "early_stopping": "never"},
])
def test_beam_search_matches_a_numpy_reference(beam):
    """The server's beam_search extension on SmolLM2's chat turn against a
    NumPy beam search over folio's own logits (each beam's logits from a
    separate `folio logits` run on its whole token list): the same
    hypotheses, in the same order, with the same scores."""
    import gguf
    model = smollm2.require()
    r = gguf.GGUFReader(str(model))
    vocab = r.fields["tokenizer.ggml.tokens"].contents()
    ends = {int(r.fields["tokenizer.ggml.eos_token_id"].contents()), vocab.index("<|im_end|>")}
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    max_tokens, n = 10, 2

    from test_server import Server
    s = Server("--model", str(model))
    try:
        status, ids = s.post("/tokenize", {"messages": messages})
        assert status == 200, ids
        prompt = ids["tokens"]
        status, reply = s.post("/v1/chat/completions", {"messages": messages, "n": n,
                                                        "max_tokens": max_tokens,
                                                        "beam_search": beam})
        assert status == 200, reply
        status, err = s.post("/v1/chat/completions", {"messages": messages, "stream": True,
                                                      "beam_search": beam})
        assert status == 400 and err["error"]["param"] == "beam_search", err
        status, err = s.post("/v1/chat/completions", {"messages": messages, "temperature": 0.7,
                                                      "beam_search": beam})
        assert status == 400 and "temperature" in err["error"]["message"], err
        got_text = [c["message"]["content"] for c in reply["choices"]]
        got_scores = [c["beam_score"] for c in reply["choices"]]
        got_finish = [c["finish_reason"] for c in reply["choices"]]
    finally:
        assert s.stop() == 0

    want = beam_reference.beam_search(lambda t: last_logits(str(model), tuple(t)), prompt,
                             beam["num_beams"], max_tokens, ends, beam["length_penalty"],
                             beam["early_stopping"], n)
    tok = hf_tokenizer(model)
    # The reply's text stops before the end token (a special token).
    want_text = [tok.decode([t for t in tokens if t not in ends]) for tokens, _, _ in want]
    assert got_text == want_text
    assert got_finish == ["stop" if ended else "length" for _, _, ended in want]
    np.testing.assert_allclose(got_scores, [score for _, score, _ in want], rtol=1e-9)
    assert any(ended for _, _, ended in want) or beam["early_stopping"] == "never"

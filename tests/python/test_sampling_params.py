"""The sampling parameters clients send (issue 42), end to end through
`folio serve` with the `openai` client: every parameter is accepted on both
endpoints and acts, the same seed gives the same text, an out-of-range
value is a 400 naming it and its range, an unknown field is a 400 naming
it; on SmolLM2, a repetition penalty makes a looping greedy run repeat
less, and speculative decoding leaves penalized output unchanged."""
import collections

import pytest

import smollm2
from test_server import Server

openai = pytest.importorskip("openai")
folio = pytest.importorskip("folio", reason="the folio extension is not built (FOLIO_BUILD_PYTHON=OFF) "
                                            "or not on PYTHONPATH")
from folio import _folio  # noqa: E402

# Every declared parameter away from its default (the built-in byte-level
# model: ids are bytes + an offset, 'A' is well inside the vocabulary).
EVERY = {
    "min_p": 0.01, "typical_p": 0.95, "top_n_sigma": 3.0, "repetition_penalty": 1.2,
    "presence_penalty": 0.5, "frequency_penalty": 0.3, "penalty_last_n": 32,
    "logit_bias": {"70": 2.0, "71": -100}, "allowed_token_ids": list(range(0, 250)),
    "bad_words": ["xyz"], "min_tokens": 2, "stop_token_ids": [5], "ignore_eos": True,
    "include_stop_str_in_output": True, "dry_multiplier": 0.8, "dry_base": 1.75,
    "dry_allowed_length": 2, "dry_penalty_last_n": 64, "dry_sequence_breakers": ["\n", ":"],
    "xtc_probability": 0.5, "xtc_threshold": 0.1,
}
OPENAI_NAMES = {"presence_penalty", "frequency_penalty", "logit_bias"}


def test_every_declared_parameter_is_covered():
    assert {d["name"] for d in _folio.request_params()} == set(EVERY)


@pytest.fixture(scope="module")
def builtin():
    s = Server()
    yield s
    assert s.stop() == 0, "".join(s.log)


def client(server):
    return openai.OpenAI(base_url=f"http://{server.host}:{server.port}/v1", api_key="none",
                         max_retries=0)


def split(params):
    """(keyword arguments the openai client has, extra_body)."""
    return ({k: v for k, v in params.items() if k in OPENAI_NAMES},
            {k: v for k, v in params.items() if k not in OPENAI_NAMES})


def complete(c, params, seed=7, temperature=0.8):
    native, extra = split(params)
    r = c.completions.create(model="builtin", prompt="the cat sat on the mat. the cat",
                             max_tokens=24, temperature=temperature, seed=seed, extra_body=extra,
                             **native)
    return r.choices[0].text


def chat(c, params, seed=7):
    native, extra = split(params)
    r = c.chat.completions.create(model="builtin", messages=[{"role": "user", "content": "hi"}],
                                  max_tokens=24, temperature=0.8, seed=seed, extra_body=extra,
                                  **native)
    return r.choices[0].message.content


def test_every_parameter_is_accepted_and_the_same_seed_repeats(builtin):
    c = client(builtin)
    for call in (complete, chat):
        first = call(c, EVERY)
        assert call(c, EVERY) == first
        assert isinstance(first, str)
    # They act: the same seed without them gives other text.
    assert complete(c, EVERY) != complete(c, {})
    # llama.cpp's names for the repetition penalty and its window.
    llama = {"repeat_penalty": 1.2, "repeat_last_n": 32}
    assert complete(c, llama) == complete(c, {"repetition_penalty": 1.2, "penalty_last_n": 32})


def test_logit_bias_and_allowed_token_ids_steer_greedy_output(builtin):
    c = client(builtin)
    letters = "abcdefghijklmnopqrstuvwxyz"
    status, reply = builtin.post("/tokenize", {"prompt": letters, "add_special_tokens": False})
    assert status == 200, reply
    ids = dict(zip(letters, reply["tokens"]))
    # allowed_token_ids: only letters come out (the built-in model's own
    # greedy text is mostly not even UTF-8).
    text = complete(c, {"allowed_token_ids": list(ids.values())}, temperature=0.0)
    assert text and set(text) <= set(letters), text
    # logit_bias -100 on its first letter: that letter never comes first.
    banned = complete(c, {"allowed_token_ids": list(ids.values()),
                          "logit_bias": {str(ids[text[0]]): -100}}, temperature=0.0)
    assert banned[0] != text[0] and set(banned) <= set(letters), banned
    # A positive bias makes a letter the greedy choice.
    other = next(ch for ch in letters if ch != text[0])
    boosted = complete(c, {"logit_bias": {str(ids[other]): 100}}, temperature=0.0)
    assert boosted.startswith(other), boosted


def error_of(call):
    with pytest.raises(openai.BadRequestError) as e:
        call()
    body = e.value.body
    return body.get("error", body) if isinstance(body, dict) else body


@pytest.mark.parametrize("name,value,needle", [
    ("repetition_penalty", 0, "(0, 100]"), ("presence_penalty", 2.5, "[-2, 2]"),
    ("frequency_penalty", -3, "[-2, 2]"), ("min_p", 1.5, "[0, 1]"), ("typical_p", -0.1, "[0, 1]"),
    ("top_n_sigma", -1, "[0, 100]"), ("penalty_last_n", -2, "[-1, "), ("min_tokens", -1, "[0, "),
    ("logit_bias", {"70": 101}, "[-100, 100]"), ("logit_bias", {"99999999": 1}, "vocabulary"),
    ("logit_bias", {str(i): 1 for i in range(301)}, "at most 300"),
    ("dry_base", 0.5, "[1, 100]"), ("xtc_threshold", 2, "[0, 1]"),
    ("allowed_token_ids", [10 ** 6], "vocabulary"), ("bad_words", [""], "non-empty"),
])
def test_out_of_range_is_a_400_naming_the_parameter_and_range(builtin, name, value, needle):
    c = client(builtin)
    for call in (complete, chat):
        err = error_of(lambda: call(c, {name: value}))
        assert err["param"] == name, err
        assert needle in err["message"], err


def test_unknown_fields_are_refused_by_name_and_documented_ones_ignored(builtin):
    c = client(builtin)
    for call in (complete, chat):
        err = error_of(lambda: call(c, {"repetition_penaltyy": 1.1}))
        assert err["param"] == "repetition_penaltyy" and "unknown field" in err["message"], err
    # user, metadata, store, service_tier: accepted, and they change nothing.
    plain = complete(c, {})
    assert complete(c, {"user": "u", "metadata": {"k": "v"}, "store": False,
                        "service_tier": "auto"}) == plain


def repeated_4grams(tokens):
    grams = collections.Counter(tuple(tokens[i:i + 4]) for i in range(len(tokens) - 3))
    return sum(n - 1 for n in grams.values() if n > 1)


@pytest.fixture(scope="module")
def smol():
    model = smollm2.require()
    s = Server("--model", str(model))
    yield s
    assert s.stop() == 0, "".join(s.log)


LOOP = [{"role": "user", "content": "List the days of the week, again and again, forever."}]


def greedy_tokens(server, **extra):
    status, reply = server.post("/v1/chat/completions", {
        "messages": LOOP, "max_tokens": 160, "temperature": 0, "logprobs": True, **extra})
    assert status == 200, reply
    return [t["token"] for t in reply["choices"][0]["logprobs"]["content"]]


def test_repetition_penalty_makes_a_looping_greedy_run_repeat_less(smol):
    plain = greedy_tokens(smol)
    penalized = greedy_tokens(smol, repetition_penalty=1.3)
    assert repeated_4grams(plain) >= 20, plain  # the prompt loops without a penalty
    assert repeated_4grams(penalized) < repeated_4grams(plain)
    dry = greedy_tokens(smol, dry_multiplier=0.8)
    assert repeated_4grams(dry) < repeated_4grams(plain)


def test_speculative_decoding_keeps_penalized_output(smol):
    params = {"repetition_penalty": 1.3, "frequency_penalty": 0.2, "dry_multiplier": 0.5,
              "min_tokens": 5}
    assert greedy_tokens(smol, num_draft_tokens=0, **params) == \
        greedy_tokens(smol, num_draft_tokens=6, **params)

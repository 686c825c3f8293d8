"""folio's logits processors and candidate filters against implementations
folio did not write: transformers' logits processors (torch on CPU) on
random logits and random token histories, NumPy transcriptions of OpenAI's
presence/frequency formula and of llama.cpp's DRY, XTC and top-n-sigma.

folio runs through folio._folio.apply_logits_processors and
sampling_candidates (python/src/sampling.cc): the sampling module's own
functions on one row, at token level.

Tolerances, and why:
- processors that only ban (-inf), min_tokens, bad words, allowed ids: equal.
- logit_bias: equal. Both add the bias rounded to float32 to a float32 logit.
- repetition_penalty: within 2 float32 ulps of the value. Both compute one
  float32 product or quotient, but PyTorch divides a tensor by a Python
  scalar as a product with the scalar's float32 reciprocal: one extra
  rounding, so a quotient may be an ulp apart.
- presence/frequency: equal to the NumPy transcription, which computes the
  formula in float64 and rounds once to float32, as folio does.
- min_p, typical_p (candidate sets): equal sets. transformers runs on the
  same float32 logits widened to float64, since folio's sampler weighs in
  double; then only a token within ~1e-12 of a cut could differ, and the
  test checks that no token is that close.
- DRY, XTC, top-n-sigma: equal to the transcription (the same float32
  arithmetic for DRY's penalty; candidate sets for the others).
"""
import math

import numpy as np
import pytest

folio = pytest.importorskip("folio", reason="the folio extension is not built (FOLIO_BUILD_PYTHON=OFF) "
                                            "or not on PYTHONPATH")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from folio import _folio  # noqa: E402

VOCAB = 300
TRIALS = 60
ULP = np.float32(2.0 ** -23)


def random_case(rng, alphabet=VOCAB, length=(1, 80)):
    logits = (rng.standard_normal(VOCAB) * 3).astype(np.float32)
    n = int(rng.integers(*length))
    tokens = [int(t) for t in rng.integers(0, alphabet, n)]
    prompt = int(rng.integers(0, n + 1))
    return logits, tokens, prompt


def hf(processor, tokens, logits, dtype=torch.float32):
    ids = torch.tensor([tokens], dtype=torch.long)
    scores = torch.tensor(logits[None, :].astype(np.float64), dtype=dtype)
    return processor(ids, scores)[0].numpy()


def folio_row(logits, tokens, prompt, **kw):
    return np.array(_folio.apply_logits_processors(logits, tokens, prompt, **kw), dtype=np.float32)


def test_repetition_penalty_matches_transformers():
    from transformers import RepetitionPenaltyLogitsProcessor
    rng = np.random.default_rng(1)
    for _ in range(TRIALS):
        logits, tokens, prompt = random_case(rng)
        penalty = float(rng.choice([0.5, 0.9, 1.1, 1.3, 2.0, rng.uniform(0.2, 3.0)]))
        want = hf(RepetitionPenaltyLogitsProcessor(penalty), tokens, logits)
        got = folio_row(logits, tokens, prompt, repetition_penalty=penalty)
        np.testing.assert_allclose(got, want, rtol=2 * ULP, atol=0)
        # penalty_last_n: the same as handing transformers only the window.
        last = int(rng.integers(1, len(tokens) + 1))
        want = hf(RepetitionPenaltyLogitsProcessor(penalty), tokens[-last:], logits)
        got = folio_row(logits, tokens, prompt, repetition_penalty=penalty, penalty_last_n=last)
        np.testing.assert_allclose(got, want, rtol=2 * ULP, atol=0)


def test_logit_bias_matches_sequence_bias():
    from transformers import SequenceBiasLogitsProcessor
    rng = np.random.default_rng(2)
    for _ in range(TRIALS):
        logits, tokens, prompt = random_case(rng)
        ids = rng.choice(VOCAB, size=int(rng.integers(1, 40)), replace=False)
        bias = {int(t): float(rng.uniform(-100, 100)) for t in ids}
        want = hf(SequenceBiasLogitsProcessor([[[t], b] for t, b in bias.items()]), tokens, logits)
        got = folio_row(logits, tokens, prompt, logit_bias=bias)
        np.testing.assert_array_equal(got, want)


def test_bad_words_match_no_bad_words():
    from transformers import NoBadWordsLogitsProcessor
    rng = np.random.default_rng(3)
    for _ in range(TRIALS):
        logits, tokens, prompt = random_case(rng, alphabet=12)
        words = []
        for _ in range(int(rng.integers(1, 6))):
            if rng.random() < 0.5 and len(tokens) >= 2:
                # A word whose prefix ends the history, so it bans its last token.
                k = int(rng.integers(1, min(4, len(tokens)) + 1))
                words.append(tokens[-k:] + [int(rng.integers(0, VOCAB))])
            else:
                words.append([int(t) for t in rng.integers(0, 12, int(rng.integers(1, 4)))])
        want = hf(NoBadWordsLogitsProcessor(words), tokens, logits)
        got = folio_row(logits, tokens, prompt, bad_words_ids=words)
        np.testing.assert_array_equal(got, want)


def test_min_tokens_matches_min_new_tokens_length():
    from transformers import MinNewTokensLengthLogitsProcessor
    rng = np.random.default_rng(4)
    for _ in range(TRIALS):
        logits, tokens, prompt = random_case(rng)
        ends = [int(t) for t in rng.choice(VOCAB, size=int(rng.integers(1, 4)), replace=False)]
        minimum = int(rng.integers(0, len(tokens) - prompt + 3))
        want = hf(MinNewTokensLengthLogitsProcessor(prompt, minimum, ends), tokens, logits)
        got = folio_row(logits, tokens, prompt, min_tokens=minimum, end_ids=ends)
        np.testing.assert_array_equal(got, want)


def presence_frequency_reference(logits, generated, presence, frequency):
    """OpenAI's formula: mu[j] - c[j] * alpha_frequency - float(c[j] > 0) * alpha_presence."""
    c = np.bincount(np.asarray(generated, dtype=np.int64), minlength=VOCAB).astype(np.float64)
    mu = logits.astype(np.float64) - c * frequency - (c > 0) * presence
    return mu.astype(np.float32)


def test_presence_and_frequency_match_openais_formula():
    rng = np.random.default_rng(5)
    for _ in range(TRIALS):
        logits, tokens, prompt = random_case(rng, alphabet=40)
        presence, frequency = (float(x) for x in rng.uniform(-2, 2, 2))
        want = presence_frequency_reference(logits, tokens[prompt:], presence, frequency)
        got = folio_row(logits, tokens, prompt, presence_penalty=presence,
                        frequency_penalty=frequency)
        np.testing.assert_array_equal(got, want)


def test_the_processors_compose_in_the_documented_order():
    """allowed ids, bad words, min_tokens, logit_bias, repetition, presence/frequency."""
    from transformers import (MinNewTokensLengthLogitsProcessor, NoBadWordsLogitsProcessor,
                              RepetitionPenaltyLogitsProcessor, SequenceBiasLogitsProcessor)
    rng = np.random.default_rng(6)
    for _ in range(TRIALS):
        logits, tokens, prompt = random_case(rng, alphabet=30)
        allowed = [int(t) for t in rng.choice(VOCAB, size=200, replace=False)]
        words = [[int(t)] for t in rng.integers(0, 30, 3)] + [tokens[-1:] + [7]]
        ends = [int(rng.integers(0, VOCAB))]
        minimum = len(tokens) - prompt + 1  # still banning
        bias = {int(t): float(rng.uniform(-5, 5)) for t in rng.integers(0, 30, 10)}
        penalty = float(rng.uniform(0.5, 2.0))
        presence, frequency = (float(x) for x in rng.uniform(-2, 2, 2))
        x = logits.copy()
        mask = np.full(VOCAB, -np.inf, dtype=np.float32)
        mask[allowed] = 0
        x = x + mask
        x = hf(NoBadWordsLogitsProcessor(words), tokens, x)
        x = hf(MinNewTokensLengthLogitsProcessor(prompt, minimum, ends), tokens, x)
        x = hf(SequenceBiasLogitsProcessor([[[t], b] for t, b in bias.items()]), tokens, x)
        x = hf(RepetitionPenaltyLogitsProcessor(penalty), tokens, x)
        want = presence_frequency_reference(x, tokens[prompt:], presence, frequency)
        got = folio_row(logits, tokens, prompt, allowed_token_ids=allowed, bad_words_ids=words,
                        min_tokens=minimum, end_ids=ends, logit_bias=bias,
                        repetition_penalty=penalty, presence_penalty=presence,
                        frequency_penalty=frequency)
        assert np.array_equal(np.isinf(got), np.isinf(want))
        finite = np.isfinite(want)
        # Presence/frequency may subtract from a value an ulp apart: a few
        # ulps of the larger of the operands.
        scale = np.maximum(np.abs(want[finite]), 4.0)
        np.testing.assert_array_less(np.abs(got[finite] - want[finite]), 4 * ULP * scale)


def candidates(logits, **kw):
    return set(_folio.sampling_candidates(logits, **kw)["ids"])


def test_min_p_matches_transformers():
    from transformers import MinPLogitsWarper
    rng = np.random.default_rng(7)
    for _ in range(TRIALS):
        logits = (rng.standard_normal(VOCAB) * 2).astype(np.float32)
        min_p = float(rng.uniform(0.001, 0.5))
        ratio = np.exp(logits.astype(np.float64) - logits.max())
        assert np.min(np.abs(ratio - min_p)) > 1e-9 * min_p  # no token at the cut
        want = hf(MinPLogitsWarper(min_p), [0], logits, torch.float64)
        assert candidates(logits, min_p=min_p) == set(np.flatnonzero(np.isfinite(want)))


def typical_scores(logits):
    logp = logits.astype(np.float64) - logits.max()
    logp -= np.log(np.exp(logp).sum())
    p = np.exp(logp)
    return np.abs(-logp - (-(p * logp).sum())), p


def test_typical_p_matches_transformers():
    from transformers import TypicalLogitsWarper
    rng = np.random.default_rng(8)
    for _ in range(TRIALS):
        logits = (rng.standard_normal(VOCAB) * 2).astype(np.float32)
        mass = float(rng.uniform(0.05, 0.99))
        scores, p = typical_scores(logits)
        order = np.argsort(scores, kind="stable")
        cumulative = np.cumsum(p[order])
        assert np.min(np.abs(cumulative - mass)) > 1e-9  # no cut decided by rounding
        want = hf(TypicalLogitsWarper(mass), [0], logits, torch.float64)
        assert candidates(logits, typical_p=mass) == set(np.flatnonzero(np.isfinite(want)))


def test_top_n_sigma_matches_llama_cpps_rule():
    rng = np.random.default_rng(9)
    for _ in range(TRIALS):
        logits = (rng.standard_normal(VOCAB) * 2).astype(np.float32)
        banned = rng.choice(VOCAB, size=20, replace=False)
        logits[banned] = -np.inf
        n = float(rng.uniform(0.1, 3.0))
        finite = logits[np.isfinite(logits)].astype(np.float64)
        cut = finite.max() - n * finite.std()  # population sigma over the finite logits
        assert np.min(np.abs(finite - cut)) > 1e-9
        want = set(np.flatnonzero(np.isfinite(logits) & (logits >= cut)))
        assert candidates(logits, top_n_sigma=n) == want


def test_xtc_matches_llama_cpps_rule():
    rng = np.random.default_rng(10)
    acted = 0
    for trial in range(TRIALS):
        logits = (rng.standard_normal(50) * 2).astype(np.float32)
        prob, threshold = float(rng.uniform(0.2, 1.0)), float(rng.uniform(0.0, 0.3))
        plain = _folio.sampling_candidates(logits, top_k=20)
        got = _folio.sampling_candidates(logits, top_k=20, xtc_probability=prob,
                                         xtc_threshold=threshold, seed=trial)
        ids, w = plain["ids"], np.array(plain["weights"])
        want = list(ids)
        u = got["xtc_draw"]
        assert u is not None
        if u <= prob:  # llama.cpp: it acts unless the draw exceeds the probability
            p = w / w.sum()
            above = 0
            while above < len(p) and p[above] >= threshold:
                above += 1
            if above >= 2:  # all but the least likely of the top choices go
                want = ids[above - 1:]
                acted += 1
        assert got["ids"] == want
    assert acted > 0


def dry_reference(logits, tokens, multiplier, base, allowed, last_n, breakers):
    """llama.cpp's DRY (src/llama-sampling.cpp, llama_sampler_dry_apply) as
    its comments describe it, without the Z-algorithm: the repeat ending at
    each earlier position is measured token by token."""
    out = logits.copy()
    m32, b32 = np.float32(multiplier), np.float32(base)
    if m32 == 0 or b32 < 1 or last_n == 0:
        return out
    w = tokens if last_n < 0 else tokens[-last_n:]
    n = len(w)
    if n <= allowed:
        return out

    def back(i):
        return w[n - 1 - i]

    limit = n  # step 1: the most recent breaker limits how far back a repeat reaches
    for i in range(n):
        longest = -1
        for head, tail in breakers:
            if head == back(i) and longest < len(tail) <= i and \
                    all(tail[o] == back(i - o - 1) for o in range(len(tail))):
                longest = len(tail)
        if longest >= 0:
            limit = i - longest
            break
    if limit < allowed:
        return out
    longest_repeat = {}  # steps 2 and 3: the longest repeat each next token would extend
    for j in range(n - 1):
        m = 0
        while m <= j and w[j - m] == w[n - 1 - m]:
            m += 1
        m = min(m, limit)
        if m >= allowed:
            longest_repeat[w[j + 1]] = max(longest_repeat.get(w[j + 1], 0), m)
    max_exponent = int(np.float32(88.7228391) / np.log(b32)) if b32 > np.float32(1.000001) else 0
    single = {head for head, tail in breakers if not tail}
    for t, m in longest_repeat.items():  # step 4
        if t in single:
            continue
        e = m - allowed
        if max_exponent > 0:
            e = min(e, max_exponent)
        penalty = np.float32(np.float64(m32) * np.float64(b32) ** e)
        out[t] = np.float32(out[t] - penalty)
    return out


def test_dry_matches_llama_cpps_algorithm():
    rng = np.random.default_rng(11)
    penalized = 0
    for _ in range(200):
        logits, tokens, prompt = random_case(rng, alphabet=int(rng.integers(2, 7)),
                                             length=(1, 120))
        breakers = []
        for _ in range(int(rng.integers(0, 3))):
            head = int(rng.integers(0, 7))
            tail = [int(t) for t in rng.integers(0, 7, int(rng.integers(0, 3)))]
            breakers.append((head, tail))
        kw = dict(dry_multiplier=float(rng.uniform(0.1, 2)), dry_base=float(rng.uniform(1, 3)),
                  dry_allowed_length=int(rng.integers(0, 5)),
                  dry_penalty_last_n=int(rng.choice([-1, 0, 5, 30])))
        want = dry_reference(logits, tokens, kw["dry_multiplier"], kw["dry_base"],
                             kw["dry_allowed_length"], kw["dry_penalty_last_n"], breakers)
        got = folio_row(logits, tokens, prompt, dry_breakers=breakers, **kw)
        np.testing.assert_array_equal(got, want)
        penalized += int(np.any(got != logits))
    assert penalized > 50  # the cases exercised the penalty, not only the early exits


def test_dry_exponent_cap_matches():
    logits = np.zeros(VOCAB, dtype=np.float32)
    tokens = [3] * 300
    want = dry_reference(logits, tokens, 0.8, 10.0, 2, -1, [])
    got = folio_row(logits, tokens, 0, dry_multiplier=0.8, dry_base=10.0)
    np.testing.assert_array_equal(got, want)
    assert math.isfinite(got[3]) and got[3] < -1e30

"""folio.LLM / folio.AsyncLLM (python/folio/): the engine from Python, with
vLLM's names. The built-in model needs no download; the real-model test
skips, saying why, without SmolLM2 (tests/python/smollm2.py).

The engine's determinism contract (docs/design.md) is checked through the
Python API: the same tokens and log-prob bits as `folio generate` and `folio
serve`, alone or batched, streamed or not, moved between engines or not.
"""
import asyncio
import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

folio = pytest.importorskip("folio", reason="the folio extension is not built "
                            "(FOLIO_BUILD_PYTHON=OFF) or not on PYTHONPATH")
if not hasattr(folio, "LLM"):
    pytest.skip("this build of folio has no LLM", allow_module_level=True)

import smollm2  # noqa: E402
from test_server import FOLIO, Server  # noqa: E402

from folio import LLM, AsyncLLM, SamplingParams  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ["a", "paged attention", "kv", "a block table maps pages", "continuous batching",
           "x" * 40, "a block table maps tokens", "z"]


@pytest.fixture(scope="module")
def llm():
    return LLM("builtin", threads=1)


@pytest.fixture(scope="module")
def server_builtin():
    s = Server()
    yield s
    assert s.stop() == 0, "".join(s.log)


def lp_bits(out):
    """A completion's log-probs as exact values: [(token, logprob, [(id, lp)])]."""
    return [sorted((t, lp.logprob, lp.rank) for t, lp in pos.items())
            for pos in out.outputs[0].logprobs]


def test_the_worked_example_continues_as_the_book_says(llm):
    out = llm.generate("a", SamplingParams(temperature=0, max_tokens=4), use_tqdm=False)
    assert len(out) == 1
    assert out[0].prompt_token_ids == [0, 99]
    assert out[0].outputs[0].token_ids == [70, 56, 216, 6]
    assert out[0].outputs[0].finish_reason == "length"
    assert out[0].finished and out[0].prompt == "a"


def test_same_tokens_as_folio_generate(llm):
    # `folio generate` on the built-in model: 12 positions, f32 KV (as LLM's
    # default), the prompt after the begin token; --raw prints the bytes.
    for flags, params in [
        ([], SamplingParams(temperature=0, max_tokens=8)),
        (["--temperature", "0.8", "--top-k", "40", "--seed", "5"],
         SamplingParams(temperature=0.8, top_k=40, seed=5, max_tokens=8)),
        (["--temperature", "1.3", "--top-p", "0.9", "--seed", "77"],
         SamplingParams(temperature=1.3, top_p=0.9, seed=77, max_tokens=9)),
    ]:
        cli = subprocess.run([FOLIO, "generate", "--prompt", "ab", "--raw", "--threads", "1",
                              "--max-tokens", str(params.max_tokens), *flags],
                             capture_output=True, timeout=60)
        assert cli.returncode == 0, cli.stderr
        ids = llm.generate("ab", params, use_tqdm=False)[0].outputs[0].token_ids
        assert cli.stdout == b"ab" + bytes(t - 2 for t in ids if t >= 2) + b"\n", flags


def test_same_tokens_and_logprob_bits_as_folio_serve(llm):
    server = Server()
    try:
        for body, params in [
            ({"temperature": 0}, SamplingParams(temperature=0)),
            ({"temperature": 0.9, "top_k": 20, "top_p": 0.95, "min_p": 0.01, "seed": 123},
             SamplingParams(temperature=0.9, top_k=20, top_p=0.95, min_p=0.01, seed=123)),
            ({"seed": 2**64 - 5}, SamplingParams(seed=2**64 - 5)),
        ]:
            status, resp = server.post("/v1/completions", {
                "model": "builtin", "prompt": "hello world", "max_tokens": 12, "logprobs": 3,
                **body})
            assert status == 200, resp
            choice = resp["choices"][0]
            p = dataclasses.replace(params, max_tokens=12, logprobs=3)
            out = llm.generate("hello world", p, use_tqdm=False)[0].outputs[0]
            assert out.text == choice["text"]
            want = choice["logprobs"]["token_logprobs"]
            got = [pos[t].logprob for t, pos in zip(out.token_ids, out.logprobs)]
            assert got == want  # float32 values, exactly
            for pos, top in zip(out.logprobs, choice["logprobs"]["top_logprobs"]):
                # The server keys alternatives by their text, so byte tokens
                # that all show as U+FFFD share one entry.
                alternatives = {lp.logprob for lp in pos.values() if lp.rank is not None}
                assert len(alternatives) == 3 and set(top.values()) <= alternatives
            assert out.cumulative_logprob == sum(got)
    finally:
        assert server.stop() == 0, "".join(server.log)


def test_same_seed_same_output_and_a_batch_equals_each_prompt_alone():
    params = [SamplingParams(temperature=0.9, top_k=30, seed=100 + i, max_tokens=20 + i,
                             logprobs=2) for i in range(len(PROMPTS))]
    alone = LLM("builtin", threads=1)
    want = [alone.generate(p, sp, use_tqdm=False)[0] for p, sp in zip(PROMPTS, params)]
    again = alone.generate(PROMPTS[1], params[1], use_tqdm=False)[0]
    assert lp_bits(again) == lp_bits(want[1])
    # A small pool, small pages, chunked prefill and few sequences at once:
    # the batch is scheduled nothing like the lone requests.
    for engine in [LLM("builtin", threads=2, page_size=4, num_pages=24, max_num_seqs=3,
                       max_num_batched_tokens=8, kv_dtype="f32"),
                   LLM("builtin", threads=1, prefix_caching=False)]:
        got = engine.generate(PROMPTS, params, use_tqdm=False)
        for g, w in zip(got, want):
            assert g.outputs[0].token_ids == w.outputs[0].token_ids
            assert g.outputs[0].text == w.outputs[0].text
            assert lp_bits(g) == lp_bits(w)
            assert g.outputs[0].cumulative_logprob == w.outputs[0].cumulative_logprob
    assert engine.stats()["pages_held_by_requests"] == 0


def test_outputs_come_in_input_order_and_token_prompts_work(llm):
    params = SamplingParams(temperature=0, max_tokens=3)
    ids = llm.get_tokenizer().encode("kv")
    outs = llm.generate(["kv", ids, {"prompt_token_ids": ids}, {"prompt": "kv"}], params,
                        use_tqdm=False)
    assert [o.outputs[0].token_ids for o in outs] == [outs[0].outputs[0].token_ids] * 4
    assert outs[1].prompt is None and outs[1].prompt_token_ids == ids
    assert len({o.request_id for o in outs}) == 4


def test_stop_strings_and_tokens(llm):
    free = llm.generate("hello", SamplingParams(temperature=0, max_tokens=20),
                        use_tqdm=False)[0].outputs[0]
    stop = free.text[5:7]
    out = llm.generate("hello", SamplingParams(temperature=0, max_tokens=20, stop=stop),
                       use_tqdm=False)[0].outputs[0]
    assert out.finish_reason == "stop" and out.text == free.text[:free.text.index(stop)]
    token = free.token_ids[3]
    out = llm.generate("hello", SamplingParams(temperature=0, max_tokens=20,
                                               stop_token_ids=[token]),
                       use_tqdm=False)[0].outputs[0]
    assert out.token_ids == free.token_ids[:free.token_ids.index(token) + 1]
    assert out.finish_reason == "stop" and out.stop_reason == token


def test_tokenizer_and_chat(llm):
    tok = llm.get_tokenizer()
    assert llm.tokenizer is tok
    assert tok.encode("ab") == [0, 99, 100]
    assert tok.encode("ab", add_special_tokens=False) == [99, 100]
    assert tok.decode([0, 99, 100, 1]) == "ab"
    assert tok.vocab_size == 258 and tok.eos_token_id is None and tok.bos_token_id == 0
    messages = [{"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    prompt = tok.apply_chat_template(messages)
    assert prompt == "system: be brief\nuser: hi\nassistant:"
    params = SamplingParams(temperature=0, max_tokens=5)
    chat = llm.chat(messages, params, use_tqdm=False)[0]
    assert chat.prompt == prompt
    assert chat.outputs[0].token_ids == llm.generate(prompt, params,
                                                     use_tqdm=False)[0].outputs[0].token_ids
    assert len(llm.chat([messages, messages[1:]], params, use_tqdm=False)) == 2
    with pytest.raises(ValueError, match="role"):
        llm.chat([{"role": "robot", "content": "x"}])
    # A template of one's own, rendered by folio's Jinja engine, with
    # variables of one's own.
    own = ("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
           "{% if add_generation_prompt %}<{{ who }}>{% endif %}")
    assert tok.apply_chat_template(messages, chat_template=own, who="bot") == \
        "<system>be brief<user>hi<bot>"
    assert tok.apply_chat_template(messages, chat_template=own, add_generation_prompt=False) == \
        "<system>be brief<user>hi"
    out = llm.chat(messages, params, chat_template=own, chat_template_kwargs={"who": "bot"},
                   use_tqdm=False)[0]
    assert out.prompt == "<system>be brief<user>hi<bot>"
    assert out.prompt_token_ids == tok.encode(out.prompt)
    with pytest.raises(ValueError, match="chat template raised: no"):
        llm.chat(messages, chat_template="{{ raise_exception('no') }}")
    with pytest.raises(ValueError):
        llm.chat(messages, chat_template="{% for %}")


def test_bad_inputs_raise_clear_exceptions(tmp_path, llm):
    with pytest.raises(FileNotFoundError, match="no model at"):
        LLM(str(tmp_path / "missing.gguf"))
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + b"\xff" * 7)  # truncated counts
    with pytest.raises(ValueError, match="bad.gguf"):
        LLM(str(bad))
    with pytest.raises(ValueError, match="kv_dtype"):
        LLM("builtin", kv_dtype="q9")
    with pytest.raises(ValueError, match="matmul_activations"):
        LLM("builtin", matmul_activations="q4")
    with pytest.raises(ValueError, match="max_num_seqs"):
        LLM("builtin", max_num_seqs=0)
    with pytest.raises(ValueError, match="step_delay_us"):
        LLM("builtin", step_delay_us=-1)
    with pytest.raises(ValueError, match="num_pages or kv_bytes"):
        LLM("builtin", num_pages=4, kv_bytes=1 << 20)
    with pytest.raises(ValueError, match="prompt_logprobs=2.*skip_special_tokens=False"):
        SamplingParams(prompt_logprobs=2, skip_special_tokens=False)
    with pytest.raises(TypeError, match="repetition_penaltyy"):
        SamplingParams(repetition_penaltyy=1.2)  # not a field: refused by name
    with pytest.raises(ValueError, match="n must be"):
        SamplingParams(n=0)
    with pytest.raises(ValueError, match="best_of must be"):
        SamplingParams(n=3, best_of=2)
    with pytest.raises(ValueError, match="temperature=0"):
        SamplingParams(use_beam_search=True)
    with pytest.raises(ValueError, match="beam search only"):
        SamplingParams(length_penalty=0.5)
    with pytest.raises(ValueError, match="early_stopping"):
        SamplingParams(use_beam_search=True, temperature=0, early_stopping="sometimes")
    with pytest.raises(ValueError, match="logprobs"):  # the engine's refusal, by name
        llm.generate("a", SamplingParams(use_beam_search=True, temperature=0, best_of=2,
                                         logprobs=1))
    for kwargs, field in [({"temperature": -1}, "temperature"), ({"top_p": 0}, "top_p"),
                          ({"top_k": -2}, "top_k"), ({"min_p": 1.5}, "min_p"),
                          ({"max_tokens": 0}, "max_tokens"), ({"logprobs": 21}, "logprobs"),
                          ({"stop": [""]}, "stop"), ({"repetition_penalty": 0},
                                                     "repetition_penalty"),
                          ({"best_of": 0}, "best_of"), ({"logit_bias": {1: 200.0}}, "logit_bias"),
                          ({"logit_bias": {i: 1.0 for i in range(301)}}, "logit_bias"),
                          ({"presence_penalty": 2.5}, "presence_penalty"),
                          ({"min_tokens": -1}, "min_tokens"), ({"bad_words": [""]}, "bad_words"),
                          ({"penalty_last_n": 1.5}, "penalty_last_n"),
                          ({"dry_sequence_breakers": "x"}, "dry_sequence_breakers")]:
        with pytest.raises(ValueError, match=field):
            SamplingParams(**kwargs)
    SamplingParams(best_of=1, logit_bias={}, top_k=0)  # neutral values pass
    with pytest.raises(ValueError, match="outside the vocabulary"):
        llm.generate([5000])
    with pytest.raises(ValueError, match="empty"):
        llm.generate([[]])
    with pytest.raises(ValueError, match="positions"):
        llm.generate("a", SamplingParams(max_tokens=600))
    small = LLM("builtin", page_size=4, num_pages=3)
    with pytest.raises(ValueError, match="pages; the pool has 3"):
        small.generate("a" * 20, SamplingParams(max_tokens=4))
    # A bad request in a batch refuses the batch before anything runs.
    before = llm.stats()["steps"]
    with pytest.raises(ValueError, match="prompt 1"):
        llm.generate(["a", [9999]], use_tqdm=False)
    assert llm.stats()["steps"] == before
    with pytest.raises(TypeError):
        llm.generate("a", {"max_tokens": 3})


def test_streams_grow_and_end_as_the_batch_does(llm):
    params = [SamplingParams(temperature=0.8, seed=i, max_tokens=10 + i, logprobs=1)
              for i in range(4)]
    want = llm.generate(PROMPTS[:4], params, use_tqdm=False)

    async def main():
        async with AsyncLLM("builtin", threads=1) as engine:
            async def one(i):
                seen = []
                async for out in engine.generate(PROMPTS[i], params[i], f"r{i}"):
                    seen.append(out)
                return seen
            return await asyncio.gather(*[one(i) for i in range(4)])

    for seen, w in zip(asyncio.run(main()), want):
        for prev, nxt in zip(seen, seen[1:]):  # cumulative outputs
            assert nxt.outputs[0].token_ids[:len(prev.outputs[0].token_ids)] == \
                prev.outputs[0].token_ids
            assert nxt.outputs[0].text.startswith(prev.outputs[0].text)
        assert all(not s.finished for s in seen[:-1]) and seen[-1].finished
        assert seen[-1].outputs[0].token_ids == w.outputs[0].token_ids
        assert lp_bits(seen[-1]) == lp_bits(w)


def test_100_concurrent_requests_with_random_aborts_free_every_page():
    rng = random.Random(17)
    reference = LLM("builtin", threads=1)

    async def main():
        engine = AsyncLLM("builtin", threads=1, max_num_seqs=16, page_size=4, num_pages=160)
        plans = [(i, rng.random() < 0.3, rng.randrange(1, 6)) for i in range(100)]

        async def one(i, abort, after):
            params = SamplingParams(temperature=1.0, seed=i, max_tokens=30 + i % 7)
            n, last = 0, None
            async for out in engine.generate(f"prompt {i} " * (1 + i % 5), params, f"req-{i}"):
                n, last = n + 1, out
                if abort and n == after:
                    await engine.abort(f"req-{i}")
                if i % 10 == 9 and n == 2:
                    break  # leaving the stream aborts the request too
            return i, abort, last, params

        results = await asyncio.gather(*[one(*p) for p in plans])
        for _ in range(100):  # breaking off aborts through the engine thread
            if engine.stats()["in_flight"] == 0:
                break
            await asyncio.sleep(0.01)
        stats = engine.stats()
        cleared = engine.reset_prefix_cache()
        await asyncio.sleep(0)
        engine.shutdown()
        return results, stats, cleared, engine

    results, stats, cleared, engine = asyncio.run(main())
    assert stats["in_flight"] == 0 and stats["num_running"] == 0 and stats["num_waiting"] == 0
    assert stats["pages_held_by_requests"] == 0
    assert stats["pages_used"] == stats["pages_cached"]
    assert cleared and engine.stats()["pages_free"] == engine.stats()["num_pages"]
    finished = [r for r in results if r[2].outputs[0].finish_reason == "length"]
    assert any(r[2].outputs[0].finish_reason == "abort" for r in results)
    assert len(finished) > 30
    for i, _, last, params in finished[:10]:
        alone = reference.generate(last.prompt, params, use_tqdm=False)[0].outputs[0]
        assert last.outputs[0].token_ids == alone.token_ids


def test_async_errors():
    async def main():
        async with AsyncLLM("builtin", threads=1) as engine:
            with pytest.raises(ValueError, match="outside the vocabulary"):
                async for _ in engine.generate([999], SamplingParams()):
                    pass
            stream = engine.generate("a", SamplingParams(max_tokens=200), "dup")
            first = await stream.__anext__()
            with pytest.raises(ValueError, match="already running"):
                async for _ in engine.generate("a", SamplingParams(), "dup"):
                    pass
            await stream.aclose()
            return first

    assert asyncio.run(main()).outputs[0].token_ids


def test_kv_snapshot_hand_off_continues_bit_for_bit(tmp_path):
    params = [SamplingParams(temperature=0.7, top_k=50, seed=11 + i, max_tokens=24, logprobs=2)
              for i in range(3)]
    prompts = PROMPTS[1:4]
    a = LLM("builtin", threads=1, kv_dtype="bf16")
    b = LLM("builtin", threads=1, kv_dtype="bf16", page_size=16, num_pages=64)
    want = a.generate(prompts, params, use_tqdm=False)
    path = tmp_path / "handoff.kv"
    snapshot = a.export_kv(prompts, params, decode_tokens=3, path=path)
    assert path.read_bytes() == snapshot
    assert a.stats()["pages_held_by_requests"] == 0
    assert len(folio.read_snapshot(str(path)).sequences) == 3
    got = b.import_kv(snapshot)
    for g, w in zip(got, want):
        assert g.prompt_token_ids == w.prompt_token_ids
        assert g.outputs[0].token_ids == w.outputs[0].token_ids
        assert g.outputs[0].text == w.outputs[0].text
        # Log-probs of the tokens decoded on b are a's, bit for bit.
        n = sum(pos is None for pos in g.outputs[0].logprobs)
        assert n >= 3
        assert [sorted((t, lp.logprob) for t, lp in pos.items())
                for pos in g.outputs[0].logprobs[n:]] == \
            [sorted((t, lp.logprob) for t, lp in pos.items()) for pos in w.outputs[0].logprobs[n:]]
    with pytest.raises(ValueError, match="KV dtype"):
        LLM("builtin", kv_dtype="f32").import_kv(path)

    async def streamed():  # running requests, exported and moved mid-stream
        async with AsyncLLM("builtin", threads=1, kv_dtype="bf16", builtin_context=4096) as src, \
                AsyncLLM("builtin", threads=1, kv_dtype="bf16", builtin_context=4096) as dst:
            # Long enough that it still runs when export_kv reaches the engine.
            stream = src.generate(prompts[0], long_params, "moving")
            await stream.__anext__()
            data = await src.export_kv("moving")
            await src.abort("moving")  # hand-off: drop it at the source
            [moved] = dst.import_kv(data, ["moved"])
            async for out in moved:
                pass
            src_stats = src.stats()
            async for last in stream:
                pass
            return out, src_stats, last

    long_params = dataclasses.replace(params[0], max_tokens=4000)
    out, src_stats, aborted = asyncio.run(streamed())
    assert aborted.outputs[0].finish_reason == "abort"
    assert out.request_id == "moved"
    long = LLM("builtin", threads=1, kv_dtype="bf16", builtin_context=4096)
    assert out.outputs[0].token_ids == \
        long.generate(prompts[0], long_params, use_tqdm=False)[0].outputs[0].token_ids
    assert src_stats["pages_held_by_requests"] == 0


def _logprob_bits(positions):
    return [sorted((t, lp.logprob) for t, lp in pos.items()) for pos in positions]


def test_async_prefill_and_resume_continue_bit_for_bit():
    """AsyncLLM.prefill hands one request over as snapshot bytes; resume
    continues one from what its client saw (tokens, text, rng_state) after
    its engine is gone. Both end as one engine alone would, with a stop
    string holding text back across the cut."""
    sp = SamplingParams(temperature=0.9, top_k=40, seed=23, max_tokens=30, logprobs=2,
                        stop=["q!"])

    async def main():
        async with AsyncLLM("builtin", threads=1) as a, \
                AsyncLLM("builtin", threads=1, num_pages=90, max_num_seqs=4,
                         max_num_batched_tokens=24) as b:
            want = None
            async for want in a.generate(PROMPTS[2], sp):
                pass
            snapshot, first = await a.prefill(PROMPTS[2], sp, decode_tokens=2)
            [moved] = b.import_kv(snapshot)
            async for handed in moved:
                pass
            cuts = []
            for cut in (1, 5, 17):
                # What a client had seen after `cut` tokens, exactly (prefill
                # stops the request between two steps there); then it is gone.
                _, seen = await a.prefill(PROMPTS[2], sp, decode_tokens=cut)
                assert len(seen.outputs[0].token_ids) == cut
                assert seen.outputs[0].rng_state is not None
                async for resumed in b.resume(seen.prompt_token_ids, seen.outputs[0], sp):
                    pass
                cuts.append((seen, resumed))
            done = await a.prefill(PROMPTS[2], dataclasses.replace(sp, max_tokens=1))
            return want, snapshot, first, handed, cuts, done, a.stats(), b.stats()

    want, snapshot, first, handed, cuts, done, a_stats, b_stats = asyncio.run(main())
    w = want.outputs[0]
    assert not first.finished and first.outputs[0].finish_reason is None
    assert first.outputs[0].token_ids == w.token_ids[:len(first.outputs[0].token_ids)]
    assert len(first.outputs[0].token_ids) >= 2
    assert isinstance(snapshot, bytes) and snapshot
    for got in [handed] + [r for _, r in cuts]:
        g = got.outputs[0]
        assert (g.token_ids, g.text, g.finish_reason) == (w.token_ids, w.text, w.finish_reason)
        known = sum(pos is None for pos in g.logprobs)
        assert known >= 1
        assert _logprob_bits(g.logprobs[known:]) == _logprob_bits(w.logprobs[known:])
    for seen, _ in cuts:
        assert w.text.startswith(seen.outputs[0].text)
    # max_tokens 1: finished before the hand-off, so no snapshot.
    assert done[0] is None and done[1].finished
    assert done[1].outputs[0].token_ids == w.token_ids[:1]
    assert a_stats["pages_held_by_requests"] == 0 and b_stats["pages_held_by_requests"] == 0


def test_resume_refuses_what_cannot_continue():
    async def main():
        async with AsyncLLM("builtin", threads=1) as e:
            sp = SamplingParams(temperature=0.5, seed=1, max_tokens=4)
            from folio.outputs import CompletionOutput
            full = CompletionOutput(0, "", [70, 71, 72, 73], None, None, rng_state=9)
            with pytest.raises(ValueError, match="already has its 4 tokens"):
                e.resume([0, 70], full, sp)
            bad = CompletionOutput(0, "", [70, 10**6], None, None, rng_state=9)
            with pytest.raises(ValueError, match="output token 1"):
                e.resume([0, 70], bad, sp)
            with pytest.raises(ValueError, match="n > 1"):
                e.resume([0, 70], bad, SamplingParams(n=2, seed=1))
            with pytest.raises(ValueError, match="no rng_state"):
                e.resume([0, 70], CompletionOutput(0, "", [70], None, None), sp)
            return e.stats()

    assert asyncio.run(main())["num_waiting"] == 0


def test_real_model_greedy_batch():
    model = smollm2.require()
    llm = LLM(str(model), threads=0, max_num_seqs=4)
    assert llm.model_info["chat_template"] == "model"  # its own Jinja template
    prompts = ["The capital of France is", "def add(a, b):\n    return", "Water boils at"]
    outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=4), use_tqdm=False)
    assert outs[0].outputs[0].text.startswith(" Paris"), outs[0].outputs[0].text
    assert [o.prompt for o in outs] == prompts
    chat = llm.chat([{"role": "user",
                      "content": "What is the capital of France? Answer in one sentence."}],
                    SamplingParams(temperature=0, max_tokens=24), use_tqdm=False)[0]
    assert "Paris" in chat.outputs[0].text, chat.outputs[0].text


def test_real_model_runs_the_integer_path_by_default_as_folio_generate_does():
    """LLM's default matmul_activations is "q8", the packed integer matmuls:
    the same greedy tokens as `folio generate` with no flag (whose default
    is q8 too) and as an explicit "q8"; "f32", the exact mode, gives other
    logprobs. info names the mode."""
    model = smollm2.require()
    params = SamplingParams(temperature=0, max_tokens=8, logprobs=1)
    llm = LLM(str(model), threads=2, max_num_seqs=2)
    assert llm._core.info["matmul_activations"] == "q8"
    got = llm.generate("The capital of France is", params, use_tqdm=False)[0].outputs[0]
    explicit = LLM(str(model), threads=2, max_num_seqs=2, matmul_activations="q8")
    again = explicit.generate("The capital of France is", params, use_tqdm=False)[0].outputs[0]
    assert (again.token_ids, again.logprobs) == (got.token_ids, got.logprobs)
    exact = LLM(str(model), threads=2, max_num_seqs=2, matmul_activations="f32")
    assert exact._core.info["matmul_activations"] == "f32"
    other = exact.generate("The capital of France is", params, use_tqdm=False)[0].outputs[0]
    assert other.logprobs != got.logprobs
    out = subprocess.run([FOLIO, "generate", "--model", str(model), "--prompt",
                          "The capital of France is", "--max-tokens", "8", "--threads", "2",
                          "--raw"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "The capital of France is" + got.text.rstrip()


def run_example(name, *args, timeout=60):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, str(ROOT / "examples" / name), *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_examples_run():
    for name in ["offline_batch.py", "kv_handoff.py"]:
        r = run_example(name)
        assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("same as on one engine") == 3


def test_streaming_server_example():
    import http.client
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(ROOT / "examples" / "stream_server.py"),
                             "--port", "0"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening on http://"), line
        host, port = line.split("//")[1].strip().split(":")
        c = http.client.HTTPConnection(host, int(port), timeout=30)
        c.request("POST", "/", body=json.dumps({"prompt": "hello", "max_tokens": 12, "seed": 3}))
        r = c.getresponse()
        events = [ln[6:] for ln in r.read().decode().splitlines() if ln.startswith("data: ")]
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        assert chunks[-1]["finish_reason"] == "length"
        want = LLM("builtin", threads=1).generate(
            "hello", SamplingParams(max_tokens=12, seed=3), use_tqdm=False)[0].outputs[0].text
        assert "".join(ch["text"] for ch in chunks) == want
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_examples_type_check_with_mypy_strict(tmp_path):
    # The package's pure-Python layer and the examples, strictly; the
    # extension's stubs are nanobind's stubgen output and only read.
    pytest.importorskip("mypy", reason="mypy is not installed (tools/requirements-test.txt)")
    package = Path(folio.__file__).parent.parent
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\n[mypy-folio._folio]\nignore_errors = True\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["MYPYPATH"] = str(package)
    r = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(config),
                        "--cache-dir", str(tmp_path / "cache"), str(package / "folio"),
                        *[str(ROOT / "examples" / n) for n in
                          ["offline_batch.py", "kv_handoff.py", "stream_server.py"]]],
                       capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(os.environ.get("FOLIO_SLOW") != "1",
                    reason="set FOLIO_SLOW=1 to `pip install .` into a fresh venv (minutes)")
def test_pip_install_in_a_fresh_venv(tmp_path):
    # Offline: the build backend and nanobind come from this interpreter's
    # packages (--system-site-packages, --no-build-isolation).
    pytest.importorskip("scikit_build_core", reason="scikit-build-core is not installed "
                        "(tools/requirements-test.txt)")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                        str(ROOT)], capture_output=True, text=True, timeout=3600,
                       env={**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": "2"})
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([py, "-c", "import folio; o = folio.LLM('builtin').generate('a', "
                        "folio.SamplingParams(temperature=0, max_tokens=4), use_tqdm=False); "
                        "print(o[0].outputs[0].token_ids, folio.__file__)"],
                       capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("[70, 56, 216, 6]") and str(venv) in r.stdout


def test_speculative_config_changes_nothing_but_speed():
    """vLLM's speculative_config with prompt lookup: the same tokens and
    log-prob values, greedy and sampled; other methods are refused."""
    prompts = ["abcabcabcabcabc", "the cat sat on the mat, the cat sat on the"]
    plain = LLM("builtin", threads=1)
    spec = LLM("builtin", threads=1, speculative_config={
        "method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 3})
    assert spec._core.info["num_speculative_tokens"] == 4  # the engine got it
    for params in (SamplingParams(temperature=0.0, max_tokens=40, logprobs=2),
                   SamplingParams(temperature=0.9, max_tokens=40, seed=3, logprobs=2)):
        want = plain.generate(prompts, params)
        got = spec.generate(prompts, params)
        for a, b in zip(want, got):
            assert a.outputs[0].token_ids == b.outputs[0].token_ids
            assert a.outputs[0].logprobs == b.outputs[0].logprobs
    with pytest.raises(ValueError, match="method 'eagle'"):
        LLM("builtin", speculative_config={"method": "eagle"})
    with pytest.raises(ValueError, match="draft_model"):
        LLM("builtin", speculative_config={"draft_model": "x"})
    with pytest.raises(ValueError, match="'model' goes with method 'draft_model'"):
        LLM("builtin", speculative_config={"method": "draft_model"})
    with pytest.raises(FileNotFoundError, match="speculative_config model"):
        LLM("builtin", speculative_config={"model": "/nonexistent/draft.gguf"})


def test_a_draft_model_changes_nothing_but_speed():
    """speculative_config={"model": ...}: a draft model (the built-in model
    drafting for itself) proposes, the engine verifies; the same tokens and
    log-probs, greedy and sampled, with drafts accepted."""
    prompts = ["a draft model", "kv"]
    plain = LLM("builtin", threads=1)
    spec = LLM("builtin", threads=1, speculative_config={"model": "builtin",
                                                         "num_speculative_tokens": 3})
    for params in (SamplingParams(temperature=0.0, max_tokens=24, logprobs=1),
                   SamplingParams(temperature=0.9, max_tokens=24, seed=8, logprobs=1)):
        want = plain.generate(prompts, params, use_tqdm=False)
        got = spec.generate(prompts, params, use_tqdm=False)
        for a, b in zip(want, got):
            assert a.outputs[0].token_ids == b.outputs[0].token_ids
            assert a.outputs[0].logprobs == b.outputs[0].logprobs
    stats = spec.stats()
    assert stats["draft_accepted_tokens"] > 0 and stats["draft_tokens"] > 0


def test_n_samples_share_one_prefill_and_equal_one_sample_requests(llm):
    """outputs[i] of an n-sample request equals a one-sample request seeded
    as the engine seeds sample i; sample 0 keeps the request's seed."""
    params = SamplingParams(temperature=1.0, max_tokens=10, seed=42, n=3, logprobs=1)
    out = llm.generate("parallel", params)[0]
    assert [c.index for c in out.outputs] == [0, 1, 2] and out.finished
    assert all(c.finish_reason == "length" and len(c.token_ids) == 10 for c in out.outputs)
    one = llm.generate("parallel", SamplingParams(temperature=1.0, max_tokens=10, seed=42,
                                                  logprobs=1))[0].outputs[0]
    assert out.outputs[0].token_ids == one.token_ids
    assert out.outputs[0].cumulative_logprob == one.cumulative_logprob
    assert len({tuple(c.token_ids) for c in out.outputs}) > 1

    async def stream():
        engine = AsyncLLM("builtin", threads=1)
        last = None
        async for o in engine.generate("parallel", params, "r"):
            last = o
        return last

    streamed = asyncio.run(stream())
    assert [c.token_ids for c in streamed.outputs] == [c.token_ids for c in out.outputs]


def test_best_of_returns_the_n_most_likely_of_its_samples(llm):
    """best_of=4, n=2 runs the four samples n=4 would (same seed) and returns
    the two with the highest cumulative log-probability, best first; the
    caller did not ask for log-probs, so none come back."""
    every = llm.generate("paged", SamplingParams(n=4, seed=5, max_tokens=8, logprobs=0),
                         use_tqdm=False)[0].outputs
    best = llm.generate("paged", SamplingParams(n=2, best_of=4, seed=5, max_tokens=8),
                        use_tqdm=False)[0].outputs
    want = sorted(every, key=lambda o: -o.cumulative_logprob)[:2]
    assert [o.token_ids for o in best] == [o.token_ids for o in want]
    assert [o.cumulative_logprob for o in best] == [o.cumulative_logprob for o in want]
    assert [o.index for o in best] == [0, 1]
    assert all(o.logprobs is None for o in best)


def test_beam_search_matches_the_numpy_reference_and_the_server(llm, server_builtin):
    """use_beam_search (width best_of) through the Python engine: the same
    hypotheses as the NumPy beam search over `folio logits` and as the
    server's beam_search extension, cumulative_logprob their summed
    log-probabilities."""
    import numpy as np
    import beam_reference
    prompt = [0] + [2 + b for b in b"kv cache"]
    params = SamplingParams(n=2, best_of=3, use_beam_search=True, temperature=0,
                            length_penalty=0.7, early_stopping="never", max_tokens=5)
    got = llm.generate({"prompt_token_ids": prompt}, params, use_tqdm=False)[0].outputs

    def logits(ids):
        out = subprocess.run([FOLIO, "logits", "--tokens", ",".join(map(str, ids))],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["logits"][-1]

    want = beam_reference.beam_search(logits, prompt, 3, 5, set(), 0.7, "never", 2)
    assert [o.token_ids for o in got] == [tokens for tokens, _, _ in want]
    np.testing.assert_allclose([o.cumulative_logprob for o in got],
                               [score * len(tokens) ** 0.7 for tokens, score, _ in want],
                               rtol=1e-9)
    assert [o.finish_reason for o in got] == ["length", "length"]
    status, reply = server_builtin.post("/v1/completions", {
        "prompt": prompt, "n": 2, "max_tokens": 5,
        "beam_search": {"num_beams": 3, "length_penalty": 0.7, "early_stopping": "never"}})
    assert status == 200, reply
    assert [c["text"] for c in reply["choices"]] == [o.text for o in got]


def test_every_declared_request_parameter_is_a_sampling_params_field():
    """engine/request_params.h declares request parameters once; each must be
    a SamplingParams field of the same name, checked against its row."""
    from dataclasses import fields
    from folio import _folio
    names = {f.name for f in fields(SamplingParams)}
    declared = _folio.request_params()
    assert {"min_p", "stop_token_ids", "ignore_eos"} <= {d["name"] for d in declared}
    for d in declared:
        assert d["name"] in names, d["name"]
    with pytest.raises(ValueError, match="stop_token_ids"):
        SamplingParams(stop_token_ids=list(range(65)))
    with pytest.raises(ValueError, match="ignore_eos"):
        SamplingParams(ignore_eos=1)

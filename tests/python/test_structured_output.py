"""Structured output end to end on the real SmolLM2: every front end (HTTP
with the `openai` client, folio.LLM, `folio generate`) constrains the same
way, every reply is checked by `jsonschema` (an implementation folio did not
write), and refusals name what was refused.

The schemas are the project's own (a bounded set a small model finishes in
few tokens); the MaskBench soundness and differential runs against
llguidance are benchmarks (bench/), not tests.
"""
import json
import re
import subprocess

import pytest

import smollm2
from test_server import FOLIO, Server

# Bounded so that a small model reaches the end within max_tokens: every
# string has a maxLength or an enum, every number a range.
SCHEMAS = [
    {"type": "object",
     "properties": {"city": {"type": "string", "maxLength": 16},
                    "country": {"type": "string", "enum": ["France", "Germany", "Italy"]},
                    "population_millions": {"type": "integer", "minimum": 0, "maximum": 99}},
     "required": ["city", "country", "population_millions"], "additionalProperties": False},
    {"type": "object",
     "properties": {"answer": {"type": "boolean"},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1}},
     "required": ["answer"], "additionalProperties": False},
    {"type": "array", "items": {"type": "string", "enum": ["red", "green", "blue"]},
     "minItems": 1, "maxItems": 3},
    {"type": "object",
     "properties": {"date": {"type": "string", "format": "date"},
                    "id": {"type": "string", "format": "uuid"}},
     "required": ["date", "id"], "additionalProperties": False},
    {"$defs": {"leaf": {"type": "integer", "minimum": 1, "maximum": 9}},
     "type": "object",
     "properties": {"a": {"$ref": "#/$defs/leaf"},
                    "b": {"anyOf": [{"$ref": "#/$defs/leaf"}, {"type": "null"}]}},
     "required": ["a", "b"], "additionalProperties": False},
]
QUESTION = [{"role": "user", "content": "Describe Paris as JSON."}]


def validator(schema):
    import jsonschema
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def check_reply(schema, text, finish_reason):
    """A finished reply is an instance of the schema; one cut by max_tokens
    is a prefix the grammar allowed (only its finish reason is checked)."""
    if finish_reason == "length":
        return
    assert finish_reason == "stop", (finish_reason, text)
    validator(schema).validate(json.loads(text))


@pytest.fixture(scope="module")
def server():
    model = smollm2.require()
    s = Server("--model", str(model))
    yield s
    assert s.stop() == 0, "".join(s.log)


def test_openai_client_json_schema_replies_validate(server):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"http://{server.host}:{server.port}/v1", api_key="none")
    name = client.models.list().data[0].id
    for schema in SCHEMAS:
        for temperature, seed in ((0.0, 0), (0.8, 1), (0.8, 2)):
            r = client.chat.completions.create(
                model=name, messages=QUESTION, max_tokens=96, temperature=temperature, seed=seed,
                response_format={"type": "json_schema",
                                 "json_schema": {"name": "t", "schema": schema, "strict": True}})
            c = r.choices[0]
            check_reply(schema, c.message.content, c.finish_reason)


def test_every_http_field_constrains_and_streams_the_same(server):
    schema = SCHEMAS[0]
    body = {"messages": QUESTION, "max_tokens": 96, "temperature": 0}
    texts = []
    for extra in ({"response_format": {"type": "json_schema",
                                       "json_schema": {"name": "t", "schema": schema}}},
                  {"structured_outputs": {"json": schema}},
                  {"guided_json": json.dumps(schema)},
                  {"json_schema": schema}):
        status, reply = server.post("/v1/chat/completions", {**body, **extra})
        assert status == 200, reply
        c = reply["choices"][0]
        check_reply(schema, c["message"]["content"], c["finish_reason"])
        texts.append(c["message"]["content"])
    assert len(set(texts)) == 1, texts  # one constraint, one greedy output
    events = server.stream("/v1/chat/completions", {**body, "structured_outputs": {"json": schema}})
    streamed = "".join(json.loads(e)["choices"][0]["delta"].get("content") or ""
                       for e in events if e != "[DONE]" and json.loads(e)["choices"])
    assert streamed == texts[0]

    status, reply = server.post("/v1/completions", {"prompt": "Favourite colour:", "max_tokens": 8,
                                                    "guided_choice": [" red", " green"]})
    assert status == 200 and reply["choices"][0]["text"] in (" red", " green"), reply
    status, reply = server.post("/v1/completions", {"prompt": "Year:", "max_tokens": 8,
                                                    "guided_regex": "[12][0-9]{3}"})
    assert status == 200 and re.fullmatch("[12][0-9]{3}", reply["choices"][0]["text"]), reply
    status, reply = server.post("/v1/completions", {"prompt": "Answer:", "max_tokens": 8,
                                                    "grammar": 'root ::= " yes" | " no"'})
    assert status == 200 and reply["choices"][0]["text"] in (" yes", " no"), reply


def test_refusals_name_the_field_and_keyword(server):
    status, reply = server.post("/v1/chat/completions", {
        "messages": QUESTION,
        "response_format": {"type": "json_schema", "json_schema": {
            "name": "t", "schema": {"type": "object", "propertyNames": {"maxLength": 3}}}}})
    assert status == 400 and reply["error"]["param"] == "response_format", reply
    assert "propertyNames" in reply["error"]["message"]
    status, reply = server.post("/v1/completions", {"prompt": "a", "guided_regex": "(?<=a)b"})
    assert status == 400 and reply["error"]["param"] == "guided_regex", reply
    # A count past the repeat limit is refused, not compiled.
    bomb = {"type": "array", "maxItems": 10000,
            "items": {"type": "string", "maxLength": 1000000}}
    status, reply = server.post("/v1/completions", {"prompt": "a", "guided_json": bomb})
    assert status == 400 and reply["error"]["param"] == "guided_json", reply
    # The server still answers after the refusals.
    status, reply = server.post("/v1/completions", {"prompt": "a", "max_tokens": 2})
    assert status == 200


def test_llm_and_cli_give_the_http_server_s_greedy_output(server):
    from folio import LLM, SamplingParams, StructuredOutputsParams
    model = smollm2.require()
    schema = SCHEMAS[1]
    prompt = "Is Paris the capital of France? Answer as JSON: "
    status, reply = server.post("/v1/completions", {"prompt": prompt, "max_tokens": 64,
                                                    "temperature": 0,
                                                    "structured_outputs": {"json": schema}})
    assert status == 200, reply
    http_text = reply["choices"][0]["text"]
    check_reply(schema, http_text, reply["choices"][0]["finish_reason"])

    llm = LLM(str(model), threads=2)
    out = llm.generate(prompt, SamplingParams(
        temperature=0, max_tokens=64, structured_outputs=StructuredOutputsParams(json=schema)),
        use_tqdm=False)[0].outputs[0]
    assert out.text == http_text
    # n > 1 forks: every sample satisfies the grammar.
    many = llm.generate(prompt, SamplingParams(
        temperature=0.9, seed=3, n=4, max_tokens=64,
        structured_outputs={"json": json.dumps(schema)}), use_tqdm=False)[0].outputs
    for o in many:
        check_reply(schema, o.text, o.finish_reason)
    choice = llm.generate("Pick a colour:", SamplingParams(
        temperature=0.8, seed=5, max_tokens=8,
        guided_decoding={"choice": [" cyan", " magenta"]}), use_tqdm=False)[0].outputs[0]
    assert choice.text in (" cyan", " magenta")
    with pytest.raises(ValueError, match="propertyNames"):
        llm.generate(prompt, SamplingParams(structured_outputs={"json": {
            "type": "object", "propertyNames": {}}}), use_tqdm=False)
    with pytest.raises(ValueError, match="exactly one"):
        SamplingParams(structured_outputs={"regex": "a", "choice": ["a"]})
    with pytest.raises(ValueError, match="whitespace_pattern"):
        StructuredOutputsParams(json={}, whitespace_pattern=" ")
    with pytest.raises(ValueError, match="use_beam_search"):
        SamplingParams(temperature=0, use_beam_search=True, n=2,
                       structured_outputs={"regex": "a"})
    del llm

    path = server_tmp_schema(schema)
    cli = subprocess.run([FOLIO, "generate", "--model", str(model), "--prompt", prompt,
                          "--max-tokens", "64", "--threads", "2", "--json-schema", path],
                         capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout == prompt + http_text + "\n"


def server_tmp_schema(schema):
    import tempfile
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(schema, f)
    f.close()
    return f.name

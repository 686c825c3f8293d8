"""gpt-oss tool calls held to the harmony grammar (docs/tool-calling.md,
"Harmony"), end to end on a tiny random gpt-oss checkpoint.

The checkpoint is transformers' GptOssForCausalLM (two layers, hidden size
64, random weights) beside a byte-level BPE tokenizer trained here with the
`tokenizers` package, whose special tokens are gpt-oss's harmony markers,
and gpt-oss's chat template. A random model writes nothing on its own, so
whatever it writes under tool_choice "required", a named function or a
strict tool comes from the grammar: `folio serve` must return a call whose
arguments validate against the tool's schema (`jsonschema`), and the raw
reply (LLM.chat's text, the same seed) must read as that call in
openai-harmony's StreamableParser (OpenAI's own reader of the format; its
vocabulary is set up offline as test_harmony_output.py does). The markers
are special tokens here, so a marker the grammar asks for is one token, as
in gpt-oss.
"""
import json
import random
import shutil

import pytest

from test_chat_templates import CORPUS
from test_harmony_output import harmony  # noqa: F401 (a fixture)
from test_server import Server
from test_tool_calling import PARAMETERS, QUESTION, TOOLS, without_ids

jsonschema = pytest.importorskip("jsonschema")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|start|>", "<|channel|>", "<|constrain|>",
            "<|message|>", "<|end|>", "<|return|>", "<|call|>"]
SEEDS = range(10)
RECIPIENT_TOKEN = " to=functions."
MAX_TOKENS = 1500


def tokenizer_corpus(template):
    """Text the BPE merges are learned from: the template's own words, the
    harmony headers and some JSON, so tokens cross the grammar's literals."""
    rng = random.Random(5)
    lines = [template]
    for _ in range(200):
        name = rng.choice(["get_weather", "search", "no_args"])
        lines.append(f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>")
        lines.append(json.dumps({"city": rng.choice(["Paris", "Oslo"]), "unit": "celsius"}))
        lines.append("<|channel|>analysis<|message|>The user asks for the weather.<|end|>")
    return lines


@pytest.fixture(scope="module")
def gpt_oss_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpt_oss_harmony")
    template = (CORPUS / "harmony_gptoss.jinja").read_text(encoding="utf-8")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=512, special_tokens=SPECIALS, show_progress=False,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(tokenizer_corpus(template), trainer)
    # One ordinary (not special) added token that spans a header's
    # separator and the recipient's start, as BPE merges in real
    # vocabularies span the grammar's pieces; the "auto" test leans on it.
    tok.add_tokens([tokenizers.AddedToken(RECIPIENT_TOKEN, special=False, normalized=False)])
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<|startoftext|>", "eos_token": "<|return|>",
         "tokenizer_class": "PreTrainedTokenizerFast"}))
    shutil.copy(CORPUS / "harmony_gptoss.jinja", folder / "chat_template.jinja")
    cfg = transformers.GptOssConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=32,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=8192, num_local_experts=4, num_experts_per_tok=2,
        sliding_window=64, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        attn_implementation="eager")
    torch.manual_seed(3)
    model = transformers.GptOssForCausalLM(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.randn_like(p) * (0.3 if "norm" in name else 0.15))
    model.save_pretrained(folder, safe_serialization=True)
    return folder


@pytest.fixture(scope="module")
def server(gpt_oss_folder):
    s = Server("--model", str(gpt_oss_folder))
    yield s
    assert s.stop() == 0, "".join(s.log)


@pytest.fixture(scope="module")
def llm(gpt_oss_folder):
    from folio import LLM
    return LLM(str(gpt_oss_folder))


def ask(server, seed, **fields):
    status, reply = server.post("/v1/chat/completions", {
        "messages": QUESTION, "tools": TOOLS, "seed": seed, "temperature": 1.0,
        "max_tokens": MAX_TOKENS, **fields})
    assert status == 200, reply
    return reply["choices"][0]


def raw_reply(llm, seed, logit_bias=None, tools=TOOLS, max_tokens=MAX_TOKENS, **fields):
    """LLM.chat's reply for the same request: its raw text and message."""
    from folio import SamplingParams
    bias = {int(k): v for k, v in (logit_bias or {}).items()}
    params = SamplingParams(seed=seed, temperature=1.0, max_tokens=max_tokens,
                            logit_bias=bias or None)
    return llm.chat(QUESTION, params, tools=tools, use_tqdm=False, **fields)[0].outputs[0]


def harmony_messages(harmony, text, last_only=False):
    """openai-harmony's reading of a reply's text (after the prompt's
    <|start|>assistant): its messages, or with last_only the last message
    alone (from its <|start|>), for a reply whose earlier headers are free
    words that openai-harmony would refuse."""
    oh, enc = harmony
    role = oh.Role.ASSISTANT
    if last_only and "<|start|>" in text:
        text, role = text[text.rindex("<|start|>"):], None
    parser = oh.StreamableParser(enc, role=role)
    for t in enc.encode(text, allowed_special="all"):
        parser.process(t)
    parser.process_eos()
    return parser.messages


def check_call(harmony, llm, choice, seed, names, **fields):
    """The server's reply is one call of one of `names`, its arguments
    valid; LLM.chat's raw text for the same seed holds that call, read by
    openai-harmony. Returns (name, whether the reply had reasoning)."""
    assert choice["finish_reason"] == "tool_calls", choice
    message = choice["message"]
    [call] = message["tool_calls"]
    name = call["function"]["name"]
    assert name in names, call
    args = json.loads(call["function"]["arguments"])
    jsonschema.validate(args, PARAMETERS[name])
    out = raw_reply(llm, seed, **fields)
    assert [(c.function.name, c.function.arguments) for c in out.tool_calls] == \
        [(name, call["function"]["arguments"])], (out.text, message)
    assert (out.reasoning_content or None) == message.get("reasoning_content"), out.text
    messages = harmony_messages(harmony, out.text)
    assert messages, out.text
    last = messages[-1]
    assert last.recipient == "functions." + name, out.text
    assert last.channel == "commentary", out.text
    assert json.loads("".join(c.text for c in last.content)) == args, out.text
    for m in messages[:-1]:
        assert m.channel == "analysis" and not m.recipient, out.text
    return name, bool(message.get("reasoning_content"))


def test_required_returns_a_valid_call_that_openai_harmony_reads(server, llm, harmony):
    names = set()
    for seed in SEEDS:
        choice = ask(server, seed, tool_choice="required")
        name, _ = check_call(harmony, llm, choice, seed, PARAMETERS.keys(),
                             tool_choice="required")
        names.add(name)
    # The grammar leaves the model its choice of tool.
    assert len(names) >= 2, names


def test_analysis_may_come_before_the_call(server, llm, harmony, gpt_oss_folder):
    """The forced grammar lets gpt-oss think first. This random model
    rarely takes the analysis channel on its own, so logit_bias leans it
    there (<|channel|> first, then "analysis", and <|end|>, which the
    grammar allows only to close the analysis): the calls still validate, and some replies carry
    reasoning that openai-harmony reads as analysis messages first."""
    tok = tokenizers.Tokenizer.from_file(str(gpt_oss_folder / "tokenizer.json"))
    bias = {str(tok.token_to_id(t)): b for t, b in
            (("<|channel|>", 4.0), ("analysis", 4.0), ("<|end|>", 4.0))}
    reasoned = 0
    for seed in SEEDS:
        fields = {"tool_choice": "required", "logit_bias": bias}
        choice = ask(server, seed, **fields)
        _, reasoning = check_call(harmony, llm, choice, seed, PARAMETERS.keys(), **fields)
        reasoned += reasoning
    assert reasoned >= 3, reasoned


def test_a_named_function_is_the_call(server, llm, harmony):
    for name in ("get_weather", "search"):
        named = {"type": "function", "function": {"name": name}}
        for seed in range(4):
            choice = ask(server, seed, tool_choice=named)
            check_call(harmony, llm, choice, seed, {name}, tool_choice=named)


def test_strict_tools_under_auto_are_held_once_called(server, llm, harmony, gpt_oss_folder):
    """Under "auto" the reply is free harmony; a call, once its header says
    to=functions., names a tool and follows a strict tool's schema. The
    random model writes no recipient on its own, so logit_bias leans it to
    the token " to=functions."; every reply still reads as harmony (no
    marker left in a field), and every call validates and reads as that
    call in openai-harmony."""
    strict = [{"type": "function", "function": {**t["function"], "strict": True}}
              for t in TOOLS]
    tok = tokenizers.Tokenizer.from_file(str(gpt_oss_folder / "tokenizer.json"))
    bias = {str(tok.token_to_id(RECIPIENT_TOKEN)): 6.0}
    calls = 0
    for seed in SEEDS:
        choice = ask(server, seed, tools=strict, max_tokens=400, logit_bias=bias)
        message = choice["message"]
        for field in ("content", "reasoning_content"):
            assert "<|" not in (message.get(field) or ""), message
        if not message.get("tool_calls"):
            continue
        [call] = message["tool_calls"]
        calls += 1
        name = call["function"]["name"]
        args = json.loads(call["function"]["arguments"])
        jsonschema.validate(args, PARAMETERS[name])
        assert choice["finish_reason"] == "tool_calls"
        out = raw_reply(llm, seed, tools=strict, max_tokens=400, logit_bias=bias)
        last = harmony_messages(harmony, out.text, last_only=True)[-1]
        assert last.recipient == "functions." + name, out.text
        assert json.loads("".join(c.text for c in last.content)) == args, out.text
    assert calls >= 3, calls


def test_streamed_calls_add_up_to_the_whole_reply(server):
    from test_tool_calling import accumulate
    body = {"messages": QUESTION, "tools": TOOLS, "seed": 1, "temperature": 1.0,
            "max_tokens": MAX_TOKENS, "tool_choice": "required"}
    status, whole = server.post("/v1/chat/completions", body)
    assert status == 200, whole
    streamed, finish = accumulate(server.stream("/v1/chat/completions", body))
    assert finish == "tool_calls"
    assert without_ids(streamed)["tool_calls"] == \
        without_ids(whole["choices"][0]["message"])["tool_calls"]


def test_a_model_without_harmony_s_tokens_is_refused_naming_the_token():
    """The built-in model's vocabulary is bytes: the grammar's <|channel|>
    names no token of it, a 400 naming tool_choice and the token (LLM.chat:
    ValueError, the same)."""
    from folio import LLM
    template = CORPUS / "harmony_gptoss.jinja"
    s = Server("--builtin-context", "4096", "--chat-template", str(template))
    try:
        status, reply = s.post("/v1/chat/completions",
                               {"messages": QUESTION, "tools": TOOLS, "tool_choice": "required"})
        assert status == 400 and reply["error"]["param"] == "tool_choice", reply
        assert "<|channel|>" in reply["error"]["message"], reply
    finally:
        assert s.stop() == 0, "".join(s.log)
    llm = LLM("builtin", builtin_context=4096)
    with pytest.raises(ValueError, match=r"tool_choice.*<\|channel\|>"):
        llm.chat(QUESTION, chat_template=template.read_text(encoding="utf-8"), tools=TOOLS,
                 tool_choice="required", use_tqdm=False)

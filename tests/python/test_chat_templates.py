"""folio's chat-template rendering against Python jinja2 set up the way
Hugging Face transformers sets it up for `apply_chat_template`.

Every template in chat_templates/ (written for these tests in the styles of
the model families) is rendered for seeded random conversations by
`folio template` and by the oracle below. The texts must be equal byte for
byte; where the template refuses (raise_exception) folio must exit 1 and
say "chat template raised: " and the same message. A failure prints the
seed, the conversation file and both results; rerun one template with
`FOLIO_TEMPLATE_SEED=<seed> pytest tests/python/test_chat_templates.py -k <name>`.
FOLIO_TEMPLATE_CASES sets the number of conversations per template.

The tests that run folio skip, saying why, when there is no folio binary at
FOLIO_BIN or it has no `template` command; the corpus checks always run.
"""
import difflib
import json
import os
import random
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Optional

import pytest

jinja2 = pytest.importorskip("jinja2")
import jinja2.ext  # noqa: E402
from jinja2.exceptions import TemplateError  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

FOLIO = os.environ.get("FOLIO_BIN", str(Path(__file__).resolve().parents[2] / "build/bin/folio"))
CORPUS = Path(__file__).resolve().parent / "chat_templates"
SEED = int(os.environ.get("FOLIO_TEMPLATE_SEED", "20240917"))
CASES = int(os.environ.get("FOLIO_TEMPLATE_CASES", "25"))


# ---------------------------------------------------------------------------
# The oracle.

class TemplateRaised(TemplateError):
    """The template called raise_exception(message). A TemplateError, as in
    transformers; a subclass only so the test can tell it from a bug in a
    template (an UndefinedError, say), which is a failure of the corpus."""


def compile_like_transformers(source: str, epoch: int):
    """The template compiled as transformers compiles a chat template
    (src/transformers/utils/chat_template_utils.py, the cached
    `_compile_jinja_template`), with two differences that do not change the
    text: its AssistantTracker extension, which only records where
    {% generation %} blocks fall, is left out; and strftime_now reads a
    fixed UTC clock (the one folio is given with --strftime-now) instead of
    the local `datetime.now()`.

    What is mirrored: an ImmutableSandboxedEnvironment with trim_blocks and
    lstrip_blocks on and the loopcontrols extension (break, continue); the
    built-in tojson filter replaced by plain json.dumps with ensure_ascii
    off (so no HTML escaping and no \\u escapes of non-ASCII) and indent,
    separators and sort_keys passed through; a raise_exception global that
    raises TemplateError with the template's message; a strftime_now global.
    """
    def raise_exception(message):
        raise TemplateRaised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.fromtimestamp(epoch, timezone.utc).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def template_variables(messages_json: str, add_generation_prompt: bool, bos: str, eos: str) -> dict:
    """The variables a template sees, given the --messages file's text, as
    `apply_chat_template` passes them: messages, tools and documents
    (None when not given), add_generation_prompt, then the special tokens
    overlaid by the caller's other keyword arguments (here: the file's other
    keys)."""
    data = json.loads(messages_json)
    if isinstance(data, list):
        data = {"messages": data}
    kwargs = {k: v for k, v in data.items() if k not in ("messages", "tools", "documents")}
    return dict(messages=data["messages"], tools=data.get("tools"), documents=data.get("documents"),
                add_generation_prompt=add_generation_prompt,
                **{"bos_token": bos, "eos_token": eos, **kwargs})


@dataclass
class Rendered:
    text: Optional[str] = None    # the rendered text, or
    raised: Optional[str] = None  # the message the template raised


def oracle(source: str, messages_json: str, add_generation_prompt: bool = True,
           bos: str = "", eos: str = "", epoch: int = 0) -> Rendered:
    template = compile_like_transformers(source, epoch)
    variables = template_variables(messages_json, add_generation_prompt, bos, eos)
    try:
        return Rendered(text=template.render(**variables))
    except TemplateRaised as e:
        return Rendered(raised=e.message)


# ---------------------------------------------------------------------------
# folio.

@pytest.fixture(scope="module")
def folio_template():
    if not Path(FOLIO).is_file():
        pytest.skip(f"no folio binary at {FOLIO} (build it, or set FOLIO_BIN)")
    out = subprocess.run([FOLIO, "template", "--help"], capture_output=True, timeout=60)
    if out.returncode != 0:
        pytest.skip(f"{FOLIO} has no `template` command (`folio template --help` exited "
                    f"{out.returncode})")
    return FOLIO


@dataclass
class Case:
    """One rendering: the --messages file's text and the flags."""
    messages_json: str
    add_generation_prompt: bool = True
    bos: Optional[str] = None  # None: the flag is not passed (folio's default is "")
    eos: Optional[str] = None
    epoch: int = 0


def run_folio(template_args: list, case: Case, messages: Path):
    messages.write_bytes(case.messages_json.encode("utf-8"))
    argv = [FOLIO, "template", *template_args, "--messages", str(messages),
            "--strftime-now", str(case.epoch)]
    if not case.add_generation_prompt:
        argv.append("--no-generation-prompt")
    if case.bos is not None:
        argv += ["--bos-token", case.bos]
    if case.eos is not None:
        argv += ["--eos-token", case.eos]
    # Bytes, not text: a text-mode pipe would turn \r\n into \n.
    out = subprocess.run(argv, capture_output=True, timeout=60)
    return argv, out


def mismatch(want: Rendered, out) -> Optional[str]:
    """None when folio's result `out` agrees with the oracle's, else why not."""
    stderr = out.stderr.decode("utf-8", "replace")
    if want.raised is not None:
        needle = "chat template raised: " + want.raised
        if out.returncode == 1 and needle in stderr:
            return None
        return (f"jinja2 raised {want.raised!r}; folio exited {out.returncode}, "
                f"stderr {stderr!r}, stdout {out.stdout.decode('utf-8', 'replace')!r}")
    want_bytes = want.text.encode("utf-8")
    if out.returncode == 0 and out.stdout == want_bytes:
        return None
    if out.returncode != 0:
        return f"folio exited {out.returncode}: {stderr.strip()!r}\n  expected {want.text!r}"
    got = out.stdout.decode("utf-8", "replace")
    at = next((i for i, (a, b) in enumerate(zip(want.text, got)) if a != b),
              min(len(want.text), len(got)))
    diff = "\n".join(difflib.unified_diff(want.text.splitlines(True), got.splitlines(True),
                                          "jinja2", "folio", lineterm=""))
    return (f"texts differ at character {at}: jinja2 has {want.text[at:at + 40]!r}, "
            f"folio {got[at:at + 40]!r}\n  expected {want.text!r}\n  got      {got!r}\n{diff}")


# ---------------------------------------------------------------------------
# Random conversations.

PIECES = [
    "Hello", "What is the capital of France?", "Paris.", "ok", "1234567890", "3.14",
    "def f(x):\n    return {'a': [1, 2, 3]}",
    "東京は日本の首都です。", "北京是中国的首都。", "안녕하세요", "Ελληνικά", "naïve café Ünïcödé ß",
    "emoji 🙂👍🏽 flags 🇫🇷🇩🇪 family 👨‍👩‍👧", "مرحبا بالعالم", "שלום עולם",
    # Text that looks like Jinja is data: it must come out as written.
    "{{ x }}", "{% if %}", "{% for m in messages %}{{ m }}{% endfor %}", "{# not a comment #}",
    "{{- raise_exception('no') -}}", "}}", "{%", "{{ messages[0]['content'] }}",
    # Other templates' markers, also data.
    "<|im_end|>", "</s>", "[INST]", "<start_of_turn>", "<|eot_id|>",
    'quotes "double" and \'single\' and \\backslash\\', "tab\there", "a\n\nb", "line\r\nbreak",
    "{\"json\": true}", "trailing brace }", "  padded  ",
]
EDGE_SPACE = [" ", "\n", "\t", "  \n", "\n\n", " \t ", "\u3000", "\u00a0"]


def content(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.08:
        return ""
    if r < 0.12:
        return rng.choice(EDGE_SPACE)
    text = rng.choice(["", " ", "\n", " "]).join(rng.choice(PIECES) for _ in range(rng.randint(1, 4)))
    if rng.random() < 0.2:
        text = rng.choice(EDGE_SPACE) + text
    if rng.random() < 0.2:
        text += rng.choice(EDGE_SPACE)
    return text


TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Current weather for a city.\nUses live data; may be slow.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. 東京 or São Paulo"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search",
        "description": "Search the web for \"quoted\" phrases & <tags>.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for"},
            "max_results": {"type": "integer", "default": 5, "minimum": 1},
            "safe": {"type": "boolean", "default": True},
            "ratio": {"type": "number", "default": 0.5, "maximum": 1.0},
            "tags": {"type": "array", "items": {"type": "string"}}},
            "required": ["query", "max_results"]}}},
    {"type": "function", "function": {
        "name": "no_args", "description": "Takes nothing 🙂",
        "parameters": {"type": "object", "properties": {}}}},
]

DOCUMENTS = [
    {"title": "Paris", "text": "Paris is the capital of France.\nIt has 2.1 million people."},
    {"text": "A document without a title 🙂"},
    {"title": "東京", "text": "東京は日本の首都です。", "year": 2021, "doc_id": "d-7"},
    {"title": "", "text": "An empty title; {{ not a variable }}"},
]


def tool_call(rng: random.Random, as_string: bool):
    name, args = rng.choice([
        ("get_weather", {"city": rng.choice(["Zürich", "東京", "Paris"]), "unit": "celsius"}),
        ("search", {"query": content(rng), "max_results": rng.randint(1, 9), "safe": False}),
        ("no_args", {}),
    ])
    return {"type": "function",
            "function": {"name": name,
                         "arguments": json.dumps(args, ensure_ascii=False) if as_string else args}}


@dataclass
class Spec:
    """What conversations suit a template.

    style: "alternating" (user/assistant after an optional system message;
    sometimes deliberately broken, for templates that check), "loose"
    (mostly alternating, sometimes in any order, a system message anywhere),
    "free" (any roles in any order, runs of one role) or "tools" (user,
    assistant tool calls, tool results)."""
    style: str
    bos: str = ""
    eos: str = ""
    tools: bool = False             # offer a tools list
    documents: bool = False         # offer a documents list
    odd_roles: bool = False         # roles the template does not know
    many_systems: bool = False      # several system messages
    think: bool = False             # <think>…</think> in assistant content
    tool_objects: bool = False      # tool results as JSON objects, not text
    string_arguments: bool = False  # tool call arguments as a JSON string
    extras: Callable = field(default=lambda rng: {})  # other template variables


def extras_filters(rng):
    out = {}
    if rng.random() < 0.5:
        out["speaker"] = rng.choice(["ada lovelace", "o'brien-smith", "jean-luc (JL) picard",
                                     "mixed CASE name", "  spaced  out "])
    if rng.random() < 0.5:
        out["temperature"] = rng.choice([0.7, 1, 1.0, 0.25, 0.123456, 2])
    if rng.random() < 0.5:
        keys = ["model", "turns", "ratio", "whole", "flag", "missing", "note"]
        values = ["folio", 3, 0.5, 2.0, True, None, "ünï 🙂 \"q\""]
        picked = rng.sample(range(len(keys)), rng.randint(0, len(keys)))
        out["metadata"] = {keys[i]: values[i] for i in picked}
    return out


def extras_window(rng):
    return {"max_turns": rng.choice([1, 2, 3, 5, 8, "3", "4"])} if rng.random() < 0.6 else {}


def extras_llama31(rng):
    out = {}
    if rng.random() < 0.3:
        out["date_string"] = rng.choice(["01 Jan 2025", "29 Feb 2024"])
    if rng.random() < 0.5:
        out["tools_in_user_message"] = rng.random() < 0.5
    return out


def extras_qwen3(rng):
    return {"enable_thinking": rng.random() < 0.5} if rng.random() < 0.6 else {}


def extras_granite(rng):
    return {"thinking": rng.random() < 0.5} if rng.random() < 0.6 else {}


def extras_harmony(rng):
    return {"reasoning_effort": rng.choice(["low", "medium", "high"])} if rng.random() < 0.6 else {}


SPECS = {
    "chatml_qwen.jinja": Spec("tools", eos="<|im_end|>", tools=True, string_arguments=True),
    "qwen3_tools.jinja": Spec("tools", eos="<|im_end|>", tools=True, string_arguments=True,
                              extras=extras_qwen3),
    "llama3.jinja": Spec("loose", bos="<|begin_of_text|>", eos="<|eot_id|>"),
    "llama2_inst.jinja": Spec("alternating", bos="<s>", eos="</s>"),
    "mistral_inst.jinja": Spec("alternating", bos="<s>", eos="</s>", tools=True),
    "gemma.jinja": Spec("alternating", bos="<bos>", eos="<eos>"),
    "phi3.jinja": Spec("loose", bos="<s>", eos="<|endoftext|>", odd_roles=True),
    "zephyr.jinja": Spec("free", eos="</s>"),
    "deepseek.jinja": Spec("loose", bos="<｜begin▁of▁sentence｜>", eos="<｜end▁of▁sentence｜>",
                           many_systems=True, think=True),
    "command_r.jinja": Spec("loose", bos="<BOS_TOKEN>", eos="<|END_OF_TURN_TOKEN|>",
                            tools=True, documents=True),
    "smollm2_chatml.jinja": Spec("loose", bos="<|im_start|>", eos="<|im_end|>"),
    "llama31_tools.jinja": Spec("tools", bos="<|begin_of_text|>", eos="<|eot_id|>", tools=True,
                                tool_objects=True, extras=extras_llama31),
    "alpaca_forelse.jinja": Spec("free", many_systems=True),
    "tricky_nested_macros.jinja": Spec("free"),
    "tricky_prev_item.jinja": Spec("free"),
    "tricky_whitespace.jinja": Spec("free", eos="</s>"),
    "tricky_filters.jinja": Spec("free", extras=extras_filters),
    "reverse_window.jinja": Spec("free", extras=extras_window),
    "granite_docs.jinja": Spec("loose", eos="<|end_of_text|>", tools=True, documents=True,
                               extras=extras_granite),
    "harmony_gptoss.jinja": Spec("tools", eos="<|return|>", tools=True, extras=extras_harmony),
}


def turns(rng: random.Random, spec: Spec) -> list:
    n = rng.randint(1, 12)
    msgs = []
    if spec.style == "free":
        roles = ["user", "assistant", "system", "tool"]
        return [{"role": rng.choices(roles, [4, 4, 1, 1])[0], "content": content(rng)}
                for _ in range(n)]
    if spec.style == "tools":
        start = "assistant" if rng.random() < 0.1 else "user"
        while len(msgs) < n:
            if start == "user" or msgs:
                msgs.append({"role": "user", "content": content(rng)})
            if len(msgs) >= n:
                break
            if rng.random() < 0.5:
                calls = [tool_call(rng, spec.string_arguments and rng.random() < 0.3)
                         for _ in range(rng.choices([1, 2], [4, 1])[0])]
                msgs.append({"role": "assistant", "content": rng.choice(["", None, content(rng)]),
                             "tool_calls": calls})
                for call in calls:
                    result = {"result": content(rng), "ok": True, "n": 3}
                    if spec.tool_objects and rng.random() < 0.5:
                        msgs.append({"role": "tool", "content": result})
                    else:
                        msgs.append({"role": "tool", "content": json.dumps(result, ensure_ascii=False)})
            msgs.append({"role": "assistant", "content": content(rng)})
        return msgs[:max(n, 1)]
    roles = ["user" if i % 2 == 0 else "assistant" for i in range(n)]
    if spec.style == "loose" and rng.random() < 0.2:
        roles = [rng.choice(["user", "assistant", "system"]) for _ in range(n)]
    if spec.style == "alternating" and rng.random() < 0.3:
        # Break the alternation on purpose: the template must refuse.
        i = rng.randrange(n)
        how = rng.choice(["swap", "repeat", "system"])
        if how == "swap":
            roles[i] = "assistant" if roles[i] == "user" else "user"
        elif how == "repeat":
            roles.insert(i, roles[i])
        else:
            roles.insert(i + 1, "system")
    if spec.odd_roles and rng.random() < 0.2:
        roles[rng.randrange(len(roles))] = rng.choice(["tool", "critic", "function"])
    return [{"role": r, "content": content(rng)} for r in roles]


def make_case(rng: random.Random, spec: Spec) -> Case:
    msgs = turns(rng, spec)
    if rng.random() < 0.5:
        msgs.insert(0, {"role": "system", "content": content(rng)})
    if spec.many_systems:
        for _ in range(rng.randint(0, 2)):
            msgs.insert(rng.randrange(len(msgs) + 1), {"role": "system", "content": content(rng)})
    if spec.think:
        for m in msgs:
            if m["role"] == "assistant" and rng.random() < 0.5:
                m["content"] = "<think>\n" + content(rng) + "\n</think>" + rng.choice(["", "\n\n", " "]) + m["content"]
    obj = {"messages": msgs}
    if spec.tools and rng.random() < 0.6:
        obj["tools"] = rng.sample(TOOLS, rng.randint(0, len(TOOLS)))
    if spec.documents and rng.random() < 0.5:
        obj["documents"] = rng.sample(DOCUMENTS, rng.randint(0, len(DOCUMENTS)))
    obj.update(spec.extras(rng))
    bos, eos = spec.bos, spec.eos
    if rng.random() < 0.1:
        obj["bos_token"] = "<BOS 🙂>"  # the file's own keys win over the flags
    if rng.random() < 0.1:
        obj["eos_token"] = "<EOS>"
    payload = msgs if len(obj) == 1 and rng.random() < 0.5 else obj
    text = json.dumps(payload, ensure_ascii=rng.random() < 0.3, indent=rng.choice([None, 2]))
    return Case(messages_json=text, add_generation_prompt=rng.random() < 0.6,
                bos=None if bos == "" and rng.random() < 0.5 else bos,
                eos=None if eos == "" and rng.random() < 0.5 else eos,
                epoch=rng.randrange(0, 4102444800))


# ---------------------------------------------------------------------------
# The corpus itself (no folio needed).

def corpus():
    return sorted(p.name for p in CORPUS.glob("*.jinja"))


def test_every_template_in_the_corpus_has_a_spec():
    assert len(corpus()) >= 16
    assert set(corpus()) == set(SPECS)


# Each construct the corpus must exercise, as a pattern over the templates' text.
CONSTRUCTS = {
    "loop.index": r"loop\.index\b", "loop.index0": r"loop\.index0", "loop.first": r"loop\.first",
    "loop.last": r"loop\.last", "loop.length": r"loop\.length", "loop.revindex": r"loop\.revindex\b",
    "for-else": r"{%-?\s*else\s*-?%}(?:(?!{%-?\s*endif).)*?{%-?\s*endfor",
    "for with if": r"{%-?\s*for [^%]* in [^%]* if ", "break": r"{%-?\s*break", "continue": r"{%-?\s*continue",
    "elif": r"{%-?\s*elif", "set": r"{%-?\s*set \w+ =", "block set": r"{%-?\s*set \w+\s*-?%}",
    "namespace": r"namespace\(", "namespace assignment": r"set \w+\.\w+ =",
    "macro default": r"macro \w+\([^)]*=", "call/caller": r"caller\(", "call with arguments": r"{%-?\s*call\(",
    "left -": r"{%-|{{-", "right -": r"-%}|-}}", "+ concat": r"' \+ |\+ '", "~ concat": r" ~ ",
    "messages[1:]": r"messages\[1:\]", "[::-1]": r"\[::-1\]", "negative index": r"\[-\d\]",
    "attribute access": r"message\.content", "in": r" in \[", "not in": r" not in ",
    "is defined": r"is defined", "is not defined": r"is not defined", "is none": r"is (not )?none",
    "is string": r"is string", "is mapping": r"is mapping", "is iterable": r"is iterable",
    "is number": r"is number", "comparison": r"[<>]=? \d", "and/or/not": r" and .* or |\bnot ",
    "ternary": r" if .* else ",
    **{f"|{f}": rf"\|\s*{f}\b" for f in [
        "trim", "length", "upper", "lower", "title", "capitalize", "replace", "join", "default",
        "tojson", "first", "last", "list", "items", "select", "selectattr", "rejectattr",
        "string", "int", "round", "indent"]},
    "tojson(indent=)": r"tojson\(indent=", "tojson sort_keys": r"sort_keys=True",
    "map(attribute=)": r"map\(attribute=", ".strip()": r"\.strip\(\)", ".split(": r"\.split\(",
    ".startswith(": r"\.startswith\(", ".endswith(": r"\.endswith\(", ".lstrip()": r"\.lstrip\(\)",
    ".rstrip()": r"\.rstrip\(\)", ".items()": r"\.items\(\)", ".get(": r"\.get\(",
    "raise_exception": r"raise_exception\(", "strftime_now": r"strftime_now\(",
    "tools": r"for \w+ in tools", "documents": r"for \w+ in documents",
}


def test_the_corpus_exercises_every_construct():
    texts = [(CORPUS / name).read_text(encoding="utf-8") for name in corpus()]
    missing = [c for c, pattern in CONSTRUCTS.items()
               if not any(re.search(pattern, t, re.S) for t in texts)]
    assert not missing, f"no template in {CORPUS} uses: {missing}"


@pytest.mark.parametrize("name", corpus())
def test_the_cases_exercise_the_template(name):
    """The generated conversations reach both outcomes where a template can
    refuse, and the oracle fails only through raise_exception (anything
    else is a bug in the template or the generator)."""
    source = (CORPUS / name).read_text(encoding="utf-8")
    rng = random.Random(f"{SEED}:{name}")
    outcomes = {"text": 0, "raised": 0}
    for _ in range(CASES):
        case = make_case(rng, SPECS[name])
        want = oracle(source, case.messages_json, case.add_generation_prompt,
                      case.bos or "", case.eos or "", case.epoch)
        outcomes["text" if want.raised is None else "raised"] += 1
    assert outcomes["text"] > 0, outcomes
    spec = SPECS[name]
    if ("raise_exception" in source and spec.style in ("alternating", "tools")) or spec.odd_roles:
        assert outcomes["raised"] > 0, outcomes


# ---------------------------------------------------------------------------
# folio against the oracle.

@pytest.mark.parametrize("name", corpus())
def test_folio_renders_like_jinja2(name, folio_template, tmp_path):
    template = CORPUS / name
    source = template.read_text(encoding="utf-8")
    rng = random.Random(f"{SEED}:{name}")
    failures = []
    for i in range(CASES):
        case = make_case(rng, SPECS[name])
        want = oracle(source, case.messages_json, case.add_generation_prompt,
                      case.bos or "", case.eos or "", case.epoch)
        # One file per case, so the command line in a failure can be rerun.
        argv, out = run_folio(["--template", str(template)], case, tmp_path / f"case{i}.json")
        why = mismatch(want, out)
        if why:
            data = json.dumps(json.loads(case.messages_json), ensure_ascii=False)
            failures.append(f"case {i} (FOLIO_TEMPLATE_SEED={SEED}): {shlex.join(argv)}\n"
                            f"  messages: {data}\n  {why}")
    assert not failures, (f"{len(failures)} of {CASES} conversations render differently from "
                          f"jinja2 for {name}; the first ones:\n\n" + "\n\n".join(failures[:3]))


def test_tools_and_documents_are_none_when_not_given(folio_template, tmp_path):
    """transformers always passes tools and documents, None when the caller
    has none, so `tools is none` holds and `tools is defined` too."""
    template = tmp_path / "probe.jinja"
    template.write_text("{{ tools is defined }} {{ tools is none }} {{ documents is defined }} "
                        "{{ documents is none }} {{ tools }}", encoding="utf-8")
    for payload in ('[{"role": "user", "content": "hi"}]',
                    '{"messages": [{"role": "user", "content": "hi"}]}'):
        case = Case(messages_json=payload)
        want = oracle(template.read_text(), payload)
        assert want.text == "True True True True None"
        _, out = run_folio(["--template", str(template)], case, tmp_path / "messages.json")
        assert mismatch(want, out) is None, mismatch(want, out)


# ---------------------------------------------------------------------------
# The real model's own template.

MODEL_CONVERSATIONS = [
    [{"role": "user", "content": "What is the capital of France?"}],  # SmolLM's default system prompt
    [{"role": "system", "content": "You are terse."},
     {"role": "user", "content": "Hi 🙂"},
     {"role": "assistant", "content": "Hello."},
     {"role": "user", "content": "東京は？ {{ not a variable }}"}],
    [{"role": "user", "content": "  padded\n"}, {"role": "assistant", "content": ""}],
]


def test_folio_renders_the_model_s_own_template_like_jinja2(folio_template, tmp_path):
    import smollm2
    gguf = pytest.importorskip("gguf")
    model = smollm2.require()
    fields = gguf.GGUFReader(str(model)).fields
    source = fields["tokenizer.chat_template"].contents()
    tokens = fields["tokenizer.ggml.tokens"].contents()
    bos = tokens[fields["tokenizer.ggml.bos_token_id"].contents()]
    eos = tokens[fields["tokenizer.ggml.eos_token_id"].contents()]
    for messages in MODEL_CONVERSATIONS:
        for add_generation_prompt in (True, False):
            case = Case(messages_json=json.dumps(messages, ensure_ascii=False),
                        add_generation_prompt=add_generation_prompt)
            want = oracle(source, case.messages_json, add_generation_prompt, bos, eos)
            if messages[0]["role"] != "system":
                assert "named SmolLM" in want.text
            argv, out = run_folio(["--model", str(model)], case, tmp_path / "messages.json")
            why = mismatch(want, out)
            assert why is None, f"{shlex.join(argv)}\n  messages.json: {case.messages_json}\n  {why}"


def test_the_corpus_smollm2_template_renders_as_the_model_s_own():
    """chat_templates/smollm2_chatml.jinja is written differently from the
    template in SmolLM2's GGUF but must render the same."""
    import smollm2
    gguf = pytest.importorskip("gguf")
    model = smollm2.require()
    source = gguf.GGUFReader(str(model)).fields["tokenizer.chat_template"].contents()
    ours = (CORPUS / "smollm2_chatml.jinja").read_text(encoding="utf-8")
    rng = random.Random(f"{SEED}:smollm2")
    for _ in range(CASES):
        case = make_case(rng, SPECS["smollm2_chatml.jinja"])
        assert (oracle(ours, case.messages_json, case.add_generation_prompt) ==
                oracle(source, case.messages_json, case.add_generation_prompt)), case.messages_json

"""Seed corpora for the parser fuzzers: small valid files of each format.

Usage: make_seeds.py OUT_DIR
(writes OUT_DIR/{gguf,safetensors,request,jinja,chat_output,gbnf,json_schema,
tokenizer_json}/...)
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests/python"))
import checkpoints as ck  # noqa: E402

out = Path(sys.argv[1])
for sub in ("gguf", "safetensors", "request"):
    (out / sub).mkdir(parents=True, exist_ok=True)
a = ck.Arch(name="qwen2", hidden=32, heads=2, kv_heads=1, head_dim=16, ffn=32,
            layers=1, vocab=64)
w = ck.random_weights(a, 1)
for dtype in ("f32", "f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1"):
    ck.write_gguf(out / "gguf" / f"tiny-{dtype}.gguf", a, w, dtype)
# The K-quants and IQ4 need rows of whole 256-element super-blocks: a
# model just wide enough, 140-350 KB a file. `make fuzz` passes -max_len
# 65536, so the fuzzer sees each one's first 64 KB: the header and tensor
# table, where the loader checks types, shapes, block counts and offsets,
# and then data cut short, which it must refuse by name.
wide = ck.Arch(name="llama", hidden=256, heads=2, kv_heads=1, head_dim=128, ffn=256,
               layers=1, vocab=64)
ww = ck.random_weights(wide, 2)
for dtype in ck.KQUANT_DTYPES:
    ck.write_gguf(out / "gguf" / f"wide-{dtype}.gguf", wide, ww, dtype)
for dtype in ("f32", "bf16"):
    ck.write_hf(out / "hf", a, w, dtype)
    (out / "hf" / "model.safetensors").rename(out / "safetensors" / f"tiny-{dtype}.safetensors")

# HTTP request bodies for the server's request layer (tools/fuzz/fuzz_request.cc).
bodies = [
    {"model": "builtin", "prompt": "hello", "max_tokens": 8, "temperature": 0.7, "top_p": 0.9,
     "top_k": 40, "min_p": 0.05, "seed": 3, "stop": ["\n", "x"], "logprobs": 2, "stream": True},
    {"prompt": [0, 5, 250], "n": 1, "user": "u", "stream_options": {"include_usage": True}},
    {"messages": [{"role": "system", "content": "s"},
                  {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
     "logprobs": True, "top_logprobs": 3, "max_completion_tokens": 4},
    {"prompt": "a", "max_tokens": 0, "temperature": -1, "stop": ""},
    {"messages": [{"role": "user", "content": "w?"},
                  {"role": "assistant", "content": None, "tool_calls": [
                      {"id": "call_1", "type": "function",
                       "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "2"}],
     "tools": [{"type": "function", "function": {"name": "f", "parameters": {
         "type": "object", "properties": {"x": {"type": "integer"}}}}}],
     "tool_choice": {"type": "function", "function": {"name": "f"}},
     "parallel_tool_calls": False, "chat_template_kwargs": {"enable_thinking": False}},
]
for i, b in enumerate(bodies):
    (out / "request" / f"body{i}.json").write_text(json.dumps(b))

# Chat templates (tools/fuzz/fuzz_jinja.cc): every template of the chat
# module's jinja2-checked cases, and the benchmark's Llama-3-style one.
root = Path(__file__).resolve().parents[2]
(out / "jinja").mkdir(parents=True, exist_ok=True)
cases = json.loads((root / "src/chat/testdata/render_cases.json").read_text(encoding="utf-8"))
for i, case in enumerate(cases):
    (out / "jinja" / f"case{i:03d}.jinja").write_text(case["template"], encoding="utf-8")
(out / "jinja" / "llama3.jinja").write_text(
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}", encoding="utf-8")

# Model replies for the chat reply reader (tools/fuzz/fuzz_chat_output.cc):
# an options byte (bit 0 reasoning, 1 opened by the prompt, 2 parallel calls,
# bits 3-4 the format: none, hermes, llama3_json, mistral; bit 5 harmony, bit
# 6 with its calls read), a cut byte, text.
(out / "chat_output").mkdir(parents=True, exist_ok=True)
replies = [
    (0b01101, "<think>\nhm\n</think>\n\nOk <tool_call>\n{\"name\": \"f\", \"arguments\": "
              "{\"x\": [1, {\"y\": \"\u00e9\"}]}}\n</tool_call>\n<tool_call>{\"name\": \"g\"}"),
    (0b10100, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"get_weather\", "
              "\"parameters\": {\"city\": \"Oslo\"}}"),
    (0b11100, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": \"b\"}}]"),
    (0b00011, "reasoning</think>answer"),
    (0b1100101, "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>commentary"
                "<|message|>Checking.<|end|><|start|>assistant<|channel|>commentary "
                "to=functions.f <|constrain|>json<|message|>{\"x\": 1}<|call|>"),
    (0b0100001, "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final"
                "<|message|>b<|return|>"),
]
for i, (flags, text) in enumerate(replies):
    (out / "chat_output" / f"reply{i}").write_bytes(bytes([flags, 3]) + text.encode())

# Grammars (tools/fuzz/fuzz_gbnf.cc): llama.cpp-style GBNF.
(out / "gbnf").mkdir(parents=True, exist_ok=True)
grammars = [
    'root ::= object\nobject ::= "{" ws ( member ( "," ws member )* )? "}"\n'
    'member ::= "\\"" [a-z]+ "\\"" ":" ws value\nvalue ::= object | [0-9]{1,3} | "true"\n'
    'ws ::= [ \\t\\n]{0,4}\n',
    'root ::= expr\nexpr ::= term ( [-+] term )*\nterm ::= [0-9]+ | "(" expr ")"\n',
    'root ::= ( "a" | "ab" | [^\\x00-\\x1F] ){2,5} "\\u00e9"? # comment\n',
]
for i, g in enumerate(grammars):
    (out / "gbnf" / f"grammar{i}.gbnf").write_text(g, encoding="utf-8")

# JSON Schemas (first byte even; bit 1: flexible whitespace) and regular
# expressions (first byte odd; bit 1: search, bit 2: JSON string) for
# tools/fuzz/fuzz_json_schema.cc.
(out / "json_schema").mkdir(parents=True, exist_ok=True)
schemas = [
    {"type": "object", "properties": {"a": {"type": "string", "maxLength": 4},
                                      "b": {"type": "integer", "minimum": -3, "maximum": 12}},
     "required": ["a"], "additionalProperties": False},
    {"$defs": {"n": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/n"}, {"type": "array",
                                                                      "items": {"$ref": "#/$defs/n"}}]}},
     "$ref": "#/$defs/n"},
    {"oneOf": [{"required": ["r"]}, {"required": ["l", "w"]}],
     "properties": {"r": {"type": "number"}, "l": {"type": "number"}, "w": {"type": "number"}}},
    {"type": "object", "patternProperties": {"^x_[0-9]+$": {"enum": [1, "a", None]}},
     "additionalProperties": False, "minProperties": 1, "maxProperties": 3},
    {"type": "string", "format": "date-time"},
    {"allOf": [{"type": "object", "properties": {"k": {"const": "v"}}}, {"required": ["k"]}]},
]
for i, sch in enumerate(schemas):
    (out / "json_schema" / f"schema{i}").write_bytes(bytes([2 * (i % 2)]) + json.dumps(sch).encode())
for i, (flags, rx) in enumerate([(1, "^[a-z]{2,4}(-[0-9]+)?$"), (3, "a|b+c?"), (7, "\\d{3}\\.\\w*"),
                                 (5, "(?:x|y){0,3}[^\\n]")]):
    (out / "json_schema" / f"regex{i}").write_bytes(bytes([flags]) + rx.encode())

# tokenizer.json files (tools/fuzz/fuzz_tokenizer_json.cc): WordPiece in
# the shapes BERT-family files take, and a byte-level BPE.
(out / "tokenizer_json").mkdir(parents=True, exist_ok=True)
wp_tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "un", "##aff",
             "##able", ",", ".", "!", "'", "s", "caf", "##e", "\u4f60", "##,"]
wp_added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True} for i, t in enumerate(wp_tokens[:5])]


def wordpiece(normalizer, pre_tokenizer, post_processor, decoder, max_chars=100):
    return {"version": "1.0", "truncation": {"max_length": 128, "strategy": "LongestFirst",
                                             "stride": 0},
            "padding": None, "added_tokens": wp_added, "normalizer": normalizer,
            "pre_tokenizer": pre_tokenizer, "post_processor": post_processor, "decoder": decoder,
            "model": {"type": "WordPiece", "unk_token": "[UNK]",
                      "continuing_subword_prefix": "##", "max_input_chars_per_word": max_chars,
                      "vocab": {t: i for i, t in enumerate(wp_tokens)}}}


def piece(kind, name, type_id):
    return {kind: {"id": name, "type_id": type_id}}


bert_template = {
    "type": "TemplateProcessing",
    "single": [piece("SpecialToken", "[CLS]", 0), piece("Sequence", "A", 0),
               piece("SpecialToken", "[SEP]", 0)],
    "pair": [piece("SpecialToken", "[CLS]", 0), piece("Sequence", "A", 0),
             piece("SpecialToken", "[SEP]", 0), piece("Sequence", "B", 1),
             piece("SpecialToken", "[SEP]", 1)],
    "special_tokens": {t: {"id": t, "ids": [i], "tokens": [t]}
                       for t, i in (("[CLS]", 2), ("[SEP]", 3))}}
bert_normalizer = {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                   "strip_accents": None, "lowercase": True}
wordpiece_decoder = {"type": "WordPiece", "prefix": "##", "cleanup": True}
seeds = {
    "bert": wordpiece(bert_normalizer, {"type": "BertPreTokenizer"}, bert_template,
                      wordpiece_decoder),
    "bert-processing": wordpiece(
        dict(bert_normalizer, lowercase=False, strip_accents=True), {"type": "BertPreTokenizer"},
        {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]}, wordpiece_decoder),
    "whitespace": wordpiece(
        {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "Lowercase"},
                                             {"type": "StripAccents"}]},
        {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                                               {"type": "Whitespace"}]},
        None, None, max_chars=8),
}
byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
              "use_regex": True}
bytes_to_chars = {}
n = 0
for b in range(256):
    if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b:
        bytes_to_chars[b] = chr(b)
    else:
        bytes_to_chars[b] = chr(256 + n)
        n += 1
bpe_vocab = {bytes_to_chars[b]: b for b in range(256)}
bpe_vocab.update({"he": 256, "ll": 257, "hell": 258, "hello": 259})
seeds["bpe"] = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": 260, "content": "<eos>", "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True}],
    "normalizer": {"type": "NFC"}, "pre_tokenizer": byte_level, "post_processor": None,
    "decoder": byte_level,
    "model": {"type": "BPE", "dropout": None, "unk_token": None,
              "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": False,
              "byte_fallback": False, "ignore_merges": False, "vocab": bpe_vocab,
              "merges": [["h", "e"], ["l", "l"], ["he", "ll"], ["hell", "o"]]}}
for name, doc in seeds.items():
    (out / "tokenizer_json" / f"{name}.json").write_text(json.dumps(doc, ensure_ascii=False),
                                                          encoding="utf-8")

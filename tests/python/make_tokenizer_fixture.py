#!/usr/bin/env python3
"""Regenerates the byte-level BPE tokenizer fixtures in tests/data/tokenizer/.

folio's C++ tokenizer (src/tokenizer/bpe_tokenizer.cc) must produce exactly the
ids of Hugging Face `tokenizers`. This script trains three small byte-level
BPE tokenizers on text written below (no downloads), saves each as a
tokenizer.json, and records what `tokenizers` does with a corpus of awkward
strings: the ids (plain, with the post-processor's special tokens, and with
special tokens treated as text), the decoded text, and decodes of random id
sequences. bpe_tokenizer_test.cc reads these files; Python is needed only to
regenerate them:

    bash tools/setup.sh            # installs the pinned `tokenizers`
    python3 tests/python/make_tokenizer_fixture.py

For a larger differential check without touching the fixtures, --fuzz
writes random strings and what `tokenizers` makes of them with the
checked-in tokenizer.json files; the C++ test reads the file named by
FOLIO_TOKENIZER_FUZZ (and skips that test when it is unset):

    python3 tests/python/make_tokenizer_fixture.py --fuzz /tmp/fuzz.json
    FOLIO_TOKENIZER_FUZZ=/tmp/fuzz.json build/tests/folio_model_tests \
        --gtest_filter='*Fuzz*'

The three configurations:
  llama3  Split(Llama-3 regex, Isolated) + ByteLevel(use_regex=False),
          BPE ignore_merges=True, TemplateProcessing "<|begin_of_text|> $A",
          special tokens appended after the trained vocabulary.
  qwen2   NFC normalizer, Split(Qwen2 regex) + ByteLevel, ByteLevel
          post-processor, ChatML specials and Qwen3-style non-special added
          tokens (<think>, </think>).
  gpt2    Sequence[NFC] normalizer, Digits(individual) + ByteLevel(
          add_prefix_space, GPT-2 regex), merges in the legacy "a b" form,
          "<s> $A </s>" template, added tokens with lstrip / rstrip /
          single_word / normalized set.
"""

import argparse
import json
import os
import random
import sys

import tokenizers
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models,
                        normalizers, pre_tokenizers, processors, trainers)

EXPECTED_VERSION = "0.23.3"  # keep in step with tools/setup.sh

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

PARAGRAPHS = [
    "The quick brown fox jumps over the lazy dog. It's not the fox's fault "
    "that the dog didn't move; they'd agreed on it, and we've all seen it "
    "happen before. I'm sure you'll agree that she'll be fine.",
    "In 1969, 600 million people watched the landing. The rocket burned "
    "2,000,000 kg of fuel in 168 seconds; by 2024 launches cost 3.5% of "
    "that. Call 555-0123 or visit https://example.com/a/b?c=1&d=2.",
    "def tokenize(text: str) -> list[int]:\n    ids = []\n    for word in "
    "text.split():\n        ids.append(vocab.get(word, 0))  # unknown -> 0\n"
    "    return ids\n\nif (a != b && c <= d) { x->y(z[i]); }\n",
    "Le cœur a ses raisons que la raison ne connaît point. Ça va très bien, "
    "merci ! Über den Wolken muss die Freiheit wohl grenzenlos sein. "
    "Tiếng Việt có dấu: người, được, những.",
    "你好，世界！今天的天气很好，我们去公园散步吧。机器学习和自然语言处理。"
    "日本語のテキストを書きます。東京は大きな都市です。",
    "한국어 텍스트도 있습니다. 안녕하세요, 만나서 반갑습니다.",
    "مرحبا بالعالم، هذه جملة باللغة العربية. שלום עולם, זה משפט בעברית.",
    "नमस्ते दुनिया, यह हिंदी में एक वाक्य है। Привет, мир! Это предложение "
    "на русском языке. Γειά σου κόσμε, αυτή είναι μια πρόταση.",
    "Emoji time 😀 👋🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇫🇷 — all of them, twice: 😀😀 👍👍🏿.",
    "   Indented line\n\tTabbed line\n\n\nThree newlines above.  Two spaces "
    "after period. Trailing spaces here   \r\nWindows line end.",
]


def corpus(seed):
    rng = random.Random(seed)
    lines = []
    for _ in range(40):
        for p in PARAGRAPHS:
            words = p.split(" ")
            start = rng.randrange(len(words))
            lines.append(" ".join(words[start:] + words[:start]))
        lines.append(" ".join(str(rng.randrange(10 ** rng.randrange(1, 9)))
                              for _ in range(8)))
    return lines


def awkward_strings():
    s = [
        "", " ", "  ", "\t", "\n", "\r\n", "\n\n\n", " \n ", "a", "Hello world",
        " Hello", "Hello ", "Hello   world  ", "\t\tindent\n\n\nlines \n",
        "end   ", "   ", "x\n\n  y", "a \t b", "word\r\rword",
        "I'm don't you'll we've she'd it's THEY'RE I'M O'Neill 'twas",
        "rock'n'roll ſ'S 'S 'LL 'Ve '' ''s", "can't'nt", "'", "'s", " 's",
        "3.14159", "1,000,000", "২০২৪ ٣٤٥ ①②③ Ⅻ x² ½", "12ab34cd567",
        "你好，世界！", "日本語のテキスト。", "한국어 텍스트", "مرحبا بالعالم",
        "שלום", "नमस्ते दुनिया", "Привет, мир!", "Γειά σου κόσμε",
        "👋🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "🇫🇷🇩🇪", "😀😀😀", "a😀b",
        "e\u0301", "cafe\u0301", "n\u0303", "a\u0308\u0301", "\u0301",
        "\u1100\u1161\u11a8", "Å A\u030a \u212b", "Ǆǅǆ ʰ İstanbul ß ﬁ",
        "naïve coöperate façade Ünïcödé",
        "\u00a0", "a\u00a0b", "x \u3000 y", "\u2028\u2029", "a\u0085b",
        "\u180e", "a\u200bb", "\ufeffBOM", "\u200d", "\x00\x01\x1f\x7f",
        "\U00031350\U00010d50 new letters", "Tiếng Việt có dấu",
        "a" * 300, "abc" * 100, "pneumonoultramicroscopicsilicovolcanoconiosis",
        "9" * 50, " " * 100, "\n" * 20, "\t \t \t", "!!!???...", "--->",
        "def f(x):\n    return x**2  # square\n",
        "if (a != b && c <= d) { x->y(); }",
        "https://example.com/path?q=1&r=2#frag",
        "<|begin_of_text|>Hello<|eot_id|>", "a<|eot_id|>b",
        "<|eot_id|><|eot_id|>", "<|eot_id", "< |eot_id|>", "<|eot_id|>\n\n",
        "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
        "<|im_start|>user\nhi<|im_end|>\n", "<|im_start|>assistant\n",
        "<think>\nhmm\n</think>\n\nAnswer", "x<think>y", "<|endoftext|>",
        "<s>Hello</s>", "a <mask> b", "a<mask>b", "   <mask>   x",
        "[tool]   x", "[tool]\n\nx", "xyz", "a xyz b", "axyz b", "xyz_", "xyzé",
        "xyz\u0301", "(xyz)", "café", "cafe\u0301 au lait", "<s><s>",
        "1", "12", "123", "1234", "12345", "123456", "1234567", "12345678",
        "123456789", "1234567890", " 1234567890 ", "a1b22c333d4444",
    ]
    return s


def random_strings(seed, count):
    pool = (list("abcXYZ09 '.,!?-_") + ["\t", "\n", "\r", "  ", "'s", "'RE",
            "é", "e\u0301", "ü", "ß", "你", "好", "日", "ア", "한", "م", "ש",
            "न", "\u094d", "ि", "Я", "λ", "😀", "🏽", "\u200d", "👨", "❤",
            "\ufe0f", "\u00a0", "\u3000", "\u2028", "\u0085", "\u180e",
            "\u200b", "٣", "২", "①", "Ⅻ", "²", "\U00031350", "\u1100",
            "\u1161", "\u11a8", "\u212b", "ſ", "<|eot_id|>", "<|im_end|>",
            "<think>", "<mask>", "[tool]", "xyz", "café", "<s>", "\x7f"])
    rng = random.Random(seed)
    return ["".join(rng.choice(pool) for _ in range(rng.randrange(1, 40)))
            for _ in range(count)]


def byte_level_bpe(ignore_merges):
    return models.BPE(ignore_merges=ignore_merges)


def train(tok, seed, vocab_size):
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[])
    tok.train_from_iterator(corpus(seed), trainer=trainer)


def make_llama3():
    tok = Tokenizer(byte_level_bpe(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated",
                             invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    train(tok, seed=1, vocab_size=800)
    specials = ["<|begin_of_text|>", "<|end_of_text|>",
                "<|reserved_special_token_0|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|eot_id|>"]
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False)
                            for s in specials])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(
            single="<|begin_of_text|> $A",
            pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
            special_tokens=[("<|begin_of_text|>", bos)]),
    ])
    return tok


def make_qwen2():
    tok = Tokenizer(byte_level_bpe(ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated",
                             invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    train(tok, seed=2, vocab_size=700)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False)
                            for s in ["<|endoftext|>", "<|im_start|>",
                                      "<|im_end|>"]])
    tok.add_tokens([AddedToken(s, special=False, normalized=False)
                    for s in ["<think>", "</think>"]])
    return tok


def make_gpt2():
    tok = Tokenizer(byte_level_bpe(ignore_merges=False))
    tok.normalizer = normalizers.Sequence([normalizers.NFC()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    train(tok, seed=3, vocab_size=600)
    tok.add_special_tokens([
        AddedToken("<s>", special=True, normalized=False),
        AddedToken("</s>", special=True, normalized=False),
        AddedToken("<mask>", special=True, normalized=False, lstrip=True),
    ])
    tok.add_tokens([
        AddedToken("[tool]", special=False, normalized=False, rstrip=True),
        AddedToken("xyz", special=False, normalized=False, single_word=True),
        AddedToken("café", special=False, normalized=True),
    ])
    s, e = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
        special_tokens=[("<s>", s), ("</s>", e)])
    return tok


def legacy_merges(tokenizer_json):
    """Rewrites [["a", "b"], ...] merges as the older ["a b", ...] form."""
    data = json.loads(tokenizer_json)
    data["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]
    return json.dumps(data, ensure_ascii=False, indent=1)


def frame(tok):
    """The ids the post-processor puts before and after a single sequence."""
    inner = tok.encode("a", add_special_tokens=False).ids
    framed = tok.encode("a", add_special_tokens=True).ids
    at = framed.index(inner[0])
    return framed[:at], framed[at + len(inner):]


def record(tok, name, seed):
    """Cases, one JSON object a line. Fields equal to another are left out:
    "ids_special_as_text" (encode_special_tokens=True) when equal to "ids",
    "decoded" when equal to "text", "decoded_skip" when equal to "decoded".
    Encoding with add_special_tokens=True is checked here to be the frame
    around "ids", so only the frame is stored."""
    texts = awkward_strings() + random_strings(seed, 100)
    vocab_size = tok.get_vocab_size(with_added_tokens=True)
    prefix, suffix = frame(tok)
    encode = []
    for text in texts:
        tok.encode_special_tokens = False
        ids = tok.encode(text, add_special_tokens=False).ids
        assert tok.encode(text, add_special_tokens=True).ids == \
            prefix + ids + suffix, text
        tok.encode_special_tokens = True
        as_text = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        case = {"text": text, "ids": ids}
        if as_text != ids:
            case["ids_special_as_text"] = as_text
        decoded = tok.decode(ids, skip_special_tokens=False)
        if decoded != text:
            case["decoded"] = decoded
        decoded_skip = tok.decode(prefix + ids + suffix,
                                  skip_special_tokens=True)
        if decoded_skip != decoded:
            case["decoded_skip"] = decoded_skip
        encode.append(case)
    rng = random.Random(seed + 100)
    decode = []
    for _ in range(100):
        ids = [rng.randrange(vocab_size) for _ in range(rng.randrange(1, 9))]
        decode.append({"ids": ids,
                       "text": tok.decode(ids, skip_special_tokens=False),
                       "text_skip": tok.decode(ids, skip_special_tokens=True)})
    return {"generator": "tests/python/make_tokenizer_fixture.py",
            "tokenizers_version": tokenizers.__version__,
            "tokenizer": name + ".tokenizer.json",
            "frame_prefix": prefix, "frame_suffix": suffix,
            "encode": encode, "decode": decode}


def write_cases(path, cases):
    """Compact JSON, one case a line, ASCII only (non-ASCII as \\u escapes)."""
    def dump(value):
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    with open(path, "w", encoding="ascii") as f:
        f.write("{\n")
        for key in ["generator", "tokenizers_version", "tokenizer",
                    "frame_prefix", "frame_suffix"]:
            f.write(f"{dump(key)}:{dump(cases[key])},\n")
        for key in ["encode", "decode"]:
            f.write(f"{dump(key)}:[\n")
            f.write(",\n".join(dump(c) for c in cases[key]))
            f.write("\n]" + ("," if key == "encode" else "") + "\n")
        f.write("}\n")


NAMES = ["llama3", "qwen2", "gpt2"]


def fuzz_strings(seed, count):
    """Random strings dense in what tokenizers get wrong: combining marks,
    new-script letters and digits, odd whitespace, added-token text."""
    rng = random.Random(seed)
    words = ["<|eot_id|>", "<|begin_of_text|>", "<|im_start|>", "<|im_end|>",
             "<think>", "</think>", "<mask>", "[tool]", "xyz", "café",
             "cafe\u0301", "<s>", "</s>", "'s", "'T", "'re", "'VE", "'m",
             "'ll", "'D", "ſ"]

    def char():
        r = rng.random()
        if r < 0.3:
            return chr(rng.randrange(0x20, 0x7F))
        if r < 0.4:
            return rng.choice(" \t\n\r\u00a0\u3000\u2028\u0085\u180e"
                              "\u200b\u000b\u000c")
        if r < 0.5:
            return chr(rng.randrange(0x300, 0x370))
        for limit, (lo, hi) in [(0.6, (0x80, 0x800)), (0.7, (0x800, 0x10000)),
                                (0.8, (0x10000, 0x30000)),
                                (0.85, (0x11DE0, 0x11DEA)),
                                (0.9, (0x1F300, 0x1FAFF))]:
            if r < limit:
                c = rng.randrange(lo, hi)
                return chr(c) if not 0xD800 <= c <= 0xDFFF else "x"
        return rng.choice(words)
    return ["".join(char() for _ in range(rng.randrange(0, 60)))
            for _ in range(count)]


def write_fuzz(path, root, seed, count):
    texts = fuzz_strings(seed, count)
    expected = {}
    for name in NAMES:
        tok = Tokenizer.from_file(os.path.join(
            root, "tests", "data", "tokenizer", name + ".tokenizer.json"))
        ids = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
        tok.encode_special_tokens = True
        as_text = [e.ids for e in tok.encode_batch(texts,
                                                   add_special_tokens=False)]
        expected[name] = {"ids": ids, "ids_special_as_text": as_text}
    with open(path, "w", encoding="ascii") as f:
        json.dump({"texts": texts, "expected": expected}, f, ensure_ascii=True)
    print(f"{path}: {count} strings")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fuzz", metavar="OUT",
                        help="write a fuzz file instead of the fixtures")
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if tokenizers.__version__ != EXPECTED_VERSION:
        sys.exit(f"tokenizers {tokenizers.__version__} installed, fixtures "
                 f"are pinned to {EXPECTED_VERSION} (run tools/setup.sh)")
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    if args.fuzz:
        write_fuzz(args.fuzz, root, args.seed, args.count)
        return
    out_dir = os.path.join(root, "tests", "data", "tokenizer")
    os.makedirs(out_dir, exist_ok=True)
    makers = {"llama3": make_llama3, "qwen2": make_qwen2, "gpt2": make_gpt2}
    for seed, name in enumerate(NAMES):
        make = makers[name]
        tok = make()
        text = tok.to_str(pretty=True)
        if name == "gpt2":
            text = legacy_merges(text)
            tok = Tokenizer.from_str(text)  # the fixture is what HF reads back
        with open(os.path.join(out_dir, name + ".tokenizer.json"), "w",
                  encoding="utf-8") as f:
            f.write(text)
        cases = record(tok, name, seed)
        write_cases(os.path.join(out_dir, name + ".cases.json"), cases)
        print(f"{name}: vocab {tok.get_vocab_size(with_added_tokens=True)}, "
              f"{len(cases['encode'])} encode and {len(cases['decode'])} "
              f"decode cases")


if __name__ == "__main__":
    main()

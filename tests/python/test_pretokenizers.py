"""Every pre-tokenizer family folio maps a GGUF tokenizer.ggml.pre name to,
checked against Hugging Face `tokenizers` (PyPI) with the same splits.

No real model is needed: each test writes a vocabulary-only GGUF (the 256
byte tokens, merges learnt here from the test strings, two whole words no
merge reaches) with the PyPI `gguf` package, and builds a `tokenizers`
tokenizer from the same vocabulary and merges with a Sequence of
Split(Regex, "isolated") steps (Digits(individual_digits) where the family's
tokenizer.json has it) then ByteLevel(use_regex=False). The patterns below
are this test's own copy, written from llama.cpp's llama-vocab.cpp (the
original tokenizer.json pattern where it quotes one), so a wrong pattern in
folio's table fails here."""
import collections
import json
import os
import subprocess
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")
tokenizers = pytest.importorskip("tokenizers")

FOLIO = os.environ.get("FOLIO_BIN", str(Path(__file__).resolve().parents[2] / "build/bin/folio"))

DIGITS = object()  # pre_tokenizers.Digits(individual_digits=True)

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
          r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
         r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN35 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"""
          r"""| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
UPPER, LOWER = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
CONTR_I = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
CONTR_CASES = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
GPT4O = (rf"[^\r\n\p{{L}}\p{{N}}]?{UPPER}*{LOWER}+{CONTR_I}?"
         rf"|[^\r\n\p{{L}}\p{{N}}]?{UPPER}+{LOWER}*{CONTR_I}?"
         r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
TEKKEN = (rf"[^\r\n\p{{L}}\p{{N}}]?{UPPER}*{LOWER}+|[^\r\n\p{{L}}\p{{N}}]?{UPPER}+{LOWER}*"
          r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
YOUTU = (rf"[^\r\n\p{{L}}\p{{N}}]?{UPPER}*{LOWER}+{CONTR_CASES}?"
         rf"|[^\r\n\p{{L}}\p{{N}}]?{UPPER}+{LOWER}*{CONTR_CASES}?"
         r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
JAIS2 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
         r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)"""
         r"""|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}""")
SEED_CODER = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}"""
              r"""| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+""")
BAILING = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}"""
           r"""| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+""")
UFAKZEKA = r"""[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
EXAONE_MOE = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+"""
              r"""|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+""")
LAGUNA = (CONTR_CASES + r"""|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
          r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
CJK_KANA = "[一-龥぀-ゟ゠-ヿ]+"
CJK_HANGUL = "[一-龥ࠀ-一가-퟿]+"
ASCII_PUNCT_WORD = r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"""
DEEPSEEK_V3 = (ASCII_PUNCT_WORD + r"""|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*"""
               r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
SPARK25 = (ASCII_PUNCT_WORD + r"""|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+"""
           r"""|[\r\n]|\s+(?!\S)|\s+""")
# Written with escapes: some of its letters (U+1F7D, U+2126, U+212A, ...)
# are NFC singletons that a text pipeline may silently replace.
DEEPSEEK_LLM_LETTERS = (
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-"
    "\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1"
    "\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-"
    "\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15"
    "\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D"
    "\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB"
    "\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124"
    "\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184"
    "\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-"
    "\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A"
    "\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-"
    "\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+")
BLOOM = r" ?[^(\s|.,!?…。，、।۔،)]+"

# Representative GGUF name -> (steps, ignore_merges, nfc).
FAMILIES = {
    "llama-bpe": ([LLAMA3], True, False),
    "dbrx": ([LLAMA3], False, False),
    "qwen2": ([QWEN2], False, True),
    "stablelm2": ([QWEN2], False, False),
    "qwen35": ([QWEN35], False, False),
    "gpt-2": ([GPT2], False, False),
    "smollm": ([DIGITS, GPT2], False, False),
    "starcoder": ([DIGITS, GPT2], False, False),
    "deepseek-llm": ([r"[\r\n]", DEEPSEEK_LLM_LETTERS, r"\s?[!-/:-~！-／：-～‘-‟　-。]+", r"\s+$",
                      CJK_HANGUL, r"\p{N}+"], False, False),
    "deepseek-coder": ([r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", CJK_HANGUL, r"\p{N}"], False, False),
    "deepseek-v3": ([r"\p{N}{1,3}", CJK_KANA, DEEPSEEK_V3], False, False),
    "spark2_5": ([r"\p{N}{1,3}", CJK_KANA, SPARK25, r"\p{N}"], False, False),
    "falcon": ([r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"], False, False),
    "bloom": ([BLOOM], False, False),
    "viking": ([BLOOM, r"\p{N}"], False, False),
    "tekken": ([TEKKEN], True, False),
    "gpt-4o": ([GPT4O], False, False),
    "chameleon": ([r"<sentinel:[0-9]+>", r"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                   "([\\t\\n]|    |  )", r"\p{N}", r"[\p{P}!-/:-@\[-`{-~]", GPT2], False, False),
    "jais-2": ([JAIS2], False, False),
    "seed-coder": ([SEED_CODER], False, False),
    "bailingmoe": ([BAILING], False, False),
    "ufakzeka": ([UFAKZEKA], False, False),
    "exaone-moe": ([EXAONE_MOE], False, False),
    "youtu": (["[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+", YOUTU], True, False),
    "laguna": ([r"[^\n]+|[\n]+", LAGUNA], False, False),
}

# Awkward strings: digits, CJK, emoji, contractions (both cases), whitespace
# runs, newlines, code, combining marks, punctuation runs.
TEXTS = [
    "The capital of France is",
    "In 2024, 1234567 people paid $3.50 each (+12.5%) ٣٤٥ ½².",
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다. ﾃｽﾄ",
    "emoji 🙂👍🏽 and flags 🇫🇷🇩🇪!!",
    "I'm sure you'll see they'd've done it; it's 'quoted'. I'M SURE YOU'LL SEE THEY'D'VE DONE IT'S",
    "tabs\tand  double  spaces   and\n\n\nnewlines  \n end   ",
    "def f(x):\n    return {'a': [1, 2, 3]}  # comment\r\n\tif a<=b && c!=d: pass\n",
    "hello world HelloWorld camelCaseXMLParser snake_case __init__",
    "Ünïcödé naïve café e\u0301 ﬁ Ωmega Kelvin \u212a",
    "a,b.c!d?e…f。g，h、i।j۔k،l (paren|pipe)",
    "<sentinel:12> IMGIMGABZ x    y  z",
    " leading space and trailing  ",
    "   ",
]


def byte_level_map():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def vocabulary():
    """256 byte tokens, merges learnt greedily on the test strings (within
    whitespace-led chunks, like a real byte-level BPE), and two whole words
    that no merge reaches (seen only where merges are ignored)."""
    bmap = byte_level_map()
    tokens = [bmap[b] for b in range(256)]
    words = collections.Counter()
    for text in TEXTS:
        chunk = ""
        for ch in text:
            if ch.isspace() and chunk and not chunk[-1].isspace():
                words[chunk] += 1
                chunk = ""
            chunk += ch
        if chunk:
            words[chunk] += 1
    seqs = {w: [bmap[b] for b in w.encode()] for w in words}
    merges, known = [], set(tokens)
    for _ in range(300):
        pairs = collections.Counter()
        for w, seq in seqs.items():
            for a, b in zip(seq, seq[1:]):
                pairs[(a, b)] += words[w]
        if not pairs:
            break
        (a, b), _count = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append((a, b))
        if a + b not in known:
            known.add(a + b)
            tokens.append(a + b)
        for w, seq in seqs.items():
            out, i = [], 0
            while i < len(seq):
                if i + 1 < len(seq) and seq[i] == a and seq[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(seq[i])
                    i += 1
            seqs[w] = out
    for word in ["hello", bmap[ord(" ")] + "world"]:
        if word not in known:
            tokens.append(word)
    return tokens, merges


def write_gguf(path, pre, tokens, merges):
    w = gguf.GGUFWriter(str(path), "gpt2")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([1] * len(tokens))
    w.add_token_merges([f"{a} {b}" for a, b in merges])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def hf_tokenizer(steps, ignore_merges, nfc, tokens, merges):
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(tokens)}, merges,
                               ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True) if s is DIGITS else
         pre_tokenizers.Split(Regex(s), behavior="isolated") for s in steps] +
        [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    return tok


def folio_tokenize(model, text, *extra):
    out = subprocess.run([FOLIO, "tokenize", "--model", str(model), "--no-special", *extra],
                         input=text.encode(), capture_output=True, timeout=60)
    return out


@pytest.fixture(scope="module")
def vocab():
    if not Path(FOLIO).exists():
        pytest.skip(f"no folio binary at {FOLIO}")
    return vocabulary()


@pytest.mark.parametrize("pre", sorted(FAMILIES))
def test_family_matches_hugging_face_tokenizers(pre, vocab, tmp_path):
    tokens, merges = vocab
    steps, ignore_merges, nfc = FAMILIES[pre]
    path = tmp_path / f"{pre}.gguf"
    write_gguf(path, pre, tokens, merges)
    hf = hf_tokenizer(steps, ignore_merges, nfc, tokens, merges)
    for text in TEXTS:
        out = folio_tokenize(path, text)
        assert out.returncode == 0, out.stderr.decode()
        got = json.loads(out.stdout)["ids"]
        want = hf.encode(text, add_special_tokens=False).ids
        assert got == want, (pre, text, [tokens[i] for i in got], [tokens[i] for i in want])


def test_tokenizer_pre_overrides_the_files_name(vocab, tmp_path):
    tokens, merges = vocab
    path = tmp_path / "gpt2.gguf"
    write_gguf(path, "gpt-2", tokens, merges)
    text = "In 2024, 1234567 people"
    hf_smollm = hf_tokenizer(*FAMILIES["smollm"], tokens, merges)
    hf_gpt2 = hf_tokenizer(*FAMILIES["gpt-2"], tokens, merges)
    assert hf_smollm.encode(text).ids != hf_gpt2.encode(text).ids
    plain = folio_tokenize(path, text)
    assert json.loads(plain.stdout)["ids"] == hf_gpt2.encode(text).ids
    over = folio_tokenize(path, text, "--tokenizer-pre", "smollm")
    assert over.returncode == 0, over.stderr.decode()
    assert json.loads(over.stdout)["ids"] == hf_smollm.encode(text).ids


def test_an_unknown_name_is_a_clear_error(vocab, tmp_path):
    tokens, merges = vocab
    path = tmp_path / "odd.gguf"
    write_gguf(path, "no-such-pre", tokens, merges)
    out = folio_tokenize(path, "hi")
    assert out.returncode != 0
    err = out.stderr.decode()
    assert "no-such-pre" in err and "llama-bpe" in err and "gpt-4o" in err, err
    out = folio_tokenize(tmp_path / "odd.gguf", "hi", "--tokenizer-pre", "not-a-family")
    assert out.returncode != 0
    assert "not-a-family" in out.stderr.decode()


@pytest.mark.parametrize("pre", sorted(FAMILIES))
def test_quantize_names_a_folder_tokenizers_family(pre, vocab, tmp_path):
    """`folio quantize` of a Hugging Face folder writes its tokenizer.json as
    GGUF keys, naming the pre-tokenizer by how it splits text: for each
    family's tokenizer.json (built here with HF `tokenizers`), the name
    written splits as that family does (this file's own table), and the
    written file tokenizes as HF `tokenizers` does."""
    import checkpoints as ck
    tokens, merges = vocab
    steps, ignore_merges, nfc = FAMILIES[pre]
    folder = tmp_path / "hf"
    a = ck.Arch(name="llama", hidden=32, heads=2, kv_heads=1, head_dim=16, ffn=32,
                vocab=len(tokens))
    ck.write_hf(folder, a, ck.random_weights(a, seed=1), "f32")
    from tokenizers import decoders
    hf = hf_tokenizer(steps, ignore_merges, nfc, tokens, merges)
    hf.decoder = decoders.ByteLevel()
    hf.save(str(folder / "tokenizer.json"))
    run = subprocess.run([FOLIO, "quantize", str(folder), str(tmp_path / "out.gguf"),
                          "--type", "f32"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    note = json.loads(run.stdout)["tokenizer"]
    assert note.startswith("pre-tokenizer "), note
    written = note.split()[1].rstrip(",")
    for text in TEXTS:
        out = folio_tokenize(tmp_path / "out.gguf", text)
        assert out.returncode == 0, out.stderr.decode()
        got = json.loads(out.stdout)["ids"]
        assert got == hf.encode(text, add_special_tokens=False).ids, (pre, written, text)
    # A name from this file's table must be the family's own, or one whose
    # patterns are spelled differently but split every probe and text alike
    # (bailingmoe's and stablelm2's).
    if written in FAMILIES and FAMILIES[written] != FAMILIES[pre]:
        assert (pre, written) == ("bailingmoe", "stablelm2")

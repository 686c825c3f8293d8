"""WordPiece (BERT) tokenization: folio against Hugging Face `tokenizers`
for tokenizer.json files, and against llama.cpp's WPM tokenizer for GGUF
files written the way llama.cpp's converter writes a BERT vocabulary.

The tokenizers:
  * all-MiniLM-L6-v2's tokenizer.json (bert-base-uncased's 30522 tokens,
    BertNormalizer lowercase, BertPreTokenizer, TemplateProcessing,
    WordPiece decoder), from ~/.cache/folio/all-MiniLM-L6-v2 (tools/setup.sh
    fetches it; FOLIO_MINILM_DIR overrides). Its tests skip, visibly,
    without it.
  * three tokenizers trained here with `tokenizers` on text of this file's
    own: cased with accents stripped; NFD + Lowercase + StripAccents with
    the Whitespace pre-tokenizer, BertProcessing and a short
    max_input_chars_per_word; uncased keeping accents, WhitespaceSplit, no
    post-processor and no decoder.
  * one synthetic tokenizer per normalizer configuration whose vocabulary
    holds every character (and its "##" form), run over every code point:
    folio must split, drop, lowercase and strip exactly as `tokenizers`.

llama.cpp is described by llama_wpm_tokenize / llama_detokenize below, a
line-by-line reading of llm_tokenizer_wpm_session (preprocess + greedy
longest match over "▁" + word), llama_vocab::impl::tokenize's WPM case
(CLS ... SEP), token_to_piece and detokenize's clean_spaces; its Unicode
data as scripts/gen-unicode-data.py builds it (categories, first code point
of NFD, simple lowercase), here from Python's unicodedata (unicodedata2
where installed). Code points unassigned in the interpreter's own Unicode
version are left out of the llama.cpp comparisons, since folio's tables
are Unicode 16.

Many strings go to folio in one `folio tokenize` call, separated by the
[SEP] special token, which splits the text before anything else in both
libraries; the ids between separators are each string's.
"""
import json
import os
import random
import subprocess
import unicodedata as ud_builtin
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers")
gguf = pytest.importorskip("gguf")
try:
    import unicodedata2 as ud
except ImportError:
    ud = ud_builtin

from tokenizers import (AddedToken, Tokenizer, decoders, models, normalizers,  # noqa: E402
                        pre_tokenizers, processors, trainers)

FOLIO = os.environ.get("FOLIO_BIN", str(Path(__file__).resolve().parents[2] / "build/bin/folio"))
MINILM = Path(os.environ.get("FOLIO_MINILM_DIR",
                             Path.home() / ".cache/folio/all-MiniLM-L6-v2"))
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PHANTOM = "\u2581"
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED = 1, 2, 3, 4, 5
WHITE_SPACE = {0x9, 0xA, 0xB, 0xC, 0xD, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
               0x2028, 0x2029, 0x202F, 0x205F, 0x3000}
CHINESE = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
           (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]


# --- Text -------------------------------------------------------------------

CURATED = [
    "", " ", "Hello, world!", "The quick brown fox jumps over the lazy dog.",
    "I'm sure you'll see they'd've done it; it's 'quoted'. DON'T SHOUT, y'all.",
    "unaffable unbelievably antidisestablishmentarianism", "##ing ## # ###x",
    "Héllo Wörld naïve café résumé Ångström Øre Łódź ÇA", "e\u0301 a\u0308\u0301 o\u0323\u0302",
    "İstanbul ı ß ẞ ﬁ ﬃ Ωmega \u2126 \u212B \u212A Kelvin",
    "東京は日本の首都です。北京是中国的首都。你好，世界！", "서울은 한국의 수도입니다. 한글 자모 ᄒ ᅡ ᆫ",
    "ภาษาไทย हिन्दी भाषा தமிழ் العربية עִבְרִית Ελληνικά Русский язык",
    "emoji 🙂👍🏽 👨‍👩‍👧 🇫🇷🇩🇪 ❤️ ✈︎",
    "“curly” ‘quotes’ — dash – en … ellipsis ¿Qué? ¡Sí! «guillemets» ‹›",
    "tabs\tand\nnewlines\r\n and  double  spaces\u00a0nbsp\u3000ideographic\u2003em",
    "ctrl\x00\x01\x07\x08\x0b\x0c\x1b\x1f\x7f\x85\x9f zero\u200bwidth\u200d joiner\ufeff bom",
    "replacement \ufffd private \ue000\U000f0000 unassigned \u0378 nonchar \ufdd0",
    "a" * 99, "b" * 100, "c" * 101, "x" * 250 + " y", "é" * 60 + "e\u0301" * 50,
    "$100 + 5% = <x> ^y | `z` ~w @a #b &c *d (e) [f] {g} \\h /i _j -k",
    "[CLS] [MASK] [PAD] [UNK] [mask] [cls]text[MASK]more", "don't do not won't can't I'm we're",
    "a.b,c!d?e;f:g'h\"i", " . ? ! , ' ", "...!!!???,,,", "U.S.A. e.g. i.e. Mr. Smith's",
    "code: def f(x): return x**2 # comment", "https://example.com/path?q=1&r=2#frag",
    "numbers 3.14159 1,000,000 ٣٤٥ ½ ² ⅷ ①", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ ﾃｽﾄ",
    "\u2581phantom \u2581space", "Ǆ ǅ ǆ ᾈ ᾀ Σ σ ς ΣΑΣ", "ŉ ǰ ΐ", "\u0345\u0300 combining alone",
    "ㄱㄴㄷ ᄀᄁ 가각", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐛𝐨𝐥𝐝 𠀀𠀁 𪜀 𫝀", "\U0002B820\U0002B91F\U0002B920",
]

POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿÀÉÎÕÜŒœŠšŽžŁłŃńŚśŹźŻż",
    "αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩάέήίόύώϊϋΐΰ",
    "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЁЖЗИЙКЛМНОПРСТУФХЦЧШЩЪЫЬЭЮЯ",
    "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生",
    "あいうえおかきくけこアイウエオカキクケコ한국어가나다라마바사", "\u0300\u0301\u0302\u0303\u0308\u0327\u0323\u093f\u0940\u0e31\u20dd",
    "“”‘’«»—–…¿¡§¶†‡•‰′″‹›⁂※⁇、。，！？：；「」『』（）【】",
    " \t\n\r\x0b\x0c\x85\u00a0\u1680\u2000\u2009\u200a\u2028\u2029\u202f\u205f\u3000",
    "\x00\x01\x1f\x7f\x9f\u200b\u200c\u200d\u2060\ufeff\ufffd\ue000\u0378\ufdd0",
    "🙂👍🏽🇫🇷❤️✈\u200d🔥💯🎉", "İıßẞﬁﬀǅǲᾈΣς\u2126\u212a\u212b",
]


def random_strings(words, count, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(0, 12)):
            kind = rng.random()
            if kind < 0.5 and words:
                w = rng.choice(words)
                if rng.random() < 0.3:
                    w = w.capitalize() if rng.random() < 0.5 else w.upper()
                parts.append(w)
            elif kind < 0.85:
                pool = rng.choice(POOLS)
                parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 8))))
            elif kind < 0.95:
                parts.append(chr(rng.choice([rng.randint(0x20, 0x2FFF), rng.randint(0x3000, 0xFFEF),
                                             rng.randint(0x10000, 0x2FFFF)])))
            else:
                parts.append(rng.choice(words or ["x"]) * rng.randint(20, 40))  # long words
        sep = rng.choice([" ", " ", " ", "", "  ", "\n", "\t", "\u3000", ", "])
        s = sep.join(parts)
        out.append(s.replace("[SEP]", "[S]"))
    return [s for s in out if not any(0xD800 <= ord(c) <= 0xDFFF for c in s)]


# --- folio ------------------------------------------------------------------

def folio(model, *args, stdin=""):
    out = subprocess.run([FOLIO, "tokenize", "--model", str(model), *args], input=stdin.encode(),
                         capture_output=True, timeout=600)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    return json.loads(out.stdout)


def folio_encode_each(model, strings, sep_id):
    """Each string's ids, from one call with [SEP] between the strings."""
    ids = folio(model, "--no-special", stdin="[SEP]".join(strings))["ids"]
    per, cur = [], []
    for i in ids:
        if i == sep_id:
            per.append(cur)
            cur = []
        else:
            cur.append(i)
    per.append(cur)
    assert len(per) == len(strings), (len(per), len(strings))
    return per


def folio_decode(model, ids, skip_special):
    args = ["--decode"] + ([] if skip_special else ["--no-special"])
    return folio(model, *args, stdin=",".join(map(str, ids)))["text"]


def compare_each(strings, got, want, show):
    bad = [(s, g, w) for s, g, w in zip(strings, got, want) if g != w]
    assert not bad, f"{len(bad)} of {len(strings)} differ; first: " + "; ".join(
        f"{s!r}: folio {show(g)} want {show(w)}" for s, g, w in bad[:3])


@pytest.fixture(scope="module")
def binary():
    if not Path(FOLIO).exists():
        pytest.skip(f"no folio binary at {FOLIO}")
    return FOLIO


# --- Tokenizers under test --------------------------------------------------

CORPUS_WORDS = (
    "the quick brown fox jumps over lazy dog tokenization wordpiece pieces "
    "naïve café résumé Zürich Ångström São Paulo Kraków Dvořák Ñandú "
    "Hello World Paris London Berlin Tokyo 東京 北京 서울 Москва Αθήνα "
    "running runner runs ran unbelievable believing believed disbelief "
    "international internationalization nationalism nation nations "
    "don't can't won't it's I'm we've they're you'll she'd "
    "2024 1,000 3.14 100% $5 #tag @user e-mail co-operate U.S.A."
).split()


def training_text():
    rng = random.Random(3)
    lines = []
    for _ in range(3000):
        lines.append(" ".join(rng.choice(CORPUS_WORDS) for _ in range(rng.randint(3, 15))))
    return lines


def train(normalizer, pre_tokenizer, vocab_size=1200):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                        show_progress=False)
    tok.train_from_iterator(training_text(), trainer=trainer)
    return tok


def template(tok):
    return processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])


def trained_cased():
    tok = train(normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                           strip_accents=True, lowercase=False),
                pre_tokenizers.BertPreTokenizer())
    tok.post_processor = template(tok)
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    return tok


def trained_nfd_whitespace():
    tok = train(normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(),
                                      normalizers.StripAccents()]),
                pre_tokenizers.Whitespace())
    tok.model.max_input_chars_per_word = 12
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    tok.add_tokens([AddedToken("Zürich", normalized=True), AddedToken("<ent>", normalized=False)])
    return tok


def trained_uncased_accents():
    tok = train(normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False,
                                           strip_accents=False, lowercase=True),
                pre_tokenizers.WhitespaceSplit())
    return tok


def save(tok, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


def minilm_path():
    path = MINILM / "tokenizer.json"
    if not path.exists():
        pytest.skip(f"all-MiniLM-L6-v2 is not at {MINILM} (tools/setup.sh fetches it; "
                    "FOLIO_MINILM_DIR names another folder)")
    return path


def load_hf(path):
    tok = Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()
    return tok


def vocab_words(tok):
    return [w for w in tok.get_vocab() if not w.startswith("##") and not w.startswith("[")]


# --- Hugging Face tokenizer.json --------------------------------------------

def check_against_hf(binary, path, seed, count=3000):
    hf = load_hf(path)
    strings = CURATED + random_strings(vocab_words(hf), count, seed)
    want = [e.ids for e in hf.encode_batch(strings, add_special_tokens=False)]
    got = folio_encode_each(path, strings, hf.token_to_id("[SEP]"))
    compare_each(strings, got, want, lambda ids: [hf.id_to_token(i) for i in ids])
    # With the post-processor's special tokens, one string at a time.
    for s in strings[:40]:
        assert folio(path, stdin=s)["ids"] == hf.encode(s).ids, s
    # Decoding, many strings' ids at once, special tokens skipped or kept.
    sep = hf.token_to_id("[SEP]")
    for start in range(0, len(strings), 150):
        ids = []
        for w in want[start:start + 150]:
            ids += w + [sep]
        for skip in (True, False):
            assert folio_decode(path, ids, skip) == hf.decode(ids, skip_special_tokens=skip), \
                (start, skip)
    # And a string's own ids, where the first token decides the first space.
    for w in want[:60]:
        if w:
            assert folio_decode(path, w, True) == hf.decode(w), w
    return len(strings)


def test_minilm_matches_tokenizers(binary):
    assert check_against_hf(binary, minilm_path(), seed=1) > 3000


def test_trained_cased_matches_tokenizers(binary, tmp_path):
    check_against_hf(binary, save(trained_cased(), tmp_path / "cased/tokenizer.json"), seed=2)


def test_trained_nfd_whitespace_matches_tokenizers(binary, tmp_path):
    path = save(trained_nfd_whitespace(), tmp_path / "nfd/tokenizer.json")
    check_against_hf(binary, path, seed=3, count=1500)


def test_trained_uncased_with_accents_matches_tokenizers(binary, tmp_path):
    path = save(trained_uncased_accents(), tmp_path / "accents/tokenizer.json")
    check_against_hf(binary, path, seed=4, count=1500)


# Every code point, each after an "a" in words of 32: a character
# BertPreTokenizer isolates, whitespace, a control clean_text drops, a mark
# strip_accents drops or a lowercase mapping all change the ids.
def every_code_point_text(cps):
    words = []
    for i in range(0, len(cps), 32):
        words.append("".join("a" + chr(c) for c in cps[i:i + 32]))
    return " ".join(words)


# Planes 0-3 and 14 whole; of the unassigned planes 4-13 and the private
# use planes 15-16 every 97th code point (a vocabulary of all of them would
# pass folio's limit of 2^21 tokens where nothing drops them).
ALL_CODE_POINTS = [c for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF
                   and (c < 0x40000 or 0xE0000 <= c < 0xF0000 or c % 97 == 0)]


@pytest.mark.parametrize("name", ["bert-uncased", "bert-cased-keep-accents", "nfd-whitespace"])
def test_every_code_point_matches_tokenizers(binary, tmp_path, name):
    norm, pre = {
        "bert-uncased": (normalizers.BertNormalizer(lowercase=True),
                         pre_tokenizers.BertPreTokenizer()),
        "bert-cased-keep-accents": (normalizers.BertNormalizer(lowercase=False,
                                                               strip_accents=False),
                                    pre_tokenizers.BertPreTokenizer()),
        "nfd-whitespace": (normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(),
                                                 normalizers.StripAccents()]),
                           pre_tokenizers.Whitespace()),
    }[name]
    text = every_code_point_text(ALL_CODE_POINTS)
    chars = sorted(set(norm.normalize_str(text)) - {" "})
    vocab = {t: i for i, t in enumerate(SPECIALS)}
    for ch in chars:
        for t in (ch, "##" + ch):
            vocab.setdefault(t, len(vocab))
    hf = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=1000))
    hf.normalizer, hf.pre_tokenizer = norm, pre
    hf.add_special_tokens(SPECIALS)
    path = save(hf, tmp_path / "tokenizer.json")
    want = hf.encode(text, add_special_tokens=False).ids
    got = folio(path, "--no-special", stdin=text)["ids"]
    if got != want:
        i = next(i for i, (g, w) in enumerate(zip(got + [None], want + [None])) if g != w)
        pytest.fail(f"{name}: ids differ at {i}: folio {[hf.id_to_token(x) for x in got[i:i + 4]]}"
                    f" want {[hf.id_to_token(x) for x in want[i:i + 4]]}")


# --- llama.cpp's WPM, as its sources read -----------------------------------

def llama_preprocess(text, lowercase, strip_accents):
    """llm_tokenizer_wpm_session::preprocess."""
    words = [""]
    for ch in text:
        cpt = ord(ch)
        if strip_accents:
            cpt = ord(ud.normalize("NFD", chr(cpt))[0])  # unicode_cpts_normalize_nfd
        if cpt in WHITE_SPACE:
            if words[-1]:
                words.append("")
            continue
        cat = ud.category(chr(cpt))
        if cpt == 0 or cpt == 0xFFFD or cat in ("Cc", "Cf", "Co", "Cs"):
            continue
        if strip_accents and cat[0] == "M":
            continue
        s = chr(cpt).lower()[0] if lowercase else chr(cpt)  # the simple mapping
        if cat[0] == "P" or (cpt < 0x7F and cat[0] == "S") or any(
                a <= cpt <= b for a, b in CHINESE):
            if words[-1]:
                words.append("")
            words[-1] = s
            words.append("")
        else:
            words[-1] += s
    if not words[-1]:
        words.pop()
    return words


class LlamaVocab:
    def __init__(self, tokens, types, bos, sep, unk, lowercase=True, strip_accents=True):
        self.tokens, self.types = tokens, types
        self.ids = {t.encode(): i for i, t in enumerate(tokens)}
        assert len(self.ids) == len(tokens), "the phantom vocabulary repeats a token"
        self.max_len = max(len(t.encode()) for t in tokens)
        self.bos, self.sep, self.unk = bos, sep, unk
        self.lowercase, self.strip_accents = lowercase, strip_accents

    def tokenize(self, text, add_special=False):
        """llama_vocab::impl::tokenize, WPM case, for text without special tokens."""
        out = [self.bos] if add_special else []
        for word in llama_preprocess(text, self.lowercase, self.strip_accents):
            w = (PHANTOM + word).encode()
            n, mark, i = len(w), len(out), 0
            while i < n:
                for j in range(min(n, i + self.max_len + 1), i, -1):
                    tok = self.ids.get(w[i:j])
                    if tok is not None:
                        out.append(tok)
                        i = j - 1
                        break
                else:
                    del out[mark:]
                    break
                i += 1
            if len(out) == mark:
                out.append(self.unk)
        return out + ([self.sep] if add_special else [])

    def detokenize(self, ids, special):
        """token_to_piece for each id, then detokenize's clean_spaces."""
        text = b""
        for i in ids:
            t = self.types[i]
            if t in (UNKNOWN, CONTROL) and not special:
                continue
            if t in (UNKNOWN, CONTROL, USER_DEFINED):
                text += self.tokens[i].encode()
            elif t == NORMAL:
                text += self.tokens[i].replace(PHANTOM, " ").encode()
        return clean_spaces(bytearray(text)).decode("utf-8", errors="replace")


def clean_spaces(text):
    """llama_vocab::impl::detokenize's three in-place passes."""
    total = len(text)
    total1, total = total, 1 if total else 0
    for i in range(1, total1):
        x = text[i]
        if text[i - 1] == 0x20 and x in b"?!.,":
            total -= 1
        text[total] = x
        total += 1
    total2, total = total, 1 if total else 0
    i = 1
    while i < total2:
        x = text[i]
        if x == 0x27 and i + 1 < total2 and text[i - 1] == 0x20 and text[i + 1] == 0x20:
            total -= 1
            i += 1
            text[i] = 0
        text[total] = x
        total += 1
        i += 1
    total3, total = total, 1 if total else 0
    for i in range(1, total3):
        x = text[i]
        if text[i - 1] == 0x20 and x == 0x27 and i + 1 < total3:
            x1 = text[i + 1]
            if x1 in b"sm":
                total -= 1
            elif x1 not in b"td" and i + 2 < total3:
                if x1 in b"rv" and text[i + 2] == ord("e"):
                    total -= 1
        text[total] = x
        total += 1
    return bytes(text[:total])


def phantom_vocab(tok_json):
    """The vocabulary as llama.cpp's BertModel.set_vocab writes it: special
    added tokens control and as they are, "##x" as "x", the rest "▁x", ids
    without a token "[PADn]" and unused."""
    tj = json.loads(Path(tok_json).read_text())
    by_id = {i: t for t, i in tj["model"]["vocab"].items()}
    added = {a["id"]: a for a in tj["added_tokens"]}
    by_id.update({i: a["content"] for i, a in added.items()})
    tokens, types = [], []
    for i in range(max(by_id) + 1):
        tok = by_id.get(i, f"[PAD{i}]")
        typ = UNUSED if i not in by_id else NORMAL
        if i in added:
            typ = CONTROL if added[i]["special"] else USER_DEFINED
        tokens.append(tok if typ == CONTROL else tok[2:] if tok.startswith("##")
                      else PHANTOM + tok)
        types.append(typ)
    return tokens, types


def write_bert_gguf(path, tokens, types, lowercase=None, strip_accents=None):
    """A vocabulary-only GGUF with the keys llama.cpp's converter writes for
    BERT: cls as bos, sep as eos and separator, unk, pad; add_bos and
    add_eos as gguf.SpecialVocab reads a [CLS] $A [SEP] template. Returns
    llama.cpp's view of it."""
    ids = {t: i for i, t in enumerate(tokens) if types[i] == CONTROL}
    w = gguf.GGUFWriter(str(path), "bert")
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("bert-bge")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_bos_token_id(ids["[CLS]"])
    w.add_eos_token_id(ids["[SEP]"])
    w.add_sep_token_id(ids["[SEP]"])
    w.add_unk_token_id(ids["[UNK]"])
    w.add_pad_token_id(ids["[PAD]"])
    w.add_add_bos_token(True)
    w.add_add_eos_token(True)
    if lowercase is not None:
        w.add_bool("tokenizer.ggml.normalizer.lowercase", lowercase)
    if strip_accents is not None:
        w.add_bool("tokenizer.ggml.normalizer.strip_accents", strip_accents)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    lower = True if lowercase is None else lowercase
    return LlamaVocab(tokens, types, ids["[CLS]"], ids["[SEP]"], ids["[UNK]"], lowercase=lower,
                      strip_accents=lower if strip_accents is None else strip_accents)


def assigned_in_both(s):
    """Leaves out code points either Unicode version here lacks."""
    return "".join(c for c in s if ud_builtin.category(c) != "Cn" and ud.category(c) != "Cn"
                   or c in "\ufdd0")


def check_against_llama(path, llama, hf, seed, count=3000):
    strings = [assigned_in_both(s) for s in CURATED + random_strings(vocab_words(hf), count, seed)]
    strings = [s.replace("[", "(") for s in strings]  # no special tokens in the text
    want = [llama.tokenize(s) for s in strings]
    got = folio_encode_each(path, strings, llama.sep)
    compare_each(strings, got, want, lambda ids: [llama.tokens[i] for i in ids])
    for s in strings[:40]:
        assert folio(path, stdin=s)["ids"] == llama.tokenize(s, add_special=True), s
    for start in range(0, len(strings), 150):
        ids = [llama.bos]
        for w in want[start:start + 150]:
            ids += w + [llama.sep]
        for skip in (True, False):
            assert folio_decode(path, ids, skip) == llama.detokenize(ids, not skip), (start, skip)
    return strings, want


def test_minilm_gguf_matches_llama_cpp(binary, tmp_path):
    path = tmp_path / "minilm.gguf"
    llama = write_bert_gguf(path, *phantom_vocab(minilm_path()))
    hf = load_hf(minilm_path())
    strings, want = check_against_llama(path, llama, hf, seed=5)
    # Where llama.cpp's preprocessing and `tokenizers`' agree (plain ASCII
    # words, no over-long ones), so do the ids.
    plain = [i for i, s in enumerate(strings)
             if s.isascii() and all(32 <= ord(c) < 127 for c in s)
             and all(len(w) <= 100 for w in s.split())]
    assert len(plain) > 100
    hf_ids = hf.encode_batch([strings[i] for i in plain], add_special_tokens=False)
    for i, e in zip(plain, hf_ids):
        assert [llama.tokens[t] for t in want[i]] == [
            t if t.startswith("[") else t[2:] if t.startswith("##") else PHANTOM + t
            for t in e.tokens], strings[i]


def test_trained_cased_gguf_matches_llama_cpp(binary, tmp_path):
    tj = save(trained_cased(), tmp_path / "cased/tokenizer.json")
    path = tmp_path / "cased.gguf"
    llama = write_bert_gguf(path, *phantom_vocab(tj), lowercase=False, strip_accents=True)
    check_against_llama(path, llama, load_hf(tj), seed=6)


def test_every_code_point_matches_llama_cpp(binary, tmp_path):
    cps = [c for c in ALL_CODE_POINTS if ud_builtin.category(chr(c)) != "Cn"
           and ud.category(chr(c)) != "Cn"]
    text = every_code_point_text(cps)
    chars = set()
    for word in llama_preprocess(text, True, True):
        chars.update(word)
    tokens = list(SPECIALS)
    for ch in sorted(chars):
        tokens += [PHANTOM + ch, ch]
    tokens = list(dict.fromkeys(tokens))
    types = [CONTROL] * len(SPECIALS) + [NORMAL] * (len(tokens) - len(SPECIALS))
    path = tmp_path / "all.gguf"
    llama = write_bert_gguf(path, tokens, types)
    want = llama.tokenize(text)
    got = folio(path, "--no-special", stdin=text)["ids"]
    if got != want:
        i = next(i for i, (g, w) in enumerate(zip(got + [None], want + [None])) if g != w)
        pytest.fail(f"ids differ at {i}: folio {[llama.tokens[x] for x in got[i:i + 4]]} "
                    f"want {[llama.tokens[x] for x in want[i:i + 4]]}")

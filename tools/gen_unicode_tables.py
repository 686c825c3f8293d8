#!/usr/bin/env python3
"""Writes src/tokenizer/unicode_tables.cc, the Unicode data of folio's tokenizers.

1. The general category of every code point, as runs, for the split
   regexes' classes (\\p{L}, \\p{N}, ...). Hugging Face `tokenizers` matches
   split patterns with Oniguruma, whose tables are Unicode 16.0 in the pinned
   version (0.23.3); PCRE2's own tables follow the PCRE2 release (Unicode 14
   in Debian 12), so folio spells each class out from this table instead.
2. The numeric code points of the Digits pre-tokenizer (Rust's
   char::is_numeric, whose tables are Unicode 17 in the Rust that built the
   pinned `tokenizers`), read off `tokenizers` itself.
3. NFC data as `tokenizers` has it. Its normalizer (the
   unicode-normalization-alignments crate) carries older Unicode tables:
   it knows fewer combining classes and decompositions than Unicode 16, and
   a current library (ICU, utf8proc) would order or compose some marks
   differently. So the tables are read off `tokenizers` itself: which
   combining marks it reorders (their class values, which Unicode never
   changes, come from Unicode 16), which code points it decomposes (their
   one-step mappings from Unicode 16) and which pairs it composes.

It also writes src/tokenizer/unicode_bert_tables.cc, the character data of
the WordPiece (BERT) tokenizers:

4. BERT's character classes, read off `tokenizers` code point by code
   point: what BertNormalizer's clean_text drops, what its strip_accents
   drops after NFD (the nonspacing marks of the unicode_categories crate's
   old tables), what StripAccents drops (unicode-normalization's combining
   marks), what BertPreTokenizer isolates as punctuation and what the
   Whitespace pre-tokenizer's \\w takes (Oniguruma's tables).
5. Rust's char::to_lowercase, as the Lowercase normalizer applies it.
6. The first code point of each character's canonical decomposition in
   Unicode 16.0: llama.cpp's WordPiece "NFD" keeps only that one.

Needs the pinned `tokenizers` (tools/setup.sh) and the `unicodedata2`
backport; regenerating gives the same files anywhere (clang-format them):

    python3 -m pip install --target /tmp/ud16 unicodedata2==16.0.0
    PYTHONPATH=/tmp/ud16 python3 tools/gen_unicode_tables.py
"""

import os
import sys

import tokenizers
import unicodedata2
from tokenizers import (AddedToken, Tokenizer, models, normalizers,
                        pre_tokenizers)

EXPECTED_UNICODE = "16.0.0"
EXPECTED_TOKENIZERS = "0.23.3"
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3
# The order of folio::tokenizer::unicode::Category (src/tokenizer/unicode.h).
CATEGORIES = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl",
              "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc",
              "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"]


def code_points():
    return [c for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF]


def normalize_each(normalizer, strings):
    """Normalizes each string alone (NUL separates them: it never combines)."""
    out = normalizer.normalize_str("\x00".join(strings)).split("\x00")
    assert len(out) == len(strings)
    return out


def numeric_ranges():
    """[first, last] ranges of what Digits(individual_digits) isolates."""
    cps = code_points()
    pieces = pre_tokenizers.Digits(individual_digits=True).pre_tokenize_str(
        "a".join(chr(c) for c in cps))  # "a" keeps non-numeric runs long
    numeric = sorted(ord(p) for p, _ in pieces if len(p) == 1 and p != "a")
    ranges = []
    for c in numeric:
        if ranges and ranges[-1][1] + 1 == c:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return ranges


def check_word_characters():
    """single_word tests its neighbours with the regex crate's \\w;
    unicode::IsWordChar computes it from the Unicode 16 categories plus
    Join_Control and the non-mark Other_Alphabetic symbols. Checks that
    this is what `tokenizers` does, code point by code point."""
    vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.add_tokens([AddedToken("xyz", single_word=True, normalized=False)])
    xyz = tok.token_to_id("xyz")
    cps = code_points()
    encodings = tok.encode_batch([chr(c) + "xyz" for c in cps],
                                 add_special_tokens=False)
    extra = [(0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169),
             (0x1F170, 0x1F189), (0x200C, 0x200D)]
    for c, e in zip(cps, encodings):
        cat = unicodedata2.category(chr(c))
        ours = (cat[0] in "LM" or cat in ("Nd", "Nl", "Pc")
                or any(a <= c <= b for a, b in extra))
        if ours != (xyz not in e.ids):
            sys.exit(f"word character table disagrees at U+{c:04X}")


def combining_classes():
    """(code point, class) for the marks `tokenizers` reorders."""
    nfd = normalizers.NFD()
    marks = [c for c in code_points() if unicodedata2.combining(chr(c)) > 0]
    # A mark of class k > 1 before U+0334 (class 1) moves after it; a class-1
    # mark after U+0301 (class 230) moves before it -- if the class is known.
    probes = ["a" + chr(m) + "\u0334" if unicodedata2.combining(chr(m)) > 1
              else "a\u0301" + chr(m) for m in marks]
    known = []
    for m, out in zip(marks, normalize_each(nfd, probes)):
        k = unicodedata2.combining(chr(m))
        moved = out == "a\u0334" + chr(m) if k > 1 else out == "a" + chr(m) + "\u0301"
        if moved:
            known.append((m, k))
    return known


def decompositions():
    """(code point, first, second, composes) for each code point `tokenizers`
    decomposes, Hangul syllables aside (they are arithmetic); second is 0
    for a singleton."""
    nfd, nfc = normalizers.NFD(), normalizers.NFC()
    cps = [c for c in code_points() if not HANGUL_FIRST <= c <= HANGUL_LAST]
    decomposed = [c for c, out in zip(cps, normalize_each(nfd, [chr(c) for c in cps]))
                  if out != chr(c)]
    rows = []
    for c in decomposed:
        mapping = unicodedata2.decomposition(chr(c))
        assert mapping and not mapping.startswith("<"), hex(c)
        parts = [int(x, 16) for x in mapping.split()]
        assert len(parts) in (1, 2), hex(c)
        rows.append([c, parts[0], parts[1] if len(parts) == 2 else 0, False])
    pairs = [r for r in rows if r[2] != 0]
    composed = normalize_each(nfc, [chr(r[1]) + chr(r[2]) for r in pairs])
    for r, out in zip(pairs, composed):
        r[3] = out == chr(r[0])
    # The full decomposition tokenizers gives is these steps applied again.
    step = {r[0]: r for r in rows}

    def full(c):
        if c not in step:
            return chr(c)
        r = step[c]
        return full(r[1]) + (full(r[2]) if r[2] else "")
    for c, out in zip(decomposed, normalize_each(nfd, [chr(c) for c in decomposed])):
        assert unicodedata2.normalize("NFD", full(c)) == out or full(c) == out, hex(c)
    return rows


# tokenizers' (and llama.cpp's) "Chinese characters" (bert.rs is_chinese_char,
# with its 0x2B920 for 0x2B820); unicode.cc has the same list.
CHINESE_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
                  (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF),
                  (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]
# The bits of unicode::BertFlags (src/tokenizer/unicode.h).
BERT_CONTROL, BERT_PUNCTUATION, BERT_NONSPACING_MARK, COMBINING_MARK, \
    ONIG_WORD = 1, 2, 4, 8, 16
WHITE_SPACE = [0x9, 0xA, 0xB, 0xC, 0xD, 0x20, 0x85, 0xA0, 0x1680,
               *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000]


def bert_flags():
    """The BERT classes of every code point (0 for surrogates), probed one
    code point at a time; checks on the way that the classes unicode.cc
    takes from elsewhere (White_Space, the Chinese ranges) are what
    `tokenizers` uses."""
    clean = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False,
                                       strip_accents=False, lowercase=False)
    chinese = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True,
                                         strip_accents=False, lowercase=False)
    strip = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False,
                                       strip_accents=True, lowercase=False)
    strip_accents, nfd = normalizers.StripAccents(), normalizers.NFD()
    bert_pre, whitespace = pre_tokenizers.BertPreTokenizer(), pre_tokenizers.Whitespace()
    white = set(WHITE_SPACE)
    flags = [0] * 0x110000
    flags[0] = BERT_CONTROL  # clean_text drops U+0000 by name
    for c in code_points():
        ch, f = chr(c), 0
        cleaned = clean.normalize_str(ch)
        if cleaned == "":
            f |= BERT_CONTROL
        elif cleaned != (" " if c in white else ch):
            sys.exit(f"clean_text maps U+{c:04X} to {cleaned!r}")
        in_ranges = any(a <= c <= b for a, b in CHINESE_RANGES)
        if (chinese.normalize_str(ch) == f" {ch} ") != in_ranges:
            sys.exit(f"Chinese character ranges disagree at U+{c:04X}")
        # After NFD only undecomposable code points are left to filter.
        if nfd.normalize_str(ch) == ch and strip.normalize_str(ch) == "":
            f |= BERT_NONSPACING_MARK
        if strip_accents.normalize_str(ch) == "":
            f |= COMBINING_MARK
        pieces = [p for p, _ in bert_pre.pre_tokenize_str("a" + ch + "a")]
        if len(pieces) == 3:
            f |= BERT_PUNCTUATION
        elif (len(pieces) == 2) != (c in white):
            sys.exit(f"BertPreTokenizer's whitespace disagrees at U+{c:04X}")
        pieces = [p for p, _ in whitespace.pre_tokenize_str("a" + ch + "a")]
        if len(pieces) == 1:
            f |= ONIG_WORD
        elif (len(pieces) == 2) != (c in white):
            sys.exit(f"Whitespace's \\s disagrees at U+{c:04X}")
        flags[c] = f
    return flags


def lowercase_rows():
    """(code point, first code point of its lowercase) where it changes;
    only U+0130 lowers to two code points (i and U+0307), which unicode.cc
    knows by name."""
    low = normalizers.Lowercase()
    rows = []
    for c in code_points():
        out = low.normalize_str(chr(c))
        if out == chr(c):
            continue
        if len(out) != 1 and not (c == 0x130 and out == "i\u0307"):
            sys.exit(f"U+{c:04X} lowercases to {out!r}")
        rows.append((c, ord(out[0])))
    return rows


def nfd_first_rows():
    """(code point, the first code point of its Unicode 16 canonical
    decomposition) where that differs, Hangul syllables aside."""
    rows = []
    for c in code_points():
        if HANGUL_FIRST <= c <= HANGUL_LAST:
            continue
        first = ord(unicodedata2.normalize("NFD", chr(c))[0])
        if first != c:
            rows.append((c, first))
    return rows


def write_bert_tables(path):
    flags = bert_flags()
    runs, previous = [], None
    for c, f in enumerate(flags):
        if f != previous:
            runs.append((c << 8) | f)
            previous = f
    lower = lowercase_rows()
    nfd_first = nfd_first_rows()
    with open_generated(path) as f:
        f.write(
            "// (first code point << 8) | BertFlags bits; the flags last until "
            "the next\n// entry's first code point.\n")
        write_array(f, "kBertFlagRuns", runs, 8)
        f.write("// Pairs: code point, the first code point of Rust's "
                "to_lowercase (the\n// second, for U+0130 only, is U+0307).\n")
        write_array(f, "kLowercase", [x for r in lower for x in r], 8)
        f.write("// Pairs: code point, the first code point of its canonical "
                "decomposition,\n// Hangul syllables aside.\n")
        write_array(f, "kNfdFirst", [x for r in nfd_first for x in r], 8)
        f.write("}  // namespace folio::tokenizer::unicode\n")
    print(f"{path}: {len(runs)} BERT flag runs, {len(lower)} lowercase "
          f"mappings, {len(nfd_first)} NFD first code points")


def open_generated(path):
    """A generated table file, open for writing, its header written."""
    f = open(path, "w", encoding="ascii")
    f.write("// Generated by tools/gen_unicode_tables.py from Unicode "
            f"{EXPECTED_UNICODE} and\n// tokenizers {EXPECTED_TOKENIZERS}; "
            "do not edit.\n"
            '#include "tokenizer/unicode.h"\n\n'
            "namespace folio::tokenizer::unicode {\n\n")
    return f


def write_array(f, name, values, per_line):
    f.write(f"const uint32_t {name}[{len(values)}] = {{\n")
    for i in range(0, len(values), per_line):
        f.write("    " + " ".join(f"0x{v:x}," for v in values[i:i + per_line])
                + "\n")
    f.write(f"}};\nconst size_t kNum{name[1:]} = {len(values)};\n\n")


def main():
    if unicodedata2.unidata_version != EXPECTED_UNICODE:
        sys.exit(f"unicodedata2 has Unicode {unicodedata2.unidata_version}, "
                 f"want {EXPECTED_UNICODE}")
    if tokenizers.__version__ != EXPECTED_TOKENIZERS:
        sys.exit(f"tokenizers {tokenizers.__version__} installed, want "
                 f"{EXPECTED_TOKENIZERS}")
    index = {name: i for i, name in enumerate(CATEGORIES)}
    runs = []
    previous = None
    for cp in range(0x110000):
        cat = index[unicodedata2.category(chr(cp))]
        if cat != previous:
            runs.append((cp << 5) | cat)
            previous = cat
    numeric = numeric_ranges()
    check_word_characters()
    classes = combining_classes()
    rows = decompositions()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, "src", "tokenizer", "unicode_tables.cc")
    with open_generated(path) as f:
        f.write(
            "// (first code point << 5) | category; the category lasts until "
            "the next\n// entry's first code point.\n")
        write_array(f, "kCategoryRuns", runs, 10)
        f.write("// [first, last] pairs: what `tokenizers`' Digits pre-tokenizer "
                "takes for\n// numeric (Rust's char::is_numeric).\n")
        write_array(f, "kNumericRanges", [x for r in numeric for x in r], 10)
        f.write("// (code point << 8) | canonical combining class, for the "
                "marks `tokenizers`\n// reorders; every other code point has "
                "class 0 there.\n")
        write_array(f, "kCombiningClasses", [(c << 8) | k for c, k in classes], 10)
        f.write("// Triples: code point, first, second | composes << 31 (second "
                "0: a\n// singleton), the one-step canonical decompositions of "
                "the code points\n// `tokenizers` decomposes, Hangul syllables "
                "aside.\n")
        flat = []
        for c, a, b, composes in rows:
            flat += [c, a, b | (1 << 31 if composes else 0)]
        write_array(f, "kDecompositions", flat, 9)
        f.write("}  // namespace folio::tokenizer::unicode\n")
    print(f"{path}: {len(runs)} category runs, {len(numeric)} numeric "
          f"ranges, {len(classes)} combining "
          f"classes, {len(rows)} decompositions "
          f"({sum(r[3] for r in rows)} composing)")
    write_bert_tables(os.path.join(root, "src", "tokenizer", "unicode_bert_tables.cc"))


if __name__ == "__main__":
    main()

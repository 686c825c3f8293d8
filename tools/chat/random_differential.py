"""folio's chat templates against jinja2 on random templates.

Builds random templates from the expressions, filters, tests, methods and
statements chat templates use, renders each with jinja2 configured as
Hugging Face's apply_chat_template (make_render_cases.py's environment)
and with `folio template`, and prints every case where they disagree: a
different text, or one raising where the other does not. What cannot
agree is skipped: Python's reprs of generators and iterators carry a
memory address, and what folio refuses as unsupported (kUnimplemented).

Usage: python3 tools/chat/random_differential.py [--folio build/bin/folio]
           [--seed 1] [--cases 500] [--show 20]
"""
import argparse
import copy
import json
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_render_cases import EPOCH, render  # noqa: E402

VARS = {"x": "Hello World", "n": 7, "f": 2.5, "z": 0, "e": "", "l": [3, 1, 2], "s": ["b", "A", "c"],
        "d": {"b": 2, "a": 1},
        "m": [{"role": "user", "content": "hi "}, {"role": "assistant", "content": " yo"}],
        "t": True, "nn": None, "u8": "héllo wörld 日本", "ws": "  a \n b\t", "neg": -3,
        "big": 10**12}
ATOMS = ["x", "n", "f", "z", "e", "l", "s", "d", "m", "t", "nn", "u8", "ws", "neg", "big", "u",
         "missing", "1", "0", "-2", "2.5", "0.1", "1e3", "'a'", "'ab c'", "\"q'\"", "''", "none",
         "true", "false", "[1, 2]", "[]", "{'k': 1}", "{}", "(1, 'a')", "range(3)", "m[0]", "l[0]",
         "d.a", "d['b']", "x[1:3]", "l[::-1]", "u8[2]", "m[0].content", "namespace(a=1)"]
FILTERS = ["trim", "length", "upper", "lower", "title", "capitalize", "first", "last", "list",
           "string", "int", "float", "round", "abs", "reverse", "sort", "unique", "sum", "min",
           "max", "tojson", "join", "join(', ')", "default('D')", "default('D', true)",
           "replace('l', 'L')", "indent(2)", "center(9)", "wordcount", "escape", "safe", "items",
           "dictsort", "batch(2)", "slice(2)", "map('upper')", "map(attribute='role')",
           "select('odd')", "reject('even')", "selectattr('role', 'equalto', 'user')",
           "rejectattr('content')", "tojson(indent=2)", "tojson(sort_keys=true)", "round(1)",
           "int(5)", "float(1.5)", "format(1)", "attr('a')", "trim('x')", "count", "e", "d",
           "list|length", "select|list", "unique|list", "sort(reverse=true)",
           "sort(attribute='role')", "max(attribute='content')", "join(attribute='role')"]
TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "boolean",
         "true", "false", "mapping", "iterable", "sequence", "odd", "even", "divisibleby 2",
         "eq 1", "lt 3", "in [1, 2]", "sameas none", "callable", "lower", "upper", "ne 'a'",
         "ge 0", "gt 1"]
METHODS = ["strip()", "split()", "split(' ')", "upper()", "lower()", "title()",
           "startswith('H')", "endswith('d')", "replace('o', '0')", "find('o')", "count('l')",
           "lstrip()", "rstrip('d')", "items()", "keys()", "values()", "get('a')", "get('q', 9)",
           "capitalize()", "isdigit()", "split('l', 1)", "rsplit(' ', 1)", "format(1)",
           "join(['a', 'b'])", "index(1)", "splitlines()"]
BINOPS = ["+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", "<=", ">", ">=", "in",
          "not in", "and", "or"]
UNMATCHABLE = re.compile(r"<(generator|list_reverseiterator|dict_reverse\w+|range_iterator|"
                         r"reversed) object( \w+)? at 0x[0-9a-f]+>", re.I)


def expr(r, depth=0):
    k = r.random()
    if depth > 2 or k < 0.3:
        return r.choice(ATOMS)
    if k < 0.45:
        return f"{expr(r, depth + 1)} | {r.choice(FILTERS)}"
    if k < 0.55:
        return f"{expr(r, depth + 1)} is {'not ' if r.random() < 0.3 else ''}{r.choice(TESTS)}"
    if k < 0.65:
        return f"{r.choice(['x', 'u8', 'ws', 'd', 'l', 'e', 'm[0]', 's'])}.{r.choice(METHODS)}"
    if k < 0.85:
        return f"({expr(r, depth + 1)} {r.choice(BINOPS)} {expr(r, depth + 1)})"
    if k < 0.9:
        return f"({expr(r, depth + 1)} if {expr(r, depth + 1)} else {expr(r, depth + 1)})"
    if k < 0.95:
        return f"(not {expr(r, depth + 1)})"
    sub = r.choice(["0", "-1", "1:", "::2", '"a"', "5"])
    return f"{expr(r, depth + 1)}[{sub}]"


def stmt(r):
    k = r.random()
    e = expr(r)
    if k < 0.5:
        return "{{ " + e + " }}"
    if k < 0.7:
        source = r.choice(["l", "s", "m", "d", "x", "range(3)", e])
        cond = " if i" if r.random() < 0.2 else ""
        return ("{% for i in " + source + cond + " %}[{{ i }}|{{ loop.index }}{{ loop.last }}|{{ "
                + expr(r) + " }}]{% else %}E{% endfor %}")
    if k < 0.85:
        return "{% if " + e + " %}T{{ " + expr(r) + " }}{% else %}F{% endif %}"
    return "{% set v = " + e + " %}{{ v }}|{{ v | " + r.choice(FILTERS) + " }}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folio", default=str(Path(__file__).resolve().parents[2] / "build/bin/folio"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=500)
    ap.add_argument("--show", type=int, default=20)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    bad = skipped = 0
    with tempfile.TemporaryDirectory() as tmp:
        messages = Path(tmp) / "vars.json"
        messages.write_text(json.dumps({**VARS, "messages": []}))
        template = Path(tmp) / "t.jinja"
        for _ in range(args.cases):
            source = "".join(stmt(rng) for _ in range(rng.randint(1, 3)))
            # A copy each time: jinja2's indent filter extends a list it is
            # given in place (s += "\n") before it fails.
            want = render(source, {**copy.deepcopy(VARS), "messages": [], "tools": None,
                                   "documents": None, "add_generation_prompt": True,
                                   "bos_token": "", "eos_token": ""})
            template.write_text(source, encoding="utf-8")
            out = subprocess.run([args.folio, "template", "--template", str(template),
                                  "--messages", str(messages), "--strftime-now", str(EPOCH)],
                                 capture_output=True, timeout=60)
            err = out.stderr.decode("utf-8", "replace")
            if "Unimplemented" in err or ("output" in want and UNMATCHABLE.search(want["output"])):
                skipped += 1
                continue
            if "output" in want:
                ok = out.returncode == 0 and out.stdout.decode("utf-8") == want["output"]
            else:
                ok = out.returncode == 1
            if not ok:
                bad += 1
                if bad <= args.show:
                    print(f"TEMPLATE {source}\n  jinja2: {want}\n  folio:  rc={out.returncode} "
                          f"{out.stdout.decode('utf-8', 'replace')!r} {err.strip()!r}\n")
    print(f"{bad} of {args.cases} differ ({skipped} skipped as unmatchable or unsupported)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

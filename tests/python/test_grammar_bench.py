"""`folio bench grammar` and bench/grammar_oracles.py on a tiny MaskBench-format
folder written here: three schemas (one refused), valid instances that must
be accepted and invalid ones that must be rejected. Smoke tests of the
report's shape and verdicts; nothing is timed."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

import smollm2
from test_server import FOLIO

ROOT = Path(__file__).resolve().parents[2]

FILES = {
    "Handwritten---person.json": {
        "schema": {"type": "object",
                   "properties": {"name": {"type": "string", "maxLength": 10},
                                  "age": {"type": "integer", "minimum": 0, "maximum": 150}},
                   "required": ["name", "age"], "additionalProperties": False},
        "tests": [
            {"description": "ok", "valid": True, "data": {"name": "Ann \u00e9", "age": 30}},
            {"description": "negative age", "valid": False, "data": {"name": "Ann", "age": -1}},
            {"description": "no age", "valid": False, "data": {"name": "Ann"}},
            {"description": "extra", "valid": False,
             "data": {"name": "Ann", "age": 3, "x": 1}},
        ],
        "meta": {},
    },
    "Handwritten---colors.json": {
        "schema": {"type": "array", "items": {"enum": ["red", "green"]}, "maxItems": 2},
        "tests": [
            {"description": "ok", "valid": True, "data": ["red", "green"]},
            {"description": "not a color", "valid": False, "data": ["blue"]},
            {"description": "too many", "valid": False, "data": ["red", "red", "green"]},
        ],
        "meta": {},
    },
    "Other_1.json": {
        "schema": {"type": "object", "not": {"required": ["b"]}},
        "tests": [{"description": "ok", "valid": True, "data": {"a": 1}}],
        "meta": {},
    },
}


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "maskbench"
    d.mkdir()
    for name, doc in FILES.items():
        (d / name).write_text(json.dumps(doc), encoding="utf-8")
    return d


def run_bench(folder, tmp_path, model=None):
    out, trace, vocab = tmp_path / "out.json", tmp_path / "trace.jsonl", tmp_path / "vocab.json"
    cmd = [FOLIO, "bench", "grammar", "--maskbench", str(folder), "-o", str(out),
           "--trace", str(trace), "--dump-vocab", str(vocab)]
    if model:
        cmd += ["--model", str(model)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text()), trace, json.loads(vocab.read_text())


def check_report(r, trace, vocab):
    assert r["benchmark"] == "grammar"
    assert set(r["splits"]) == {"Handwritten", "Other"}
    t = r["total"]
    assert (t["schemas"], t["compiled"]) == (3, 2)
    assert t["coverage_pct"] == pytest.approx(200 / 3)
    assert t["refusal_reasons_top30"] == [{"reason": "not", "count": 1}]
    assert [x["file"] for x in r["refused"]] == ["Other_1.json"]
    # Soundness: both valid instances of compiled schemas accepted ...
    assert t["valid"] == {"total": 2, "accepted": 2} and t["soundness_pct"] == 100.0
    assert r["soundness_failures"] == [] and r["soundness_failures_count"] == 0
    # ... and the five invalid ones rejected.
    assert t["invalid"] == {"total": 5, "rejected": 5}
    assert r["invalid_accepted"] == []
    assert t["instances_of_refused_schemas"] == 1
    assert t["mask_accept_disagreements"] == 0
    assert t["mask_us"]["count"] == t["steps"] > 0
    assert t["mask_us_cold_first_step"]["count"] == 7
    assert t["compile_ms"]["count"] == 2
    assert t["matcher"]["instances"] == 7
    # The trace: a line per file, then one per instance with its tokens and
    # one [count, hash] per step of a compiled schema's instance.
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    assert lines[0]["trace"] == "folio bench grammar"
    assert sum("schema_file" in x for x in lines) == 3
    instances = [x for x in lines if "test" in x]
    assert len(instances) == 8
    for x in instances:
        assert x["tokens"]
        if x["compiled"]:
            assert 1 <= len(x["masks"]) <= len(x["tokens"]) + 1
    assert len(vocab["tokens_hex"]) == vocab["vocab_size"] == r["vocab_size"]
    # The tokens spell the instance as strict mode writes it.
    person = next(x for x in instances if x["file"].endswith("person.json") and x["test"] == 0)
    text = b"".join(bytes.fromhex(vocab["tokens_hex"][i]) for i in person["tokens"])
    assert text.decode() == '{"name": "Ann \u00e9", "age": 30}'


def test_byte_level(folder, tmp_path):
    check_report(*run_bench(folder, tmp_path))


def test_smollm2(folder, tmp_path):
    check_report(*run_bench(folder, tmp_path, model=smollm2.require()))


def test_oracles_side_by_side(folder, tmp_path):
    pytest.importorskip("llguidance")
    pytest.importorskip("xgrammar")
    out = tmp_path / "oracles.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "grammar_oracles.py"), "--folio", FOLIO,
         "--maskbench", str(folder), "--differential", "-o", str(out)],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    r = json.loads(out.read_text())
    assert [row["engine"] for row in r["summary"]] == ["folio", "llguidance", "xgrammar"]
    for engine in ("folio", "llguidance", "xgrammar"):
        assert r[engine]["total"]["schemas"] == 3
    # llguidance refuses `not` as folio does, and agrees on every verdict.
    lt = r["llguidance"]["total"]
    assert lt["compiled"] == 2
    assert lt["valid"] == {"total": 2, "accepted": 2}
    assert lt["invalid"] == {"total": 5, "rejected": 5}
    # The same vocabulary, except the lone byte 0xFF (id 257), which
    # llguidance's list of token bytes reserves as the mark of a special token.
    assert r["llguidance"]["tokenizer"]["first_differing_ids"] == [257]
    d = r["differential"]
    assert d["compared_instances"] == 2
    # Some steps agree: folio's set hashes (C++) and the script's (Python)
    # are the same function, or no step could.
    assert d["steps_equal"] > 0

"""Prefill here, decode there: a KV snapshot written by one folio process and
continued by another gives the tokens the first process would have produced.

Each test runs the real CLI (FOLIO_BIN) in separate processes, so nothing is
shared but the snapshot file.
"""
import json
import os
import subprocess
from pathlib import Path

import pytest

FOLIO = os.environ.get("FOLIO_BIN", str(Path(__file__).resolve().parents[2] / "build/bin/folio"))
PROMPTS = ["paged attention", "a block table maps pages", "kv"]


def run(*args, check=True):
    r = subprocess.run([FOLIO, *args], capture_output=True, text=True, timeout=120)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def export(path, *extra):
    args = ["kv", "export", "-o", str(path), "--reference", "--max-tokens", "14"]
    for p in PROMPTS:
        args += ["--prompt", p]
    return json.loads(run(*args, *extra).stdout)


@pytest.mark.parametrize("dtype,page", [("f32", 4), ("bf16", 16), ("f16", 3)])
def test_import_in_another_process_continues_bit_identically(tmp_path, dtype, page):
    snap = tmp_path / "s.kvs"
    exported = export(snap, "--kv-dtype", dtype, "--page-size", str(page), "--decode-steps", "4")
    assert exported["exported_requests"] == len(PROMPTS)
    # The receiver has a pool of another size, so pages land elsewhere.
    imported = json.loads(run("kv", "import", str(snap), "--page-size", str(page),
                              "--num-pages", "97").stdout)
    assert imported["tokens"] == exported["reference_tokens"]
    assert all(len(t) == 14 for t in imported["tokens"])
    for before, after in zip(exported["tokens_before_export"], imported["tokens"]):
        assert after[:len(before)] == before


def test_inspect_summarises_without_reading_pages_as_text(tmp_path):
    snap = tmp_path / "s.kvs"
    export(snap, "--page-size", "4")
    summary = json.loads(run("kv", "inspect", str(snap), "--json").stdout)
    assert summary["page_size"] == 4
    assert summary["kv_dtype"] == "f32"
    assert len(summary["sequences"]) == len(PROMPTS)
    assert summary["file_bytes"] == snap.stat().st_size
    human = run("kv", "inspect", str(snap)).stdout
    assert "folio KV snapshot v1" in human


def test_mismatched_or_damaged_snapshots_are_refused(tmp_path):
    snap = tmp_path / "s.kvs"
    export(snap, "--page-size", "4")
    r = run("kv", "import", str(snap), "--page-size", "8", check=False)
    assert r.returncode != 0 and "page size 4" in r.stderr
    data = bytearray(snap.read_bytes())
    data[len(data) // 2] ^= 0x40
    bad = tmp_path / "bad.kvs"
    bad.write_bytes(bytes(data))
    r = run("kv", "import", str(bad), "--page-size", "4", check=False)
    assert r.returncode != 0 and "checksum" in r.stderr
    bad.write_bytes(bytes(data[:100]))
    r = run("kv", "inspect", str(bad), check=False)
    assert r.returncode != 0 and "folio kv:" in r.stderr

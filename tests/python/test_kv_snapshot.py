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


@pytest.mark.parametrize("dtype,page", [("f32", 4), ("bf16", 16), ("f16", 3), ("i8", 8)])
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


def walk_container(data):
    """Reads a snapshot by docs/spec/kv-snapshot.md alone: manifest, then per
    tensor its Hurray descriptor (decoded by folio.TensorDescriptor) and its
    64-byte aligned buffers."""
    import struct
    import zlib

    import folio

    assert data[:8] == b"FOLIOKVS"
    assert struct.unpack_from("<I", data, len(data) - 4)[0] == zlib.crc32(data[:-4])
    version, flags, manifest_len = struct.unpack_from("<IIQ", data, 8)
    assert (version, flags) == (1, 0)
    manifest = json.loads(data[24:24 + manifest_len])
    pos = 24 + manifest_len
    (num_tensors,) = struct.unpack_from("<I", data, pos)
    pos += 4
    tensors = []
    for _ in range(num_tensors):
        (length,) = struct.unpack_from("<I", data, pos)
        pos += 4
        desc = folio.TensorDescriptor.from_bytes(data[pos:pos + length])
        pos += length
        buffers = []
        for b in desc.buffers:
            pos = (pos + 63) // 64 * 64
            buffers.append(data[pos:pos + b.byte_size])
            pos += b.byte_size
        tensors.append((desc, buffers))
    assert pos == len(data) - 4
    return manifest, tensors


@pytest.mark.parametrize("dtype,np_dtype", [("f32", "float32"), ("bf16", "uint16"), ("f16", "float16")])
def test_snapshot_pages_read_from_python_match_the_spec(tmp_path, dtype, np_dtype):
    np = pytest.importorskip("numpy")
    folio = pytest.importorskip("folio")
    snap = tmp_path / "s.kvs"
    export(snap, "--kv-dtype", dtype, "--page-size", "4")
    s = folio.read_snapshot(str(snap))
    assert (s.kv_dtype, s.page_size, s.num_layers) == (dtype, 4, 2)
    assert len(s.sequences) == len(PROMPTS)
    manifest, tensors = walk_container(snap.read_bytes())
    assert manifest["num_pages"] == s.num_pages
    assert len(tensors) == 2 * s.num_layers
    for i, (desc, buffers) in enumerate(tensors):
        layer, role = divmod(i, 2)
        layout = desc.layout
        assert layout.tag == 0x0A and layout.page_size == 4 and layout.layer_index == layer
        assert layout.kv_role == ("value" if role else "key")
        layout.validate_index_buffers(seq_ptr=np.frombuffer(buffers[2], np.uint32),
                                      block_table=np.frombuffer(buffers[1], np.uint32))
        pages = (s.values if role else s.keys)(layer)
        assert pages.dtype == np.dtype(np_dtype)
        assert pages.shape == (s.num_pages, 4, s.num_kv_heads, s.head_dim)
        assert not pages.flags.writeable
        assert pages.tobytes() == buffers[0]
    # Slots after each sequence's last token are zero; written ones are not.
    for q in s.sequences:
        last = q["block_table"][-1]
        used = q["num_tokens"] - 4 * (len(q["block_table"]) - 1)
        keys = s.keys(0)
        assert np.all(keys[last, used:].view(np.uint8) == 0) or any(
            other["block_table"][-1] == last and other["num_tokens"] > q["num_tokens"]
            for other in s.sequences)
        assert np.any(keys[last, :used].view(np.uint8) != 0)
        assert q["request"]["prompt"] and len(q["request"]["output"]) == 3


def test_i8_snapshot_scales_are_hurray_per_block_sections(tmp_path):
    """An i8 snapshot: one tensor per (layer, role, head), each quantized
    per block on the paged axis with block_size = page_size, its scale
    buffer holding that head's row scale in every slot."""
    np = pytest.importorskip("numpy")
    folio = pytest.importorskip("folio")
    snap = tmp_path / "s.kvs"
    export(snap, "--kv-dtype", "i8", "--page-size", "4")
    s = folio.read_snapshot(str(snap))
    assert s.kv_dtype == "i8"
    manifest, tensors = walk_container(snap.read_bytes())
    heads = s.num_kv_heads
    assert len(tensors) == 2 * s.num_layers * heads
    for i, (desc, buffers) in enumerate(tensors):
        layer, rest = divmod(i, 2 * heads)
        role, head = divmod(rest, heads)
        q = desc.quantization
        assert (q.name, q.axis, q.block_size, q.is_symmetric) == ("per_block_affine", 0, 4, True)
        assert q.scale_buffer_index == 3 and desc.layout.validate_quantization_compatibility(q) is None
        assert desc.layout.layer_index == layer and desc.shape[1:] == [1, s.head_dim]
        scales = (s.value_scales if role else s.key_scales)(layer)
        assert scales.shape == (s.num_pages, 4, heads) and np.all(scales > 0)
        slot_scales = np.frombuffer(buffers[3], np.float32).reshape(s.num_pages, 4)
        assert np.array_equal(slot_scales, scales[:, :, head])
        # Rows differ, so their scales do (one per row, not per page).
        assert len(np.unique(slot_scales)) > s.num_pages
        pages = (s.values if role else s.keys)(layer)
        assert pages.dtype == np.int8
        assert pages[:, :, head, :].tobytes() == buffers[0]
    export(snap, "--page-size", "4")
    f32 = folio.read_snapshot(str(snap))
    with pytest.raises(ValueError, match="f32 snapshot has no scales"):
        f32.key_scales(0)


def test_read_snapshot_refuses_bad_files(tmp_path):
    folio = pytest.importorskip("folio")
    with pytest.raises(FileNotFoundError):
        folio.read_snapshot(str(tmp_path / "missing.kvs"))
    bad = tmp_path / "bad.kvs"
    bad.write_bytes(b"FOLIOKVS" + b"\0" * 40)
    with pytest.raises(ValueError):
        folio.read_snapshot(str(bad))

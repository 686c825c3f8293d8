"""folio.paged_attention (the Python binding over folio's C++ kernel)
against a plain NumPy float64 reference written here from the formula.

Every case draws fresh seeded inputs, places pages in a shuffled order and
fills every slot no sequence owns with NaN, so a result that is finite and
matches proves those slots were never read.
"""
import math
import re

import numpy as np
import pytest

folio = pytest.importorskip(
    "folio", reason="the folio package is not built (FOLIO_BUILD_PYTHON=OFF?)")

EPS32 = float(np.finfo(np.float32).eps)
BF16_NAN = np.uint16(0x7FC0)


# ---------------------------------------------------------------- helpers

def to_bf16_bits(x):
    """float -> bfloat16 bit patterns (truncation: any bf16 value will do)."""
    return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def pages_as_f64(pages):
    if pages.dtype == np.uint16:
        return (pages.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return pages.astype(np.float64)


def reference(query, key_pages, value_pages, block_table, context_lens, page_size,
              scale=None, causal=False):
    """Two-pass softmax attention in float64, one (sequence, head) at a time."""
    batch, num_q_heads, num_rows, head_dim = query.shape
    group = num_q_heads // key_pages.shape[1]
    scale = head_dim ** -0.5 if scale is None else scale
    k_all, v_all = pages_as_f64(key_pages), pages_as_f64(value_pages)
    out = np.zeros(query.shape, np.float64)
    for b in range(batch):
        n = int(context_lens[b])
        if n == 0:
            continue
        pos = np.arange(n)
        pages, slots = block_table[b, pos // page_size], pos % page_size
        keys = k_all[pages, :, slots, :]      # [n, num_kv_heads, head_dim]
        values = v_all[pages, :, slots, :]
        visible = np.ones((num_rows, n), bool)
        if causal:
            visible = pos[None, :] <= (n - num_rows + np.arange(num_rows))[:, None]
        for h in range(num_q_heads):
            s = scale * (query[b, h].astype(np.float64) @ keys[:, h // group].T)
            s = np.where(visible, s, -np.inf)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            out[b, h] = (p / p.sum(axis=1, keepdims=True)) @ values[:, h // group]
    return out


def tolerance(head_dim, max_context):
    """float32 compute: each score is a head_dim-long dot product and each
    output a max_context-long weighted sum, so the error grows with both
    reduction lengths; 2 ulp per term leaves room for exp and rescaling
    (the largest error seen is about a tenth of this)."""
    return 2 * EPS32 * (head_dim + max_context)


def make_case(rng, contexts, *, num_rows=1, num_kv_heads=2, group=1, head_dim=16,
              page_size=3, kv_dtype="float32", extra_pages=3, extra_columns=1,
              shared_prefix_pages=0):
    """Random K/V for sequences of the given contexts, in shuffled pages of a
    NaN-filled pool; the first `shared_prefix_pages` pages of every sequence
    are the same physical pages (a shared prefix)."""
    needed = [-(-n // page_size) for n in contexts]
    own = [max(0, k - shared_prefix_pages) for k in needed]
    num_pages = shared_prefix_pages + sum(own) + extra_pages
    order = rng.permutation(num_pages)
    shared, rest = list(order[:shared_prefix_pages]), list(order[shared_prefix_pages:])
    max_pages = max(needed, default=0) + extra_columns
    block_table = np.full((len(contexts), max_pages), -1, np.int32)
    shape = (num_pages, num_kv_heads, page_size, head_dim)
    keys32 = np.full(shape, np.nan, np.float32)
    values32 = np.full(shape, np.nan, np.float32)
    for b, n in enumerate(contexts):
        k = needed[b]
        row = shared[:k] + [rest.pop() for _ in range(k - min(k, shared_prefix_pages))]
        block_table[b, :k] = row
        for pos in range(n):
            page, slot = row[pos // page_size], pos % page_size
            if np.isnan(keys32[page, 0, slot, 0]):
                keys32[page, :, slot] = rng.standard_normal((num_kv_heads, head_dim))
                values32[page, :, slot] = rng.standard_normal((num_kv_heads, head_dim))
    if kv_dtype == "bfloat16":
        keys, values = to_bf16_bits(keys32), to_bf16_bits(values32)
        keys[np.isnan(keys32)] = BF16_NAN
        values[np.isnan(values32)] = BF16_NAN
    else:
        keys, values = keys32.astype(kv_dtype), values32.astype(kv_dtype)
    query = rng.standard_normal(
        (len(contexts), num_kv_heads * group, num_rows, head_dim)).astype(np.float32)
    return dict(query=query, key_pages=keys, value_pages=values, block_table=block_table,
                context_lens=np.asarray(contexts, np.int32), page_size=page_size)


def run(case, **kw):
    return folio.paged_attention(case["query"], case["key_pages"], case["value_pages"],
                                 case["block_table"], case["context_lens"],
                                 case["page_size"], **kw)


def check_against_reference(case, **kw):
    out = run(case, **kw)
    assert out.dtype == np.float32 and out.shape == case["query"].shape
    assert np.isfinite(out).all()
    want = reference(**case, scale=kw.get("scale"), causal=kw.get("mask") == "causal")
    limit = tolerance(case["query"].shape[3], int(case["context_lens"].max(initial=0)))
    np.testing.assert_allclose(out, want, rtol=limit, atol=limit)
    return out


def bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


def boundary_contexts(page_size, num_rows):
    """Contexts at and around page boundaries, and an empty sequence."""
    raw = [page_size - 1, page_size, page_size + 1, 2 * page_size, 2 * page_size + 1,
           3 * page_size + 2, 0]
    return [0 if n == 0 else max(n, num_rows) for n in raw]


# ---------------------------------------------------------------- results

@pytest.mark.parametrize("kv_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("mask", [None, "causal"])
@pytest.mark.parametrize("num_rows", [1, 4])
@pytest.mark.parametrize("group", [1, 2, 4])
@pytest.mark.parametrize("page_size", [1, 3, 16])
def test_matches_reference(page_size, group, num_rows, mask, kv_dtype):
    rng = np.random.default_rng([page_size, group, num_rows, mask is None, len(kv_dtype)])
    case = make_case(rng, boundary_contexts(page_size, num_rows), num_rows=num_rows,
                     group=group, page_size=page_size, kv_dtype=kv_dtype)
    check_against_reference(case, mask=mask)


def test_float16_pages_match_reference():
    rng = np.random.default_rng(11)
    case = make_case(rng, [7, 20, 1], num_rows=1, group=2, kv_dtype="float16")
    check_against_reference(case, mask="causal")


def test_odd_head_dim_and_long_context():
    rng = np.random.default_rng(12)
    case = make_case(rng, [600, 257, 5], num_rows=5, group=2, head_dim=5, page_size=16)
    check_against_reference(case, mask="causal")
    check_against_reference(case)


def test_custom_scale():
    rng = np.random.default_rng(13)
    case = make_case(rng, [9, 4], num_rows=2)
    check_against_reference(case, scale=0.3, mask="causal")


def test_default_scale_is_inverse_sqrt_head_dim():
    rng = np.random.default_rng(14)
    case = make_case(rng, [9, 4], num_rows=2, head_dim=8)
    assert np.array_equal(bits(run(case)), bits(run(case, scale=8 ** -0.5)))


def test_causal_last_row_sees_everything_first_row_sees_its_prefix():
    rng = np.random.default_rng(15)
    case = make_case(rng, [10], num_rows=3)
    causal, full = run(case, mask="causal"), run(case)
    assert np.array_equal(bits(causal[:, :, 2]), bits(full[:, :, 2]))
    assert not np.allclose(causal[:, :, 0], full[:, :, 0])


def test_nan_in_unused_slots_and_pages_is_never_read():
    rng = np.random.default_rng(16)
    # Partly filled last pages, spare pages and spare table columns: all NaN.
    case = make_case(rng, [5, 13, 2], num_rows=2, page_size=4, extra_pages=6,
                     extra_columns=3)
    assert np.isnan(case["key_pages"]).any() and np.isnan(case["value_pages"]).any()
    check_against_reference(case, mask="causal")
    check_against_reference(case)


def test_bf16_nan_poison_is_never_read():
    rng = np.random.default_rng(17)
    case = make_case(rng, [5, 13], num_rows=1, page_size=4, kv_dtype="bfloat16",
                     extra_pages=4)
    assert (case["key_pages"] == BF16_NAN).any()
    check_against_reference(case)


def test_shared_prefix_pages_between_rows():
    rng = np.random.default_rng(18)
    case = make_case(rng, [11, 9, 12], num_rows=2, page_size=4, shared_prefix_pages=2)
    table = case["block_table"]
    assert (table[0, :2] == table[1, :2]).all() and (table[0, :2] == table[2, :2]).all()
    check_against_reference(case, mask="causal")


def test_zero_context_row_outputs_zeros():
    rng = np.random.default_rng(19)
    case = make_case(rng, [0, 6, 0], num_rows=3, extra_pages=2)
    out = check_against_reference(case, mask="causal")
    assert not out[0].any() and not out[2].any() and out[1].any()
    assert (case["block_table"][0] == -1).all()


def test_empty_pool_and_all_empty_batch():
    case = make_case(np.random.default_rng(20), [0, 0], extra_pages=0, extra_columns=0)
    assert case["key_pages"].shape[0] == 0 and case["block_table"].shape[1] == 0
    assert not run(case).any()


# ---------------------------------------------------------------- determinism

def test_row_alone_is_bit_identical_to_row_in_batch():
    rng = np.random.default_rng(21)
    case = make_case(rng, [40, 3, 17, 0, 300], num_rows=3, group=2, page_size=5)
    batch_out = run(case, mask="causal")
    for b in range(len(case["context_lens"])):
        alone = dict(case, query=case["query"][b:b + 1].copy(),
                     block_table=case["block_table"][b:b + 1].copy(),
                     context_lens=case["context_lens"][b:b + 1].copy())
        out = run(alone, mask="causal")
        assert np.array_equal(bits(out), bits(batch_out[b:b + 1])), f"sequence {b}"


def test_page_size_and_placement_do_not_change_bits():
    rng = np.random.default_rng(22)
    small = make_case(rng, [33, 70], num_rows=2, page_size=1)
    # The same logical K/V repacked into 16-slot pages in a different order.
    big = make_case(np.random.default_rng(23), [33, 70], num_rows=2, page_size=16)
    big["query"] = small["query"]
    for name in ("key_pages", "value_pages"):
        for b, n in enumerate(small["context_lens"]):
            for pos in range(n):
                src = small[name][small["block_table"][b, pos], :, 0]
                big[name][big["block_table"][b, pos // 16], :, pos % 16] = src
    assert np.array_equal(bits(run(small, mask="causal")), bits(run(big, mask="causal")))


@pytest.mark.parametrize("num_threads", [0, 2, 3])
def test_thread_count_does_not_change_bits(num_threads):
    rng = np.random.default_rng(24)
    case = make_case(rng, [700, 5, 260], num_rows=2, group=4, page_size=16)
    want = run(case, mask="causal")
    assert np.array_equal(bits(run(case, mask="causal", num_threads=num_threads)), bits(want))


# ---------------------------------------------------------------- inputs taken

def test_non_contiguous_and_float64_query_are_converted():
    rng = np.random.default_rng(25)
    case = make_case(rng, [6, 9], num_rows=2)
    want = run(case)
    strided = np.swapaxes(np.swapaxes(case["query"], 1, 2).copy(), 1, 2)
    assert not strided.flags.c_contiguous
    assert np.array_equal(bits(run(dict(case, query=strided))), bits(want))
    as64 = case["query"].astype(np.float64)
    assert np.array_equal(bits(run(dict(case, query=as64))), bits(want))


def test_float16_query_is_converted_exactly():
    rng = np.random.default_rng(29)
    case = make_case(rng, [6, 9], num_rows=2)
    as16 = case["query"].astype(np.float16)
    want = run(dict(case, query=as16.astype(np.float32)))
    assert np.array_equal(bits(run(dict(case, query=as16))), bits(want))


@pytest.mark.parametrize("num_threads", [4096, 2**40])
def test_num_threads_above_the_core_count_is_clamped(num_threads):
    # Before the fix 2**40 raised MemoryError (and 4096 started 4095
    # threads); now it runs on at most every core, with the same bits.
    rng = np.random.default_rng(31)
    case = make_case(rng, [6, 9], num_rows=2)
    assert np.array_equal(bits(run(case, num_threads=num_threads)), bits(run(case)))


def test_num_threads_is_checked_before_anything_is_allocated():
    case = valid_case()
    with pytest.raises(ValueError, match="num_threads must be >= 0"):
        run(case, num_threads=-(2**40))
    # A huge request no longer fails first: the metadata error is reported.
    with_context(1, -1)(case)
    with pytest.raises(ValueError, match="negative"):
        run(case, num_threads=2**40)


def test_int64_metadata_is_accepted():
    rng = np.random.default_rng(26)
    case = make_case(rng, [6, 9], num_rows=2)
    want = run(case)
    wide = dict(case, block_table=case["block_table"].astype(np.int64),
                context_lens=case["context_lens"].astype(np.int64))
    assert np.array_equal(bits(run(wide)), bits(want))


def test_read_only_arrays_are_accepted():
    rng = np.random.default_rng(28)
    case = make_case(rng, [6, 9], num_rows=2, kv_dtype="bfloat16")
    want = run(case)
    for v in case.values():
        if isinstance(v, np.ndarray):
            v.flags.writeable = False
    assert np.array_equal(bits(run(case)), bits(want))


def test_input_arrays_are_not_modified():
    rng = np.random.default_rng(27)
    case = make_case(rng, [6, 9], num_rows=2)
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in case.items()}
    run(case, mask="causal")
    for k, v in case.items():
        if isinstance(v, np.ndarray):
            assert np.array_equal(v, before[k], equal_nan=v.dtype.kind == "f"), k


# ---------------------------------------------------------------- errors

def valid_case():
    """Two sequences, page_size 4, two query rows, 8 pages; row 0 uses
    pages [5, 2] for 7 keys, row 1 page [0] for 3 keys."""
    rng = np.random.default_rng(30)
    case = make_case(rng, [7, 3], num_rows=2, page_size=4, extra_pages=5, extra_columns=1)
    case["block_table"] = np.array([[5, 2, -1], [0, -1, -1]], np.int32)
    case["key_pages"] = rng.standard_normal(case["key_pages"].shape).astype(np.float32)
    case["value_pages"] = rng.standard_normal(case["value_pages"].shape).astype(np.float32)
    return case


def test_valid_case_is_valid():
    check_against_reference(valid_case(), mask="causal")


def with_table(row, entries):
    def mutate(c):
        c["block_table"][row] = entries
    return mutate


def with_context(row, n):
    def mutate(c):
        c["context_lens"][row] = n
    return mutate


def with_page_size(p):
    def mutate(c):
        c["page_size"] = p
    return mutate


def with_array(name, fn):
    def mutate(c):
        c[name] = fn(c[name])
    return mutate


# (id, mutation, extra keyword arguments, message fragment)
VALUE_ERRORS = [
    ("negative_context", with_context(1, -1), {}, "negative"),
    ("context_beyond_table_width", with_context(1, 13), {}, "needs 4 pages"),
    ("context_beyond_live_pages", with_context(1, 5), {}, "outside [0, 8)"),
    ("minus_one_inside_live_pages", with_table(0, [5, -1, -1]), {}, "is page -1"),
    ("page_id_past_pool", with_table(0, [5, 8, -1]), {}, "page 8, outside [0, 8)"),
    ("page_id_below_minus_one", with_table(0, [-3, 2, -1]), {}, "page -3"),
    ("page_repeated_in_row", with_table(0, [2, 2, -1]), {}, "appears twice"),
    ("padding_not_minus_one", with_table(1, [0, 3, -1]), {}, "must be -1 (got 3)"),
    ("padding_minus_two", with_table(1, [0, -1, -2]), {}, "must be -1 (got -2)"),
    ("page_size_zero", with_page_size(0), {}, "page_size must be >= 1"),
    ("page_size_negative", with_page_size(-4), {}, "page_size must be >= 1"),
    ("page_size_not_pages_axis", with_page_size(2), {}, "does not match key_pages"),
    ("context_shorter_than_rows_causal", with_context(1, 1), {"mask": "causal"},
     "shorter than its 2 query rows"),
    ("context_shorter_than_rows_no_mask", with_context(1, 1), {},
     "shorter than its 2 query rows"),
    ("query_not_4d", with_array("query", lambda q: q[0]), {}, "query must be 4-D"),
    ("pages_not_4d", with_array("key_pages", lambda p: p[0]), {}, "key_pages must be 4-D"),
    ("key_value_shapes_differ", with_array("value_pages", lambda p: p[:7]), {},
     "differ in shape"),
    ("head_dim_differs", with_array("query", lambda q: q[..., :8].copy()), {},
     "head_dim 8 does not match"),
    ("table_rows_not_batch", with_array("block_table", lambda t: t[:1].copy()), {},
     "block_table has 1 rows"),
    ("table_not_2d", with_array("block_table", lambda t: t[0].copy()), {},
     "block_table must be 2-D"),
    ("context_lens_not_batch", with_array("context_lens", lambda c: c[:1].copy()), {},
     "context_lens has 1 entries"),
    ("q_heads_not_multiple_of_kv_heads",
     with_array("query", lambda q: np.concatenate([q, q[:, :1]], axis=1)), {},
     "not a positive multiple"),
    ("metadata_outside_int32",
     with_array("context_lens", lambda c: c.astype(np.int64) + 2**32), {}, "outside int32"),
    ("scale_nan", None, {"scale": math.nan}, "scale must be finite and > 0"),
    ("scale_inf", None, {"scale": math.inf}, "scale must be finite and > 0"),
    ("scale_zero", None, {"scale": 0.0}, "scale must be finite and > 0"),
    ("scale_negative", None, {"scale": -0.5}, "scale must be finite and > 0"),
    ("unknown_mask", None, {"mask": "sliding"}, "mask must be None or 'causal'"),
    ("negative_num_threads", None, {"num_threads": -1}, "num_threads must be >= 0"),
]


@pytest.mark.parametrize("mutate,kwargs,message",
                         [pytest.param(*e[1:], id=e[0]) for e in VALUE_ERRORS])
def test_bad_input_is_a_value_error(mutate, kwargs, message):
    case = valid_case()
    if mutate:
        mutate(case)
    with pytest.raises(ValueError, match=re.escape(message)):
        run(case, **kwargs)


TYPE_ERRORS = [
    ("int_pages", with_array("key_pages", lambda p: p.astype(np.int32)), "key_pages must be"),
    ("float64_pages", with_array("key_pages", lambda p: p.astype(np.float64)),
     "key_pages must be"),
    ("key_value_dtypes_differ", with_array("value_pages", lambda p: p.astype(np.float16)),
     "value_pages is float16"),
    ("float_block_table", with_array("block_table", lambda t: t.astype(np.float32)),
     "block_table must be an integer array"),
    # Before the fix these were silently converted to float32 (uint16 read
    # as integers, although uint16 pages mean bfloat16).
    ("int8_query", with_array("query", lambda q: q.astype(np.int8)),
     "query must be float32 (float16 and float64 are converted); got int8"),
    ("int32_query", with_array("query", lambda q: q.astype(np.int32)),
     "query must be float32 (float16 and float64 are converted); got int32"),
    ("bool_query", with_array("query", lambda q: q > 0), "query must be float32"),
    ("uint16_query", with_array("query", to_bf16_bits), "got uint16"),
    ("complex_query", with_array("query", lambda q: q.astype(np.complex64)),
     "got complex64"),
]


@pytest.mark.parametrize("mutate,message", [pytest.param(*e[1:], id=e[0]) for e in TYPE_ERRORS])
def test_unsupported_dtype_is_a_type_error(mutate, message):
    case = valid_case()
    mutate(case)
    with pytest.raises(TypeError, match=re.escape(message)):
        run(case)


def test_non_finite_input_propagates_as_ieee_arithmetic():
    """A NaN query row, a NaN in a key, or a key scoring +inf makes the
    rows that see it NaN, as NumPy's float64 softmax does; the other rows
    stay finite and match the reference."""
    rng = np.random.default_rng(16)
    for kind in ("nan_query", "nan_key", "inf_key"):
        case = make_case(rng, [12], num_rows=1, num_kv_heads=1, page_size=4, head_dim=8)
        q, k = case["query"], case["key_pages"]
        page = case["block_table"][0, 5 // 4]
        if kind == "nan_query":
            q[0, 0, 0, 2] = np.nan
        elif kind == "nan_key":
            k[page, 0, 5 % 4, 3] = np.nan
        else:
            q[...] = np.abs(q) + 0.25
            k[page, 0, 5 % 4, :] = np.inf
        out = run(case)
        assert np.isnan(out).all(), kind
        # The same key in a second sequence that does not reach it is harmless.
        case2 = make_case(rng, [12, 4], num_rows=1, num_kv_heads=1, page_size=4, head_dim=8)
        bad_page = case2["block_table"][0, 1]
        case2["key_pages"][bad_page, 0, 1, 3] = np.nan
        out2 = run(case2)
        assert np.isnan(out2[0]).all() and np.isfinite(out2[1]).all(), kind


# ---------------------------------------------------------------- quantized pages

def e4m3_to_f32(bits):
    """FP8 E4M3 bit patterns -> float32 (exact), as the spec defines them."""
    b = bits.astype(np.int32)
    exp, mant = (b >> 3) & 0xF, b & 7
    mag = np.where(exp == 0, mant * 2.0 ** -9, (8 + mant) * 2.0 ** (exp - 10.0))
    return np.where(b & 0x80, -mag, mag).astype(np.float32)


def quantize_case(case, kind, rng):
    """The case's pages as int8 codes or E4M3 bits, with random positive
    scales per row (page, head, slot); returns the quantized case and the
    f32 pages the codes mean."""
    keys, values = case["key_pages"], case["value_pages"]
    out, meant = dict(case), {}
    for name, pages in (("key", keys), ("value", values)):
        scales = rng.uniform(0.01, 0.05, pages.shape[:3]).astype(np.float32)
        x = np.nan_to_num(pages) / scales[..., None]
        if kind == "int8":
            codes = np.clip(np.rint(x), -127, 127).astype(np.int8)
            value = codes.astype(np.float32)
        else:  # E4M3: the nearest of the 256 patterns by brute force
            table = e4m3_to_f32(np.arange(256, dtype=np.uint8))
            table[np.isnan(table)] = np.inf
            codes = np.abs(x[..., None] - table).argmin(axis=-1).astype(np.uint8)
            value = e4m3_to_f32(codes)
        out[name + "_pages"] = codes
        out[name + "_scales"] = scales
        meant[name + "_pages"] = (value * scales[..., None]).astype(np.float32)
    return out, meant


@pytest.mark.parametrize("kind", ["int8", "e4m3"])
def test_quantized_pages_match_their_dequantized_values(kind):
    rng = np.random.default_rng(12)
    case = make_case(rng, [2, 17, 40], num_rows=2, group=2, head_dim=16, page_size=4)
    q, meant = quantize_case(case, kind, rng)
    out = folio.paged_attention(q["query"], q["key_pages"], q["value_pages"], q["block_table"],
                                q["context_lens"], q["page_size"], mask="causal",
                                key_scales=q["key_scales"], value_scales=q["value_scales"])
    want = reference(case["query"], meant["key_pages"], meant["value_pages"],
                     case["block_table"], case["context_lens"], case["page_size"], causal=True)
    limit = 4 * tolerance(16, 40)
    np.testing.assert_allclose(out, want, rtol=limit, atol=limit)
    # Page placement never changes the bits: the same pages in reverse order.
    perm = np.arange(q["key_pages"].shape[0])[::-1]
    inverse = np.argsort(perm)
    table = np.where(q["block_table"] >= 0, inverse[np.maximum(q["block_table"], 0)], -1)
    moved = folio.paged_attention(q["query"], q["key_pages"][perm], q["value_pages"][perm],
                                  table.astype(np.int32), q["context_lens"], q["page_size"],
                                  mask="causal", key_scales=q["key_scales"][perm],
                                  value_scales=q["value_scales"][perm])
    assert np.array_equal(bits(moved), bits(out))


def test_quantized_pages_need_their_scales_and_float_pages_refuse_them():
    rng = np.random.default_rng(13)
    case = make_case(rng, [5], page_size=4)
    q, _ = quantize_case(case, "int8", rng)
    base = (q["query"], q["key_pages"], q["value_pages"], q["block_table"], q["context_lens"], 4)
    with pytest.raises(ValueError, match="i8 pages need key_scales"):
        folio.paged_attention(*base, value_scales=q["value_scales"])
    with pytest.raises(ValueError,
                       match=r"value_scales must be \[num_pages, num_kv_heads, page_size\]"):
        folio.paged_attention(*base, key_scales=q["key_scales"],
                              value_scales=q["value_scales"][:, :1].copy())
    with pytest.raises(TypeError, match="key_scales must be float32"):
        folio.paged_attention(*base, key_scales=q["key_scales"].astype(np.float64),
                              value_scales=q["value_scales"])
    with pytest.raises(ValueError, match="key_scales is only for int8 or FP8"):
        run(case, key_scales=q["key_scales"])

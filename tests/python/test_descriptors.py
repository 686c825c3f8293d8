"""folio's Hurray tensor descriptors from Python (python/src/format.cc).

The examples come from the Hurray reference page (Python surface, published
addressing checks) and docs/spec/hurray-descriptor.md; the golden byte
strings are the ones src/format/descriptor_test.cc builds field by field.
Every refusal must be folio.InvalidDescriptorError (a ValueError) with a
message naming the field and value; the checks themselves are the C++
format module's, so these tests are about the binding: conversions, the
error mapping, and that bytes survive the trip through Python unchanged.
"""
import random
import re
import struct

import numpy as np
import pytest

folio = pytest.importorskip(
    "folio", reason="the folio package is not built (FOLIO_BUILD_PYTHON=OFF?)")

Error = folio.InvalidDescriptorError
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1


def refused(fragment):
    """pytest.raises for InvalidDescriptorError whose message holds `fragment`."""
    return pytest.raises(Error, match=re.escape(fragment))


def spec_layout(**overrides):
    """The reference page's example layout."""
    args = dict(page_size=4, num_pages=5, paged_axis=0, num_seqs=2, kv_role="key",
                layer_index=3, block_table_index_type="uint32")
    args.update(overrides)
    return folio.BlockPagedLayout(**args)


# ------------------------------------------------------ golden byte strings
# Little-endian field packers, mirroring src/format/test_bytes.h.

def u8(v): return struct.pack("<B", v)
def u32(v): return struct.pack("<I", v)
def u64(v): return struct.pack("<Q", v)


def header(flags, dtype, layout, rank):
    return b"HRRY" + u8(1) + u8(0) + u32(0) + u32(flags) + u8(dtype) + u8(layout) + u32(rank)


def finish(b):
    """Patches descriptor_length (bytes 6..10) with the total size."""
    return b[:6] + u32(len(b)) + b[10:]


def buffer(size, alignment=64, device=0, sync=0, memory_class=0, reserved=0):
    return u64(size) + u32(alignment) + bytes([device, sync, memory_class, reserved])


# The spec's worked size check: f32 [3, 4], row-major, one 192-byte CPU
# buffer, 61 bytes (kRowMajor; also written out in docs/spec).
ROW_MAJOR_61 = bytes.fromhex(
    "48525259" "01" "00" "3d000000" "00000000" "03" "01" "02000000"
    "0300000000000000" "0400000000000000"
    "0000000000000000"
    "01" "c000000000000000" "40000000" "00" "00" "00" "00")

# kPaged: f16, page_size 4, num_pages 5, 2 heads, head_dim 8, 2 sequences,
# values of layer 7.
PAGED = finish(
    header(0, 0x01, 0x0A, 3) + u64(12) + u64(2) + u64(8) + u64(0)
    + u32(4) + u64(5) + u32(0) + u32(2) + u8(1) + u32(7) + u8(0) + bytes(6)
    + u8(3) + buffer(5 * 4 * 2 * 8 * 2) + buffer(3 * 4) + buffer(3 * 4))

# kPagedQuantized: i8 pool, u64 index buffers, per-block scales (f32, one
# per page slot) with zero points: five buffers.
PAGED_QUANTIZED = finish(
    header(1, 0x10, 0x0A, 3) + u64(12) + u64(2) + u64(8) + u64(0)
    + u32(4) + u64(5) + u32(0) + u32(2) + u8(0) + u32(0xFFFFFFFF) + u8(1) + bytes(6)
    + u8(5) + buffer(5 * 4 * 2 * 8) + buffer(3 * 8) + buffer(3 * 8)
    + buffer(5 * 4 * 4) + buffer(5 * 4)
    + u32(24) + bytes.fromhex("03010000") + u32(0) + u32(4) + u32(3) + u32(4)
    + u8(0x03) + bytes(3))

# The spec's quantization example: symmetric per-block, axis 0, block 128,
# scales in buffer 1, f16 scales.
SPEC_PER_BLOCK = bytes.fromhex("03010100" "00000000" "80000000" "01000000" "ffffffff" "01000000")


# ------------------------------------------------------ the reference page's examples

def test_block_paged_layout_tag_name_and_buffer_count():
    layout = spec_layout()
    assert layout.tag == 0x0A
    assert layout.name == "block_paged"
    assert layout.buffer_count == 3
    assert folio.BlockPagedLayout.tag == 0x0A  # also on the class


def test_block_paged_layout_getters():
    layout = spec_layout()
    assert layout.page_size == 4
    assert layout.num_pages == 5
    assert layout.paged_axis == 0
    assert layout.num_seqs == 2
    assert layout.kv_role == "key"
    assert layout.layer_index == 3
    assert layout.block_table_index_type == "uint32"


def test_block_paged_layout_defaults_and_positional_arguments():
    layout = folio.BlockPagedLayout(16, 8, 0, 1)
    assert layout.kv_role == "key"
    assert layout.layer_index is None
    assert layout.block_table_index_type == "uint32"
    fused = folio.BlockPagedLayout(16, 8, 0, 1, "fused", 0, "uint64")
    assert (fused.kv_role, fused.layer_index, fused.block_table_index_type) == (
        "fused", 0, "uint64")


def test_block_paged_layout_is_immutable():
    layout = spec_layout()
    with pytest.raises(AttributeError):
        layout.page_size = 8
    assert layout.page_size == 4


def test_validate_against_shape_accepts_the_example():
    spec_layout().validate_against_shape([9, 2, 8])
    spec_layout().validate_against_shape((None, 2, 8))  # dynamic total_tokens


def test_validate_index_buffers_accepts_the_example():
    spec_layout().validate_index_buffers(seq_ptr=[0, 2, 3], block_table=[0, 1, 0])


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint32, np.uint64, np.uint8])
@pytest.mark.parametrize("index_type", ["uint32", "uint64"])
def test_validate_index_buffers_accepts_numpy_integer_arrays(dtype, index_type):
    layout = spec_layout(block_table_index_type=index_type)
    layout.validate_index_buffers(seq_ptr=np.array([0, 2, 3], dtype),
                                  block_table=np.array([0, 1, 0], dtype))
    # A strided (non-contiguous) view is read correctly too.
    layout.validate_index_buffers(seq_ptr=np.array([0, 9, 2, 9, 3], dtype)[::2],
                                  block_table=np.array([0, 1, 0], dtype))


def test_validate_index_buffers_accepts_an_empty_batch_and_shared_pages():
    spec_layout(num_seqs=0).validate_index_buffers(seq_ptr=[0], block_table=[])
    spec_layout().validate_index_buffers(seq_ptr=[0, 1, 2], block_table=[4, 4])


def test_validate_index_buffers_accepts_u64_page_ids_in_a_u64_layout():
    layout = spec_layout(num_pages=2**40, block_table_index_type="uint64")
    layout.validate_index_buffers(seq_ptr=[0, 1, 1], block_table=[2**40 - 1])


def test_validate_quantization_compatibility_accepts_the_example():
    scheme = folio.PerBlockAffine.symmetric(axis=0, block_size=4, scale_buffer_index=3,
                                            scale_type=folio.float32)
    spec_layout().validate_quantization_compatibility(scheme)
    spec_layout().validate_quantization_compatibility(folio.PerTensorAffine(0.5, 3))
    spec_layout().validate_quantization_compatibility(
        folio.PerChannelAffine.symmetric(axis=2, scale_buffer_index=3))


# Published addressing checks: page_size 4, num_pages 5, 2 heads, head_dim 8,
# seq_ptr [0, 2, 3], block_table [0, 1, 0].
@pytest.mark.parametrize("seq, token, head, dim, expected", [
    (0, 0, 0, 0, 0),
    (0, 4, 0, 0, 64),
    (0, 5, 1, 7, 95),
    (1, 0, 0, 0, 0),
])
def test_element_offset_published_checks(seq, token, head, dim, expected):
    layout = spec_layout()
    assert layout.element_offset([12, 2, 8], [0, 2, 3], [0, 1, 0], seq, token, head, dim) == expected
    assert layout.element_offset(shape=[12, 2, 8], seq_ptr=np.array([0, 2, 3]),
                                 block_table=np.array([0, 1, 0]), seq=seq, token=token,
                                 head=head, dim=dim) == expected


@pytest.mark.parametrize("index_type", ["uint32", "uint64"])
def test_element_offset_single_page_four_is_319(index_type):
    layout = spec_layout(num_seqs=1, block_table_index_type=index_type)
    assert layout.element_offset([4, 2, 8], [0, 1], [4], 0, 3, 1, 7) == 319


@pytest.mark.parametrize("seq, token, head, dim, fragment", [
    (1, 4, 0, 0, "token 4 of sequence 1 is out of range"),
    (0, 0, 2, 0, "head 2 is out of range; num_heads is 2"),
    (0, 0, 0, 8, "dim 8 is out of range; head_dim is 8"),
    (2, 0, 0, 0, "sequence 2 is out of range; num_seqs is 2"),
    (0, U64_MAX, 0, 0, "out of range"),
])
def test_element_offset_out_of_range_is_an_error(seq, token, head, dim, fragment):
    with refused(fragment):
        spec_layout().element_offset([12, 2, 8], [0, 2, 3], [0, 1, 0], seq, token, head, dim)


def test_element_offset_non_monotone_seq_ptr_is_an_error():
    with refused("seq_ptr[2] = 2 < seq_ptr[1] = 3"):
        spec_layout().element_offset([12, 2, 8], [0, 3, 2], [0, 1, 0], 1, 0, 0, 0)


@pytest.mark.parametrize("field, value", [("token", -1), ("seq", 2**64), ("head", -5)])
def test_element_offset_refuses_positions_outside_u64(field, value):
    position = dict(seq=0, token=0, head=0, dim=0)
    position[field] = value
    with refused(f"{field} must be in [0, {U64_MAX}] (got {value})"):
        spec_layout().element_offset([12, 2, 8], [0, 2, 3], [0, 1, 0], **position)


# ------------------------------------------------------ layout refusals

def test_invalid_descriptor_error_is_a_value_error():
    assert issubclass(folio.InvalidDescriptorError, ValueError)
    assert folio.InvalidDescriptorError.__module__ == "folio"


@pytest.mark.parametrize("overrides, fragment", [
    (dict(page_size=0), "page_size must be >= 1 (got 0)"),
    (dict(paged_axis=1), "paged_axis must be 0 (got 1)"),
    (dict(layer_index=U32_MAX), "layer_index"),
    (dict(page_size=-1), "page_size must be in [0, 4294967295] (got -1)"),
    (dict(page_size=2**32), "page_size must be in [0, 4294967295] (got 4294967296)"),
    (dict(num_pages=2**64), "num_pages must be in [0, 18446744073709551615]"),
    (dict(num_seqs=-3), "num_seqs must be in [0, 4294967295] (got -3)"),
    (dict(layer_index=-1), "layer_index must be in [0, 4294967295] (got -1)"),
])
def test_block_paged_layout_refuses_bad_fields(overrides, fragment):
    with refused(fragment):
        spec_layout(**overrides)


@pytest.mark.parametrize("field, value", [
    ("kv_role", "keys"), ("kv_role", "Key"), ("kv_role", ""),
    ("block_table_index_type", "int8"), ("block_table_index_type", "u32"),
])
def test_bad_enum_strings_are_value_errors_naming_field_and_value(field, value):
    with pytest.raises(ValueError) as info:
        spec_layout(**{field: value})
    assert isinstance(info.value, Error)
    assert field in str(info.value) and repr(value) in str(info.value)


def test_non_integer_fields_are_type_errors():
    with pytest.raises(TypeError, match="page_size must be an integer, got float"):
        spec_layout(page_size=4.0)
    with pytest.raises(TypeError):
        spec_layout(kv_role=0)


@pytest.mark.parametrize("shape, fragment", [
    ([12, 16], "rank 3"),
    ([12, 2, 8, 1], "rank 3"),
    ([12, None, 8], "num_heads"),
    ([12, 2, None], "head_dim"),
    ([12, 2**62, 2**62], "overflows u64"),
])
def test_validate_against_shape_refusals(shape, fragment):
    with refused(fragment):
        spec_layout().validate_against_shape(shape)


@pytest.mark.parametrize("seq_ptr, block_table, fragment", [
    ([0, 2], [0, 1], "seq_ptr has 2 entries; num_seqs 2 needs 3"),
    ([1, 2, 3], [0, 1, 0], "seq_ptr[0] is 1; it must be 0"),
    ([0, 3, 2], [0, 1, 0], "seq_ptr[2] = 2 < seq_ptr[1] = 3"),
    ([0, 2, 4], [0, 1, 0], "seq_ptr[2] is 4; it must equal the block_table length 3"),
    ([0, 2, 3], [0, 5, 0], "block_table[1] is page 5; num_pages is 5"),
    ([0, 2, 3], [0, 2**32, 0], "block_table[1] must be in [0, 4294967295] (got 4294967296)"),
    ([0, 2, 3], [0, -1, 0], "block_table[1] must be in [0, 4294967295] (got -1)"),
])
def test_validate_index_buffers_refusals(seq_ptr, block_table, fragment):
    with refused(fragment):
        spec_layout().validate_index_buffers(seq_ptr=seq_ptr, block_table=block_table)
    with refused(fragment):  # the same through NumPy arrays
        spec_layout().validate_index_buffers(seq_ptr=np.array(seq_ptr, np.int64),
                                             block_table=np.array(block_table, np.int64))


def test_validate_index_buffers_refuses_non_integer_and_2d_arrays():
    with pytest.raises(TypeError, match="seq_ptr must hold integers"):
        spec_layout().validate_index_buffers(seq_ptr=np.array([0.0, 2.0, 3.0]),
                                             block_table=[0, 1, 0])
    with refused("block_table must be 1-D, got a 2-D array"):
        spec_layout().validate_index_buffers(seq_ptr=[0, 2, 3],
                                             block_table=np.zeros((3, 1), np.int32))
    with pytest.raises(TypeError, match=re.escape("seq_ptr[1] must be an integer, got str")):
        spec_layout().validate_index_buffers(seq_ptr=[0, "2", 3], block_table=[0, 1, 0])
    with pytest.raises(TypeError, match="block_table must be a list of integers"):
        spec_layout().validate_index_buffers(seq_ptr=[0, 2, 3], block_table=7)


@pytest.mark.parametrize("scheme, fragment", [
    (folio.PerChannelAffine.symmetric(axis=0, scale_buffer_index=3), "axis 0"),
    (folio.PerBlockAffine.symmetric(axis=0, block_size=8, scale_buffer_index=3,
                                    scale_type=folio.float32), "block_size"),
    (folio.PerBlockAffine.symmetric(axis=1, block_size=4, scale_buffer_index=3,
                                    scale_type=folio.float16), "axis"),
])
def test_validate_quantization_compatibility_refusals(scheme, fragment):
    with refused(fragment):
        spec_layout().validate_quantization_compatibility(scheme)


def test_validate_quantization_compatibility_refuses_a_raw_integer():
    with pytest.raises(TypeError, match="scheme must be a PerTensorAffine"):
        spec_layout().validate_quantization_compatibility(3)


def test_buffer_count_with_a_scheme():
    L = folio.BlockPagedLayout
    assert L.buffer_count_with(folio.PerTensorAffine.symmetric(0.5)) == 3
    assert L.buffer_count_with(folio.PerChannelAffine.symmetric(1, 3)) == 4
    assert L.buffer_count_with(folio.PerBlockAffine.asymmetric(0, 4, 3, 4, "float32")) == 5


def test_layouts_compare_hash_and_repr():
    a, b = spec_layout(), spec_layout()
    assert a == b and hash(a) == hash(b)
    assert a != spec_layout(layer_index=None)
    assert a != "block_paged"
    assert eval(repr(a), vars(folio)) == a
    assert repr(a) == ("BlockPagedLayout(page_size=4, num_pages=5, paged_axis=0, num_seqs=2, "
                       "kv_role='key', layer_index=3, block_table_index_type='uint32')")
    assert folio.RowMajorLayout() == folio.RowMajorLayout()
    assert (folio.RowMajorLayout.tag, folio.RowMajorLayout.name) == (0x01, "row_major")
    strided = folio.StridedLayout(strides=[1, -4])
    assert strided.strides == [1, -4]
    assert (strided.tag, strided.name) == (0x03, "strided")
    assert eval(repr(strided), vars(folio)) == strided
    assert folio.StridedLayout(np.array([1, 4])) == folio.StridedLayout([1, 4])


# ------------------------------------------------------ quantization schemes

def test_per_tensor_affine():
    q = folio.PerTensorAffine(scale=0.25, zero_point=3)
    assert (q.tag, q.name) == (0x01, "per_tensor_affine")
    assert (q.scale, q.zero_point, q.is_symmetric) == (0.25, 3, False)
    s = folio.PerTensorAffine.symmetric(scale=0.5)
    assert (s.scale, s.zero_point, s.is_symmetric) == (0.5, 0, True)
    # Per-tensor has no symmetric flag on the wire: symmetric is zero point 0.
    assert folio.PerTensorAffine(0.5, 0) == s


def test_per_tensor_symmetric_writes_quantization_flags_zero():
    # The spec: per-tensor flags MUST be 0, and a reader refuses reserved bits.
    d = folio.TensorDescriptor(folio.uint8, [3, 4], 0, folio.RowMajorLayout(), [12],
                               folio.PerTensorAffine.symmetric(2.0))
    raw = d.to_bytes()
    quant = raw[-16:]
    assert quant[:4] == bytes([0x01, 0x01, 0x00, 0x00])
    assert folio.TensorDescriptor.from_bytes(raw) == d
    with refused("per_tensor_affine flags 0x0001 must be 0"):
        folio.TensorDescriptor.from_bytes(patch(raw, len(raw) - 14, b"\x01"))


def test_per_channel_affine():
    s = folio.PerChannelAffine.symmetric(axis=0, scale_buffer_index=3)
    assert (s.tag, s.name) == (0x02, "per_channel_affine")
    assert (s.axis, s.scale_buffer_index, s.zero_point_buffer_index) == (0, 3, None)
    assert s.is_symmetric and s.scale_type == folio.float32
    a = folio.PerChannelAffine.asymmetric(axis=1, scale_buffer_index=3, zero_point_buffer_index=4)
    assert (a.axis, a.zero_point_buffer_index, a.is_symmetric) == (1, 4, False)


def test_per_block_affine():
    s = folio.PerBlockAffine.symmetric(axis=0, block_size=4, scale_buffer_index=3,
                                       scale_type=folio.float32)
    assert (s.tag, s.name) == (0x03, "per_block_affine")
    assert (s.axis, s.block_size, s.scale_buffer_index) == (0, 4, 3)
    assert s.zero_point_buffer_index is None and s.scale_type == folio.float32
    a = folio.PerBlockAffine.asymmetric(axis=0, block_size=128, scale_buffer_index=1,
                                        zero_point_buffer_index=2, scale_type="bfloat16")
    assert a.scale_type == folio.bfloat16 and a.zero_point_buffer_index == 2


def test_schemes_compare_hash_and_repr():
    schemes = [
        folio.PerTensorAffine(0.1, -7),
        folio.PerTensorAffine.symmetric(3.0),
        folio.PerChannelAffine.symmetric(2, 1),
        folio.PerChannelAffine.asymmetric(1, 1, 2),
        folio.PerBlockAffine.symmetric(0, 128, 1, folio.float16),
        folio.PerBlockAffine.asymmetric(1, 2, 1, 2, folio.float32),
    ]
    for q in schemes:
        again = eval(repr(q), vars(folio))
        assert again == q and hash(again) == hash(q)
    assert len(set(schemes)) == len(schemes)


@pytest.mark.parametrize("make, fragment", [
    (lambda: folio.PerTensorAffine(0.0, 0), "scale must be finite and non-zero"),
    (lambda: folio.PerTensorAffine(float("nan"), 0), "scale must be finite and non-zero"),
    (lambda: folio.PerTensorAffine.symmetric(float("inf")), "scale must be finite and non-zero"),
    (lambda: folio.PerTensorAffine(1e39, 0), "scale must be finite and non-zero"),  # inf as f32
    (lambda: folio.PerTensorAffine(1.0, 2**31), "zero_point must be in [-2147483648, 2147483647]"),
    (lambda: folio.PerChannelAffine.symmetric(1, U32_MAX),
     "scale_buffer 0xffffffff is not a buffer index"),
    (lambda: folio.PerChannelAffine.asymmetric(1, 3, 3), "also the scale_buffer"),
    (lambda: folio.PerChannelAffine.symmetric(-1, 3), "axis must be in [0, 4294967295] (got -1)"),
    (lambda: folio.PerBlockAffine.symmetric(0, 3, 1, folio.float16),
     "block_size must be a power of two >= 2 (got 3)"),
    (lambda: folio.PerBlockAffine.symmetric(0, 1, 1, folio.float16), "block_size"),
    (lambda: folio.PerBlockAffine.symmetric(0, 4, 1, folio.int8), "scale_type"),
    (lambda: folio.PerBlockAffine.symmetric(0, 4, 1, "float8"),
     "scale_type: unknown element type 'float8'"),
])
def test_scheme_refusals(make, fragment):
    with refused(fragment):
        make()


def test_schemes_have_no_plain_constructor_where_hurray_has_none():
    with pytest.raises(TypeError):
        folio.PerChannelAffine(0, 3)
    with pytest.raises(TypeError):
        folio.PerBlockAffine(0, 4, 3, folio.float32)


# ------------------------------------------------------ element types

ELEMENT_TYPES = {"float16": 0x01, "bfloat16": 0x02, "float32": 0x03, "float64": 0x04,
                 "int8": 0x10, "uint8": 0x11, "int32": 0x14, "uint32": 0x15,
                 "int64": 0x16, "uint64": 0x17}


@pytest.mark.parametrize("name, tag", ELEMENT_TYPES.items())
def test_element_types_are_module_attributes_with_wire_tags(name, tag):
    t = getattr(folio, name)
    assert t is folio.ElementType[name]
    assert t.value == tag
    d = folio.TensorDescriptor(t, [2], 0, folio.RowMajorLayout(), [64])
    assert d.dtype is t and d.to_bytes()[14] == tag
    assert folio.TensorDescriptor(name, [2], 0, folio.RowMajorLayout(), [64]) == d


def test_bad_element_type_names_are_refused():
    with refused("dtype: unknown element type 'float128'"):
        folio.TensorDescriptor("float128", [2], 0, folio.RowMajorLayout(), [64])
    with pytest.raises(TypeError, match="dtype must be a folio.ElementType"):
        folio.TensorDescriptor(3, [2], 0, folio.RowMajorLayout(), [64])


# ------------------------------------------------------ descriptors: golden bytes

def test_row_major_is_the_specs_61_bytes():
    d = folio.TensorDescriptor(folio.float32, [3, 4], 0, folio.RowMajorLayout(), [192])
    assert len(ROW_MAJOR_61) == 61 == d.encoded_size
    assert d.to_bytes() == ROW_MAJOR_61 == bytes(d)
    back = folio.TensorDescriptor.from_bytes(ROW_MAJOR_61)
    assert back == d
    assert (back.dtype, back.shape, back.rank, back.byte_offset) == (folio.float32, [3, 4], 2, 0)
    assert back.layout == folio.RowMajorLayout()
    assert back.buffers == [folio.BufferHandle(192)]
    assert back.quantization is None


def test_block_paged_golden_bytes():
    layout = folio.BlockPagedLayout(4, 5, 0, 2, kv_role="value", layer_index=7)
    d = folio.TensorDescriptor(folio.float16, [12, 2, 8], 0, layout, [640, 12, 12])
    assert d.to_bytes() == PAGED
    back = folio.TensorDescriptor.from_bytes(PAGED)
    assert back == d
    assert isinstance(back.layout, folio.BlockPagedLayout)
    assert back.layout == layout and back.layout.layer_index == 7
    assert [b.byte_size for b in back.buffers] == [640, 12, 12]


def test_block_paged_quantized_golden_bytes():
    d = folio.TensorDescriptor.from_bytes(PAGED_QUANTIZED)
    assert d.dtype == folio.int8
    assert d.layout.layer_index is None
    assert d.layout.block_table_index_type == "uint64"
    assert d.layout.kv_role == "key"
    assert d.quantization == folio.PerBlockAffine.asymmetric(
        axis=0, block_size=4, scale_buffer_index=3, zero_point_buffer_index=4,
        scale_type=folio.float32)
    assert len(d.buffers) == 5
    assert d.to_bytes() == PAGED_QUANTIZED
    built = folio.TensorDescriptor(
        "int8", [12, 2, 8], 0,
        folio.BlockPagedLayout(4, 5, 0, 2, block_table_index_type="uint64"),
        [320, 24, 24, 80, 20], d.quantization)
    assert built.to_bytes() == PAGED_QUANTIZED


def test_the_specs_per_block_example_encodes_as_published():
    q = folio.PerBlockAffine.symmetric(axis=0, block_size=128, scale_buffer_index=1,
                                       scale_type=folio.float16)
    d = folio.TensorDescriptor(folio.int8, [256], 0, folio.RowMajorLayout(), [256, 4], q)
    # The quantization section ends the descriptor: u32 length, then the scheme.
    assert d.to_bytes()[-28:] == u32(24) + SPEC_PER_BLOCK


def test_from_bytes_accepts_bytes_bytearray_memoryview_and_numpy():
    d = folio.TensorDescriptor.from_bytes(ROW_MAJOR_61)
    assert folio.TensorDescriptor.from_bytes(bytearray(ROW_MAJOR_61)) == d
    assert folio.TensorDescriptor.from_bytes(memoryview(ROW_MAJOR_61)) == d
    assert folio.TensorDescriptor.from_bytes(memoryview(b"xx" + ROW_MAJOR_61)[2:]) == d
    assert folio.TensorDescriptor.from_bytes(np.frombuffer(ROW_MAJOR_61, np.uint8)) == d


def test_from_bytes_refuses_what_is_not_bytes():
    with pytest.raises(TypeError, match="from_bytes needs bytes"):
        folio.TensorDescriptor.from_bytes(ROW_MAJOR_61.hex())
    with pytest.raises(TypeError):
        folio.TensorDescriptor.from_bytes(memoryview(ROW_MAJOR_61 * 2)[::2])


# ------------------------------------------------------ descriptors: round trips

def paged(**kw):
    return folio.BlockPagedLayout(4, 5, 0, 2, **kw)


ROUND_TRIPS = {
    "row_major_f32": (folio.float32, [3, 4], 0, folio.RowMajorLayout(), [192], None),
    "row_major_offset_bf16": (folio.bfloat16, [2, 5], 6, folio.RowMajorLayout(), [64], None),
    "scalar_f64_on_cuda": (folio.float64, [], 8, folio.RowMajorLayout(),
                           [folio.BufferHandle(16, 128, "cuda", "consumer_stream",
                                               "host_pinned")], None),
    "dynamic_dimension": (folio.uint32, [None, 7], 0, folio.RowMajorLayout(), [64], None),
    "strided_transpose_u8": (folio.uint8, [4, 3], 0, folio.StridedLayout([1, 4]), [12], None),
    "strided_reversed_i32": (folio.int32, [4], 12, folio.StridedLayout([-1]), [16], None),
    "strided_broadcast_i64": (folio.int64, [3, 5], 0, folio.StridedLayout([0, 1]), [40], None),
    "row_major_per_tensor": (folio.int8, [3, 4], 0, folio.RowMajorLayout(), [12],
                             folio.PerTensorAffine(0.125, -3)),
    "row_major_per_tensor_symmetric": (folio.uint8, [3, 4], 0, folio.RowMajorLayout(), [12],
                                       folio.PerTensorAffine.symmetric(2.0)),
    "row_major_per_channel": (folio.int8, [3, 4], 0, folio.RowMajorLayout(), [12, 16, 16],
                              folio.PerChannelAffine.asymmetric(1, 1, 2)),
    "strided_per_block": (folio.int8, [8, 4], 0, folio.StridedLayout([4, 1]), [32, 16],
                          folio.PerBlockAffine.symmetric(0, 2, 1, folio.bfloat16)),
    "paged": (folio.float16, [12, 2, 8], 0, paged(kv_role="value", layer_index=7),
              [640, 12, 12], None),
    "paged_empty_batch": (folio.bfloat16, [0, 4, 64], 0, folio.BlockPagedLayout(16, 0, 0, 0),
                          [folio.BufferHandle(0, 1), folio.BufferHandle(0, 1), 4], None),
    "paged_u64_fused": (folio.float32, [None, 2, 8], 0,
                        paged(kv_role="fused", block_table_index_type="uint64"),
                        [1280, 24, 24], None),
    "paged_per_tensor": (folio.uint8, [12, 2, 8], 0, paged(), [320, 12, 12],
                         folio.PerTensorAffine(0.125, 128)),
    "paged_per_channel_symmetric": (folio.int8, [12, 2, 8], 0, paged(), [320, 12, 12, 8],
                                    folio.PerChannelAffine.symmetric(1, 3)),
    "paged_per_channel_asymmetric": (folio.int8, [12, 2, 8], 0, paged(layer_index=0),
                                     [320, 12, 12, 32, 32],
                                     folio.PerChannelAffine.asymmetric(2, 3, 4)),
    "paged_per_block_symmetric": (folio.int8, [12, 2, 8], 0, paged(), [320, 12, 12, 40],
                                  folio.PerBlockAffine.symmetric(0, 4, 3, folio.float16)),
    "paged_per_block_asymmetric": (folio.uint8, [12, 2, 8], 0, paged(), [320, 12, 12, 80, 20],
                                   folio.PerBlockAffine.asymmetric(0, 4, 3, 4, folio.float32)),
}


@pytest.mark.parametrize("case", ROUND_TRIPS)
def test_round_trip_through_bytes(case):
    dtype, shape, byte_offset, layout, buffers, quantization = ROUND_TRIPS[case]
    d = folio.TensorDescriptor(dtype, shape, byte_offset, layout, buffers, quantization)
    encoded = d.to_bytes()
    assert len(encoded) == d.encoded_size
    back = folio.TensorDescriptor.from_bytes(encoded)
    assert back == d and hash(back) == hash(d)
    assert back.to_bytes() == encoded
    assert back.dtype == dtype and back.shape == shape and back.byte_offset == byte_offset
    assert back.layout == layout and type(back.layout) is type(layout)
    assert back.quantization == quantization
    assert [b.byte_size for b in back.buffers] == [
        b.byte_size if isinstance(b, folio.BufferHandle) else b for b in buffers]
    assert eval(repr(back), vars(folio)) == d


def test_buffer_handle_fields():
    b = folio.BufferHandle(byte_size=16, alignment=128, device="cuda",
                           sync_mode="consumer_stream", memory_class="host_pinned")
    assert (b.byte_size, b.alignment, b.device, b.sync_mode, b.memory_class) == (
        16, 128, "cuda", "consumer_stream", "host_pinned")
    assert folio.BufferHandle(1) == folio.BufferHandle(1, 64, "cpu", "producer_synced", "standard")
    d = folio.TensorDescriptor(folio.float64, [], 8, folio.RowMajorLayout(), [b])
    assert d.buffers == [b]
    raw = d.to_bytes()
    assert raw[-16:] == buffer(16, 128, device=0x01, sync=2, memory_class=1)


@pytest.mark.parametrize("field, value", [
    ("device", "tpu"), ("sync_mode", "async"), ("memory_class", "pinned"),
])
def test_buffer_handle_refuses_unknown_names(field, value):
    with refused(f"{field} must be one of"):
        folio.BufferHandle(64, **{field: value})
    with refused(repr(value)):
        folio.BufferHandle(64, **{field: value})


# ------------------------------------------------------ descriptors: refusals

@pytest.mark.parametrize("args, fragment", [
    ((folio.float32, [3, 4], 0, folio.RowMajorLayout(), [47]),
     "tensor needs bytes [0, 48) of buffer 0, which has 47"),
    ((folio.float32, [3, 4], 193, folio.RowMajorLayout(), [192]),
     "byte_offset 193 is past the end of buffer 0 (192 bytes)"),
    ((folio.float32, [3, 4], 0, folio.RowMajorLayout(), []),
     "buffer_count is 0; the row_major layout needs 1"),
    ((folio.float32, [3, 4], 0, folio.RowMajorLayout(), [folio.BufferHandle(192, 32)]),
     "buffer 0 alignment 32 is below 64 for a non-empty buffer"),
    ((folio.float32, [3, 4], 0, folio.RowMajorLayout(), [folio.BufferHandle(192, 96)]),
     "buffer 0 alignment 96 is not a power of two"),
    ((folio.float32, [3, 4], 0, folio.StridedLayout([1]), [192]), "strides"),
    ((folio.float16, [12, 2, 8], 64, paged(), [640, 12, 12]),
     "block_paged byte_offset must be 0 (got 64)"),
    ((folio.float16, [12, 2, 8], 0, paged(), [641, 12, 12]),
     "page_pool (buffer 0) byte_size is 641; the layout needs 640"),
    ((folio.float16, [12, 16], 0, paged(), [640, 12, 12]), "rank 2"),
    ((folio.float16, [12, 2, 8], 0, paged(),
      [640, 12, folio.BufferHandle(12, device="cuda")]), "share one device tag"),
    ((folio.float32, [3, 4], 0, folio.RowMajorLayout(), [48], folio.PerTensorAffine(1.0, 0)),
     "i8"),
    ((folio.int8, [12, 2, 8], 0, paged(), [320, 12, 12, 8],
      folio.PerChannelAffine.symmetric(0, 3)), "axis 0"),
    ((folio.int8, [3, 4], 0, folio.RowMajorLayout(), [12, 12],
      folio.PerChannelAffine.symmetric(2, 1)), "axis"),
    ((folio.float32, [3, 4], 0, folio.RowMajorLayout(),
      [folio.BufferHandle(192, sync_mode="event")]),
     "buffer 0 sync_mode 1 must be 0 (producer-synced) for a CPU buffer"),
    ((folio.uint8, [1] * 65, 0, folio.RowMajorLayout(), [64]),
     "rank 65 exceeds the maximum of 64"),
    ((folio.uint8, [3, 4], 0, folio.RowMajorLayout(), [12], folio.PerTensorAffine(1.0, 300)),
     "zero_point 300 is outside the u8 storage range [0, 255]"),
    ((folio.uint8, [3, 4], 0, folio.RowMajorLayout(), [12], folio.PerTensorAffine(1.0, -1)),
     "zero_point -1 is outside the u8 storage range"),
    ((folio.int8, [3, 4], 0, folio.RowMajorLayout(), [12], folio.PerTensorAffine(1.0, 128)),
     "zero_point 128 is outside the i8 storage range [-128, 127]"),
    ((folio.int8, [None, 4], 0, folio.RowMajorLayout(), [folio.BufferHandle(0, 1), 16],
      folio.PerChannelAffine.symmetric(0, 1)), "axis 0 is a dynamic dimension"),
    ((folio.int8, [3, None], 0, folio.RowMajorLayout(), [folio.BufferHandle(0, 1), 16],
      folio.PerBlockAffine.symmetric(1, 2, 1, folio.float32)), "axis 1 is a dynamic dimension"),
    ((folio.int8, [3, 4], 0, folio.RowMajorLayout(), [12, 16],
      folio.PerBlockAffine.symmetric(1, 8, 1, folio.float32)),
     "block_size 8 exceeds shape[1] = 4"),
    ((folio.float32, [], 0, folio.StridedLayout([]), [64]),
     "strided layout needs rank >= 1 (got rank 0"),
])
def test_descriptor_create_refusals(args, fragment):
    with refused(fragment):
        folio.TensorDescriptor(*args)


def test_descriptor_argument_types():
    with pytest.raises(TypeError, match="layout must be a RowMajorLayout"):
        folio.TensorDescriptor(folio.float32, [3, 4], 0, "row_major", [192])
    with pytest.raises(TypeError, match="quantization must be a PerTensorAffine"):
        folio.TensorDescriptor(folio.int8, [3, 4], 0, folio.RowMajorLayout(), [12], 1)
    with pytest.raises(TypeError, match="buffers must be a list"):
        folio.TensorDescriptor(folio.float32, [3, 4], 0, folio.RowMajorLayout(), 192)
    with refused("buffers[0] must be in [0, 18446744073709551615] (got -1)"):
        folio.TensorDescriptor(folio.float32, [3, 4], 0, folio.RowMajorLayout(), [-1])
    with refused("shape[1] must be in [0, 18446744073709551615] (got -4)"):
        folio.TensorDescriptor(folio.float32, [3, -4], 0, folio.RowMajorLayout(), [192])


def patch(data, offset, new):
    return data[:offset] + new + data[offset + len(new):]


@pytest.mark.parametrize("data, fragment", [
    (b"", "truncated descriptor: magic at byte 0 needs 4 bytes, 0 remain"),
    (patch(ROW_MAJOR_61, 0, b"HRRX"), "bad magic 0x48 0x52 0x52 0x58"),
    (patch(ROW_MAJOR_61, 4, u8(2)), "descriptor version 2.0 is not supported"),
    (patch(ROW_MAJOR_61, 6, u32(60)), "descriptor_length is 60 but the descriptor has 61 bytes"),
    (patch(ROW_MAJOR_61, 10, u32(1 << 5)), "undefined bits 0x00000020"),
    (patch(ROW_MAJOR_61, 10, u32(1 << 1)), "shard section (flags bit1)"),
    (patch(PAGED, 10, u32(1 << 1)), "not allowed with the block-paged layout"),
    (patch(ROW_MAJOR_61, 14, u8(0x12)), "element type i16 (0x12) is not supported"),
    (patch(ROW_MAJOR_61, 14, u8(0x00)), "element type tag 0x00 is invalid"),
    (patch(ROW_MAJOR_61, 15, u8(0x02)), "layout column-major (0x02) is not supported"),
    (patch(ROW_MAJOR_61, 15, u8(0xFF)), "layout tag 0xff is invalid"),
    (patch(ROW_MAJOR_61, 16, u32(U32_MAX)), "rank 4294967295 exceeds the maximum of 64"),
    (patch(ROW_MAJOR_61, 16, u32(64)), "shape of rank 64 at byte 20 needs 512 bytes"),
    (patch(ROW_MAJOR_61, 45 + 13, u8(1)), "sync_mode 1 must be 0 (producer-synced)"),
    (finish(ROW_MAJOR_61 + b"\0"), "1 trailing bytes after the last section"),
    (patch(ROW_MAJOR_61, 45 + 12, u8(0xFF)), "buffer 0 device_tag 0xff is invalid"),
    (patch(PAGED, 52, u32(0)), "page_size must be >= 1"),
    (patch(PAGED, 64, u32(1)), "paged_axis must be 0 (got 1)"),
    (patch(PAGED, 72, u8(3)), "kv_role 3"),
    (patch(PAGED, 77, u8(2)), "block_table_index_type 2"),
    (patch(PAGED, 78 + 5, u8(1)), "block_paged reserved byte 5 (descriptor byte 83) is 0x01"),
    (patch(PAGED, 56, u64(1 << 62)), "overflows u64"),
])
def test_from_bytes_refusals(data, fragment):
    with refused(fragment):
        folio.TensorDescriptor.from_bytes(data)


@pytest.mark.parametrize("golden", [ROW_MAJOR_61, PAGED, PAGED_QUANTIZED],
                         ids=["row_major", "paged", "paged_quantized"])
def test_every_truncation_is_refused(golden):
    for n in range(len(golden)):
        with pytest.raises(Error):
            folio.TensorDescriptor.from_bytes(golden[:n])


@pytest.mark.parametrize("golden", [ROW_MAJOR_61, PAGED, PAGED_QUANTIZED],
                         ids=["row_major", "paged", "paged_quantized"])
def test_mutated_bytes_are_refused_or_round_trip(golden):
    """Every byte set to a few values, plus seeded random multi-byte damage:
    each result is either a valid descriptor that re-encodes to exactly the
    input, or InvalidDescriptorError; never another exception, never a crash."""
    rng = random.Random(1234)
    candidates = [patch(golden, i, bytes([v]))
                  for i in range(len(golden)) for v in (0x00, 0x01, 0x80, 0xFF, golden[i] ^ 0x10)]
    for _ in range(500):
        damaged = bytearray(golden)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        candidates.append(bytes(damaged))
    accepted = 0
    for data in candidates:
        try:
            d = folio.TensorDescriptor.from_bytes(data)
        except Error:
            continue
        accepted += 1
        assert d.to_bytes() == data
    assert accepted > 0  # some mutations (sizes, tags) are still valid descriptors

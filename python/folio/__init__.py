"""folio: a C++20 LLM inference engine built around a paged KV cache.

The Python package wraps folio's own kernels and its Hurray tensor
descriptors; nothing is reimplemented here. See help(folio.paged_attention)
for the attention contract and help(folio.TensorDescriptor) /
help(folio.BlockPagedLayout) for descriptors.
"""
from folio._folio import (
    BlockPagedLayout,
    BufferHandle,
    ElementType,
    InvalidDescriptorError,
    KvSnapshot,
    PerBlockAffine,
    PerChannelAffine,
    PerTensorAffine,
    RowMajorLayout,
    StridedLayout,
    TensorDescriptor,
    __version__,
    bfloat16,
    float16,
    float32,
    float64,
    int8,
    int32,
    int64,
    paged_attention,
    read_snapshot,
    uint8,
    uint32,
    uint64,
)

__all__ = [
    "__version__",
    "paged_attention",
    # KV snapshots
    "KvSnapshot",
    "read_snapshot",
    # Hurray tensor descriptors
    "BlockPagedLayout",
    "BufferHandle",
    "ElementType",
    "InvalidDescriptorError",
    "PerBlockAffine",
    "PerChannelAffine",
    "PerTensorAffine",
    "RowMajorLayout",
    "StridedLayout",
    "TensorDescriptor",
    "bfloat16",
    "float16",
    "float32",
    "float64",
    "int8",
    "int32",
    "int64",
    "uint8",
    "uint32",
    "uint64",
]

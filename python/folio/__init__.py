"""folio: a C++20 LLM inference engine built around a paged KV cache.

The Python package wraps folio's own engine, kernels and Hurray tensor
descriptors; nothing is reimplemented here.

- folio.LLM, folio.AsyncLLM, folio.SamplingParams: the engine, with vLLM's
  names (help(folio.LLM), help(folio.AsyncLLM)).
- folio.apply_chat_template: a chat rendered as Hugging Face's
  apply_chat_template renders it (folio's Jinja engine).
- folio.paged_attention: the attention kernel on NumPy arrays.
- folio.read_snapshot: KV snapshot files.
- folio.TensorDescriptor, folio.BlockPagedLayout, ...: Hurray descriptors.
"""
from folio import _folio
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
from folio.async_llm import AsyncLLM
from folio.chat_template import apply_chat_template
from folio.llm import LLM
from folio.outputs import (CompletionOutput, EmbeddingOutput, EmbeddingRequestOutput, FunctionCall,
                           Logprob, RequestOutput, ScoringOutput, ScoringRequestOutput, ToolCall)
from folio.pooling_params import PoolingParams
from folio._engine import Tokenizer
from folio.sampling_params import GuidedDecodingParams, SamplingParams, StructuredOutputsParams

__version__: str = getattr(_folio, "__version__")

__all__ = [
    "__version__",
    # the engine
    "AsyncLLM",
    "CompletionOutput",
    "EmbeddingOutput",
    "EmbeddingRequestOutput",
    "FunctionCall",
    "LLM",
    "Logprob",
    "RequestOutput",
    "ScoringOutput",
    "ScoringRequestOutput",
    "GuidedDecodingParams",
    "PoolingParams",
    "SamplingParams",
    "StructuredOutputsParams",
    "Tokenizer",
    "ToolCall",
    "apply_chat_template",
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

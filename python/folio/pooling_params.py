"""folio.PoolingParams: how LLM.embed turns a prompt into one vector (vLLM's
``PoolingParams``, with the pooling named per request)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

_POOLINGS = ("last", "mean", "cls")


@dataclass
class PoolingParams:
    """pooling: which of the prompt's final hidden states (after the final
    norm) make the vector: "last" (the last position's: decoder embedders
    such as Qwen3-Embedding), "mean" (their average) or "cls" (the first
    position's); None (the default): the model's own — what its files say
    (sentence-transformers' pooling module, GGUF's pooling_type), else
    "cls" for an encoder (BERT) and "last" for a decoder. dimensions: keep
    the first that many features (Matryoshka embeddings; None: all).
    normalize: divide by the L2 norm, after the cut (default True)."""

    pooling: Optional[str] = None
    dimensions: Optional[int] = None
    normalize: bool = True

    def __post_init__(self) -> None:
        if self.pooling is not None and self.pooling not in _POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(_POOLINGS)} "
                             f"(got {self.pooling!r})")
        d = self.dimensions
        if d is not None and (not isinstance(d, int) or isinstance(d, bool) or d < 1):
            raise ValueError(f"dimensions must be None or an integer >= 1 (got {d!r})")
        if not isinstance(self.normalize, bool):
            raise ValueError(f"normalize must be a boolean (got {self.normalize!r})")

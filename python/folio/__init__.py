"""folio: a C++20 LLM inference engine built around a paged KV cache.

The Python package wraps folio's own kernels; nothing is reimplemented
here. See help(folio.paged_attention) for the attention contract.
"""
from folio._folio import __version__, paged_attention

__all__ = ["__version__", "paged_attention"]

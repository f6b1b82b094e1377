"""One sentence embedder for every memory test (the model loads once per process, ~7 s)."""

from __future__ import annotations

import pytest

from agentic_ray.text import SentenceEmbedder, get_embedder


@pytest.fixture(scope="session")
def embedder() -> SentenceEmbedder:
    return get_embedder()

"""Each memory domain ships the vectors of its own sentences: they must be the shipped model's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from agentic_ray.domains import get_domain
from agentic_ray.memory.memory_world import MemoEmbedder
from agentic_ray.text import SentenceEmbedder


@pytest.mark.parametrize("name", ["ecommerce_memory", "helpdesk_memory"])
def test_shipped_vectors_are_the_models_for_every_family_sentence(
    embedder: SentenceEmbedder, name: str
) -> None:
    d: Any = get_domain(name)
    vectors = d.world_class.memory_vectors
    with np.load(vectors) as z:
        shipped = {str(t) for t in z["texts"]}
    texts = d.task_module.sentences()
    assert set(texts) == shipped  # rebuild with `python -m agentic_ray.memory.memory_world <name>`
    memo = MemoEmbedder(vectors)
    np.testing.assert_allclose(memo.encode(texts), embedder.encode(texts), atol=1e-5)

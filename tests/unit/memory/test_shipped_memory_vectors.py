"""The help-desk memory domain ships the vectors of its own sentences: they must be the shipped model's."""

from __future__ import annotations

import numpy as np

from agentic_ray.domains.helpdesk_memory.tasks import sentences
from agentic_ray.domains.helpdesk_memory.world import VECTORS
from agentic_ray.memory.memory_world import MemoEmbedder
from agentic_ray.text import SentenceEmbedder


def test_shipped_vectors_are_the_models_for_every_family_sentence(embedder: SentenceEmbedder) -> None:
    with np.load(VECTORS) as z:
        shipped = {str(t) for t in z["texts"]}
    texts = sentences()
    assert set(texts) == shipped  # rebuild with `python -m agentic_ray.memory.memory_world helpdesk_memory`
    memo = MemoEmbedder(VECTORS)
    np.testing.assert_allclose(memo.encode(texts), embedder.encode(texts), atol=1e-5)

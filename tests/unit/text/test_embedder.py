"""The shipped sentence embedder: offline, unit-norm, deterministic, and semantically ordered."""

import numpy as np

from agentic_ray.text import get_embedder


def test_embeddings_are_unit_norm_deterministic_and_rank_a_paraphrase_first():
    e = get_embedder()
    texts = [
        "I want to send back the kettle I bought",
        "I would like to return the kettle from my order",
        "My password does not work any more",
    ]
    a = e.encode(texts)
    assert a.shape == (3, 384) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(e.encode(texts), a, atol=1e-6)
    sim = a @ a.T
    assert sim[0, 1] > sim[0, 2] + 0.2  # the paraphrase is far nearer than the unrelated request
    assert e.encode([]).shape == (0, 384)

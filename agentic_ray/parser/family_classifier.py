"""The task-family classifier over sentence embeddings (one-vs-rest), and the text it reads.

The classifier is multi-label (a composite request raises two families): one logistic regression per family on
the embedding of a text with its slot values masked (:func:`mask_slots`). Weights are kept as arrays (trained
with scikit-learn), so inference is one matrix product.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

__all__ = ["FamilyClassifier", "mask_slots", "segments"]

_SEGMENT = re.compile(r"(?<=[.!?;])\s+|\n+")


def segments(text: str) -> list[tuple[int, int]]:
    """Sentence spans ``[(start, end)]`` of ``text`` (split after ``.!?;`` followed by a space, and at newlines)."""
    out, start = [], 0
    for m in _SEGMENT.finditer(text):
        if text[start : m.start()].strip():
            out.append((start, m.start()))
        start = m.end()
    if text[start:].strip():
        out.append((start, len(text)))
    return out


def mask_slots(
    text: str, spans: Sequence[tuple[int, int, str]], fact_keys: Sequence[str], entity_slots: Sequence[str]
) -> str:
    """``text`` as the classifiers read it: fact values dropped, entity ids replaced by their slot name, enum
    phrases kept. The ids and a customer's name say nothing about what they want; measured on the e-commerce
    held-out renderings, masking lifted the message classifier's family accuracy from 0.85 to 0.95.

    Args:
        text: one turn.
        spans: slot spans ``[(start, end, slot)]`` in ``text``.
        fact_keys: slots that are facts.
        entity_slots: slots that are entity ids.
    """
    for start, end, slot in sorted(spans, key=lambda x: -x[0]):
        if slot in fact_keys:
            text = text[:start] + text[end:]
        elif slot in entity_slots:
            text = text[:start] + slot + text[end:]
    return text


def _fit_lr(x: np.ndarray, y: np.ndarray, c: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(C=c, max_iter=1000, random_state=seed)
    clf.fit(x, y)
    return clf.coef_.astype(np.float32), clf.intercept_.astype(np.float32)


class FamilyClassifier:
    """Which families a text raises: one logistic regression per family (multi-label) on its embedding.

    Attributes:
        families: the simple families (row order of ``coef``).
        coef: ``(F, D)`` one-vs-rest weights; ``intercept``: ``(F,)``.
        max_families: most families one request raised in training.
    """

    def __init__(
        self, families: list[str], coef: np.ndarray, intercept: np.ndarray, max_families: int
    ) -> None:
        self.families = families
        self.coef, self.intercept = coef, intercept
        self.max_families = max_families

    @classmethod
    def fit(
        cls, families: list[str], x: np.ndarray, y: Sequence[Sequence[str]], c: float, seed: int = 0
    ) -> FamilyClassifier:
        """Train on embeddings ``(N, D)`` with their family sets."""
        coefs, icpts = [], []
        for f in families:
            w, b = _fit_lr(x, np.array([f in s for s in y], dtype=np.int64), c, seed)
            coefs.append(w[0])
            icpts.append(b[0])
        return cls(families, np.stack(coefs), np.asarray(icpts, dtype=np.float32), max(len(s) for s in y))

    def probs(self, emb: np.ndarray) -> np.ndarray:
        """``(N, F)`` probability that each text raises each family (``emb``: ``(N, D)``)."""
        return np.asarray(1.0 / (1.0 + np.exp(-(emb @ self.coef.T + self.intercept))))

    def choose(self, probs: np.ndarray, threshold: float = 0.5) -> list[int]:
        """Families at or over ``threshold`` (at most ``max_families``, most probable first), else the argmax."""
        order = [int(i) for i in np.argsort(-probs, kind="stable")]
        picked = [i for i in order if probs[i] >= threshold][: self.max_families]
        return picked or order[:1]

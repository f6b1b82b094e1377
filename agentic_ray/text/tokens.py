"""Hashed token ids for the text modality of observations: no vocabulary file, no model, deterministic.

A text becomes at most ``length`` tokens (lower-cased words, numbers split into digits, and punctuation marks, in
order), each hashed (CRC-32) into ``1 .. VOCAB - 1``; 0 is padding. Digits are separate tokens so that a serial
number read with one wrong character differs from the right one in one token, not in a whole word. The encoder's
text sub-encoder embeds the ids (``torch.nn.EmbeddingBag``) with the per-token weights of the focus mask.

In an observation the ids are stored as ``id / VOCAB`` (exact in float32: ``VOCAB`` is a power of two), so a text
block stays inside the ``[0, 1]`` feature range; :func:`ids_from_columns` inverts it.
"""

from __future__ import annotations

import re
import zlib

import numpy as np

VOCAB = 1024
"""Hash buckets, padding (0) included."""
_TOKEN = re.compile(r"[a-z]+|[0-9]|[^\sa-z0-9]")


def tokenize(text: str) -> list[str]:
    """Lower-cased words, single digits and single punctuation marks, in order."""
    return _TOKEN.findall(text.lower())


def hash_tokens(text: str, length: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``length`` tokens of ``text`` as hashed ids and uniform weights.

    Returns:
        ``ids (length,)`` int64 in ``[0, VOCAB)`` (0 = padding) and ``weights (length,)`` float32, ``1 / n`` on the
        ``n`` real tokens and 0 on padding (a text without a token has all zeros).
    """
    toks = tokenize(text)[:length]
    ids = np.zeros(length, dtype=np.int64)
    weights = np.zeros(length, dtype=np.float32)
    for i, t in enumerate(toks):
        ids[i] = 1 + zlib.crc32(t.encode()) % (VOCAB - 1)
    if toks:
        weights[: len(toks)] = 1.0 / len(toks)
    return ids, weights


def ids_from_columns(cols: np.ndarray) -> np.ndarray:
    """Observation columns ``id / VOCAB`` (any shape, float) -> int64 ids."""
    return np.rint(np.asarray(cols, dtype=np.float64) * VOCAB).astype(np.int64)

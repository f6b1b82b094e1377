"""What travels between the reward client and the scorer actors: one request and one result per (episode, layer).

Both are plain, picklable dataclasses. A request is keyed by ``(episode_id, layer)``: a scorer that sees the same
key twice (a retry after its actor restarted) answers from its cache, so a retried call cannot produce a second,
different value for one layer.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from agentic_ray.rewards.episode_record import EpisodeRecord

STATUS_OK = "ok"
STATUS_TIMEOUT = "timeout"
STATUS_ERROR = "error"
#: The call never came back: its actor died for good (restarts exhausted) or the call raised in Ray.
STATUS_ACTOR_FAILED = "actor_failed"
#: The call was still unanswered at its deadline; the client cancelled it (``ray.cancel``).
STATUS_DEADLINE = "deadline"


@dataclass
class ScoreRequest:
    """Score ``layer`` for one episode. ``attempt`` counts from 1 (the scorer adds its own retries)."""

    episode_id: str
    layer: str
    record: EpisodeRecord
    attempt: int = 1


@dataclass
class ScoreResult:
    """The outcome of scoring one layer of one episode.

    ``values`` is ``(T,)`` float32 when ``status == "ok"``, else None (a failure is never a value). ``attempt`` is
    the number of attempts the scorer spent, counting those of earlier requests for the same key.
    """

    episode_id: str
    layer: str
    status: str
    values: np.ndarray | None
    scorer: str
    version: str
    latency_s: float
    attempt: int
    error: str = ""


def values_checksum(*arrays: np.ndarray) -> str:
    """A short, exact fingerprint of float arrays (their float32 bytes; ``|`` between arrays).

    Used for the raw value of a layer (scorer and client side) and for the sealed reward vector (runner and
    learner side). Two arrays give the same checksum iff their float32 values are bitwise equal.
    """
    h = hashlib.blake2b(digest_size=10)
    for i, a in enumerate(arrays):
        if i:
            h.update(b"|")
        h.update(np.ascontiguousarray(np.asarray(a, dtype=np.float32)).tobytes())
    return h.hexdigest()

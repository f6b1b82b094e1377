"""An exact cosine index per customer namespace, kept beside an embedded Qdrant store to answer its searches.

Why hand-written: qdrant-client's local mode scans by brute force and evaluates payload filters in Python, point
by point. Measured on this 2-CPU box with 10,000 memories of 384 dimensions (100 customers): a query filtered by
customer took 204 ms median (352 ms p99) and an unfiltered one 24 ms, against the issue's goal of 5 ms. Partitioning
the same vectors by customer and scoring one matrix product over the customer's rows is exact (the same top k as
Qdrant's brute force, ties broken by id) and takes well under a millisecond. A Qdrant server has payload indexes
and HNSW, so server mode queries the server and keeps no such index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class _Part:
    """One customer's rows; appended rows are stacked lazily on the next search."""

    dim: int
    ids: list[str] = field(default_factory=list)
    episodes: list[str] = field(default_factory=list)
    entities: list[frozenset[str]] = field(default_factory=list)
    rows: list[np.ndarray] = field(default_factory=list)
    where: dict[str, int] = field(default_factory=dict)
    _matrix: np.ndarray | None = None
    _episode_arr: np.ndarray | None = None

    def put(self, pid: str, episode: str, entities: frozenset[str], vector: np.ndarray) -> None:
        i = self.where.get(pid)
        if i is None:
            self.where[pid] = len(self.ids)
            self.ids.append(pid)
            self.episodes.append(episode)
            self.entities.append(entities)
            self.rows.append(vector)
        else:  # an upsert of a known id replaces it, as in Qdrant
            self.episodes[i], self.entities[i], self.rows[i] = episode, entities, vector
        self._matrix = self._episode_arr = None

    def matrix(self) -> tuple[np.ndarray, np.ndarray]:
        if self._matrix is None or self._episode_arr is None:
            self._matrix = (
                np.stack(self.rows).astype(np.float32) if self.rows else np.zeros((0, self.dim), np.float32)
            )
            self._episode_arr = np.asarray(self.episodes, dtype=object)
        return self._matrix, self._episode_arr


class NamespaceIndex:
    """Exact top-k cosine search over unit vectors, partitioned by customer.

    Args:
        dim: vector width.
    """

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._parts: dict[str, _Part] = {}
        self._customer_of: dict[str, str] = {}

    def __len__(self) -> int:
        return len(self._customer_of)

    def put(self, pid: str, customer: str, episode: str, entities: Sequence[str], vector: np.ndarray) -> None:
        """Add or replace point ``pid`` (a unit vector of shape ``(dim,)``)."""
        old = self._customer_of.get(pid)
        if old is not None and old != customer:
            raise ValueError(
                f"point {pid} moved from customer {old!r} to {customer!r}; ids are per namespace"
            )
        self._customer_of[pid] = customer
        part = self._parts.setdefault(customer, _Part(self.dim))
        part.put(pid, episode, frozenset(entities), np.asarray(vector, dtype=np.float32).reshape(self.dim))

    def search(
        self,
        vector: np.ndarray,
        customer: str | None,
        episode: str | None = None,
        entity_id: str | None = None,
        limit: int = 5,
    ) -> list[tuple[str, float]]:
        """The ``limit`` nearest points in the namespace, best first (ties by id).

        Args:
            vector: the query, a unit vector ``(dim,)``.
            customer: the customer namespace (None: every customer).
            episode: only this episode's points (None: all of the customer's).
            entity_id: only points naming this entity.
            limit: k.

        Returns:
            ``[(point id, cosine score)]``.
        """
        q = np.asarray(vector, dtype=np.float32).reshape(self.dim)
        parts = [self._parts[customer]] if customer is not None and customer in self._parts else []
        if customer is None:
            parts = list(self._parts.values())
        out: list[tuple[str, float]] = []
        for part in parts:
            m, eps = part.matrix()
            scores = m @ q
            keep = np.ones(len(scores), dtype=bool)
            if episode is not None:
                keep &= eps == episode
            if entity_id is not None:
                keep &= np.fromiter((entity_id in e for e in part.entities), dtype=bool, count=len(scores))
            idx = np.flatnonzero(keep)
            if len(idx) > limit:
                # keep every row tied with the k-th score, so the id tie-break below stays exact
                kth = np.partition(scores[idx], len(idx) - limit)[len(idx) - limit]
                idx = idx[scores[idx] >= kth]
            out += [(part.ids[i], float(scores[i])) for i in idx]
        out.sort(key=lambda t: (-t[1], t[0]))
        return out[:limit]

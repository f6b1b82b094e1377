"""The entity graph: which entities the customer and the tools mentioned, how they relate, when each was confirmed.

Nodes are entity ids with their node type, the fields stated with them, who first mentioned them
(``customer`` or ``tool``), the turn of the first mention and ``last_confirmed_h``, the simulated time (hours) of
the latest mention or confirmation. Edges are typed relations, one per (source, relation, target): "order o1
``belongs_to`` customer c1", "address a7 ``used_for`` order o1", "item i3 ``returned_in`` order o1"; each also
keeps when it was last confirmed. The graph names no domain: node types and relation names are the caller's.

Built on networkx's ``MultiDiGraph`` (a dependency already), keyed by relation name, so two relations between the
same pair coexist; :meth:`EntityGraph.to_dict` / :meth:`from_dict` use networkx's node-link format.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np

from agentic_ray.memory.functional import freshness

BELONGS_TO = "belongs_to"
USED_FOR = "used_for"
RETURNED_IN = "returned_in"
SOURCES = ("customer", "tool", "agent")


class EntityGraph:
    """Entities and typed relations with confirmation times (simulated hours)."""

    def __init__(self) -> None:
        self.g: nx.MultiDiGraph = nx.MultiDiGraph()

    def __len__(self) -> int:
        return int(self.g.number_of_nodes())

    def __contains__(self, entity: str) -> bool:
        return entity in self.g

    def mention(
        self,
        entity: str,
        node_type: str,
        *,
        source: str,
        at_h: float,
        turn: int,
        fields: dict[str, Any] | None = None,
    ) -> None:
        """Record that ``source`` mentioned ``entity`` at ``at_h`` (a mention confirms it; fields are merged).

        Raises:
            ValueError: an unknown source, or an entity seen before with another node type.
        """
        if source not in SOURCES:
            raise ValueError(f"source {source!r} is not one of {SOURCES}")
        if entity in self.g:
            node = self.g.nodes[entity]
            if node["node_type"] != node_type:
                raise ValueError(f"entity {entity!r} is a {node['node_type']}, not a {node_type}")
            node["fields"].update(fields or {})
            node["last_confirmed_h"] = max(node["last_confirmed_h"], at_h)
            node["sources"] = sorted({*node["sources"], source})
            return
        self.g.add_node(
            entity,
            node_type=node_type,
            fields=dict(fields or {}),
            sources=[source],
            first_turn=turn,
            last_confirmed_h=at_h,
        )

    def relate(self, src: str, relation: str, dst: str, *, at_h: float) -> None:
        """Record (or re-confirm) ``src -relation-> dst``; both entities must have been mentioned."""
        for e in (src, dst):
            if e not in self.g:
                raise KeyError(f"entity {e!r} was never mentioned")
        if self.g.has_edge(src, dst, key=relation):
            edge = self.g.edges[src, dst, relation]
            edge["last_confirmed_h"] = max(edge["last_confirmed_h"], at_h)
        else:
            self.g.add_edge(src, dst, key=relation, last_confirmed_h=at_h)
        self.confirm(src, at_h)
        self.confirm(dst, at_h)

    def confirm(self, entity: str, at_h: float) -> None:
        """The entity was confirmed again (the customer repeated it, a tool returned it)."""
        node = self.g.nodes[entity]
        node["last_confirmed_h"] = max(node["last_confirmed_h"], at_h)

    def node(self, entity: str) -> dict[str, Any]:
        """The entity's attributes (node_type, fields, sources, first_turn, last_confirmed_h)."""
        return dict(self.g.nodes[entity])

    def related(self, entity: str, relation: str | None = None, incoming: bool = False) -> list[str]:
        """Entities ``entity`` points to over ``relation`` (``incoming``: that point to it), sorted."""
        edges = self.g.in_edges(entity, keys=True) if incoming else self.g.out_edges(entity, keys=True)
        return sorted({(u if incoming else v) for u, v, k in edges if relation is None or k == relation})

    def of_type(self, node_type: str) -> list[str]:
        """Every entity of one node type, most recently confirmed first (then by id)."""
        ids = [n for n, d in self.g.nodes(data=True) if d["node_type"] == node_type]
        return sorted(ids, key=lambda n: (-self.g.nodes[n]["last_confirmed_h"], n))

    def freshness(self, entity: str, now_h: float) -> float:
        """Freshness in [0, 1] of what the graph holds about ``entity`` (see :func:`functional.freshness`)."""
        return float(freshness(now_h - self.g.nodes[entity]["last_confirmed_h"]))

    def stale(self, now_h: float) -> list[str]:
        """Entities with no freshness left at ``now_h`` (to confirm again before reuse), sorted."""
        ids = sorted(self.g.nodes)
        ages = np.asarray([now_h - self.g.nodes[n]["last_confirmed_h"] for n in ids], dtype=np.float64)
        return [n for n, f in zip(ids, freshness(ages), strict=True) if f == 0.0]

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-able node-link data."""
        return dict(nx.node_link_data(self.g, edges="edges"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EntityGraph:
        """Read what :meth:`to_dict` wrote."""
        out = cls()
        out.g = nx.node_link_graph(data, directed=True, multigraph=True, edges="edges")
        return out

"""Batching padded graph observations into one big heterogeneous graph, with tensor ops only.

A batch of padded observations ``{nt}_x (B, N_nt, F)``, ``{rk}_ei (B, 2, E_r)``, ``{rk}_mask (B, E_r)`` becomes one
disjoint-union graph: node ``n`` of row ``b`` gets the global index ``b·N_nt + n`` (so ``(B, N, F)`` is simply
viewed as ``(B·N, F)``), and edge endpoints are offset by ``b·N``. Padded nodes stay in the tensors (static
shapes, no host sync, no Python loop per row) but never send or receive messages: every masked edge, and every
edge that touches a padded node, keeps a (clamped, in-range) slot but is marked invalid, and the attention layer
gives it weight exactly 0. (Routing them all to one shared sink row would serialise the GPU's atomic adds on
that row.)

All relations of a layer are handled in ONE gather / softmax / scatter (instead of one kernel chain per
relation): source messages of all relations live in one table and attention groups of all relations in another,
laid out per node type as ``(node, relation-of-that-type)`` rows. :class:`HeteroGraphLayout` holds the static part
of that layout, :class:`BatchedHeteroGraph` the per-batch edge indices.

``compact=True`` drops the invalid edge slots instead (one ``nonzero`` and one host sync per batch): the per-edge
work shrinks to the real edges (about half of the padded slots on the e-commerce env), which is what the CPU
learner wants; the result is the same since dropped edges carry weight exactly 0 either way. The default keeps
static shapes and no host sync (what CUDA wants).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agentic_ray.graph_spec import GraphSpec

__all__ = ["BatchedHeteroGraph", "HeteroGraphLayout", "MessageRelation", "node_mask"]


@dataclass(frozen=True)
class MessageRelation:
    """One message-passing relation: an observed edge type, or the reverse of one.

    Attributes:
        src: Source node type (messages come from here).
        rel: Relation name (``rev_<rel>`` for reverse relations).
        dst: Destination node type (messages arrive here).
        obs_key: Key prefix of the observed edge type (``{obs_key}_ei``, ``{obs_key}_mask``).
        reverse: True if edges are read with source and destination swapped.
        max_edges: Padded number of edges ``E_r`` per row.
    """

    src: str
    rel: str
    dst: str
    obs_key: str
    reverse: bool
    max_edges: int

    @property
    def key(self) -> str:
        """Flat name, e.g. ``tool__rev_uses__user``."""
        return f"{self.src}__{self.rel}__{self.dst}"


def node_mask(obs: dict[str, torch.Tensor], node_type: str) -> torch.Tensor:
    """``(B, N_nt)`` bool mask of real nodes."""
    return obs[f"{node_type}_mask"] > 0


class HeteroGraphLayout:
    """Static layout of the fused message tables of a :class:`GraphSpec`.

    Args:
        spec: The graph spec (node types, maxima, relations).
        add_reverse_relations: Add ``dst → src`` for every observed relation, so every node type that touches an
            edge receives messages.
    """

    def __init__(self, spec: GraphSpec, add_reverse_relations: bool = True) -> None:
        self.node_types: tuple[str, ...] = spec.node_types
        self.max_nodes: dict[str, int] = dict(spec.max_nodes)
        relations: list[MessageRelation] = []
        for r in spec.relations:
            relations.append(MessageRelation(r.src, r.rel, r.dst, r.key, False, r.max_edges))
            if add_reverse_relations:
                relations.append(MessageRelation(r.dst, f"rev_{r.rel}", r.src, r.key, True, r.max_edges))
        self.relations: tuple[MessageRelation, ...] = tuple(relations)
        self.out_relations: dict[str, tuple[int, ...]] = {
            nt: tuple(i for i, r in enumerate(relations) if r.src == nt) for nt in self.node_types
        }
        self.in_relations: dict[str, tuple[int, ...]] = {
            nt: tuple(i for i, r in enumerate(relations) if r.dst == nt) for nt in self.node_types
        }
        self.src_types: tuple[str, ...] = tuple(nt for nt in self.node_types if self.out_relations[nt])
        self.dst_types: tuple[str, ...] = tuple(nt for nt in self.node_types if self.in_relations[nt])

    def src_offsets(self, batch_size: int) -> dict[str, int]:
        """Row offset of each source type's block in the message table (rows = node × out-relation)."""
        out, acc = {}, 0
        for nt in self.src_types:
            out[nt] = acc
            acc += batch_size * self.max_nodes[nt] * len(self.out_relations[nt])
        return out

    def dst_offsets(self, batch_size: int) -> tuple[dict[str, int], int]:
        """Row offset of each destination type's block in the group table, and the total number of groups ``G``.

        A group is one (destination node, in-relation) pair; attention is a softmax within a group.
        """
        out, acc = {}, 0
        for nt in self.dst_types:
            out[nt] = acc
            acc += batch_size * self.max_nodes[nt] * len(self.in_relations[nt])
        return out, acc


@dataclass(frozen=True)
class BatchedHeteroGraph:
    """Per-batch edge indices into the fused tables of a :class:`HeteroGraphLayout`.

    Attributes:
        batch_size: ``B``.
        src_row: ``(E_tot,)`` row of each edge's source message in the message table.
        query_row: ``(E_tot,)`` row of each edge's destination in the query/group table: the attention group
            (destination node, relation) the edge belongs to; in range even for dropped edges.
        edge_valid: ``(E_tot,)`` bool, False for dropped edges.
        num_groups: ``G``, rows of the query/group table.
        edge_slices: ``(start, B, E_r)`` of each relation's edges in the PADDED order, in ``layout.relations``
            order (edges of row ``b`` are ``start + b·E_r ... start + (b+1)·E_r - 1``, in the observation's
            column order).
        segment_sizes: Number of edges of each relation in ``src_row``/``query_row`` (relations are contiguous
            segments, in ``layout.relations`` order): ``B·E_r`` when padded, the real edge counts when compacted.
        kept: Compacted graphs only: ``(E_kept,)`` position of each kept edge in the padded order (None when
            padded); :meth:`to_padded` uses it to lay per-edge values out like ``edge_slices``.
    """

    batch_size: int
    src_row: torch.Tensor
    query_row: torch.Tensor
    edge_valid: torch.Tensor
    num_groups: int
    edge_slices: tuple[tuple[int, int, int], ...]
    segment_sizes: tuple[int, ...] = ()
    kept: torch.Tensor | None = None

    @property
    def compacted(self) -> bool:
        """True when only real edges are kept (then ``edge_valid`` is all True)."""
        return self.kept is not None

    def to_padded(self, values: torch.Tensor) -> torch.Tensor:
        """Per-edge ``values (E, ...)`` in the padded edge order of ``edge_slices`` (zeros for dropped edges)."""
        if self.kept is None:
            return values
        total = sum(b * e for _, b, e in self.edge_slices)
        out = values.new_zeros(total, *values.shape[1:])
        return out.index_copy(0, self.kept, values)

    @classmethod
    def from_padded(
        cls, obs: dict[str, torch.Tensor], layout: HeteroGraphLayout, compact: bool = False
    ) -> BatchedHeteroGraph:
        """Builds the edge indices from padded observation arrays (one loop over relation *types*, none per row).

        Args:
            obs: Observation dict of batched tensors (``{nt}_mask (B, N)``, ``{rk}_ei (B, 2, E)``,
                ``{rk}_mask (B, E)``).
            layout: The static layout.
            compact: Keep only the valid edges (data-dependent sizes, one host sync); see the module docstring.

        Returns:
            The batched graph.
        """
        first = layout.node_types[0]
        batch_size = obs[f"{first}_mask"].shape[0]
        device = obs[f"{first}_mask"].device
        src_off = layout.src_offsets(batch_size)
        dst_off, num_groups = layout.dst_offsets(batch_size)
        rows = torch.arange(batch_size, device=device).unsqueeze(1)
        masks = {nt: node_mask(obs, nt) for nt in layout.node_types}

        src_rows, query_rows, valids, slices = [], [], [], []
        start = 0
        for r_id, rel in enumerate(layout.relations):
            ei = obs[f"{rel.obs_key}_ei"].long()
            src_local, dst_local = (ei[:, 1], ei[:, 0]) if rel.reverse else (ei[:, 0], ei[:, 1])
            n_src, n_dst = layout.max_nodes[rel.src], layout.max_nodes[rel.dst]
            in_range = (src_local >= 0) & (src_local < n_src) & (dst_local >= 0) & (dst_local < n_dst)
            src_local = src_local.clamp(0, n_src - 1)
            dst_local = dst_local.clamp(0, n_dst - 1)
            valid = (
                (obs[f"{rel.obs_key}_mask"] > 0)
                & in_range
                & masks[rel.src].gather(1, src_local)
                & masks[rel.dst].gather(1, dst_local)
            )
            n_out = len(layout.out_relations[rel.src])
            n_in = len(layout.in_relations[rel.dst])
            src_node = rows * n_src + src_local
            dst_node = rows * n_dst + dst_local
            src_row = src_off[rel.src] + src_node * n_out + layout.out_relations[rel.src].index(r_id)
            query_row = dst_off[rel.dst] + dst_node * n_in + layout.in_relations[rel.dst].index(r_id)
            src_rows.append(src_row.reshape(-1))
            query_rows.append(query_row.reshape(-1))
            valids.append(valid.reshape(-1))
            slices.append((start, batch_size, rel.max_edges))
            start += valid.numel()

        src_row, query_row, edge_valid = torch.cat(src_rows), torch.cat(query_rows), torch.cat(valids)
        if not compact:
            return cls(
                batch_size=batch_size,
                src_row=src_row,
                query_row=query_row,
                edge_valid=edge_valid,
                num_groups=num_groups,
                edge_slices=tuple(slices),
                segment_sizes=tuple(b * e for _, b, e in slices),
            )
        kept = edge_valid.nonzero().squeeze(1)
        sizes = torch.stack([v.sum() for v in valids]).tolist()  # the one host sync
        return cls(
            batch_size=batch_size,
            src_row=src_row.index_select(0, kept),
            query_row=query_row.index_select(0, kept),
            edge_valid=torch.ones(kept.shape[0], dtype=torch.bool, device=device),
            num_groups=num_groups,
            edge_slices=tuple(slices),
            segment_sizes=tuple(int(n) for n in sizes),
            kept=kept,
        )

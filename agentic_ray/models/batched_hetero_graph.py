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

import dataclasses
from dataclasses import dataclass

import torch

from agentic_ray.graph_spec import GraphSpec

__all__ = [
    "BatchedHeteroGraph",
    "EdgeColumns",
    "HeteroGraphLayout",
    "MessageRelation",
    "node_mask",
    "relation_edges",
]


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

    @property
    def edge_type(self) -> tuple[str, str, str]:
        """PyG edge type ``(src, rel, dst)``."""
        return (self.src, self.rel, self.dst)


def node_mask(obs: dict[str, torch.Tensor], node_type: str) -> torch.Tensor:
    """``(B, N_nt)`` bool mask of real nodes."""
    return obs[f"{node_type}_mask"] > 0


def relation_edges(
    obs: dict[str, torch.Tensor],
    rel: MessageRelation,
    max_nodes: dict[str, int],
    masks: dict[str, torch.Tensor],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The padded edges of one message relation, read from the observation.

    Args:
        obs: Batched observation tensors (``{rk}_ei (B, 2, E)``, ``{rk}_mask (B, E)``).
        rel: The relation (a reverse one reads the observed columns swapped).
        max_nodes: ``N_nt`` per node type.
        masks: ``{nt: (B, N_nt)}`` real-node masks (:func:`node_mask`).

    Returns:
        ``(src_local, dst_local, valid)``, each ``(B, E_r)``: endpoints as node indices within their row, clamped
        in range; ``valid`` is True for a real edge (edge mask set, endpoints in range and both real nodes).
    """
    ei = obs[f"{rel.obs_key}_ei"].long()
    src_local, dst_local = (ei[:, 1], ei[:, 0]) if rel.reverse else (ei[:, 0], ei[:, 1])
    n_src, n_dst = max_nodes[rel.src], max_nodes[rel.dst]
    in_range = (src_local >= 0) & (src_local < n_src) & (dst_local >= 0) & (dst_local < n_dst)
    src_local = src_local.clamp(0, n_src - 1)
    dst_local = dst_local.clamp(0, n_dst - 1)
    valid = (
        (obs[f"{rel.obs_key}_mask"] > 0)
        & in_range
        & masks[rel.src].gather(1, src_local)
        & masks[rel.dst].gather(1, dst_local)
    )
    return src_local, dst_local, valid


_PERM_CACHE = 16
"""Batch sizes whose relation-major permutation :class:`HeteroGraphLayout` keeps (serving sees 1..32)."""


@dataclass(frozen=True)
class EdgeColumns:
    """The edge slots of all message relations side by side, ``E_tot = Σ_r E_r`` columns in relation order,
    with what :func:`relation_edges` and :meth:`BatchedHeteroGraph.from_padded` need per column.

    Attributes:
        obs_keys: The observed edge types, in first-use order (``{k}_ei``/``{k}_mask`` are concatenated in
            this order).
        obs_col: ``(E_tot,)`` column of the concatenated observed edges that the slot reads.
        reverse: ``(E_tot,)`` True where the slot reads its edge swapped (a reverse relation).
        relation: ``(E_tot,)`` index of the slot's relation in ``layout.relations``.
        n_src, n_dst: ``(E_tot,)`` ``N`` of the source / destination node type.
        src_type_start, dst_type_start: ``(E_tot,)`` offset of that node type in the node masks concatenated
            in ``layout.node_types`` order.
        src_block, dst_block: ``(E_tot,)`` the type's row offset in the message / group table, per batch row
            (the offset is ``B·block``).
        n_out, out_pos: ``(E_tot,)`` out-relations of the source type, and this relation's position among them.
        n_in, in_pos: ``(E_tot,)`` in-relations of the destination type, and this relation's position among them.
    """

    obs_keys: tuple[str, ...]
    obs_col: torch.Tensor
    reverse: torch.Tensor
    relation: torch.Tensor
    n_src: torch.Tensor
    n_dst: torch.Tensor
    src_type_start: torch.Tensor
    dst_type_start: torch.Tensor
    src_block: torch.Tensor
    dst_block: torch.Tensor
    n_out: torch.Tensor
    out_pos: torch.Tensor
    n_in: torch.Tensor
    in_pos: torch.Tensor

    def slots(
        self, obs: dict[str, torch.Tensor], node_types: tuple[str, ...]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The edge slots of a batch, all relations side by side: ``(src_local, dst_local, valid)``, each
        ``(B, E_tot)``, as :func:`relation_edges` gives them per relation (endpoints within their row, clamped in
        range; ``valid``: a real edge between real nodes). ``node_types`` in the layout's order."""
        ei = torch.cat([obs[f"{k}_ei"] for k in self.obs_keys], dim=2).long()[:, :, self.obs_col]
        emask = torch.cat([obs[f"{k}_mask"] for k in self.obs_keys], dim=1)[:, self.obs_col] > 0
        src_local = torch.where(self.reverse, ei[:, 1], ei[:, 0])
        dst_local = torch.where(self.reverse, ei[:, 0], ei[:, 1])
        in_range = (src_local >= 0) & (src_local < self.n_src) & (dst_local >= 0) & (dst_local < self.n_dst)
        src_local = torch.minimum(src_local.clamp_min(0), self.n_src - 1)
        dst_local = torch.minimum(dst_local.clamp_min(0), self.n_dst - 1)
        nodes = torch.cat([node_mask(obs, nt) for nt in node_types], dim=1)  # (B, N_all)
        valid = (
            emask
            & in_range
            & nodes.gather(1, self.src_type_start + src_local)
            & nodes.gather(1, self.dst_type_start + dst_local)
        )
        return src_local, dst_local, valid

    @classmethod
    def build(cls, layout: HeteroGraphLayout, device: torch.device) -> EdgeColumns:
        obs_keys = tuple(dict.fromkeys(r.obs_key for r in layout.relations))
        obs_start, acc = {}, 0
        for k in obs_keys:
            obs_start[k] = acc
            acc += next(r.max_edges for r in layout.relations if r.obs_key == k)
        type_start, acc = {}, 0
        for nt in layout.node_types:
            type_start[nt] = acc
            acc += layout.max_nodes[nt]
        src_block, dst_block = layout.src_offsets(1), layout.dst_offsets(1)[0]
        per_col: dict[str, list[int]] = {f.name: [] for f in dataclasses.fields(cls) if f.name != "obs_keys"}
        for r_id, r in enumerate(layout.relations):
            outs, ins = layout.out_relations[r.src], layout.in_relations[r.dst]
            values = {
                "obs_col": None,
                "reverse": int(r.reverse),
                "relation": r_id,
                "n_src": layout.max_nodes[r.src],
                "n_dst": layout.max_nodes[r.dst],
                "src_type_start": type_start[r.src],
                "dst_type_start": type_start[r.dst],
                "src_block": src_block[r.src],
                "dst_block": dst_block[r.dst],
                "n_out": len(outs),
                "out_pos": outs.index(r_id),
                "n_in": len(ins),
                "in_pos": ins.index(r_id),
            }
            for name, v in values.items():
                per_col[name].extend(
                    range(obs_start[r.obs_key], obs_start[r.obs_key] + r.max_edges)
                    if v is None
                    else [v] * r.max_edges
                )
        tensors = {k: torch.tensor(v, dtype=torch.long, device=device) for k, v in per_col.items()}
        tensors["reverse"] = tensors["reverse"].bool()
        return cls(obs_keys=obs_keys, **tensors)


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
        self._columns: dict[torch.device, EdgeColumns] = {}
        self._perms: dict[tuple[int, torch.device], torch.Tensor] = {}

    def edge_columns(self, device: torch.device) -> EdgeColumns:
        """Per edge-slot constants of all relations side by side (built once per device)."""
        cols = self._columns.get(device)
        if cols is None:
            cols = self._columns[device] = EdgeColumns.build(self, device)
        return cols

    def relation_major(self, batch_size: int, device: torch.device) -> torch.Tensor:
        """``(B·E_tot,)`` permutation from the ``(B, E_tot)`` column layout of :meth:`edge_columns` (flattened)
        to the relation-major order of :attr:`BatchedHeteroGraph.edge_slices` (cached per batch size)."""
        key = (batch_size, device)
        perm = self._perms.get(key)
        if perm is None:
            total = sum(r.max_edges for r in self.relations)
            rows = torch.arange(batch_size, device=device).unsqueeze(1) * total
            parts, start = [], 0
            for r in self.relations:
                parts.append((rows + start + torch.arange(r.max_edges, device=device)).reshape(-1))
                start += r.max_edges
            perm = torch.cat(parts)
            if len(self._perms) >= _PERM_CACHE:
                self._perms.pop(next(iter(self._perms)))
            self._perms[key] = perm
        return perm

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
        """Builds the edge indices from padded observation arrays, for all relations at once (no loop per
        relation or per row).

        The edge slots of all relations are laid side by side as columns of ``(B, E_tot)`` tensors, computed
        with per-column constants of the layout (:meth:`HeteroGraphLayout.edge_columns`), and put in the
        relation-major order of ``edge_slices`` by one cached permutation. The integers are those of a loop
        over relations with :func:`relation_edges` (``tests/unit/test_batched_hetero_graph.py`` compares them);
        that loop issued about 12 tensor ops per relation (26 relations on the e-commerce env): 2.4 ms of CPU
        of a 10 ms batch-1 forward, measured, against 0.4 ms this way.

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
        c = layout.edge_columns(device)
        _, num_groups = layout.dst_offsets(batch_size)
        # Observed edge types side by side, then gathered into the relation columns (a reverse relation reads
        # its observed type's columns again, swapped).
        src_local, dst_local, valid = c.slots(obs, layout.node_types)
        rows = torch.arange(batch_size, device=device).unsqueeze(1)
        src_row = batch_size * c.src_block + (rows * c.n_src + src_local) * c.n_out + c.out_pos
        query_row = batch_size * c.dst_block + (rows * c.n_dst + dst_local) * c.n_in + c.in_pos
        perm = layout.relation_major(batch_size, device)
        src_row, query_row = src_row.reshape(-1)[perm], query_row.reshape(-1)[perm]
        edge_valid = valid.reshape(-1)[perm]
        slices, start = [], 0
        for rel in layout.relations:
            slices.append((start, batch_size, rel.max_edges))
            start += batch_size * rel.max_edges
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
        per_rel = torch.zeros(len(layout.relations), dtype=torch.long, device=device)
        sizes = per_rel.index_add_(0, c.relation, valid.sum(0)).tolist()  # the one host sync
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

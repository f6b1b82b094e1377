"""A batch of padded graph observations as PyG's ``edge_index_dict``, with tensor ops only.

Node ``n`` of row ``b`` gets the global index ``b·N_nt + n`` (so ``{nt}_x (B, N, F)`` viewed as ``(B·N, F)`` is the
``x_dict`` entry, padded nodes included), and each message relation (observed or reverse, see
:class:`HeteroGraphLayout`) becomes one ``(2, E_kept)`` edge index of its REAL edges only: PyG's convolutions have
no edge mask, so a padded or invalid edge is dropped rather than given weight 0. Dropping needs one ``nonzero``
and one host sync per batch (for all relations together). Padded nodes then neither send nor receive messages.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from agentic_ray.models.batched_hetero_graph import HeteroGraphLayout, node_mask, relation_edges

__all__ = ["HeteroEdgeIndex"]

EdgeType = tuple[str, str, str]


@dataclass(frozen=True)
class HeteroEdgeIndex:
    """Per-batch real edges of every message relation, in PyG's ``edge_index_dict`` form.

    Attributes:
        batch_size: ``B``.
        edge_index_dict: ``{(src, rel, dst): (2, E_kept_r)}`` global node indices (row 0 source, row 1
            destination), in ``layout.relations`` order.
        kept: ``{(src, rel, dst): (E_kept_r,)}`` position of each kept edge in the relation's padded order
            ``b·E_r + column`` (to lay per-edge values out like the observation).
        max_edges: ``{(src, rel, dst): E_r}`` padded edges per row.
    """

    batch_size: int
    edge_index_dict: dict[EdgeType, torch.Tensor]
    kept: dict[EdgeType, torch.Tensor]
    max_edges: dict[EdgeType, int]

    def to_padded(self, edge_type: EdgeType, values: torch.Tensor) -> torch.Tensor:
        """Per-kept-edge ``values (E_kept_r, ...)`` as ``(B, E_r, ...)`` (zeros for dropped edges)."""
        b, e = self.batch_size, self.max_edges[edge_type]
        out = values.new_zeros(b * e, *values.shape[1:])
        return out.index_copy(0, self.kept[edge_type], values).view(b, e, *values.shape[1:])

    @classmethod
    def from_padded(cls, obs: dict[str, torch.Tensor], layout: HeteroGraphLayout) -> HeteroEdgeIndex:
        """Builds the edge indices from padded observation arrays (one loop over relation *types*, none per row).

        Args:
            obs: Observation dict of batched tensors (``{nt}_mask (B, N)``, ``{rk}_ei (B, 2, E)``,
                ``{rk}_mask (B, E)``).
            layout: The static layout.

        Returns:
            The real edges of the batch.
        """
        first = obs[f"{layout.node_types[0]}_mask"]
        batch_size = first.shape[0]
        rows = torch.arange(batch_size, device=first.device).unsqueeze(1)
        masks = {nt: node_mask(obs, nt) for nt in layout.node_types}
        edges, valids, counts = [], [], []
        for rel in layout.relations:
            src_local, dst_local, valid = relation_edges(obs, rel, layout.max_nodes, masks)
            src = rows * layout.max_nodes[rel.src] + src_local
            dst = rows * layout.max_nodes[rel.dst] + dst_local
            edges.append(torch.stack([src.reshape(-1), dst.reshape(-1)]))
            valids.append(valid.reshape(-1))
            counts.append(valid.sum())
        all_valid = torch.cat(valids)
        kept_all = all_valid.nonzero().squeeze(1)
        sizes = torch.stack(counts).tolist()  # the one host sync
        kept_edges = torch.cat(edges, dim=1).index_select(1, kept_all).split(sizes, dim=1)
        # Position of each kept edge within its own relation: subtract the relation's start in the concatenation.
        starts = torch.tensor([0, *[v.numel() for v in valids[:-1]]], device=first.device).cumsum(0)
        kept_local = (kept_all - starts.repeat_interleave(torch.tensor(sizes, device=first.device))).split(
            sizes
        )
        types = [rel.edge_type for rel in layout.relations]
        return cls(
            batch_size=batch_size,
            edge_index_dict=dict(zip(types, kept_edges, strict=True)),
            kept=dict(zip(types, kept_local, strict=True)),
            max_edges={rel.edge_type: rel.max_edges for rel in layout.relations},
        )

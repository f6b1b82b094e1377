"""The policy's inference path: :class:`AAACModel`'s forward in fewer, larger tensor operations.

A batch-1 forward of the training path (default sizes, e-commerce graph, ``torch.profiler``) issues 1,011
top-level tensor operations (4,072 counting those they call): a ``Linear`` per node type, layer and projection,
a loop over the 28 relations for the attention scores, a loop over pointer groups, ... (``addmm`` x 121, ``mul`` x
147, ``sum`` x 115). :class:`InferencePolicy` computes the same logits with 600 (1,932), most of them views and
slices, and about a third fewer kernels that compute (``addmm`` x 90):

* **one flat node table**: the node embeddings of every type live in one ``(rows, H)`` tensor, type-major (type,
  batch row, node), so a per-type ``Linear`` is one ``addmm`` on a slice writing into its rows of a shared
  output, and every ``LayerNorm`` of a layer is one ``layer_norm`` and one ``addcmul`` over all types (per-row
  weights cached per batch size). Types are not padded to a common size: one padded ``baddbmm`` over all types
  (``(6, 18, 88) @ (6, 88, 1320)``, the e-commerce projection) measured 2.2-2.5x slower than six exact
  ``addmm``s, since at batch 1 the arithmetic of the padding is not small against the real one (about 20M
  multiply-adds per forward at the default sizes, every weight read once);
* **all relations in one op**: a node type's neighbour, query and gate projections are one ``addmm``; the
  attention of every relation is one gather / softmax / ``index_add`` over the real edges of all relations
  (the per-edge attention vectors gathered by relation id, for every layer at once; no loop per relation);
* **the heads** read the state and the tool nodes through one matmul each (the first layers of the skill scorer
  and of the argument context split into a state part, a tool-node part, a task-text part (with
  ``argument_task_context``) and a constant part per action: the action and skill embeddings through their first
  layer, computed once per checkpoint); every query of every
  argument slot meets every key in one ``bmm``, and the packed distribution input is then one gather and one
  mask (no loop per pointer group or head);
* **sequence slots** (ordered lists, lists with repeats, lists paired by position): every position of every slot
  is one more query (the slot's list query plus its position embedding) in that ``bmm``, their stop logits one
  linear; a follower's rank-``R`` factors are one ``addmm`` per node type with followers or leaders, and the gate
  on its own factors one linear for all followers (no loop per slot);
* the constants (transposed and stacked weights, gather indices, the embeddings through their first layers) are
  built once per set of weights and rebuilt when a parameter changes (:meth:`InferencePolicy.for_model` checks
  the parameters' version counters);
* **work tables kept per thread and batch size** (:class:`_Scratch`): the per-type linears write into views of
  them made once (``out=``), so a layer makes no slice or view per node type and no ``cat`` of its projections
  (603 top-level operations per forward before, 424 after; about 5% less CPU time, paired, e-commerce default
  sizes). Each thread has its own (Serve runs forwards in a thread pool); results never alias them.

The training path keeps its maths: this is a second implementation of the same function, checked against it on
every registered domain and action mode (``tests/unit/models/test_inference_policy.py``: logits and values within
1e-5; on a model with sequence slots also the same greedy and seeded sampled sequences). What it does not cover
falls back to the training path (:meth:`InferencePolicy.supports`): the flat encoder, PyG layers, numeric arguments
conditioned on a pointer, a reflection head that reads the state. Node types with image or text blocks (the gated
multimodal input projection) run the training path's own modules for their input rows (a CNN, a text bag and a
cross-attention have no per-type linear to fuse), and the rest of the forward runs fused.

Tool nodes are not cached as embeddings: their rows carry the episode's SLA, masks and call counts, and message
passing mixes the whole graph into them, so only the parts that depend on no observation are precomputed.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from agentic_ray.graph_spec import NUMERIC_BOUND, TOOL_NODE_TYPE
from agentic_ray.models.aaac_model import AAACModel
from agentic_ray.models.gated_hetero_attention_layer import GatedHeteroAttentionLayer
from agentic_ray.models.hetero_gnn_encoder import HeteroGNNEncoder
from agentic_ray.models.packed_action_layout import LOG_STD_MAX, LOG_STD_MIN, masked_fill_value
from agentic_ray.models.reflection import failed_last_step
from agentic_ray.models.tool_grounded_scorer import ToolGroundedScorer

__all__ = ["InferencePolicy", "InferenceResult"]


@dataclass(frozen=True)
class InferenceResult:
    """What one inference forward returns.

    Attributes:
        packed: ``(B, D)`` the distribution input (``action_dist_inputs``), as ``policy_logits(...)["packed"]``.
        state: ``(B, H)`` the policy state (the encoder's readout).
    """

    packed: torch.Tensor
    state: torch.Tensor


class _RowTable:
    """A per-type vector repeated over the rows of the flat node table, ``(rows, W)``, cached per batch size."""

    def __init__(self, per_type: list[torch.Tensor], counts: list[int]) -> None:
        self.per_type, self.counts = per_type, counts
        self._tables: dict[int, torch.Tensor] = {}

    def __call__(self, b: int) -> torch.Tensor:
        table = self._tables.get(b)
        if table is None:
            if len(self._tables) >= _CACHED_BATCH_SIZES:
                self._tables.pop(next(iter(self._tables)))
            table = self._tables[b] = torch.cat(
                [v.unsqueeze(0).expand(b * n, -1) for v, n in zip(self.per_type, self.counts, strict=True)]
            )
        return table


_CACHED_BATCH_SIZES = 16
"""Batch sizes whose row tables are kept (serving sees 1..32, evaluation its number of envs)."""


class _FlatLayerNorm:
    """The ``LayerNorm`` of each node type over the flat node table: one ``layer_norm`` and one ``addcmul``."""

    def __init__(
        self, norms: list[nn.LayerNorm | None], counts: list[int], h: int, device: torch.device
    ) -> None:
        eps = {n.eps for n in norms if n is not None}
        if len(eps) > 1:
            raise ValueError("node types with different LayerNorm eps")
        self.eps = eps.pop() if eps else 1e-5
        self.h = h
        ones, zeros = torch.ones(h, device=device), torch.zeros(h, device=device)
        self.weight = _RowTable([n.weight.detach() if n is not None else ones for n in norms], counts)
        self.bias = _RowTable([n.bias.detach() if n is not None else zeros for n in norms], counts)
        self.total = sum(counts)

    def __call__(self, x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """The normed table (written into ``out`` when given)."""
        b = x.shape[0] // self.total
        normed = F.layer_norm(x, (self.h,), eps=self.eps)
        if out is None:
            return torch.addcmul(self.bias(b), normed, self.weight(b))
        return torch.addcmul(self.bias(b), normed, self.weight(b), out=out)


@dataclass(frozen=True)
class _TypeLinear:
    """One node type's linear over its rows of the flat table: ``x[rows of t] @ weight + bias``."""

    index: int
    weight: torch.Tensor  # (in, out), contiguous
    bias: torch.Tensor  # (out,)


_M = TypeVar("_M")


def _as(cls: type[_M], value: object) -> _M:
    """``value``, checked to be a ``cls`` (a sub-module read from a ``ModuleDict`` or ``Sequential``)."""
    if not isinstance(value, cls):
        raise TypeError(f"expected {cls.__name__}, got {type(value).__name__}")
    return value


def _param(value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"expected a tensor, got {type(value).__name__}")
    return value.detach()


def _gelu(x: torch.Tensor) -> torch.Tensor:
    """``F.gelu(x)`` (the exact, erf form) as ``x · Φ(x)``, with ``Φ`` = :func:`torch.special.ndtr`.

    Why not ``F.gelu``: on a float32 CPU tensor it runs oneDNN's eltwise primitive, whose fixed cost per call
    dominates at the sizes of a served forward. Measured here, 1 thread, median of 3,000 calls: 10.5-46 µs for a
    ``(1, 88)`` tensor against 2.7 µs for ATen's own GELU kernel (the one ``F.gelu`` runs with oneDNN switched
    off, a process-wide switch this path cannot flip per call). Two native elementwise ops give the same values
    within float rounding (the equivalence test's 1e-5 holds).
    """
    return torch.special.ndtr(x).mul_(x)


def _sequential(seq: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """A ``Sequential`` of the training path's modules, its exact ``nn.GELU`` layers run by :func:`_gelu`."""
    for module in seq.children():
        x = _gelu(x) if isinstance(module, nn.GELU) and module.approximate == "none" else module(x)
    return x


def _type_linear(
    index: int, linears: list[tuple[nn.Linear, int]], width: int, device: torch.device
) -> _TypeLinear:
    """Linears of one type side by side at the given column offsets, in a block of ``width`` columns."""
    in_dim = linears[0][0].in_features
    w = torch.zeros(in_dim, width, device=device)
    bias = torch.zeros(width, device=device)
    for lin, start in linears:
        w[:, start : start + lin.out_features] = lin.weight.detach().T
        if lin.bias is not None:
            bias[start : start + lin.out_features] = lin.bias.detach()
    return _TypeLinear(index, w, bias)


@dataclass(frozen=True)
class _BatchConstants:
    """What the flat tables' layout is at one batch size ``B``.

    Attributes:
        starts: first row of each node type in the flat node table (type-major: type, batch row, node).
        group_starts: first attention group (destination node, in-relation) of each node type.
        num_groups: ``G``.
        gate_elem: ``(G,)`` per group, the element of a layer's projection table (flattened) holding its gate
            logit.
        group_relation: ``(G,)`` per group, its relation id.
        pad_index: ``(B·T·N,)`` rows of the flat table (plus one zero row) forming the padded table
            ``(B, T, N, H)``.
    """

    starts: tuple[int, ...]
    group_starts: tuple[int, ...]
    num_groups: int
    gate_elem: torch.Tensor
    group_relation: torch.Tensor
    pad_index: torch.Tensor


@dataclass(frozen=True)
class _Graph:
    """One batch's real edges, as rows of the flat tables.

    Attributes:
        batch: the batch size's constants.
        b: ``B``.
        src_row / query_row: per edge, its row in a layer's projection table (``H`` wide: per node of a type
            with relations, its ``R_out`` neighbour messages, ``R_in`` queries and one block holding the gate
            logits).
        group: per edge, its attention group.
        relation: per edge, its relation id.
    """

    batch: _BatchConstants
    b: int
    src_row: torch.Tensor
    query_row: torch.Tensor
    group: torch.Tensor
    relation: torch.Tensor


_SCRATCH_MAX_BATCH = 64
"""Largest batch size whose scratch buffers a thread keeps (larger batches allocate them per call, where their
arithmetic outweighs the per-operation overhead the kept views save)."""


class _Scratch:
    """One thread's work tables of one batch size, and each node type's rows of them as views made once.

    A layer writes its per-type linears into these (``out=``), so a forward makes no slice or view per node type
    and layer, and no ``cat`` of the projections. Tables (``R = B·rows``):

    * ``x``: two ``(R + 1, H)`` node tables, a layer reading one and writing the other; the last row stays zero
      (the padded node table gathers its empty slots from it);
    * ``x0`` ``(R, H)`` the input projections; ``proj`` the layer's projection table; ``gated`` ``(G, H)`` the
      gated messages per group; ``update`` ``(R, H)`` the messages through ``out_proj`` (zero on rows of types
      with no in-relations, which are never written); ``mid``, ``hidden``, ``second``: the FFN's input, hidden
      layer and output; ``cdf`` the FFN's ``Φ`` (its GELU, :func:`_gelu`).

    Not shared between threads (Serve runs forwards in a thread pool): :meth:`_FastEncoder.scratch` keeps one
    set per thread.
    """

    def __init__(self, encoder: _FastEncoder, b: int) -> None:
        h, counts, device = encoder.h, encoder.counts, encoder.device
        rows = b * encoder.num_nodes
        sizes = [b * n for n in counts]

        def table(width: int, extra: int = 0) -> tuple[torch.Tensor, list[torch.Tensor]]:
            t = torch.zeros(rows + extra, width, device=device)
            return t, list(t[:rows].split(sizes))

        with torch.inference_mode(False), torch.no_grad():  # plain tensors: usable under no_grad too
            self.x, self.xs = [], []
            for _ in range(2):
                t, views = table(h, extra=1)
                self.x.append(t)
                self.xs.append(views)
            self.x0, self.x0s = table(h)
            self.update, self.updates = table(h)
            self.mid, self.mids = table(h)
            self.second, self.seconds = table(h)
            self.hidden, self.hiddens = table(encoder.ffn_width)
            self.cdf = torch.zeros_like(self.hidden)
            widths = encoder.width
            proj_rows = [b * n * w for n, w in zip(counts, widths, strict=True)]
            self.proj = torch.zeros(sum(proj_rows), h, device=device)
            self.projs = [
                part.view(b * n, w * h)
                for part, n, w in zip(self.proj.split(proj_rows), counts, widths, strict=True)
            ]
            group_rows = [b * n * r for n, r in zip(counts, encoder.r_in, strict=True)]
            self.gated = torch.zeros(sum(group_rows), h, device=device)
            self.gateds = [
                part.view(b * n, r * h)
                for part, n, r in zip(self.gated.split(group_rows), counts, encoder.r_in, strict=True)
            ]


class _FastLayer:
    """One :class:`GatedHeteroAttentionLayer` over the flat node table (same weights, same maths)."""

    def __init__(
        self,
        layer: GatedHeteroAttentionLayer,
        types: tuple[str, ...],
        counts: list[int],
        device: torch.device,
    ) -> None:
        lay, h = layer.layout, layer.hidden_dim
        self.h, self.heads, self.dh = h, layer.num_heads, layer.head_dim
        self.slope = layer.negative_slope
        self.counts = counts
        self.proj: list[_TypeLinear] = []
        self.out: list[_TypeLinear] = []
        for i, t in enumerate(types):
            ro, ri = len(lay.out_relations[t]), len(lay.in_relations[t])
            if not ro and not ri:
                continue
            parts: list[tuple[nn.Linear, int]] = []
            if ro:
                parts.append((_as(nn.Linear, layer.neighbour_proj[t]), 0))
            if ri:
                parts += [
                    (_as(nn.Linear, layer.node_proj[t]), ro * h),
                    (_as(nn.Linear, layer.gate_node[t]), (ro + ri) * h),
                ]
                self.out.append(
                    _TypeLinear(
                        i,
                        _as(nn.Linear, layer.out_proj[t]).weight.detach().T.contiguous(),
                        _as(nn.Linear, layer.out_proj[t]).bias.detach(),
                    )
                )
            self.proj.append(_type_linear(i, parts, (ro + ri + 1) * h, device))
        gm = torch.zeros(len(lay.relations), h, device=device)
        for t in lay.dst_types:
            for j, r in enumerate(lay.in_relations[t]):
                gm[r] = layer.gate_message[t][j].detach()
        self.gate_message = gm
        self.group_gate: dict[int, torch.Tensor] = {}
        is_dst = [t in layer.gate_message for t in types]
        self.all_dst = all(is_dst)
        self.dst_rows = _RowTable([torch.tensor([d], device=device) for d in is_dst], counts)
        self.message_norm = _FlatLayerNorm(
            [_as(nn.LayerNorm, layer.message_norm[t]) if t in layer.message_norm else None for t in types],
            counts,
            h,
            device,
        )
        self.ffn: list[tuple[_TypeLinear, _TypeLinear]] = []
        if len(layer.ffn):
            if set(layer.ffn.keys()) != set(types):
                raise ValueError("an FFN on some node types only")
            for i, t in enumerate(types):
                ffn = layer.ffn[t]
                assert isinstance(ffn, nn.Sequential)
                f1, f2 = _as(nn.Linear, ffn[0]), _as(nn.Linear, ffn[2])
                self.ffn.append(
                    (
                        _TypeLinear(i, f1.weight.detach().T.contiguous(), f1.bias.detach()),
                        _TypeLinear(i, f2.weight.detach().T.contiguous(), f2.bias.detach()),
                    )
                )
            self.ffn_width = self.ffn[0][0].weight.shape[1]
            self.ffn_norm = _FlatLayerNorm(
                [_as(nn.LayerNorm, layer.ffn_norm[t]) for t in types], counts, h, device
            )
        self.in_relations = [len(lay.in_relations[t]) for t in types]

    def group_gate_message(self, batch: _BatchConstants, b: int) -> torch.Tensor:
        """``(G, H)``: each group's relation's gate vector ``u_r`` (cached per batch size)."""
        table = self.group_gate.get(b)
        if table is None:
            if len(self.group_gate) >= _CACHED_BATCH_SIZES:
                self.group_gate.pop(next(iter(self.group_gate)))
            table = self.group_gate[b] = self.gate_message.index_select(0, batch.group_relation)
        return table

    def __call__(
        self, g: _Graph, attention: torch.Tensor, s: _Scratch, src: int
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Reads the node table ``s.x[src]`` (``(rows, H)`` and per type ``s.xs[src]``) and writes its output into
        ``s.x[1 - src]``; returns that table's rows and per-type views. ``attention (E, A, dh)``: each edge's
        relation's attention vectors."""
        h, a, dh, b, cb = self.h, self.heads, self.dh, g.b, g.batch
        xs, rows = s.xs[src], g.b * sum(self.counts)
        x = s.x[src][:rows]
        out, outs = s.x[1 - src][:rows], s.xs[1 - src]
        # neighbour messages, queries and gate logits of every relation: one addmm per node type
        for p in self.proj:
            torch.addmm(p.bias, xs[p.index], p.weight, out=s.projs[p.index])
        proj = s.proj
        msg_e = proj.index_select(0, g.src_row).view(-1, a, dh)
        query_e = proj.index_select(0, g.query_row).view(-1, a, dh)
        score = (F.leaky_relu(msg_e + query_e, self.slope) * attention).sum(-1)  # (E, A)
        # softmax within each group (torch_geometric.utils.softmax's maths), then the weighted messages
        top = score.new_full((cb.num_groups, a), -math.inf)
        top = top.scatter_reduce_(0, g.group.unsqueeze(1).expand(-1, a), score, "amax")
        e = (score - top.index_select(0, g.group)).exp()
        total = score.new_zeros(cb.num_groups, a).index_add_(0, g.group, e) + 1e-16
        alpha = e / total.index_select(0, g.group)
        agg = msg_e.new_zeros(cb.num_groups, a, dh).index_add_(0, g.group, alpha.unsqueeze(-1) * msg_e)
        agg = agg.view(-1, h)
        gate_logit = proj.view(-1).index_select(0, cb.gate_elem)
        gate = torch.sigmoid(gate_logit + (agg * self.group_gate_message(cb, b)).sum(-1)).unsqueeze(-1)
        torch.mul(agg, gate, out=s.gated)
        for o in self.out:
            torch.addmm(o.bias, s.gateds[o.index], o.weight, out=s.updates[o.index])
        residual = x + s.update
        target = s.mid if self.ffn else out
        if self.all_dst:
            mid = self.message_norm(residual, out=target)
        else:
            mid = torch.where(self.dst_rows(b) > 0, self.message_norm(residual), x, out=target)
        if not self.ffn:
            return out, outs
        for f1, _ in self.ffn:
            torch.addmm(f1.bias, s.mids[f1.index], f1.weight, out=s.hiddens[f1.index])
        s.hidden.mul_(torch.special.ndtr(s.hidden, out=s.cdf))  # _gelu in place (Φ into a kept table)
        for _, f2 in self.ffn:
            torch.addmm(f2.bias, s.hiddens[f2.index], f2.weight, out=s.seconds[f2.index])
        self.ffn_norm(mid + s.second, out=out)
        return out, outs


class _FastEncoder:
    """A :class:`HeteroGNNEncoder` (fused layers) over one flat node table: rows type-major (type, batch row,
    node), a type's rows contiguous, so a per-type linear is one ``addmm`` on a slice and a per-type
    ``LayerNorm`` one ``layer_norm`` over all rows.

    Args:
        encoder: The encoder whose weights it reads.
        rows: Rows per node type of the padded node table the heads and the pooling read (at least the most
            nodes of any type; rows past a type's nodes are zero embeddings).
    """

    def __init__(self, encoder: HeteroGNNEncoder, rows: int, device: torch.device) -> None:
        spec, lay = encoder.spec, encoder.layout
        self.types = spec.node_types
        self.counts = [spec.max_nodes[t] for t in self.types]
        self.n = rows
        self.h = encoder.hidden_dim
        self.device = device
        nt, h = len(self.types), self.h
        self.input_proj = [
            _TypeLinear(
                i,
                _as(nn.Linear, _as(nn.Sequential, encoder.input_proj[t])[0]).weight.detach().T.contiguous(),
                _as(nn.Linear, _as(nn.Sequential, encoder.input_proj[t])[0]).bias.detach(),
            )
            for i, t in enumerate(self.types)
            if t in encoder.input_proj
        ]
        self.proj_norm = _FlatLayerNorm(
            [
                _as(nn.LayerNorm, _as(nn.Sequential, encoder.input_proj[t])[1])
                if t in encoder.input_proj
                else None
                for t in self.types
            ],
            self.counts,
            h,
            device,
        )
        # Node types with image or text blocks: their input projection is the training path's own module (a CNN,
        # a text bag and the gated cross-attention with the task query), whose output replaces the type's rows
        # of the first node table.
        self.multimodal = [
            (i, encoder.multimodal[t]) for i, t in enumerate(self.types) if t in encoder.multimodal
        ]
        self.task_query = encoder.task_query
        layers = list(encoder.layers)
        if not all(isinstance(layer, GatedHeteroAttentionLayer) for layer in layers):
            raise ValueError("the inference path needs the fused GNN layers")
        self.layers = [_FastLayer(layer, self.types, self.counts, device) for layer in layers]  # type: ignore[arg-type]
        self.ffn_width = next((f.ffn_width for f in self.layers if f.ffn), 0)
        self._local = threading.local()
        self.attention = torch.stack([_param(layer.attention) for layer in layers])  # (L, R, A, dh)
        # the projection table's blocks per node (R_out + R_in + 1, or 0 for a type without relations)
        r_out = [len(lay.out_relations[t]) for t in self.types]
        r_in = [len(lay.in_relations[t]) for t in self.types]
        width = [ro + ri + 1 if ro or ri else 0 for ro, ri in zip(r_out, r_in, strict=True)]
        self.r_in, self.width = r_in, width
        self.proj_start = [
            sum(n * w for n, w in zip(self.counts[:i], width[:i], strict=True)) for i in range(nt)
        ]
        self.group_start = [
            sum(n * r for n, r in zip(self.counts[:i], r_in[:i], strict=True)) for i in range(nt)
        ]
        self.row_start = [sum(self.counts[:i]) for i in range(nt)]
        cols = lay.edge_columns(device)
        self.cols = cols
        t_of = {t: i for i, t in enumerate(self.types)}
        per_col: dict[str, list[int]] = {
            k: [] for k in ("src_w", "src_p", "dst_w", "dst_p", "q_off", "dst_g", "dst_r")
        }
        for r in lay.relations:
            ts, td = t_of[r.src], t_of[r.dst]
            values = {
                "src_w": width[ts],
                "src_p": self.proj_start[ts],
                "dst_w": width[td],
                "dst_p": self.proj_start[td],
                "q_off": r_out[td],
                "dst_g": self.group_start[td],
                "dst_r": r_in[td],
            }
            for k, v in values.items():
                per_col[k] += [v] * r.max_edges
        self.col = {k: torch.tensor(v, dtype=torch.long, device=device) for k, v in per_col.items()}
        self._layout = lay
        self.r_out = r_out
        self._batch: dict[int, _BatchConstants] = {}
        self.readout = encoder.readout
        self.num_nodes = sum(self.counts)
        # the padded node table (B, T, N, H) and its node masks: gathers from the flat table plus one zero row
        midx: list[int] = []
        for i in range(nt):
            midx += [self.row_start[i] + j if j < self.counts[i] else self.num_nodes for j in range(rows)]
        self.mask_index = torch.tensor(midx, dtype=torch.long, device=device)

    def batch_constants(self, b: int) -> _BatchConstants:
        """The row offsets and gather indices of a batch size (cached)."""
        cached = self._batch.get(b)
        if cached is not None:
            return cached
        if len(self._batch) >= _CACHED_BATCH_SIZES:
            self._batch.pop(next(iter(self._batch)))
        starts = tuple(b * s for s in self.row_start)
        gate_elem: list[int] = []
        group_rel: list[int] = []
        for i, t in enumerate(self.types):
            ri, w, ro = self.r_in[i], self.width[i], self.r_out[i]
            for node in range(b * self.counts[i]):
                row = b * self.proj_start[i] + node * w + ro + ri  # the node's gate block
                gate_elem += [row * self.h + k for k in range(ri)]
                group_rel += list(self._layout.in_relations[t])
        pad: list[int] = []
        for row in range(b):
            for i, n in enumerate(self.counts):
                pad += [starts[i] + row * n + j if j < n else b * self.num_nodes for j in range(self.n)]

        def index(values: list[int]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.long, device=self.device)

        out = self._batch[b] = _BatchConstants(
            starts=starts,
            group_starts=tuple(b * s for s in self.group_start),
            num_groups=b * sum(n * r for n, r in zip(self.counts, self.r_in, strict=True)),
            gate_elem=index(gate_elem),
            group_relation=index(group_rel),
            pad_index=index(pad),
        )
        return out

    def graph(self, obs: dict[str, torch.Tensor], b: int) -> _Graph:
        """The batch's real edges (those of :meth:`BatchedHeteroGraph.from_padded` with ``compact=True``), as
        rows of this encoder's tables."""
        c, k = self.cols, self.col
        src_local, dst_local, valid = c.slots(obs, self.types)
        rows = torch.arange(b, device=src_local.device).unsqueeze(1)
        src_node = rows * c.n_src + src_local
        dst_node = rows * c.n_dst + dst_local
        table = torch.stack(
            [
                b * k["src_p"] + src_node * k["src_w"] + c.out_pos,
                b * k["dst_p"] + dst_node * k["dst_w"] + k["q_off"] + c.in_pos,
                b * k["dst_g"] + dst_node * k["dst_r"] + c.in_pos,
                c.relation.expand_as(src_node),
            ]
        ).view(4, -1)[:, valid.view(-1)]
        return _Graph(
            batch=self.batch_constants(b),
            b=b,
            src_row=table[0],
            query_row=table[1],
            group=table[2],
            relation=table[3],
        )

    def scratch(self, b: int) -> _Scratch:
        """This thread's work tables of batch size ``b`` (kept for up to :data:`_CACHED_BATCH_SIZES` sizes of at
        most :data:`_SCRATCH_MAX_BATCH`; made afresh for larger batches)."""
        if b > _SCRATCH_MAX_BATCH:
            return _Scratch(self, b)
        kept: dict[int, _Scratch] | None = getattr(self._local, "scratch", None)
        if kept is None:
            kept = self._local.scratch = {}
        s = kept.get(b)
        if s is None:
            if len(kept) >= _CACHED_BATCH_SIZES:
                kept.pop(next(iter(kept)))
            s = kept[b] = _Scratch(self, b)
        return s

    def __call__(
        self, obs: dict[str, torch.Tensor], failure_input: torch.Tensor
    ) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor, _Graph, torch.Tensor | None]:
        """``(state (B, H), the flat node table's rows per node type (each (B·n_t, H)), padded node table
        (B, T, N, H), graph, the task query (B, H) or None)``. The per-type rows are this thread's work tables:
        valid until its next forward."""
        b = failure_input.shape[0]
        nt, n, h = len(self.types), self.n, self.h
        g = self.graph(obs, b)
        s = self.scratch(b)
        for p in self.input_proj:
            feats = obs[f"{self.types[p.index]}_x"].reshape(b * self.counts[p.index], -1).float()
            torch.addmm(p.bias, feats, p.weight, out=s.x0s[p.index])
        rows = b * self.num_nodes
        x = self.proj_norm(s.x0, out=s.x[0][:rows])
        query = None
        if self.task_query is not None:
            with torch.no_grad():  # the training path's modules: no graph, whatever the caller's grad mode
                query = self.task_query(obs, b)
                # multimodal types: their x0 rows stay zero (normed to zero), then are overwritten here
                for i, enc in self.multimodal:
                    s.xs[0][i].copy_(enc(obs[f"{self.types[i]}_x"], query)[0])
        xs, src = s.xs[0], 0
        if self.layers:
            attention = self.attention.index_select(1, g.relation)  # (L, E, A, dh)
            for layer, att in zip(self.layers, attention, strict=True):
                x, xs = layer(g, att, s, src)
                src = 1 - src
        # the padded node table: empty slots read the zero row past the node rows
        nodes = s.x[src].index_select(0, g.batch.pad_index).view(b, nt, n, h)
        masks = torch.cat(
            [*(obs[f"{t}_mask"] for t in self.types), obs[f"{self.types[0]}_mask"].new_zeros(b, 1)], 1
        )
        m = (masks.index_select(1, self.mask_index) > 0).view(b, nt, n, 1)
        count = m.sum(2).clamp(min=1).to(x.dtype)
        mean = (nodes * m).sum(2) / count
        top = nodes.masked_fill(~m, torch.finfo(x.dtype).min).amax(2)
        top = torch.where(m.any(2), top, torch.zeros_like(top))
        pooled = torch.cat([mean, top], -1).reshape(b, nt * 2 * h)
        state = _sequential(self.readout, torch.cat([pooled, failure_input.to(pooled.dtype)], -1))
        return state, xs, nodes, g, query


class InferencePolicy:
    """The inference forward of an :class:`AAACModel` (eval mode, no gradient): the packed logits and the state.

    Build it with :meth:`for_model` (cached on the model, rebuilt when its weights change). Call it under
    ``torch.inference_mode()`` (or ``no_grad``).

    Args:
        model: A model :meth:`supports` accepts.
    """

    def __init__(self, model: AAACModel) -> None:
        reason = self.unsupported(model)
        if reason:
            raise ValueError(f"the inference path does not cover this model: {reason}")
        device = next(model.parameters()).device
        self.model = model
        self.config = model.config
        enc = model.encoder
        assert isinstance(enc, HeteroGNNEncoder)
        heads = model.policy_heads
        pk = heads.packed
        self.pk = pk
        spec = model.spec
        widths = [g.width for g in pk.pointer_groups] + [g.width for g in pk.set_groups]
        widths += [q.width for q in pk.sequences]
        rows = max([*spec.max_nodes.values(), *widths])
        self.encoder = _FastEncoder(enc, rows, device)
        self.critic_encoders: dict[str, _FastEncoder] = {}
        if model.has_critics and model.config.separate_critic_encoders:
            for which in ("reward_critic", "risk_critic"):
                ce = model.critic_encoder(which)
                assert isinstance(ce, HeteroGNNEncoder)
                self.critic_encoders[which] = _FastEncoder(ce, rows, device)
        types = spec.node_types
        self.types = types
        self.n = rows
        h, hd = enc.hidden_dim, heads.hidden_dim
        self.h, self.hd = h, hd
        sel = heads.choice_skills
        k = pk.num_skills
        self.k = k
        self.sel = sel
        self.tool_scoring = heads.tool_scoring
        # -- the state's linears: skill base (or the state-only skill head), scorer, argument context ----------
        ctx0 = _as(nn.Linear, heads.argument_context[0])
        w_ctx = ctx0.weight.detach()
        state_w = []
        state_b = []
        if isinstance(heads.skill_head, ToolGroundedScorer):
            sc = heads.skill_head
            base0, score0 = _as(nn.Linear, sc.base[0]), _as(nn.Linear, sc.score[0])
            w1 = score0.weight.detach()
            state_w += [base0.weight.detach(), w1[:, :h], w_ctx[:, :h]]
            state_b += [
                base0.bias.detach(),
                torch.zeros(w1.shape[0], device=device),
                torch.zeros(hd, device=device),
            ]
            self.widths = (base0.out_features, w1.shape[0], hd)
            self.base_out = sc.base[2]
            self.score_out = sc.score[2]
            self.score_const = _param(sc.action_embedding.weight) @ w1[:, 2 * h :].T + score0.bias.detach()
            tool_cols = w_ctx[:, h + hd : 2 * h + hd]
            self.tool_w = torch.cat([w1[:, h : 2 * h], tool_cols]).T.contiguous()  # (H, hh + hd)
        else:
            head = heads.skill_head
            assert isinstance(head, nn.Sequential)
            first = _as(nn.Linear, head[0])
            state_w += [first.weight.detach(), w_ctx[:, :h]]
            state_b += [first.bias.detach(), torch.zeros(hd, device=device)]
            self.widths = (first.out_features, 0, hd)
            self.base_out = head[2]
        self.state_w = torch.cat(state_w).T.contiguous()
        self.state_b = torch.cat(state_b)
        self.ctx_const = _param(heads.skill_embedding.weight) @ w_ctx[:, h : h + hd].T + ctx0.bias.detach()
        # the task text's columns of the context's first layer, last (after the tool node's)
        task_start = h + hd + (h if self.tool_scoring else 0)
        self.task_w = w_ctx[:, task_start:].T.contiguous() if heads.task_context else None
        if self.task_w is not None and self.task_w.shape[0] != h:
            raise ValueError("the argument context's task columns are not one state wide")
        self.ctx_rest = heads.argument_context[1:]
        if self.tool_scoring:
            tool_t = types.index(TOOL_NODE_TYPE)
            tools = sel if sel is not None else torch.arange(k, device=device)
            self.tool_rows = tool_t * rows + tools  # rows of the (B, T·N, H) node table
        # -- one linear of the argument context: every slot's query, then omit / enum / numeric / free ----------
        p, lt, ne = pk.pointer_slots, pk.list_slots, pk.numeric_slots
        self.num_sources = heads.num_sources
        ns = ne if self.num_sources else 0
        ctx_linears: list[nn.Linear] = [heads.pointer_query, heads.list_query]
        if ns:
            ctx_linears.append(heads.source_query)
        ctx_linears += [heads.pointer_omit, heads.enum_head, heads.numeric_head, heads.source_free]
        self.ctx_w = torch.cat([lin.weight.detach() for lin in ctx_linears]).T.contiguous()
        self.ctx_b = torch.cat([lin.bias.detach() for lin in ctx_linears])
        self.queries = p + lt + ns  # queries per choice
        self.ctx_tail = (p, pk.enum_slots * pk.enum_choices, 2 * ne, ne)
        # -- keys of every node type: [pointer key | list key | source key], zero where a type has none --------
        key_dicts = [heads.node_key, heads.list_key, heads.source_key]
        key_rows = [[_as(nn.Linear, d[t]) if t in d else None for d in key_dicts] for t in types]
        # keys per type, exact: the kinds a type has side by side; then one row per (type, kind) for the node
        # slots past a type's nodes (the key of a zero embedding: the bias), then the copy sources' keys
        self.key_linears: list[_TypeLinear] = []
        key_row: dict[tuple[int, int, int], int] = {}
        bias_rows: list[torch.Tensor] = []
        offset = 0
        for i, r in enumerate(key_rows):
            kinds = [(j, lin) for j, lin in enumerate(r) if lin is not None]
            if not kinds:
                continue
            self.key_linears.append(
                _type_linear(
                    i, [(lin, pos * hd) for pos, (_, lin) in enumerate(kinds)], len(kinds) * hd, device
                )
            )
            for pos, (j, _lin) in enumerate(kinds):
                for node in range(spec.max_nodes[types[i]]):
                    key_row[(j, i, node)] = offset + node * len(kinds) + pos
            offset += spec.max_nodes[types[i]] * len(kinds)
        self.node_keys = offset
        for i, r in enumerate(key_rows):
            for j, lin in enumerate(r):
                if lin is not None:
                    for node in range(spec.max_nodes[types[i]], rows):
                        key_row[(j, i, node)] = offset + len(bias_rows)
                    bias_rows.append(lin.bias.detach())
        self.key_bias = torch.stack(bias_rows) if bias_rows else torch.zeros(0, hd, device=device)
        self.key_row = key_row
        nk = offset + len(bias_rows)
        if self.num_sources:
            src_rows = [
                key_row[(2, types.index(spec.numeric_sources[j].node_type), i)]
                for j, i in spec.source_table()
            ]
            self.source_rows = torch.tensor(src_rows, dtype=torch.long, device=device)
            self.source_const = heads.source_field(heads.source_entry).detach()
        self.source_key_start = nk
        nk += self.num_sources
        self.num_keys = nk
        self.scale = 1.0 / math.sqrt(hd)
        self.fill = masked_fill_value(torch.float32)
        self._build_sequences(model, device)
        self._build_packing(model, device)

    # -- what it covers ---------------------------------------------------------------------------------
    @staticmethod
    def unsupported(model: AAACModel) -> str | None:
        """Why :class:`InferencePolicy` cannot run ``model`` (None when it can)."""
        cfg = model.config
        if not isinstance(model.encoder, HeteroGNNEncoder):
            return "encoder 'flat'"
        if cfg.gnn_layer != "fused":
            return "gnn_layer 'pyg'"
        if model.policy_heads.packed.numeric_anchor:
            return "numeric arguments conditioned on a pointer"
        if model.has_critics and cfg.separate_critic_encoders:
            for which in ("reward_critic", "risk_critic"):
                if not isinstance(model.critic_encoder(which), HeteroGNNEncoder):
                    return "a flat critic encoder"
        if cfg.reflection_head_input != "evidence" and model.predicts_reflection:
            return "a reflection head that reads the state"
        return None

    @classmethod
    def supports(cls, model: AAACModel) -> bool:
        """True when :meth:`for_model` can build the inference path of ``model``."""
        return cls.unsupported(model) is None

    @classmethod
    def for_model(cls, model: AAACModel) -> InferencePolicy:
        """The inference path of ``model``, built once and rebuilt when a parameter has changed in place (an
        optimizer step or ``load_state_dict`` bumps the parameters' version counters). The check reads the
        parameters kept with the cached path: walking the modules for them on every call (``model.parameters()``)
        cost about 3 ms, as much as the forward (cProfile, tiny config). A parameter *replaced* by another object
        is not seen; build a new ``InferencePolicy(model)`` then."""
        cached = getattr(model, "_inference_policy", None)
        if cached is not None:
            params, version, policy = cached
            if [p._version for p in params] == version:
                return policy
        params = list(model.parameters())
        with torch.no_grad():
            policy = cls(model)
        object.__setattr__(model, "_inference_policy", (params, [p._version for p in params], policy))
        return policy

    # -- sequence slots -----------------------------------------------------------------------------------
    def _build_sequences(self, model: AAACModel, device: torch.device) -> None:
        """The constants of the sequence slots (ordered lists), all slots at once.

        A slot's position ``t`` queries with its list query plus the position embedding: these ``ΣT`` queries join
        the others in the heads' one ``bmm`` against the keys (their item scores), and one linear gives their stop
        logits. A follower's rank-``R`` factors: every node type's leader and follower factors are one ``addmm``
        over its rows of the flat node table (nodes past the type's count: the bias), and its own factors are
        gated by a linear of its slot's list query (one linear for all followers, one gather and one multiply).
        """
        heads, pk, q = model.policy_heads, self.pk, self.queries
        seqs = pk.sequences
        self.seq_count = len(seqs)
        self.seq_positions = sum(s.length for s in seqs)
        self.follower_count = 0
        self.num_factors = 0
        self.own_index = torch.zeros(0, dtype=torch.long, device=device)
        if not seqs:
            return

        def index(values: list[int]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.long, device=device)

        list_row = [s.skill * q + pk.pointer_slots + s.slot for s in seqs]  # the slot's row of the queries
        self.seq_query_rows = index([r for r, s in zip(list_row, seqs, strict=True) for _ in range(s.length)])
        self.seq_position = torch.cat([_param(heads.seq_position)[i, : s.length] for i, s in enumerate(seqs)])
        self.seq_stop_w = _param(heads.seq_stop.weight)  # (1, hd)
        self.seq_stop_b = _param(heads.seq_stop.bias)
        # the first position of each slot among the ΣT
        self.seq_start = [sum(s.length for s in seqs[:i]) for i in range(len(seqs))]
        followers = [i for i, s in enumerate(seqs) if s.leader >= 0]
        self.follower_count = len(followers)
        if not followers:
            return
        r = pk.rank
        self.follow_gate_w = _param(heads.follow_gate.weight)
        self.follow_gate_b = _param(heads.follow_gate.bias)
        self.follower_rows = index([list_row[i] for i in followers])
        # the factor table: per node type [leader factors R | follower factors R] of its nodes, then the biases
        lead_kind = {t: _as(nn.Linear, m) for t, m in heads.follow_lead.items()}
        own_kind = {t: _as(nn.Linear, m) for t, m in heads.follow_own.items()}
        t_of = {t: i for i, t in enumerate(self.types)}
        counts = self.encoder.counts
        self.factor_linears: list[_TypeLinear] = []
        # (kind: 0 leader / 1 follower, type, node) -> the first of its R columns
        col: dict[tuple[int, str, int], int] = {}
        bias: list[torch.Tensor] = []
        offset = 0
        for t in self.types:
            kinds = [(j, lin) for j, lin in enumerate((lead_kind.get(t), own_kind.get(t))) if lin is not None]
            if not kinds:
                continue
            i = t_of[t]
            self.factor_linears.append(
                _type_linear(
                    i, [(lin, pos * r) for pos, (_, lin) in enumerate(kinds)], len(kinds) * r, device
                )
            )
            for pos, (j, _lin) in enumerate(kinds):
                for node in range(counts[i]):
                    col[(j, t, node)] = offset + (node * len(kinds) + pos) * r
            offset += counts[i] * len(kinds) * r
        for t in self.types:
            for j, lin in enumerate((lead_kind.get(t), own_kind.get(t))):
                if lin is None:
                    continue
                for node in range(counts[t_of[t]], self.n):
                    col[(j, t, node)] = offset + len(bias) * r
                bias.append(lin.bias.detach())
        self.factor_bias = torch.cat(bias)
        self.factor_col = col
        self.num_factors = offset + len(bias) * r
        # a follower's own factors times its gate: (follower, node, rank) entries, node-major per follower
        own_idx: list[int] = []
        gate_idx: list[int] = []
        self.own_start: dict[int, int] = {}
        for f, i in enumerate(followers):
            s = seqs[i]
            self.own_start[i] = len(own_idx)
            for node in range(s.width):
                own_idx += [col[(1, s.node_type, node)] + c for c in range(r)]
                gate_idx += [f * r + c for c in range(r)]
        self.own_index = index(own_idx)
        self.gate_index = index(gate_idx)

    # -- packing ------------------------------------------------------------------------------------------
    def _build_packing(self, model: AAACModel, device: torch.device) -> None:
        """The gather index of the packed logits into the value table and of their masks into the mask table."""
        pk, heads, full = self.pk, model.policy_heads, model.layout
        k, p, lt, ne, q = pk.num_skills, pk.pointer_slots, pk.list_slots, pk.numeric_slots, self.queries
        sel = [int(s) for s in heads.choice_skills] if heads.choice_skills is not None else list(range(k))
        # value table: [skill (K) | scores (K·q + ΣT, num_keys) | omit (K·P) | enum (K·E·Me) | free (K·N) |
        #               mean (K·N) | log_std (K·N) | stop (ΣT) | factors | gated own factors | 0]
        v_scores = k
        v_omit = v_scores + (k * q + self.seq_positions) * self.num_keys
        v_enum = v_omit + k * p
        v_free = v_enum + k * pk.enum_slots * pk.enum_choices
        v_mean = v_free + k * ne
        v_log_std = v_mean + k * ne
        v_stop = v_log_std + k * ne
        v_factor = v_stop + self.seq_positions
        v_own = v_factor + self.num_factors
        v_zero = v_own + len(self.own_index)
        # mask table: [choice mask (K) | pointer_mask (K_full·P_full·Mp1) | list_mask (K_full·L_full·Mp) |
        #               source_mask (S) | 1 | 0]
        mp = full.max_pointer
        pf, lf, mp1 = full.pointer_slots, full.list_slots, full.pointer_choices
        m_ptr = k
        m_list = m_ptr + full.num_skills * pf * mp1
        m_src = m_list + full.num_skills * lf * mp
        m_one = m_src + max(model.spec.num_sources, 1)
        m_zero = m_one + 1
        self.mask_sizes = (
            k,
            full.num_skills * pf * mp1,
            full.num_skills * lf * mp,
            max(model.spec.num_sources, 1),
        )
        vidx: list[int] = list(range(k))
        midx: list[int] = list(range(k))

        def score(choice: int, query: int, key: int) -> int:
            return v_scores + (choice * q + query) * self.num_keys + key

        def position_score(position: int, key: int) -> int:  # a sequence position's query (after the K·q)
            return v_scores + (k * q + position) * self.num_keys + key

        t_of = {t: i for i, t in enumerate(self.types)}
        for g in pk.pointer_groups:
            for kk, pp in zip(g.skills, g.slots, strict=True):
                for w in range(g.width):
                    vidx.append(score(kk, pp, self.key_row[(0, t_of[g.node_type], w)]))
                    midx.append(m_ptr + (sel[kk] * pf + pp) * mp1 + w)
                vidx.append(v_omit + kk * p + pp)
                midx.append(m_ptr + (sel[kk] * pf + pp) * mp1 + mp)
        for sg in pk.set_groups:
            for kk, ll in zip(sg.skills, sg.slots, strict=True):
                for w in range(sg.width):
                    vidx.append(score(kk, p + ll, self.key_row[(1, t_of[sg.node_type], w)]))
                    midx.append(m_list + (sel[kk] * lf + ll) * mp + w)
        r = pk.rank
        for i, sq in enumerate(pk.sequences):  # items (T, W), stop (T), a follower's factors (W_A, R), (W, R)
            first = self.seq_start[i]
            for t in range(sq.length):
                for w in range(sq.width):
                    vidx.append(position_score(first + t, self.key_row[(1, t_of[sq.node_type], w)]))
                    midx.append(m_list + (sel[sq.skill] * lf + sq.slot) * mp + w)
            vidx += [v_stop + first + t for t in range(sq.length)]
            midx += [m_one] * sq.length
            if sq.leader >= 0:
                lead_t = pk.sequences[sq.leader].node_type
                for w in range(sq.lead_width):
                    vidx += [v_factor + self.factor_col[(0, lead_t, w)] + c for c in range(r)]
                vidx += [v_own + self.own_start[i] + e for e in range(sq.width * r)]
                midx += [m_one] * ((sq.lead_width + sq.width) * r)
        enum_valid, enum_used = heads.enum_valid, heads.enum_used
        for kk in range(k):
            for e in range(pk.enum_slots):
                for c in range(pk.enum_choices):
                    if not bool(enum_used[kk, e]):
                        vidx.append(v_zero)
                        midx.append(m_one)
                        continue
                    vidx.append(v_enum + (kk * pk.enum_slots + e) * pk.enum_choices + c)
                    midx.append(m_one if bool(enum_valid[kk, e, c]) else m_zero)
        used = heads.numeric_used
        for kk in range(k):
            for n in range(ne):
                for c in range(pk.source_choices):
                    if not bool(used[kk, n]):
                        vidx.append(v_zero)
                        midx.append(m_one)
                    elif c == 0:
                        vidx.append(v_free + kk * ne + n)
                        midx.append(m_one)
                    else:
                        vidx.append(score(kk, p + lt + n, self.source_key_start + c - 1))
                        midx.append(m_src + c - 1)
        for start in (v_mean, v_log_std):
            for kk in range(k):
                for n in range(ne):
                    vidx.append(start + kk * ne + n if bool(used[kk, n]) else v_zero)
                    midx.append(m_one)
        if len(vidx) != pk.total_dim:
            raise AssertionError(f"packed {len(vidx)} entries for a layout of {pk.total_dim}")
        self.value_index = torch.tensor(vidx, dtype=torch.long, device=device)
        self.mask_index = torch.tensor(midx, dtype=torch.long, device=device)
        self.choice_mask_key = "skill_mask" if heads.choice_skills is None else "proto_mask"

    # -- the forward ------------------------------------------------------------------------------------
    def failure_input(
        self, obs: dict[str, torch.Tensor], reflection: bool = True, evidence: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The readout's failure input and the fix prior, as :meth:`AAACModel.encode` computes them."""
        model, cfg = self.model, self.config
        refl = obs["reflection"]
        evidence_obs = obs["failure_evidence"]
        shown = evidence_obs.float() * float(evidence) if cfg.evidence_to_policy else None

        def failure(diagnosis: torch.Tensor) -> torch.Tensor:
            return diagnosis if shown is None else torch.cat([diagnosis, shown.to(diagnosis.dtype)], -1)

        if not reflection or not evidence:
            return failure(torch.zeros_like(refl)), None
        if not model.predicts_reflection:
            diagnosis = refl
        else:
            head = model.reflection_head
            assert head is not None
            probs = _sequential(head, evidence_obs.float()).softmax(-1)
            diagnosis = probs * failed_last_step(obs).unsqueeze(-1).to(probs.dtype)
        prior = None
        if model.fix_prior is not None:
            k = model.layout.num_skills
            prior = model.fix_prior(diagnosis, evidence_obs[..., -k:].to(diagnosis.dtype))
        return failure(diagnosis), prior

    def __call__(
        self, obs: dict[str, torch.Tensor], reflection: bool | None = None, evidence: bool | None = None
    ) -> InferenceResult:
        """The packed logits and state of a batch (``reflection``/``evidence``: the ablation switches of
        :meth:`AAACModel.encode`; None = the model's own)."""
        model = self.model
        diag_on = model.reflection_enabled if reflection is None else reflection
        ev_on = model.evidence_enabled if evidence is None else evidence
        failure, prior = self.failure_input(obs, bool(diag_on), bool(ev_on))
        state, rows, nodes, graph, task = self.encoder(obs, failure)
        return InferenceResult(packed=self.heads(obs, state, rows, nodes, graph, prior, task), state=state)

    def heads(
        self,
        obs: dict[str, torch.Tensor],
        state: torch.Tensor,
        rows: list[torch.Tensor],
        nodes: torch.Tensor,
        graph: _Graph,
        prior: torch.Tensor | None,
        task: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``(B, D)`` packed logits from the state, the flat node table's rows per node type, the padded table
        ``(B, T, N, H)`` and the task query (read when the argument heads read the task text)."""
        b, nt, n, h = nodes.shape
        k, hd = self.k, self.hd
        wb, ws, _ = self.widths
        s = torch.addmm(self.state_b, state, self.state_w)
        base = self.base_out(_gelu(s[:, :wb]))
        table = nodes.view(b, nt * n, h)
        ctx_pre = s[:, None, wb + ws :] + self.ctx_const
        if self.task_w is not None:
            assert task is not None
            ctx_pre = ctx_pre + (task @ self.task_w).unsqueeze(1)
        if self.tool_scoring:
            tools = table.index_select(1, self.tool_rows) @ self.tool_w  # (B, K, hh + hd)
            hidden = _gelu(s[:, None, wb : wb + ws] + tools[..., :ws] + self.score_const)
            skill = base + self.score_out(hidden).squeeze(-1)
            ctx_pre = ctx_pre + tools[..., ws:]
        else:
            skill = base
        if prior is not None:
            skill = skill + (prior if self.sel is None else prior[:, self.sel])
        ctx = _sequential(self.ctx_rest, ctx_pre)  # GELU, Linear, LayerNorm: (B, K, hd)
        out = torch.addmm(self.ctx_b, ctx.reshape(b * k, hd), self.ctx_w).view(b, k, -1)
        nq = self.queries * hd
        queries = out[..., :nq].reshape(b, k * self.queries, hd)
        seq_values: list[torch.Tensor] = []
        if self.seq_count:
            # every position of every sequence slot: its slot's list query plus the position embedding
            positions = queries.index_select(1, self.seq_query_rows) + self.seq_position  # (B, ΣT, hd)
            seq_values.append(F.linear(positions, self.seq_stop_w, self.seq_stop_b).view(b, -1))
            all_queries = torch.cat([queries, positions], 1)
        else:
            all_queries = queries

        def on_rows(lin: _TypeLinear) -> torch.Tensor:
            """``(B, nodes · out)``: a node type's linear over its rows of the flat table."""
            return torch.addmm(lin.bias, rows[lin.index], lin.weight).view(b, -1)

        parts = [on_rows(kl).view(b, -1, hd) for kl in self.key_linears]
        node_keys = torch.cat(parts, 1) if len(parts) > 1 else parts[0]
        keys = [node_keys, self.key_bias.expand(b, -1, -1)]
        if self.num_sources:
            keys.append(node_keys.index_select(1, self.source_rows) + self.source_const)
        keys_all = torch.cat(keys, 1)
        scores = torch.bmm(all_queries, keys_all.transpose(1, 2)) * self.scale  # (B, K·q + ΣT, num_keys)
        if self.follower_count:
            factors = torch.cat([*map(on_rows, self.factor_linears), self.factor_bias.expand(b, -1)], 1)
            bases = queries.index_select(1, self.follower_rows)  # each follower's list query
            gate = F.linear(bases, self.follow_gate_w, self.follow_gate_b).view(b, -1)
            own = factors.index_select(1, self.own_index) * gate.index_select(1, self.gate_index)
            seq_values += [factors, own]
        omit, enum, numeric, free = out[..., nq:].split(self.ctx_tail, dim=-1)
        raw = numeric.reshape(b, k, -1, 2)
        mean = NUMERIC_BOUND * torch.tanh(raw[..., 0] / NUMERIC_BOUND)
        log_std = LOG_STD_MIN + (LOG_STD_MAX - LOG_STD_MIN) * torch.sigmoid(raw[..., 1])
        values = torch.cat(
            [
                skill,
                scores.reshape(b, -1),
                omit.reshape(b, -1),
                enum.reshape(b, -1),
                free.reshape(b, -1),
                mean.reshape(b, -1),
                log_std.reshape(b, -1),
                *seq_values,
                skill.new_zeros(b, 1),
            ],
            1,
        )
        masks = [
            obs[self.choice_mask_key].reshape(b, -1),
            obs["pointer_mask"].reshape(b, -1),
            obs["list_mask"].reshape(b, -1),
            obs["source_mask"].reshape(b, -1),
        ]
        dtype = masks[0].dtype
        ones = torch.ones(b, 1, dtype=dtype, device=state.device)
        mask = torch.cat([*(m.to(dtype) for m in masks), ones, torch.zeros_like(ones)], 1)
        packed = values.index_select(1, self.value_index)
        return packed.masked_fill(mask.index_select(1, self.mask_index) <= 0, self.fill)

    def values(
        self, obs: dict[str, torch.Tensor], state: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(reward values, risk values)``, each ``(B,)``; ``state`` is the policy state when critics share it."""
        model = self.model
        if not model.has_critics:
            raise ValueError("an inference-only model has no critics")
        if self.critic_encoders:
            reward_state = self.critic_encoders["reward_critic"](obs, obs["reflection"].float())[0]
            if model.config.critics_share_encoder:
                risk_state = reward_state
            else:
                risk_state = self.critic_encoders["risk_critic"](obs, obs["reflection"].float())[0]
        else:
            if state is None:
                state = self(obs).state
            reward_state = risk_state = state
        return model.reward_critic(reward_state).squeeze(-1), model.risk_critic(risk_state).squeeze(-1)

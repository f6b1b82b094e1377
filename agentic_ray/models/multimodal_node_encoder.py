"""Per-modality sub-encoders and gated cross-attention fusion for node types whose features hold images or texts.

Seed 000's lesson: flattening images, text and structured fields into one vector slowed convergence; what worked was
one encoder per modality, fused by cross-attention with the task's text as the query, behind per-modality gates
that are monitored. :class:`MultimodalNodeEncoder` is that input projection for one node type, built from the
spec's :class:`~agentic_ray.graph_spec.ModalityBlock` s (no domain named):

* an **image** block (pixels and focus mask, side ``S``) -> a small CNN (``torch.nn.Conv2d``) over two channels,
  the pixels and the pixels times the focus mask (the image attention mask), pooled -> ``H``;
* a **text** block (token ids and weights) -> ``torch.nn.EmbeddingBag`` (sum with the per-token weights: the
  text-token weights of the focus mask), shared by every text of the model, then a projection per block -> ``H``;
* the **structured** columns (everything else, the known columns included) -> an MLP -> ``H``.

Each modality's embedding ``t_m`` gets a gate ``g_m = sigmoid(w_m · [t_m ‖ q] + b_m)`` from itself and the
query ``q`` (the request's text through the same text encoder, :class:`TaskQuery`). The node's embedding is

``h = LayerNorm(MHA(q, [g_m t_m], [g_m t_m]) + Σ_m g_m t_m)``

over the modalities the node has revealed (an unrevealed image or text is masked out of the attention and the
sum). The gates are returned per modality for logging (``gate_image``, ``gate_text``, ``gate_struct``: see
:func:`gate_means`; the AAAC learner logs them, the dashboard plots them and the report warns about a gate below
``keys.GATE_WARN_BELOW``: :func:`~agentic_ray.dashboard.panels.gate_warnings`): a gate that stays near 0 says the
encoder of that modality is not used.
"""

from __future__ import annotations

import torch
from torch import nn

from agentic_ray.graph_spec import GraphSpec, ModalityBlock
from agentic_ray.keys import GATE_PREFIX, MODALITY_KINDS
from agentic_ray.text.tokens import VOCAB

__all__ = [
    "MultimodalNodeEncoder",
    "TaskQuery",
    "TextTokenEncoder",
    "gate_mean_vector",
    "gate_means",
]

STRUCT = "struct"


class TextTokenEncoder(nn.Module):
    """Hashed token ids and weights ``(R, 2L)`` (ids as ``id / VOCAB``) -> ``(R, H)``: a weighted sum of token
    embeddings (``nn.EmbeddingBag``, padding id 0 contributes nothing)."""

    def __init__(self, hidden_dim: int) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, hidden_dim, mode="sum", padding_idx=0)

    def forward(self, cols: torch.Tensor, size: int) -> torch.Tensor:
        ids = torch.round(cols[:, :size].float() * VOCAB).long().clamp(0, VOCAB - 1)
        weights = cols[:, size : 2 * size].float()
        return self.bag(ids, per_sample_weights=weights)


class ImageEncoder(nn.Module):
    """Pixels and focus mask ``(R, 2 S²)`` -> ``(R, H)``: two conv layers over [pixels, pixels·focus], pooled."""

    def __init__(self, size: int, hidden_dim: int, channels: int = 16) -> None:
        super().__init__()
        self.size = size
        self.net = nn.Sequential(
            nn.Conv2d(2, channels, 3, stride=2, padding=1),
            nn.GELU(),
            nn.Conv2d(channels, channels, 3, stride=2, padding=1),
            nn.GELU(),
            nn.AdaptiveAvgPool2d(2),
            nn.Flatten(),
            nn.Linear(4 * channels, hidden_dim),
        )

    def forward(self, cols: torch.Tensor) -> torch.Tensor:
        s = self.size
        img = cols.float().view(-1, 2, s, s)
        pixels, focus = img[:, 0], img[:, 1]
        return self.net(torch.stack((pixels - 0.5, (pixels - 0.5) * focus), dim=1))


class TaskQuery(nn.Module):
    """The fusion's query ``(B, H)``: the session's task-text block through the shared text encoder and a
    projection, or a learned vector when the spec has no task text."""

    def __init__(self, spec: GraphSpec, text: TextTokenEncoder, hidden_dim: int) -> None:
        super().__init__()
        self.block = spec.task_text
        self.text = text
        self.proj = nn.Sequential(nn.Linear(hidden_dim, hidden_dim), nn.LayerNorm(hidden_dim))
        self.fixed = nn.Parameter(torch.zeros(hidden_dim))

    def forward(self, obs: dict[str, torch.Tensor], batch: int) -> torch.Tensor:
        b = self.block
        if b is None:
            return self.proj(self.fixed.expand(batch, -1))
        x = obs[f"{b.node_type}_x"][:, 0]  # the session node (one per row)
        return self.proj(self.text(x[:, b.start : b.end], b.size))


class MultimodalNodeEncoder(nn.Module):
    """The input projection of one node type with modality blocks (see the module docstring).

    Args:
        spec: the graph spec (the blocks of ``node_type`` and its structured columns are read from it).
        node_type: the node type.
        hidden_dim: ``H``.
        text: the model's shared :class:`TextTokenEncoder`.
        num_heads: heads of the cross-attention (must divide ``H``).
    """

    def __init__(
        self, spec: GraphSpec, node_type: str, hidden_dim: int, text: TextTokenEncoder, num_heads: int = 4
    ) -> None:
        super().__init__()
        self.node_type = node_type
        self.blocks: tuple[ModalityBlock, ...] = spec.blocks(node_type)
        self.feat_dim = spec.feat_dims[node_type]
        self.struct_cols: torch.Tensor
        self.register_buffer("struct_cols", torch.tensor(spec.struct_columns(node_type), dtype=torch.long))
        self.names = [STRUCT, *(f"{b.kind}:{b.field}" for b in self.blocks)]
        self.struct = nn.Sequential(
            nn.Linear(len(spec.struct_columns(node_type)), hidden_dim),
            nn.GELU(),
            nn.Linear(hidden_dim, hidden_dim),
        )
        self.text = text
        self.images = nn.ModuleDict(
            {b.field: ImageEncoder(b.size, hidden_dim) for b in self.blocks if b.kind == "image"}
        )
        self.text_proj = nn.ModuleDict(
            {b.field: nn.Linear(hidden_dim, hidden_dim) for b in self.blocks if b.kind == "text"}
        )
        self.gates = nn.ModuleList(nn.Linear(2 * hidden_dim, 1) for _ in self.names)
        self.attention = nn.MultiheadAttention(hidden_dim, num_heads, batch_first=True)
        self.norm = nn.LayerNorm(hidden_dim)

    def forward(self, x: torch.Tensor, query: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Encodes the nodes of one type.

        Args:
            x: ``(B, N, F)`` the node type's features.
            query: ``(B, H)`` the task query.

        Returns:
            ``(B·N, H)`` node embeddings and ``{modality name: (B, N)}`` gates, NaN where the node has not revealed
            that modality (so means skip it).
        """
        b, n, _ = x.shape
        rows = x.reshape(b * n, self.feat_dim).float()
        q = query.repeat_interleave(n, dim=0)  # (BN, H)
        tokens = [self.struct(rows.index_select(1, self.struct_cols))]
        known = [torch.ones(b * n, dtype=torch.bool, device=x.device)]
        for blk in self.blocks:
            cols = rows[:, blk.start : blk.end]
            if blk.kind == "image":
                t = self.images[blk.field](cols)
            else:
                t = self.text_proj[blk.field](self.text(cols, blk.size))
            tokens.append(t)
            known.append(rows[:, blk.known] > 0.5)
        t_all = torch.stack(tokens, dim=1)  # (BN, M, H)
        k_all = torch.stack(known, dim=1)  # (BN, M)
        g = torch.cat(
            [torch.sigmoid(gl(torch.cat((tok, q), -1))) for gl, tok in zip(self.gates, tokens, strict=True)],
            dim=1,
        )
        gated = t_all * (g * k_all).unsqueeze(-1)
        att, _ = self.attention(q.unsqueeze(1), gated, gated, key_padding_mask=~k_all, need_weights=False)
        h = self.norm(att.squeeze(1) + gated.sum(1))
        shown = torch.where(k_all, g, torch.full_like(g, float("nan"))).view(b, n, -1)
        return h, {name: shown[..., j] for j, name in enumerate(self.names)}


def gate_mean_vector(gates: dict[str, torch.Tensor], node_masks: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(3,)`` each modality kind's mean gate (:data:`~agentic_ray.keys.MODALITY_KINDS` order: image, text,
    struct) over the real nodes that revealed it, NaN for a kind no node revealed. ``gates`` are keyed
    ``modality/<node type>/<kind>:<field>`` or ``modality/<node type>/struct``, as the encoder names them."""
    sums: dict[str, list[torch.Tensor]] = {k: [] for k in MODALITY_KINDS}
    for key, v in gates.items():
        if not key.startswith("modality/"):
            continue
        _, nt, name = key.split("/", 2)
        m = node_masks[nt].bool() & ~torch.isnan(v)
        sums[name.split(":", 1)[0]].append(v.detach()[m].float())
    out = []
    for kind in MODALITY_KINDS:
        vals = torch.cat(sums[kind]) if sums[kind] else torch.zeros(0)
        out.append(vals.mean() if vals.numel() else torch.tensor(float("nan"), device=vals.device))
    return torch.stack([o.to(out[0].device) for o in out])


def gate_means(gates: dict[str, torch.Tensor], node_masks: dict[str, torch.Tensor]) -> dict[str, float]:
    """``{"gate_image": ..., "gate_text": ..., "gate_struct": ...}`` (:func:`gate_mean_vector`), leaving out a
    modality no node revealed."""
    v = gate_mean_vector(gates, node_masks).tolist()
    return {GATE_PREFIX + k: float(x) for k, x in zip(MODALITY_KINDS, v, strict=True) if x == x}

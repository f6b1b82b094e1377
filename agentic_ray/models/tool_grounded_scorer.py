"""Action logits grounded in the tool nodes: each action is scored from the embedding of the tool it calls.

A skill (or a prototype, which fixes a skill and its enum arguments) is an action *on a tool node* of the state
graph. Scoring it only from the pooled state makes the policy learn, for every tool separately, which pooled
features mean "this tool is needed now". Scoring it from that tool's own node embedding shares one scorer across
all tools and lets message passing do the work: a ready goal reaches the tool it needs over the
``goal —needs→ tool`` edge in one hop, so "call the tool a ready goal needs" is a local pattern the scorer
learns once.

``logit_j = base(state)_j + score([state ‖ tool[skill_j] ‖ e_j])``: ``base`` is the state-only head (kept as a
per-action bias), ``e_j`` a learned embedding of action ``j`` (which tells a prototype's enum variant apart from
the others on the same tool), ``score`` a small MLP shared by all actions. Measured on the e-commerce env (see
``benchmarks/aaac_vs_ppo.py``): from-scratch RL with the state-only head repeated one safe call regardless of
the goals (numbers in the notes of ``benchmarks/results/aaac_vs_ppo.md``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from agentic_ray.graph_spec import TOOL_NODE_TYPE

__all__ = ["TOOL_NODE_TYPE", "ToolGroundedScorer"]


def _mlp(in_dim: int, hidden_dim: int, out_dim: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, out_dim))


class ToolGroundedScorer(nn.Module):
    """Unmasked logits ``(B, J)`` of ``J`` actions, each bound to one tool node.

    Args:
        state_dim: Width of the state embedding.
        node_dim: Width of the tool node embeddings.
        hidden_dim: Width of the action embeddings and the scorer's hidden layer.
        action_tools: For each action, the index of its tool node (for skills: ``range(K)``).
    """

    action_tools: torch.Tensor

    def __init__(self, state_dim: int, node_dim: int, hidden_dim: int, action_tools: Sequence[int]) -> None:
        super().__init__()
        if not action_tools:
            raise ValueError("ToolGroundedScorer needs at least one action")
        self.num_actions = len(action_tools)
        self.register_buffer(
            "action_tools", torch.tensor(list(action_tools), dtype=torch.long), persistent=False
        )
        self.base = _mlp(state_dim, hidden_dim, self.num_actions)
        self.action_embedding = nn.Embedding(self.num_actions, hidden_dim)
        self.score = _mlp(state_dim + node_dim + hidden_dim, hidden_dim, 1)

    def forward(self, state: torch.Tensor, tool_nodes: torch.Tensor) -> torch.Tensor:
        """Logits.

        Args:
            state: ``(B, H)`` state embedding.
            tool_nodes: ``(B, N_tool, H_node)`` tool node embeddings.

        Returns:
            ``(B, J)``.
        """
        b, j = state.shape[0], self.num_actions
        tools = tool_nodes[:, self.action_tools]  # (B, J, H_node)
        emb = self.action_embedding.weight.unsqueeze(0).expand(b, j, -1)
        ctx = state.unsqueeze(1).expand(b, j, state.shape[-1])
        return self.base(state) + self.score(torch.cat([ctx, tools, emb], dim=-1)).squeeze(-1)

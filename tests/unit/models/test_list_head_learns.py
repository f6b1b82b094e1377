"""The list heads learn: a few hundred imitation steps on synthetic target lists (ordered, with repeats, paired).

Context 0 asks for the leader [2, 0] or [0, 2] half the time each, and the follower pairs by content
(2 -> 1, 0 -> 2), so only a follower that reads its leader's members gets the pairs right more than half the time.
Context 1 asks for one fixed ordered list, whose order only position-aware logits can produce, and an empty
multiset. The encoder output is fixed random: only the heads learn.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from agentic_ray.graph_spec import toy_specs
from agentic_ray.models.skill_argument_functional import (
    skill_argument_entropy,
    skill_argument_logp,
    skill_argument_mode,
    skill_argument_sample,
)
from agentic_ray.models.skill_argument_heads import SkillArgumentHeads
from agentic_ray.models.state_encoder_output import StateEncoderOutput

H, ROWS, STEPS = 32, 16, 120
PAIR = {2: 1, 0: 2}


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Tiny tensors: one thread is fastest (a shared CI box made the default thread pool 4x slower, measured)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _lists(members: torch.Tensor, t: int, mp: int) -> list[list[int]]:
    return [[int(v) for v in row if v < mp] for row in members.reshape(-1, t)]


def test_list_heads_learn_order_repeats_and_pairs() -> None:
    spec, layout = toy_specs()
    torch.manual_seed(0)
    heads = SkillArgumentHeads(spec, layout, H, H, H)
    pk = heads.packed
    k, mp, t, lt = layout.skill_index("f.swap"), layout.max_pointer, layout.list_length, layout.list_slots
    n = 2 * ROWS
    ctx = torch.arange(n) // ROWS  # context of each row
    gen = torch.Generator().manual_seed(1)
    state = torch.randn(2, H, generator=gen)[ctx]
    nodes = {nt: torch.randn(2, m, H, generator=gen)[ctx] for nt, m in spec.max_nodes.items()}
    enc = StateEncoderOutput(state=state, nodes=nodes, node_masks={nt: torch.ones(n, m, dtype=torch.bool)
                                                                    for nt, m in spec.max_nodes.items()})  # fmt: skip
    obs = {
        "skill_mask": torch.ones(n, layout.num_skills),
        "pointer_mask": torch.ones(n, layout.num_skills, layout.pointer_slots, layout.pointer_choices),
        "list_mask": torch.ones(n, layout.num_skills, lt, mp),
        "source_mask": torch.ones(n, max(spec.num_sources, 1)),
    }
    members = torch.full((n, lt, t), mp)
    flip = torch.rand(n, generator=gen) < 0.5
    for r in range(n):
        if ctx[r] == 0:
            lead = [0, 2] if flip[r] else [2, 0]
            members[r, 0, :2] = torch.tensor(lead)
            members[r, 1, :2] = torch.tensor([PAIR[x] for x in lead])
            members[r, 2, :3] = torch.tensor([3, 3, 1])
        else:
            members[r, 0, :2] = torch.tensor([3, 1])
            members[r, 1, :2] = torch.tensor([0, 0])
    target = {
        "skill": torch.full((n,), k),
        "pointer": torch.zeros(n, layout.pointer_slots, dtype=torch.long),
        "members": members.flatten(1),
        "enum": torch.zeros(n, layout.enum_slots, dtype=torch.long),
        "source": torch.zeros(n, layout.numeric_slots, dtype=torch.long),
        "numeric": torch.zeros(n, layout.numeric_slots),
    }
    opt = torch.optim.Adam(heads.parameters(), lr=1e-2)
    for _ in range(STEPS):
        parts = heads(obs, enc)["parts"]
        loss = -(skill_argument_logp(parts, pk, target) + 1e-3 * skill_argument_entropy(parts, pk)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        parts = heads(obs, enc)["parts"]
        draws = [skill_argument_sample(parts, pk) for _ in range(20)]
        greedy = skill_argument_mode(parts, pk)
    leads, pairs_ok, other_ok, both_orders = 0, 0, 0, set()
    for a in draws:
        assert (a["skill"] == k).all()
        lists = [_lists(a["members"][r], t, mp) for r in range(n)]
        for r, (lead, fol, multi) in enumerate(lists):
            if ctx[r] == 0:
                leads += lead in ([2, 0], [0, 2])
                pairs_ok += lead in ([2, 0], [0, 2]) and fol == [PAIR[x] for x in lead]
                other_ok += sorted(multi) == [1, 3, 3]
                both_orders.add(tuple(lead))
            else:
                other_ok += (lead, fol, multi) == ([3, 1], [0, 0], [])
    total = 20 * ROWS
    assert leads / total > 0.9, leads / total
    assert pairs_ok / total > 0.85, pairs_ok / total  # a follower blind to its leader gets about half
    assert {(2, 0), (0, 2)} <= both_orders
    assert other_ok / (2 * total) > 0.9, other_ok / (2 * total)
    assert _lists(greedy["members"][-1], t, mp) == [[3, 1], [0, 0], []]

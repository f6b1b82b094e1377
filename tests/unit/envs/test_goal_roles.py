"""Goal edges name the argument (issue 26, point 6): a merge's primary ticket and its duplicate are both tickets,
and an exchange's returned item and replacement are both products, but a goal reaches them over different
relations, so the policy tells them apart."""

from __future__ import annotations

import numpy as np
import torch

from agentic_ray.domains import get_domain
from agentic_ray.domains.goal_dag import Goal
from agentic_ray.domains.knowledge import Knowledge
from agentic_ray.domains.protocol import EntityRef, Request, Task
from agentic_ray.envs.episode import EpisodeState
from agentic_ray.envs.observation import ObservationBuilder, build_specs, goal_relation, goal_roles
from agentic_ray.graph_spec import GOAL_NODE_TYPE
from agentic_ray.models import AAACModel, stack_observations
from tests.unit.models.helpers import TINY


def _edges(obs: dict[str, np.ndarray], rel: str, dst: str) -> set[tuple[int, int]]:
    key = f"{GOAL_NODE_TYPE}__{rel}__{dst}"
    ei, m = obs[f"{key}_ei"], obs[f"{key}_mask"]
    return {(int(a), int(b)) for a, b, k in zip(ei[0], ei[1], m, strict=True) if k}


def test_each_entity_argument_has_its_goal_relation() -> None:
    d = get_domain("ecommerce")
    spec, _ = build_specs(d.schema, d.contracts())
    keys = {r.key for r in spec.relations}
    assert {
        "goal__targets_item_ids__product",
        "goal__targets_sku__product",
        "goal__targets_order_id__order",
    } <= keys
    assert not any(k.startswith("goal__targets__") for k in keys)  # no relation per type any more
    assert len(goal_roles(d.contracts())) == len([k for k in keys if k.startswith("goal__targets_")])


def test_a_merges_primary_and_duplicate_look_different() -> None:
    """One goal names two tickets the agent knows nothing else about, one as the primary and one as a duplicate:
    same features, same tools, same goal; only the relation differs, and the encoder's embeddings with it."""
    d = get_domain("helpdesk")
    contracts = d.contracts()
    spec, layout = build_specs(d.schema, contracts)
    request = Request("merge T-2 into T-1", {}, (EntityRef("ticket", "T-1"), EntityRef("ticket", "T-2")))
    goal = Goal("merge", "ticket.merge", {"ticket_id": "T-1", "duplicates": ["T-2"]})
    task = Task("synthetic", 0, request, (goal,), optimal_steps=1)
    know = Knowledge(d.schema.type_names)
    for ref in request.mentioned:
        know.mention(ref.type, ref.id)
    builder = ObservationBuilder(d.schema, contracts, spec, layout, d.quantiles())
    k = layout.num_skills
    masks = {
        "skill_mask": np.ones(k, dtype=np.int8),
        "pointer_mask": np.ones((k, layout.pointer_slots, layout.pointer_choices), dtype=np.int8),
        "list_mask": np.ones((k, layout.list_slots, layout.max_pointer), dtype=np.int8),
    }
    sla = {f: np.zeros(k) for f in ("p50", "p95", "error_rate", "attempt_error_rate")}
    sla |= {"open": np.zeros(k, dtype=bool), "half_open": np.zeros(k, dtype=bool)}
    obs = builder.build(task, know, EpisodeState.new(10, 1, k), sla, masks)
    t1, t2 = builder.node_index["ticket"]["T-1"], builder.node_index["ticket"]["T-2"]
    assert _edges(obs, goal_relation("ticket_id"), "ticket") == {(0, t1)}
    assert _edges(obs, goal_relation("duplicates"), "ticket") == {(0, t2)}
    np.testing.assert_array_equal(obs["ticket_x"][t1], obs["ticket_x"][t2])
    torch.manual_seed(0)
    model = AAACModel(spec, layout, TINY).eval()
    with torch.no_grad():
        nodes = model.encode(stack_observations([obs])).nodes["ticket"][0]
    assert (nodes[t1] - nodes[t2]).abs().max() > 1e-3

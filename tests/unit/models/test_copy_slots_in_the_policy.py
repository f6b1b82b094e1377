"""Copied strings in the policy (issue 26, point 3): a string copied from a revealed field is a pointer slot and a
fact with several values an enum slot, so the model needs no new head; these tests check that the env's masks reach
those slots and that the log-probability of such actions is the explicit sum over the slots (a loop reference).

On the plug-in retail domain: ``update_address`` (customer, order, and the order whose address it copies) after
the other order's lookup, and ``find_customer_by_email`` choosing one of two emails.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.models import AAACModel
from agentic_ray.models.obs_batching import stack_observations
from agentic_ray.models.skill_argument_functional import PackedActionLayout, skill_argument_logp
from tests.helpers.plugin_domain import register
from tests.unit.models.helpers import TINY


def _states(family: str) -> tuple[AgentTaskEnv, list[dict[str, np.ndarray]], list[dict[str, Any]]]:
    """The observations along the expert's episode of one task, and the expert's action at each."""
    env = AgentTaskEnv(AgentTaskEnvConfig(domain=register(), families=[family]))
    obs, _ = env.reset(seed=0, options={"task_seed": 4})
    ex = env.domain.expert()
    seen, acts = [], []
    while True:
        a = env.encode_action(*ex.plan(env.view()))
        seen.append(obs)
        acts.append(a)
        obs, _r, term, trunc, _i = env.step(a)
        if term or trunc:
            return env, seen, acts


def _ref_logp(parts: Any, pk: PackedActionLayout, layout: Any, b: int, a: dict[str, Any]) -> torch.Tensor:
    """log p(skill) plus, for each pointer and enum slot the chosen skill uses, the log-softmax of its choice."""
    k = int(a["skill"])
    s = layout.skills[k]
    assert not s.list_types and not s.numeric_count  # the skills these tests take
    out = F.log_softmax(parts.skill[b], -1)[k]
    ptr = parts.pointer_by_slot(pk)[b, k]
    for p in range(len(s.pointer_types)):
        out = out + F.log_softmax(ptr[p], -1)[int(a["pointer"][p])]
    for e, size in enumerate(s.enum_sizes):
        out = out + F.log_softmax(parts.enum[b, k, e, :size], -1)[int(a["enum"][e])]
    return out


def _logits(env: AgentTaskEnv, seen: list[dict[str, np.ndarray]]) -> tuple[Any, PackedActionLayout]:
    torch.manual_seed(0)
    model = AAACModel(env.graph_spec, env.layout, TINY)
    obs = stack_observations(seen)
    with torch.no_grad():
        return model.policy_logits(obs, model.encode(obs))["parts"], PackedActionLayout.from_action_layout(
            env.layout
        )


def test_the_copy_slot_puts_mass_only_on_revealed_fields_and_logp_is_the_sum_over_slots() -> None:
    env, seen, acts = _states("ship_like_other")
    parts, pk = _logits(env, seen)
    assert [env.skills[int(a["skill"])] for a in acts] == [
        "find_customer_by_email",
        "get_order",
        "update_address",
    ]
    k = env.skills.index("update_address")
    slot = next(ps.slot for ps in env.codec.params[k] if ps.name == "address")
    probs = parts.pointer_by_slot(pk)[2, k, slot].softmax(-1)
    chosen = int(acts[2]["pointer"][slot])
    assert probs[chosen] == 1.0  # the only order whose address is revealed: the other order
    assert torch.equal(torch.from_numpy(seen[2]["pointer_mask"][k, slot]).bool(), probs > 0)
    batch = {key: torch.as_tensor(np.stack([a[key] for a in acts])) for key in acts[0]}
    got = skill_argument_logp(parts, pk, batch)
    want = torch.stack([_ref_logp(parts, pk, env.layout, b, a) for b, a in enumerate(acts)])
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_the_fact_position_is_an_enum_slot_in_logp() -> None:
    env, seen, acts = _states("two_emails")
    parts, pk = _logits(env, seen)
    k = env.skills.index("find_customer_by_email")
    assert int(acts[0]["skill"]) == k and env.layout.skills[k].enum_sizes == (2,)
    batch = {key: torch.as_tensor(np.stack([a[key] for a in acts])) for key in acts[0]}
    got = skill_argument_logp(parts, pk, batch)
    want = torch.stack([_ref_logp(parts, pk, env.layout, b, a) for b, a in enumerate(acts)])
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    other = {key: v.clone() for key, v in batch.items()}
    other["enum"][0, 0] = 1 - other["enum"][0, 0]  # the other email
    flip = skill_argument_logp(parts, pk, other)[0]
    torch.testing.assert_close(
        flip, _ref_logp(parts, pk, env.layout, 0, {**acts[0], "enum": other["enum"][0]})
    )
    assert not torch.isclose(flip, got[0])

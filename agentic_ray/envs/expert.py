"""Reference policies: the scripted expert (upper bound, imitation data) and a random masked policy (lower bound).

:class:`ScriptedExpert` reads the goal DAG and the masks: it takes the most urgent *ready* subgoal (prerequisites
satisfied; highest priority, then DAG order), fills the goal's required arguments and the first valid choice for
free ones, and emits it in the env's own action format (structured Dict or prototype index). If the goal's skill
is masked (an outage tripped the soft mask), it hands off to a human when that is allowed, since waiting is not
an action. Without faults it solves every task family in exactly ``task.optimal_steps`` steps.

After a failed call the correction depends on the root cause of that step (``env.state.reflection``, the
policy's reflection input), as in the evaluator's reflection triples: a tool error (``tool_timeout``) is retried
as is; a missing prerequisite, dependency violation or forgotten entity is fixed by the plan itself (the ready
prerequisite, the request's entity); after ``bad_parameters`` it first re-reads the entity the rejected call
referred to (``order.get`` / ``inventory.check``, the minimal experiment) and then calls again with the goal's
values. ``bad_parameters`` and ``forgotten_entity`` leave the same trace in the rest of the observation (a failed
call, no tool error) but need different corrections, so only the reflection input tells them apart.

:class:`RandomMaskedPolicy` samples uniformly among what the observation's masks allow: a skill from
``skill_mask`` (or a prototype from ``proto_mask``), pointers from ``ptr_mask_<type>``, enum values within the
skill's sizes and raw numbers uniformly in ``[-5, 5]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from agentic_ray.envs.graph_spec import NUMERIC_BOUND, ROOT_CAUSES, ActionLayout
from agentic_ray.skills.contracts import EnumParam

if TYPE_CHECKING:
    from agentic_ray.envs.agent_task_env import AgentTaskEnv

REREAD_SKILLS: tuple[tuple[str, str], ...] = (("order_id", "order.get"), ("sku", "inventory.check"))
"""``(argument, read-only skill)``: how to re-read the entity a call referred to, in order of preference."""

_BAD_PARAMETERS = ROOT_CAUSES.index("bad_parameters")


def reread_after_bad_parameters(env: AgentTaskEnv) -> tuple[str, dict[str, Any]] | None:
    """The re-read call after a step the env attributed to ``bad_parameters``, else None.

    Returns ``(read skill, {argument: entity of the rejected call})`` for the first :data:`REREAD_SKILLS` entry
    whose argument the rejected call had and whose read skill is allowed now.
    """
    st, last = env.state, env.last_step
    if st is None or last is None or not st.last_failed or st.reflection[_BAD_PARAMETERS] == 0:
        return None
    for arg, read in REREAD_SKILLS:
        if arg in last.args and last.skill != read and env.skill_mask[env.skills.index(read)]:
            return read, {arg: last.args[arg]}
    return None


class ScriptedExpert:
    """Optimal scripted policy for the e-commerce task families (needs the env: it reads the goal DAG)."""

    def plan(self, env: AgentTaskEnv) -> tuple[str, dict[str, Any]]:
        """The next call as ``(skill, params)``."""
        task, state = env.task, env.state
        assert task is not None and state is not None
        reread = reread_after_bad_parameters(env)
        if reread is not None:
            return reread
        ready = env.builder.goal_ready(state)
        cands = [i for i in range(len(task.goals)) if ready[i]]
        if not cands:
            return "human.handoff", {"user_id": env.builder.node_ids["user"][0], "reason": "complex"}
        i = min(cands, key=lambda j: (-task.goals[j].priority, j))
        g = task.goals[i]
        k = env.skills.index(g.skill)
        if not env.skill_mask[k]:
            return "human.handoff", {"user_id": env.builder.node_ids["user"][0], "reason": "tool_failure"}
        params: dict[str, Any] = dict(g.args)
        params.update(g.numeric)
        c = env.by_name[g.skill]
        for name, p in c.input.items():
            if name not in params and isinstance(p, EnumParam):
                params[name] = p.choices[0]
        return g.skill, params

    def act(self, env: AgentTaskEnv) -> Any:
        """The next action in the env's action space (structured Dict or prototype index)."""
        skill, params = self.plan(env)
        return env.encode_action(skill, params)


class RandomMaskedPolicy:
    """Uniform over the actions the masks allow (the lower bound).

    Args:
        layout: the env's action layout.
        seed: RNG seed.
    """

    def __init__(self, layout: ActionLayout, seed: int | None = None) -> None:
        self.layout = layout
        self.rng = np.random.default_rng(seed)

    def act(self, obs: dict[str, np.ndarray]) -> Any:
        lay, rng = self.layout, self.rng
        if "proto_mask" in obs:
            return int(rng.choice(np.flatnonzero(obs["proto_mask"])))
        allowed = np.flatnonzero(obs["skill_mask"])
        k = int(rng.choice(allowed)) if len(allowed) else int(rng.integers(lay.num_skills))
        s = lay.skills[k]
        ptr = np.zeros(lay.pointer_slots, dtype=np.int64)
        for i, nt in enumerate(s.pointer_types):
            valid = np.flatnonzero(obs[f"ptr_mask_{nt}"])
            ptr[i] = int(rng.choice(valid)) if len(valid) else 0
        enm = np.zeros(lay.enum_slots, dtype=np.int64)
        for i, n in enumerate(s.enum_sizes):
            enm[i] = int(rng.integers(n))
        num = rng.uniform(-NUMERIC_BOUND, NUMERIC_BOUND, lay.numeric_slots).astype(np.float32)
        return {"skill": k, "pointer": ptr, "enum": enm, "numeric": num}

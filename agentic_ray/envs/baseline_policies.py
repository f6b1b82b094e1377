"""Reference policies that read only the observation: the random masked policy and the obs-only rule.

* :class:`RandomMaskedPolicy` samples uniformly among what the masks allow: a skill from ``skill_mask`` (or a
  prototype from ``proto_mask``, then its skill's entity arguments), pointers from ``pointer_mask``, a list of
  valid members of an allowed size, enum values within the skill's sizes, a copy source among the revealed ones
  or a free value in ``[-5, 5]``.
* :class:`ObsOnlyRulePolicy` is the "does the observation hand out the answer?" probe of the env benchmark: it
  calls the skill of the most urgent ready goal (from the goal nodes' features) with the goal's required enum
  value, the first valid pointer of each entity argument, the first valid list members and the first revealed
  copy source for numbers. If looking things up matters, it fails most tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from agentic_ray.graph_spec import GOAL_NODE_TYPE, NUMERIC_BOUND, ActionLayout, GraphSpec, SkillSlots

__all__ = ["ObsOnlyRulePolicy", "RandomMaskedPolicy", "list_members"]


def list_members(
    layout: ActionLayout,
    skill: SkillSlots,
    valid_of: Callable[[int], np.ndarray],
    choose: Callable[[np.ndarray, int, int, bool], np.ndarray],
) -> np.ndarray:
    """The ``members`` action of ``skill``: for each list slot, ``choose(valid nodes, fewest, most, unique)``
    members (a paired slot gets exactly its leader's count; a set is listed in increasing order), then the end
    marker ``Mp``. Leaders are filled before their followers."""
    t, mp = layout.list_length, layout.max_pointer
    mem = np.full(layout.list_slots * t, mp, dtype=np.int64)
    counts: dict[int, int] = {}
    order = sorted(range(len(skill.list_types)), key=lambda i: skill.leader(i) >= 0)
    for i in order:
        valid = valid_of(i)
        lead = skill.leader(i)
        lo, hi = (
            (counts[lead], counts[lead])
            if lead >= 0
            else (skill.list_bounds[i][0], layout.list_max(skill, i))
        )
        if skill.unique(i):
            lo, hi = min(lo, len(valid)), min(hi, len(valid))
        picked = choose(valid, lo, hi, skill.unique(i)) if len(valid) else np.zeros(0, dtype=np.int64)
        if not skill.is_sequence(i):
            picked = np.sort(picked)
        counts[i] = len(picked)
        mem[i * t : i * t + len(picked)] = picked
    return mem


class RandomMaskedPolicy:
    """Uniform over the actions the masks allow (the lower bound)."""

    def __init__(self, layout: ActionLayout, seed: int | None = None) -> None:
        self.layout = layout
        self.rng = np.random.default_rng(seed)

    def act(self, obs: dict[str, np.ndarray]) -> Any:
        lay, rng = self.layout, self.rng
        if "proto_mask" in obs:
            p = int(rng.choice(np.flatnonzero(obs["proto_mask"])))
            a = self._structured(obs, lay.prototype_skills[p])
            return lay.prototype_action(p, a["pointer"], a["members"])
        allowed = np.flatnonzero(obs["skill_mask"])
        return self._structured(
            obs, int(rng.choice(allowed)) if len(allowed) else int(rng.integers(lay.num_skills))
        )

    def _structured(self, obs: dict[str, np.ndarray], k: int) -> dict[str, Any]:
        """Uniform arguments of skill ``k`` among what the masks allow."""
        lay, rng = self.layout, self.rng
        s = lay.skills[k]
        ptr = np.zeros(lay.pointer_slots, dtype=np.int64)
        for i in range(len(s.pointer_types)):
            valid = np.flatnonzero(obs["pointer_mask"][k, i])
            ptr[i] = int(rng.choice(valid)) if len(valid) else 0
        mem = list_members(
            lay,
            s,
            lambda i: np.flatnonzero(obs["list_mask"][k, i]),
            lambda valid, lo, hi, unique: rng.choice(
                valid, size=int(rng.integers(lo, hi + 1)), replace=not unique
            ),
        )
        enm = np.zeros(lay.enum_slots, dtype=np.int64)
        for i, n in enumerate(s.enum_sizes):
            enm[i] = int(rng.integers(n))
        src = np.zeros(lay.numeric_slots, dtype=np.int64)
        revealed = np.flatnonzero(obs["source_mask"][: lay.num_sources]) + 1
        for i in range(s.numeric_count):
            src[i] = int(rng.choice(np.concatenate(([0], revealed))))
        num = rng.uniform(-NUMERIC_BOUND, NUMERIC_BOUND, lay.numeric_slots).astype(np.float32)
        return {"skill": k, "pointer": ptr, "members": mem, "enum": enm, "source": src, "numeric": num}


class ObsOnlyRulePolicy:
    """The obs-only rule (see the module docstring). Structured action mode only."""

    def __init__(self, spec: GraphSpec, layout: ActionLayout) -> None:
        self.spec, self.layout = spec, layout

    def act(self, obs: dict[str, np.ndarray]) -> Any:
        lay = self.layout
        k_all, em = lay.num_skills, lay.enum_max
        gx, gm = obs[f"{GOAL_NODE_TYPE}_x"], obs[f"{GOAL_NODE_TYPE}_mask"].astype(bool)
        ready = np.flatnonzero(gm & (gx[:, k_all + 1] > 0.5))
        k, enum0 = -1, -1
        if len(ready):
            g = int(max(ready, key=lambda i: (gx[i, k_all + 3], -i)))
            k = int(np.argmax(gx[g, :k_all]))
            block = gx[g, k_all + 4 : k_all + 4 + em]
            enum0 = int(np.argmax(block)) if block.any() else -1
        if k < 0 or not obs["skill_mask"][k]:
            allowed = np.flatnonzero(obs["skill_mask"])
            k = int(allowed[0]) if len(allowed) else max(k, 0)
            enum0 = -1
        s = lay.skills[k]
        ptr = np.zeros(lay.pointer_slots, dtype=np.int64)
        for i in range(len(s.pointer_types)):
            valid = np.flatnonzero(obs["pointer_mask"][k, i])
            ptr[i] = int(valid[0]) if len(valid) else 0
        mem = list_members(
            lay,
            s,
            lambda i: np.flatnonzero(obs["list_mask"][k, i]),
            lambda valid, lo, hi, unique: np.resize(valid, max(lo, min(1, hi))),
        )
        enm = np.zeros(lay.enum_slots, dtype=np.int64)
        if s.enum_sizes and 0 <= enum0 < s.enum_sizes[0]:
            enm[0] = enum0
        src = np.zeros(lay.numeric_slots, dtype=np.int64)
        revealed = np.flatnonzero(obs["source_mask"][: lay.num_sources])
        for i in range(s.numeric_count):
            src[i] = int(revealed[0]) + 1 if len(revealed) else 0
        num = np.zeros(lay.numeric_slots, dtype=np.float32)
        return {"skill": k, "pointer": ptr, "members": mem, "enum": enm, "source": src, "numeric": num}

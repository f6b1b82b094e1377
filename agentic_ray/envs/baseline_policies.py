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

from typing import Any

import numpy as np

from agentic_ray.graph_spec import GOAL_NODE_TYPE, NUMERIC_BOUND, ActionLayout, GraphSpec

__all__ = ["ObsOnlyRulePolicy", "RandomMaskedPolicy"]


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
        s, mp = lay.skills[k], lay.max_pointer
        ptr = np.zeros(lay.pointer_slots, dtype=np.int64)
        for i in range(len(s.pointer_types)):
            valid = np.flatnonzero(obs["pointer_mask"][k, i])
            ptr[i] = int(rng.choice(valid)) if len(valid) else 0
        mem = np.zeros(lay.list_slots * mp, dtype=np.int8)
        for i, (lo, hi) in enumerate(s.list_bounds):
            valid = np.flatnonzero(obs["list_mask"][k, i])
            n = int(rng.integers(min(lo, len(valid)), min(hi, len(valid)) + 1)) if len(valid) else 0
            mem[i * mp + rng.choice(valid, size=n, replace=False)] = 1
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
        k_all, mp, em = lay.num_skills, lay.max_pointer, lay.enum_max
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
        mem = np.zeros(lay.list_slots * mp, dtype=np.int8)
        for i, (lo, _hi) in enumerate(s.list_bounds):
            valid = np.flatnonzero(obs["list_mask"][k, i])[: max(lo, 1)]
            mem[i * mp + valid] = 1
        enm = np.zeros(lay.enum_slots, dtype=np.int64)
        if s.enum_sizes and 0 <= enum0 < s.enum_sizes[0]:
            enm[0] = enum0
        src = np.zeros(lay.numeric_slots, dtype=np.int64)
        revealed = np.flatnonzero(obs["source_mask"][: lay.num_sources])
        for i in range(s.numeric_count):
            src[i] = int(revealed[0]) + 1 if len(revealed) else 0
        num = np.zeros(lay.numeric_slots, dtype=np.float32)
        return {"skill": k, "pointer": ptr, "members": mem, "enum": enm, "source": src, "numeric": num}

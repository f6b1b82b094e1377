"""The contract between environments and models: graph layout of observations and the action layout.

An observation is a flat ``Dict`` of padded numpy arrays that encodes a heterogeneous graph, so that RLlib can
batch it without custom connectors and the same arrays can be built outside an env (Serve requests):

* ``{nt}_x``      float32 ``(max_nodes[nt], feat_dims[nt])``: node features (quantile-mapped to [0, 1]).
* ``{nt}_mask``   int8    ``(max_nodes[nt],)``: 1 for a real node, 0 for padding.
* ``{rk}_ei``     int64   ``(2, max_edges)`` (``MultiDiscrete``): edge index (row 0 = source local index, row 1 = destination local
  index) of relation ``rk = f"{src}__{rel}__{dst}"``; padded columns are 0.
* ``{rk}_mask``   int8    ``(max_edges,)``: 1 for a real edge.
* ``skill_mask``  int8    ``(num_skills,)``: 1 where the skill may be called now (hard, soft and business masks).
* ``ptr_mask_{nt}`` int8  ``(max_nodes[nt],)``: valid pointer targets of node type ``nt`` (for entity arguments).
* ``reflection``  float32 ``(num_root_causes,)``: the predicted root cause of the last failure (zeros if none).
* ``proto_mask``  int8    ``(num_prototypes,)``: only in prototype mode.

A structured action is a ``Dict``:

* ``skill``   ``Discrete(K)``: which skill to call.
* ``pointer`` ``MultiDiscrete([max_pointer] * pointer_slots)``: entity arguments, slot i of skill k points into
  the nodes of type ``layout.skills[k].pointer_types[i]``.
* ``enum``    ``MultiDiscrete([enum_max] * enum_slots)``: enum arguments, slot i of skill k has
  ``layout.skills[k].enum_sizes[i]`` valid choices.
* ``numeric`` ``Box(-NUMERIC_BOUND, NUMERIC_BOUND, (numeric_slots,))``: raw pre-squash values ``x``; the env maps
  slot i of skill k to its contract bounds by ``low + (high - low) * (tanh(x) + 1) / 2``.

Only the slots the chosen skill uses are meaningful; the others are ignored by the env and must not count in
log-probabilities, entropy or KL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # gymnasium is imported where spaces are built, so the spec dataclasses load without it
    import gymnasium as gym

NUMERIC_BOUND = 5.0
"""Raw numeric actions live in [-5, 5]; tanh(5) = 0.99991, so contract bounds are reachable to 1e-4."""


def numeric_action(share: float) -> float:
    """The raw numeric action for a value at ``share`` of its bound range: ``arctanh(2·share − 1)``, clipped to
    ``[-NUMERIC_BOUND, NUMERIC_BOUND]`` (the env maps an action ``v`` back to ``lo + (tanh(v) + 1)/2·(hi − lo)``)."""
    f = min(max(share, 0.0), 1.0)
    return float(
        np.clip(np.arctanh(np.clip(2.0 * f - 1.0, -0.99999999, 0.99999999)), -NUMERIC_BOUND, NUMERIC_BOUND)
    )


ROOT_CAUSES: tuple[str, ...] = (
    "tool_timeout",
    "bad_parameters",
    "dependency_violation",
    "missing_prerequisite",
    "forgotten_entity",
    "risk_violation",
)
"""Root-cause classes of failure attribution (reflection head targets and the ``reflection`` obs input)."""


def relation_key(src: str, rel: str, dst: str) -> str:
    """Flat key of an edge type, e.g. ``user__uses__tool``."""
    return f"{src}__{rel}__{dst}"


@dataclass(frozen=True)
class RelationSpec:
    """One directed edge type of the heterogeneous graph."""

    src: str
    rel: str
    dst: str
    max_edges: int

    @property
    def key(self) -> str:
        return relation_key(self.src, self.rel, self.dst)

    @property
    def edge_type(self) -> tuple[str, str, str]:
        return (self.src, self.rel, self.dst)


@dataclass(frozen=True)
class NumericTargetSpec:
    """Where observations state numeric targets, so the policy can copy them instead of regressing them.

    Nodes of ``node_type`` with feature ``flag_col`` = 1 carry, in feature ``value_col``, the target of the first
    numeric argument of a skill, in the numeric action's own units mapped to [0, 1]: the raw action is
    ``(2·x − 1)·NUMERIC_BOUND`` (see :func:`numeric_action`). With ``skill_col`` set, features
    ``skill_col .. skill_col + K − 1`` are a one-hot of the skill the target belongs to, and skill ``k`` copies only
    from nodes whose one-hot is ``k``.
    """

    node_type: str
    flag_col: int
    value_col: int
    skill_col: int | None = None

    def action_value(self, x: Any) -> Any:
        """The raw numeric action stated by feature value ``x`` (a float or an array/tensor of them)."""
        return (2.0 * x - 1.0) * NUMERIC_BOUND


@dataclass(frozen=True)
class GraphSpec:
    """Node types, their padded sizes and feature widths, and the relations between them."""

    max_nodes: dict[str, int]
    feat_dims: dict[str, int]
    relations: tuple[RelationSpec, ...]
    numeric_targets: NumericTargetSpec | None = None
    """Optional: which node features state numeric targets (the policy's numeric head can then copy them)."""

    @property
    def node_types(self) -> tuple[str, ...]:
        return tuple(self.max_nodes)

    def metadata(self) -> tuple[list[str], list[tuple[str, str, str]]]:
        """PyG-style ``(node_types, edge_types)``."""
        return list(self.node_types), [r.edge_type for r in self.relations]


@dataclass(frozen=True)
class SkillSlots:
    """Which argument slots a skill uses."""

    name: str
    pointer_types: tuple[str, ...] = ()
    enum_sizes: tuple[int, ...] = ()
    numeric_count: int = 0


@dataclass(frozen=True)
class ActionLayout:
    """Static description of the structured action space, derived from skill contracts."""

    skills: tuple[SkillSlots, ...]
    max_pointer: int
    num_prototypes: int = 0
    pointer_node_types: tuple[str, ...] = field(default=())
    prototype_skills: tuple[int, ...] = field(default=())
    """Skill index of each prototype (empty when unknown, e.g. in specs built for shape tests only)."""

    def __post_init__(self) -> None:
        if self.prototype_skills and len(self.prototype_skills) != self.num_prototypes:
            raise ValueError(
                f"prototype_skills has {len(self.prototype_skills)} entries for {self.num_prototypes} prototypes"
            )
        if any(not 0 <= k < len(self.skills) for k in self.prototype_skills):
            raise ValueError(
                f"prototype_skills {self.prototype_skills} out of range for {len(self.skills)} skills"
            )

    @property
    def num_skills(self) -> int:
        return len(self.skills)

    @property
    def pointer_slots(self) -> int:
        return max([len(s.pointer_types) for s in self.skills] + [1])

    @property
    def enum_slots(self) -> int:
        return max([len(s.enum_sizes) for s in self.skills] + [1])

    @property
    def enum_max(self) -> int:
        return max([n for s in self.skills for n in s.enum_sizes] + [2])

    @property
    def numeric_slots(self) -> int:
        return max([s.numeric_count for s in self.skills] + [1])

    def skill_index(self, name: str) -> int:
        for i, s in enumerate(self.skills):
            if s.name == name:
                return i
        raise KeyError(name)

    def action_space(self) -> gym.spaces.Dict:
        """The structured action space (see module docstring)."""
        import gymnasium as gym

        return gym.spaces.Dict(
            {
                "skill": gym.spaces.Discrete(self.num_skills),
                "pointer": gym.spaces.MultiDiscrete([self.max_pointer] * self.pointer_slots),
                "enum": gym.spaces.MultiDiscrete([self.enum_max] * self.enum_slots),
                "numeric": gym.spaces.Box(
                    -NUMERIC_BOUND, NUMERIC_BOUND, (self.numeric_slots,), dtype=np.float32
                ),
            }
        )

    def prototype_action_space(self) -> gym.spaces.Discrete:
        import gymnasium as gym

        return gym.spaces.Discrete(max(self.num_prototypes, 1))


def observation_space(spec: GraphSpec, layout: ActionLayout) -> gym.spaces.Dict:
    """The padded-array observation space (see module docstring)."""
    import gymnasium as gym

    s: dict[str, gym.spaces.Space] = {}
    for nt, n in spec.max_nodes.items():
        s[f"{nt}_x"] = gym.spaces.Box(0.0, 1.0, (n, spec.feat_dims[nt]), dtype=np.float32)
        s[f"{nt}_mask"] = gym.spaces.Box(0, 1, (n,), dtype=np.int8)
    for r in spec.relations:
        # A local node index is a discrete choice among the type's nodes. (As a Box, a single-node type's row
        # has low == high == 0, and gymnasium's env checker warns at every gym.make.)
        nvec = np.empty((2, r.max_edges), dtype=np.int64)
        nvec[0, :] = spec.max_nodes[r.src]
        nvec[1, :] = spec.max_nodes[r.dst]
        s[f"{r.key}_ei"] = gym.spaces.MultiDiscrete(nvec)
        s[f"{r.key}_mask"] = gym.spaces.Box(0, 1, (r.max_edges,), dtype=np.int8)
    s["skill_mask"] = gym.spaces.Box(0, 1, (layout.num_skills,), dtype=np.int8)
    for nt in layout.pointer_node_types:
        s[f"ptr_mask_{nt}"] = gym.spaces.Box(0, 1, (spec.max_nodes[nt],), dtype=np.int8)
    s["reflection"] = gym.spaces.Box(0.0, 1.0, (len(ROOT_CAUSES),), dtype=np.float32)
    if layout.num_prototypes:
        s["proto_mask"] = gym.spaces.Box(0, 1, (layout.num_prototypes,), dtype=np.int8)
    return gym.spaces.Dict(s)


def random_observation(
    spec: GraphSpec, layout: ActionLayout, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """A valid random observation (random graph sizes, edges only between real nodes). For tests and benches."""
    obs: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    for nt, n in spec.max_nodes.items():
        c = int(rng.integers(1, n + 1))
        counts[nt] = c
        x = np.zeros((n, spec.feat_dims[nt]), dtype=np.float32)
        x[:c] = rng.random((c, spec.feat_dims[nt]), dtype=np.float32)
        m = np.zeros(n, dtype=np.int8)
        m[:c] = 1
        obs[f"{nt}_x"], obs[f"{nt}_mask"] = x, m
    for r in spec.relations:
        e = int(rng.integers(0, r.max_edges + 1))
        ei = np.zeros((2, r.max_edges), dtype=np.int64)
        ei[0, :e] = rng.integers(0, counts[r.src], e)
        ei[1, :e] = rng.integers(0, counts[r.dst], e)
        em = np.zeros(r.max_edges, dtype=np.int8)
        em[:e] = 1
        obs[f"{r.key}_ei"], obs[f"{r.key}_mask"] = ei, em
    sm = (rng.random(layout.num_skills) < 0.6).astype(np.int8)
    sm[int(rng.integers(layout.num_skills))] = 1
    obs["skill_mask"] = sm
    for nt in layout.pointer_node_types:
        pm = obs[f"{nt}_mask"].copy()
        obs[f"ptr_mask_{nt}"] = pm
    obs["reflection"] = np.zeros(len(ROOT_CAUSES), dtype=np.float32)
    if layout.num_prototypes:
        pm = (rng.random(layout.num_prototypes) < 0.5).astype(np.int8)
        pm[0] = 1
        obs["proto_mask"] = pm
    return obs


def toy_specs() -> tuple[GraphSpec, ActionLayout]:
    """A tiny spec with every feature of the real ones, for unit tests of models without an env."""
    spec = GraphSpec(
        max_nodes={"user": 1, "tool": 5, "product": 4, "order": 3, "session": 1, "goal": 4},
        feat_dims={"user": 6, "tool": 7, "product": 5, "order": 6, "session": 4, "goal": 5},
        relations=(
            RelationSpec("user", "uses", "tool", 5),
            RelationSpec("tool", "operates", "product", 12),
            RelationSpec("product", "in", "session", 4),
            RelationSpec("tool", "depends", "tool", 6),
            RelationSpec("session", "of", "user", 1),
            RelationSpec("goal", "requires", "goal", 6),
            RelationSpec("goal", "needs", "tool", 6),
            RelationSpec("order", "contains", "product", 4),
        ),
    )
    layout = ActionLayout(
        skills=(
            SkillSlots("a.check", pointer_types=("product",)),
            SkillSlots("b.refund", pointer_types=("order",), enum_sizes=(3,), numeric_count=1),
            SkillSlots("c.sms", pointer_types=("user",), enum_sizes=(4,)),
            SkillSlots("d.exchange", pointer_types=("order", "product")),
            SkillSlots("e.handoff"),
        ),
        max_pointer=4,
        num_prototypes=6,
        pointer_node_types=("user", "product", "order"),
        prototype_skills=(0, 1, 1, 2, 3, 4),
    )
    return spec, layout

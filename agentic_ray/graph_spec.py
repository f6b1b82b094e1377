"""The contract between environments and models: the graph layout of observations and the action layout.

This module is neutral: it names no domain, no tool and no entity type. Envs build observations in this
format from a domain's schema; models are built from a :class:`GraphSpec` and an :class:`ActionLayout` (PyG's
``metadata()`` convention) and read nothing else.

An observation is a flat ``Dict`` of padded numpy arrays that encodes a heterogeneous graph, so RLlib batches it
without custom connectors and the same arrays can be built outside an env (Serve requests):

* ``{nt}_x``      float32 ``(max_nodes[nt], feat_dims[nt])``: node features in [0, 1].
* ``{nt}_mask``   int8    ``(max_nodes[nt],)``: 1 for a real node, 0 for padding (an entity not yet revealed is
  not a node).
* ``{rk}_ei``     int64   ``(2, max_edges)``: edge index (row 0 = source local index, row 1 = destination local
  index) of relation ``rk = f"{src}__{rel}__{dst}"``; padded columns are 0.
* ``{rk}_mask``   int8    ``(max_edges,)``: 1 for a real edge.
* ``skill_mask``  int8    ``(K,)``: 1 where the skill may be called now (hard, soft and business masks).
* ``pointer_mask`` int8   ``(K, P, Mp + 1)``: valid targets of pointer slot ``p`` of skill ``k`` among the nodes of
  type ``layout.skills[k].pointer_types[p]``; the last column is "leave the argument out" (optional arguments).
* ``list_mask``   int8    ``(K, L, Mp)``: valid members of list slot ``l`` of skill ``k``.
* ``source_mask`` int8    ``(C,)``: numeric copy sources (see :class:`NumericSource`) whose value is revealed.
* ``reflection``  float32 ``(num_root_causes,)``: the root cause the env's rule-based attribution gives the last
  step when it failed (zeros if none). Privileged (it reads the world): the reflection head's *label*; the policy
  reads it only with ``reflection_source="oracle_env"``.
* ``failure_evidence`` float32 ``(evidence_width(K),)``: what a caller sees of the last step when it failed, zeros
  otherwise (see :data:`EVIDENCE_FLAGS`, :data:`FAILURE_CODE_CLASSES`; then a one-hot of the failed skill). The
  reflection head's input besides the state.
* ``proto_mask``  int8    ``(num_prototypes,)``: only in prototype mode.

In prototype mode the action is a ``Dict`` of the same keys over :meth:`ActionLayout.prototype_layout` (``skill`` =
the prototype index; its entity arguments in ``pointer``/``members``, chosen by the policy among the revealed
entities; ``enum``/``source``/``numeric`` unused: the prototype fixes them).

A structured action is a ``Dict``:

* ``skill``   ``Discrete(K)``.
* ``pointer`` ``MultiDiscrete([Mp + 1] * P)``: slot ``p`` holds the node index of the ``p``-th entity argument of
  the skill (contract order) among the nodes of its type; ``Mp`` = the argument is left out.
* ``members`` ``MultiDiscrete([Mp + 1] * (L * T))``: row-major ``(L, T)``; list slot ``l`` is the node indices in
  ``members[l]`` before the first ``Mp`` (the end marker; every later entry is ``Mp`` too). ``T`` is the longest
  list (:attr:`ActionLayout.list_length`). A set's members are listed in increasing node order; an ordered list's
  in its order (:class:`SkillSlots` says which slot is which).
* ``enum``    ``MultiDiscrete([Me] * E)``: slot ``j`` is the choice index of the ``j``-th enum or bool argument.
* ``source``  ``MultiDiscrete([C + 1] * N)``: for numeric slot ``n``, 0 = a free value from ``numeric[n]``,
  ``c + 1`` = copy the revealed value of source ``c``.
* ``numeric`` ``Box(-NUMERIC_BOUND, NUMERIC_BOUND, (N,))``: raw pre-squash values ``x``, mapped to the argument's
  bounds by ``low + (high - low) * (tanh(x) + 1) / 2`` (used only when ``source[n] == 0``).

Only the slots the chosen skill uses are meaningful; the others are ignored by the env and must not count in
log-probabilities, entropy or KL.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # gymnasium is imported where spaces are built, so the spec dataclasses load without it
    import gymnasium as gym

NUMERIC_BOUND = 5.0
"""Raw numeric actions live in [-5, 5]; tanh(5) = 0.99991, so contract bounds are reachable to 1e-4."""

TOOL_NODE_TYPE = "tool"
"""Generic node type: one node per skill, node ``k`` = skill ``k``."""

GOAL_NODE_TYPE = "goal"
"""Generic node type: one node per subgoal of the request."""

SESSION_NODE_TYPE = "session"
"""Generic node type: the one session (budget, last outcome)."""

GENERIC_NODE_TYPES: tuple[str, ...] = (TOOL_NODE_TYPE, GOAL_NODE_TYPE, SESSION_NODE_TYPE)


NUMERIC_RESOLUTION = 1e-3
"""Share of a bound range below which an encoded value is "at the bound" (:func:`numeric_action`)."""

NUMERIC_TARGET_BOUND = float(np.arctanh(1.0 - 2.0 * NUMERIC_RESOLUTION))
"""The largest raw value :func:`numeric_action` returns, about 3.45: ``(tanh(x) + 1)/2`` is then within
:data:`NUMERIC_RESOLUTION` of 0 or 1."""


def numeric_action(share: float) -> float:
    """The raw numeric action for a value at ``share`` of its bound range: ``arctanh(2·share − 1)``, with the share
    kept :data:`NUMERIC_RESOLUTION` inside its bounds (the env maps an action ``v`` back to
    ``lo + (tanh(v) + 1)/2·(hi − lo)``).

    A value at a bound is encoded to the raw value whose decode is within the resolution of it (about ±3.45), not
    to the Box's clip ±5 (the old ``arctanh(1 − 1e-8)``): both decode to the bound within 1e-3 of the range, but an
    imitation target at ±5 is an outlier for a Gaussian head whose other targets sit near 0. Measured on the
    inspection expert: 91% of ``disputed_batch``'s confidence thresholds are the bound 0.3 (raw −5.0, the other
    families' near −0.5).
    """
    f = min(max(share, NUMERIC_RESOLUTION), 1.0 - NUMERIC_RESOLUTION)
    return float(np.arctanh(2.0 * f - 1.0))


ROOT_CAUSES: tuple[str, ...] = (
    "tool_error",
    "bad_parameters",
    "dependency_violation",
    "missing_prerequisite",
    "wrong_entity",
    "stale_information",
    "risk_violation",
)
"""Root-cause classes of failure attribution (reflection head targets and the ``reflection`` obs input).

``tool_error``: the tool was unavailable (timeout, upstream error, garbled reply, open breaker);
``bad_parameters``: a value out of contract or business limits; ``dependency_violation``: a goal's step ran
before its prerequisite goal; ``missing_prerequisite``: a business precondition did not hold; ``wrong_entity``: an
entity argument the request is not about; ``stale_information``: the call relied on a revealed value that has
changed since it was read; ``risk_violation``: a high-risk action without its safety check."""


EVIDENCE_FLAGS: tuple[str, ...] = ("failed", "unknown_entity", "entity_unread", "above_known_limit")
"""First columns of ``failure_evidence``, agent-observable facts about the last step: it failed; an entity argument
it carried is one the agent never learned (neither the request nor a tool result named it); every entity argument
names an entity the agent never looked up (no field of it was revealed); a numeric argument was above the limit
(the contract's ``max_from`` field) the agent had seen for the entity it refers to."""

FAILURE_CODE_CLASSES: tuple[tuple[str, ...], ...] = (
    ("NOT_FOUND",),
    ("CONFLICT",),
    ("INVALID_INPUT",),
    ("PRECONDITION_FAILED", "DEPENDENCY_MISSING", "NOT_WHITELISTED"),
    ("TOOL_TIMEOUT", "UPSTREAM_ERROR", "INVALID_OUTPUT", "RATE_LIMITED", "CIRCUIT_OPEN"),
)
"""The result-code classes of ``failure_evidence`` (one-hot after :data:`EVIDENCE_FLAGS`; a code in no class
sets none): no such entity, a state conflict, an invalid value, a rejected call (precondition, whitelist,
dependency), the tool unavailable."""


LABEL_OBS_KEYS: tuple[str, ...] = ("reflection",)
"""Observation entries that are training labels, not policy inputs: the env's root cause of the last failed step
reads the world's truth (the reflection head's label). Only the named oracle ablation
(``reflection_source: oracle_env``) feeds it to the policy; everything else in an observation is a function of the
request and of revealed tool results."""


def evidence_width(num_skills: int) -> int:
    """Width of the ``failure_evidence`` input: flags, code classes, then the failed skill's one-hot."""
    return len(EVIDENCE_FLAGS) + len(FAILURE_CODE_CLASSES) + num_skills


def relation_key(src: str, rel: str, dst: str) -> str:
    """Flat key of an edge type, e.g. ``goal__needs__tool``."""
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
class NumericSource:
    """A revealed numeric field that numeric arguments may copy: column ``col`` of ``{node_type}_x``.

    Copy source indices enumerate ``GraphSpec.numeric_sources`` in order and, inside one, the nodes of its type:
    source ``c`` of entry ``s`` and node ``i`` is ``offset(s) + i`` with ``offset(s) = Σ_{s' < s} max_nodes``.
    ``known_col`` is the column that is 1 when the field is revealed.
    """

    node_type: str
    field: str
    col: int
    known_col: int


TASK_TEXT = "task_text"
"""The field name of the request's text on the session node (the fusion's query; ``DomainSchema.task_text_tokens``)."""


@dataclass(frozen=True)
class ModalityBlock:
    """Where one image or text modality lives in its node type's features (``{node_type}_x``).

    Columns ``known`` (1 when revealed), then ``start .. start + width``: an image's ``size * size`` pixels and then
    its ``size * size`` focus mask; a text's ``size`` token ids (``id / VOCAB``, :mod:`agentic_ray.text.tokens`) and
    then its ``size`` token weights. Every other column of the node type is structured.
    """

    node_type: str
    field: str
    kind: str
    known: int
    start: int
    size: int

    @property
    def width(self) -> int:
        return 2 * self.size * self.size if self.kind == "image" else 2 * self.size

    @property
    def end(self) -> int:
        return self.start + self.width


@dataclass(frozen=True)
class GraphSpec:
    """Node types, their padded sizes and feature widths, the relations between them and the copy sources.

    ``modalities`` lists the image and text blocks of the node features (empty for a domain without any): the
    multimodal encoder builds a sub-encoder per block kind from them, and the session's ``task_text`` block, if
    present, is the query of its fusion."""

    max_nodes: dict[str, int]
    feat_dims: dict[str, int]
    relations: tuple[RelationSpec, ...]
    numeric_sources: tuple[NumericSource, ...] = ()
    root_causes: tuple[str, ...] = ROOT_CAUSES
    modalities: tuple[ModalityBlock, ...] = ()

    def blocks(self, node_type: str) -> tuple[ModalityBlock, ...]:
        """The modality blocks of one node type, in column order."""
        return tuple(b for b in self.modalities if b.node_type == node_type)

    def struct_columns(self, node_type: str) -> list[int]:
        """The structured columns of a node type: every column outside its modality blocks (known columns in)."""
        inside = {c for b in self.blocks(node_type) for c in range(b.start, b.end)}
        return [c for c in range(self.feat_dims[node_type]) if c not in inside]

    @property
    def task_text(self) -> ModalityBlock | None:
        """The request's text block on the session node (the fusion's query), or None."""
        return next((b for b in self.modalities if b.field == TASK_TEXT), None)

    @property
    def node_types(self) -> tuple[str, ...]:
        return tuple(self.max_nodes)

    def metadata(self) -> tuple[list[str], list[tuple[str, str, str]]]:
        """PyG-style ``(node_types, edge_types)``."""
        return list(self.node_types), [r.edge_type for r in self.relations]

    @property
    def num_sources(self) -> int:
        """``C``, the number of numeric copy sources."""
        return sum(self.max_nodes[s.node_type] for s in self.numeric_sources)

    def source_table(self) -> list[tuple[int, int]]:
        """``[(entry index, node index)]`` of each copy source ``c`` (see :class:`NumericSource`)."""
        return [
            (j, i) for j, s in enumerate(self.numeric_sources) for i in range(self.max_nodes[s.node_type])
        ]


@dataclass(frozen=True)
class SkillSlots:
    """Which argument slots a skill uses.

    Attributes:
        name: skill name.
        pointer_types: node type of each entity argument (pointer slot), contract order.
        pointer_optional: per pointer slot, whether it may be left out.
        list_types: node type of each list-of-entities argument (list slot).
        list_bounds: ``(min, max)`` length of each list slot.
        list_ordered: per list slot, whether its order matters (empty: none does).
        list_unique: per list slot, whether a node may appear only once (empty: every slot is unique).
        list_paired: per list slot, the list slot it is paired with by position (its leader: same length, member
            ``i`` goes with the leader's member ``i``), or -1 (empty: none is paired).
        enum_sizes: choices of each enum/bool argument.
        numeric_count: float/int arguments.
    """

    name: str
    pointer_types: tuple[str, ...] = ()
    enum_sizes: tuple[int, ...] = ()
    numeric_count: int = 0
    pointer_optional: tuple[bool, ...] = ()
    list_types: tuple[str, ...] = ()
    list_bounds: tuple[tuple[int, int], ...] = ()
    list_ordered: tuple[bool, ...] = ()
    list_unique: tuple[bool, ...] = ()
    list_paired: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.pointer_optional and len(self.pointer_optional) != len(self.pointer_types):
            raise ValueError(f"{self.name}: pointer_optional must have one entry per pointer slot")
        if len(self.list_bounds) != len(self.list_types):
            raise ValueError(f"{self.name}: list_bounds must have one (min, max) per list slot")
        for lo, hi in self.list_bounds:
            if not 0 <= lo <= hi or hi < 1:
                raise ValueError(f"{self.name}: list bounds ({lo}, {hi}) need 0 <= min <= max, max >= 1")
        for label, v in (("list_ordered", self.list_ordered), ("list_unique", self.list_unique),
                         ("list_paired", self.list_paired)):  # fmt: skip
            if v and len(v) != len(self.list_types):
                raise ValueError(f"{self.name}: {label} must have one entry per list slot")
        for i in range(len(self.list_types)):
            lead = self.leader(i)
            if lead >= 0 and (lead == i or lead >= len(self.list_types) or self.leader(lead) >= 0):
                raise ValueError(
                    f"{self.name}: list slot {i} is paired with {lead}, which is not a leader slot"
                )

    def optional(self, slot: int) -> bool:
        return bool(self.pointer_optional[slot]) if self.pointer_optional else False

    def ordered(self, slot: int) -> bool:
        return bool(self.list_ordered[slot]) if self.list_ordered else False

    def unique(self, slot: int) -> bool:
        return bool(self.list_unique[slot]) if self.list_unique else True

    def leader(self, slot: int) -> int:
        """The list slot that list slot ``slot`` is paired with, or -1."""
        return int(self.list_paired[slot]) if self.list_paired else -1

    def is_sequence(self, slot: int) -> bool:
        """A list slot is a sequence (an autoregressive choice, ``models/sequence_functional``) when its order
        matters, it may repeat a node, or it is paired (either side); otherwise a set (``models/set_functional``)."""
        return (
            self.ordered(slot)
            or not self.unique(slot)
            or self.leader(slot) >= 0
            or any(self.leader(j) == slot for j in range(len(self.list_types)))
        )


@dataclass(frozen=True)
class ActionLayout:
    """Static description of the structured action space, derived from skill contracts."""

    skills: tuple[SkillSlots, ...]
    max_pointer: int
    num_prototypes: int = 0
    pointer_node_types: tuple[str, ...] = field(default=())
    """Every node type a pointer or list slot refers to."""
    prototype_skills: tuple[int, ...] = field(default=())
    """Skill index of each prototype (empty when unknown, e.g. in specs built for shape tests only)."""
    num_sources: int = 0
    """``C``: numeric copy sources of the graph spec (0: numeric arguments are always free values)."""
    type_widths: tuple[tuple[str, int], ...] = field(default=())
    """``(node type, width)``: the pointer width of each node type (its node cap), so that a slot over a small type
    is not as wide as the widest one (empty: every type is ``max_pointer`` wide)."""

    def __post_init__(self) -> None:
        if self.prototype_skills and len(self.prototype_skills) != self.num_prototypes:
            raise ValueError(
                f"prototype_skills has {len(self.prototype_skills)} entries for {self.num_prototypes} prototypes"
            )
        if any(not 0 <= k < len(self.skills) for k in self.prototype_skills):
            raise ValueError(
                f"prototype_skills {self.prototype_skills} out of range for {len(self.skills)} skills"
            )
        for t, w in self.type_widths:
            if not 1 <= w <= self.max_pointer:
                raise ValueError(f"node type {t!r}: width {w} outside [1, max_pointer={self.max_pointer}]")
        for s in self.skills:
            for i, (lo, _hi) in enumerate(s.list_bounds):
                if s.unique(i) and lo > self.width(s.list_types[i]):
                    raise ValueError(
                        f"{s.name}: list min {lo} exceeds the {self.width(s.list_types[i])} nodes of "
                        f"{s.list_types[i]!r}"
                    )

    @property
    def num_skills(self) -> int:
        return len(self.skills)

    def width(self, node_type: str) -> int:
        """The pointer width of ``node_type`` (``max_pointer`` unless :attr:`type_widths` names it)."""
        for t, w in self.type_widths:
            if t == node_type:
                return w
        return self.max_pointer

    def list_max(self, skill: SkillSlots, slot: int) -> int:
        """The most members list slot ``slot`` of ``skill`` can hold: its ``max``, and for a list without repeats
        no more than the nodes of its type (a follower: its leader's)."""
        lead = skill.leader(slot)
        if lead >= 0:
            return self.list_max(skill, lead)
        hi = skill.list_bounds[slot][1]
        return min(hi, self.width(skill.list_types[slot])) if skill.unique(slot) else hi

    # The slot counts below are pure functions of the (immutable) skills, computed once per layout: the env's
    # decoding and masks read them several times a step (~1.5% of env time on help-desk, py-spy).
    @functools.cached_property
    def list_length(self) -> int:
        """``T``: positions of each list slot in the ``members`` action (the longest list, at least 1)."""
        return max([self.list_max(s, i) for s in self.skills for i in range(len(s.list_types))] + [1])

    @functools.cached_property
    def pointer_slots(self) -> int:
        return max([len(s.pointer_types) for s in self.skills] + [1])

    @property
    def pointer_choices(self) -> int:
        """``Mp + 1``: the nodes of the slot's type, then "left out"."""
        return self.max_pointer + 1

    @functools.cached_property
    def list_slots(self) -> int:
        return max([len(s.list_types) for s in self.skills] + [1])

    @functools.cached_property
    def enum_slots(self) -> int:
        return max([len(s.enum_sizes) for s in self.skills] + [1])

    @functools.cached_property
    def enum_max(self) -> int:
        return max([n for s in self.skills for n in s.enum_sizes] + [2])

    @functools.cached_property
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
                "pointer": gym.spaces.MultiDiscrete([self.pointer_choices] * self.pointer_slots),
                "members": gym.spaces.MultiDiscrete(
                    [self.max_pointer + 1] * (self.list_slots * self.list_length)
                ),
                "enum": gym.spaces.MultiDiscrete([self.enum_max] * self.enum_slots),
                "source": gym.spaces.MultiDiscrete([self.num_sources + 1] * self.numeric_slots),
                "numeric": gym.spaces.Box(
                    -NUMERIC_BOUND, NUMERIC_BOUND, (self.numeric_slots,), dtype=np.float32
                ),
            }
        )

    def prototype_layout(self) -> ActionLayout:
        """The action layout of prototype mode: one choice per prototype, carrying its skill's entity arguments.

        A prototype fixes the skill, its enum arguments and the rule of its numeric argument (see
        :class:`~agentic_ray.envs.action_codec.Prototype`), never the answer: which revealed entity each entity
        argument points at stays the policy's choice, so each "skill" here has the pointer and list slots of its
        prototype's skill and no enum or numeric slot.

        Raises:
            ValueError: the layout has no ``prototype_skills``.
        """
        return _prototype_layout(self)

    def prototype_action_space(self) -> gym.spaces.Dict:
        """The prototype-mode action space: ``prototype_layout().action_space()``, whose ``skill`` is the
        prototype index (its ``enum``, ``source`` and ``numeric`` entries are unused)."""
        return self.prototype_layout().action_space()

    def prototype_action(self, index: int, pointer: np.ndarray, members: np.ndarray) -> dict[str, Any]:
        """An action of :meth:`prototype_action_space`: prototype ``index`` with the structured action's
        ``pointer`` ``(P,)`` and ``members`` ``(L·T,)`` of its skill, cut to the prototype layout's slots (its
        ``T`` may be shorter: the longest list may belong to a skill no prototype uses)."""
        lay = self.prototype_layout()
        t, tp = self.list_length, lay.list_length
        mem = np.asarray(members, dtype=np.int64).reshape(-1, t)[: lay.list_slots, :tp]
        return {
            "skill": int(index),
            "pointer": np.asarray(pointer, dtype=np.int64)[: lay.pointer_slots].copy(),
            "members": mem.reshape(-1).copy(),
            "enum": np.zeros(lay.enum_slots, dtype=np.int64),
            "source": np.zeros(lay.numeric_slots, dtype=np.int64),
            "numeric": np.zeros(lay.numeric_slots, dtype=np.float32),
        }


@functools.lru_cache(maxsize=32)
def _prototype_layout(layout: ActionLayout) -> ActionLayout:
    """:meth:`ActionLayout.prototype_layout`, built once per layout (the env decodes every step through it)."""
    if not layout.prototype_skills:
        raise ValueError("prototype mode needs the layout's prototype_skills")
    skills = tuple(
        SkillSlots(
            f"{layout.skills[k].name}#{i}",
            pointer_types=layout.skills[k].pointer_types,
            pointer_optional=layout.skills[k].pointer_optional,
            list_types=layout.skills[k].list_types,
            list_bounds=layout.skills[k].list_bounds,
            list_ordered=layout.skills[k].list_ordered,
            list_unique=layout.skills[k].list_unique,
            list_paired=layout.skills[k].list_paired,
        )
        for i, k in enumerate(layout.prototype_skills)
    )
    return ActionLayout(
        skills=skills,
        max_pointer=layout.max_pointer,
        pointer_node_types=layout.pointer_node_types,
        num_sources=layout.num_sources,
        type_widths=layout.type_widths,
    )


def observation_space(spec: GraphSpec, layout: ActionLayout) -> gym.spaces.Dict:
    """The padded-array observation space (see module docstring)."""
    import gymnasium as gym

    s: dict[str, gym.spaces.Space] = {}
    for nt, n in spec.max_nodes.items():
        s[f"{nt}_x"] = gym.spaces.Box(0.0, 1.0, (n, spec.feat_dims[nt]), dtype=np.float32)
        s[f"{nt}_mask"] = gym.spaces.Box(0, 1, (n,), dtype=np.int8)
    for r in spec.relations:
        hi = np.zeros((2, r.max_edges), dtype=np.int64)
        # A one-node type's indices are all 0; its bound is kept at 1 so the Box is not degenerate (low == high
        # is an error in Gymnasium's checker). Padded columns are 0 anyway.
        hi[0, :] = max(spec.max_nodes[r.src] - 1, 1)
        hi[1, :] = max(spec.max_nodes[r.dst] - 1, 1)
        s[f"{r.key}_ei"] = gym.spaces.Box(np.zeros_like(hi), hi, dtype=np.int64)
        s[f"{r.key}_mask"] = gym.spaces.Box(0, 1, (r.max_edges,), dtype=np.int8)
    k = layout.num_skills
    s["skill_mask"] = gym.spaces.Box(0, 1, (k,), dtype=np.int8)
    s["pointer_mask"] = gym.spaces.Box(0, 1, (k, layout.pointer_slots, layout.pointer_choices), dtype=np.int8)
    s["list_mask"] = gym.spaces.Box(0, 1, (k, layout.list_slots, layout.max_pointer), dtype=np.int8)
    s["source_mask"] = gym.spaces.Box(0, 1, (max(spec.num_sources, 1),), dtype=np.int8)
    s["reflection"] = gym.spaces.Box(0.0, 1.0, (len(spec.root_causes),), dtype=np.float32)
    s["failure_evidence"] = gym.spaces.Box(0.0, 1.0, (evidence_width(k),), dtype=np.float32)
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
    k, mp = layout.num_skills, layout.max_pointer
    sm = (rng.random(k) < 0.6).astype(np.int8)
    sm[int(rng.integers(k))] = 1
    obs["skill_mask"] = sm
    pm = np.zeros((k, layout.pointer_slots, layout.pointer_choices), dtype=np.int8)
    lm = np.zeros((k, layout.list_slots, mp), dtype=np.int8)
    for i, s in enumerate(layout.skills):
        for j, nt in enumerate(s.pointer_types):
            pm[i, j, : counts[nt]] = obs[f"{nt}_mask"][: counts[nt]]
            pm[i, j, mp] = int(s.optional(j))
        for j, nt in enumerate(s.list_types):
            lm[i, j, : counts[nt]] = 1
    obs["pointer_mask"], obs["list_mask"] = pm, lm
    src = np.zeros(max(spec.num_sources, 1), dtype=np.int8)
    for c, (j, i) in enumerate(spec.source_table()):
        src[c] = int(i < counts[spec.numeric_sources[j].node_type] and rng.random() < 0.7)
    obs["source_mask"] = src
    obs["reflection"] = np.zeros(len(spec.root_causes), dtype=np.float32)
    obs["failure_evidence"] = np.zeros(evidence_width(k), dtype=np.float32)
    if layout.num_prototypes:
        pr = (rng.random(layout.num_prototypes) < 0.5).astype(np.int8)
        pr[0] = 1
        obs["proto_mask"] = pr
    return obs


def toy_specs() -> tuple[GraphSpec, ActionLayout]:
    """A tiny spec with every feature of the real ones, for unit tests of models without an env.

    Node types ``a``/``b``/``c`` stand for a domain's entity types; ``tool``/``goal``/``session`` are generic.
    ``f.swap`` has every kind of sequence slot: an ordered list without repeats, its follower (paired by position,
    repeats allowed) and a multiset.
    """
    spec = GraphSpec(
        max_nodes={"a": 1, TOOL_NODE_TYPE: 6, "b": 4, "c": 3, SESSION_NODE_TYPE: 1, GOAL_NODE_TYPE: 4},
        feat_dims={"a": 6, TOOL_NODE_TYPE: 7, "b": 5, "c": 6, SESSION_NODE_TYPE: 4, GOAL_NODE_TYPE: 5},
        relations=(
            RelationSpec(SESSION_NODE_TYPE, "uses", TOOL_NODE_TYPE, 6),
            RelationSpec("a", "calls", TOOL_NODE_TYPE, 6),
            RelationSpec(TOOL_NODE_TYPE, "operates", "b", 12),
            RelationSpec("b", "in", SESSION_NODE_TYPE, 4),
            RelationSpec(TOOL_NODE_TYPE, "depends", TOOL_NODE_TYPE, 6),
            RelationSpec(SESSION_NODE_TYPE, "of", "a", 1),
            RelationSpec(GOAL_NODE_TYPE, "requires", GOAL_NODE_TYPE, 6),
            RelationSpec(GOAL_NODE_TYPE, "needs", TOOL_NODE_TYPE, 6),
            RelationSpec("c", "contains", "b", 4),
        ),
        numeric_sources=(NumericSource("b", "f1", 3, 4), NumericSource("c", "f2", 2, 3)),
    )
    layout = ActionLayout(
        skills=(
            SkillSlots("a.check", pointer_types=("b",)),
            SkillSlots("b.refund", pointer_types=("c",), enum_sizes=(3,), numeric_count=1),
            SkillSlots("c.sms", pointer_types=("a",), enum_sizes=(4,), pointer_optional=(True,)),
            SkillSlots("d.exchange", pointer_types=("c", "b"), list_types=("b",), list_bounds=((1, 3),)),
            SkillSlots("e.handoff"),
            SkillSlots(
                "f.swap",
                list_types=("b", "c", "b"),
                list_bounds=((1, 2), (1, 2), (0, 3)),
                list_ordered=(True, True, False),
                list_unique=(True, False, False),
                list_paired=(-1, 0, -1),
            ),
        ),
        max_pointer=4,
        num_prototypes=7,
        pointer_node_types=("a", "b", "c"),
        prototype_skills=(0, 1, 1, 2, 3, 4, 5),
        num_sources=spec.num_sources,
        type_widths=(("a", 1), ("b", 4), ("c", 3)),
    )
    return spec, layout


def specs_to_dict(spec: GraphSpec, layout: ActionLayout) -> dict[str, Any]:
    """JSON-safe form of a spec pair (a model's contract travels with its checkpoint and to benchmarks)."""
    import dataclasses

    return {"graph_spec": dataclasses.asdict(spec), "action_layout": dataclasses.asdict(layout)}


def specs_from_dict(d: dict[str, Any]) -> tuple[GraphSpec, ActionLayout]:
    """Inverse of :func:`specs_to_dict`."""
    g, a = d["graph_spec"], d["action_layout"]
    spec = GraphSpec(
        max_nodes=dict(g["max_nodes"]),
        feat_dims=dict(g["feat_dims"]),
        relations=tuple(RelationSpec(**r) for r in g["relations"]),
        numeric_sources=tuple(NumericSource(**s) for s in g["numeric_sources"]),
        root_causes=tuple(g["root_causes"]),
        modalities=tuple(ModalityBlock(**m) for m in g.get("modalities", ())),
    )
    skills = tuple(
        SkillSlots(
            name=s["name"],
            pointer_types=tuple(s["pointer_types"]),
            enum_sizes=tuple(s["enum_sizes"]),
            numeric_count=s["numeric_count"],
            pointer_optional=tuple(s["pointer_optional"]),
            list_types=tuple(s["list_types"]),
            list_bounds=tuple(tuple(b) for b in s["list_bounds"]),  # type: ignore[misc]
            list_ordered=tuple(s.get("list_ordered", ())),
            list_unique=tuple(s.get("list_unique", ())),
            list_paired=tuple(s.get("list_paired", ())),
        )
        for s in a["skills"]
    )
    layout = ActionLayout(
        skills=skills,
        max_pointer=a["max_pointer"],
        num_prototypes=a["num_prototypes"],
        pointer_node_types=tuple(a["pointer_node_types"]),
        prototype_skills=tuple(a["prototype_skills"]),
        num_sources=a["num_sources"],
        type_widths=tuple((str(t), int(w)) for t, w in a.get("type_widths", ())),
    )
    return spec, layout

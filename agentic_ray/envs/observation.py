"""Specs and observations from a domain's schema: the one builder training and serving share.

:func:`build_specs` derives the :class:`~agentic_ray.graph_spec.GraphSpec` and
:class:`~agentic_ray.graph_spec.ActionLayout` from the domain schema and the skill contracts;
:class:`ObservationBuilder` turns ``(task, knowledge, episode state, SLA arrays, masks)`` into the padded-array
observation. It never reads the world: every entity feature comes from :class:`Knowledge`, i.e. from the request
and the tool results, so the Serve endpoint rebuilds exactly the same observation from a transcript.

Node features (all in [0, 1]):

=============  ====================================================================================================
entity type    mentioned by the request, looked up (any field known), then per schema field a "known" column and
               its value: a one-hot (category), a quantile through the domain's table ``<type>.<field>`` (number),
               or 0/1 (flag); a text field (an address, a tracking number) has only its known column, its value
               is never a feature (string arguments copy it through a pointer, ``source: <type>.<field>``).
               An image field: its pixels and focus mask; a text field with ``size``: its hashed token ids and
               token weights (the modality blocks, ``GraphSpec.modalities``, read by the multimodal encoder).
               Unknown fields are all zeros with known = 0.
tool           skill one-hot (K), p50, p95, error rate, attempt error rate, breaker open, half-open, high-risk,
               risk weight, masked, calls this episode / 5
goal           skill one-hot (K), pending / ready / done, priority, the required enum value (one-hot of the first
               enum argument the goal constrains, unless the request does not state it: ``Goal.hidden_args``), then
               one one-hot block per schema goal hint
session        steps used / budget, steps left / budget, goals done share, last call ok, last call failed,
               consecutive failures / 5; with ``DomainSchema.task_text_tokens``, the request's text as a text
               block (known, token ids, token weights): the query of the multimodal encoder's fusion
=============  ====================================================================================================

Relations: ``tool -depends-> tool`` (contract preconditions), ``goal -requires-> goal``, ``goal -needs-> tool``,
``session -uses-> tool`` (tools called this episode), for every entity argument ``a`` of type ``T`` in the contracts
``goal -targets_a-> T`` (a goal's argument ``a``: the relation names the argument, so the item an exchange gives
back and the one it sends look different, and so do a merge's primary ticket and its duplicates;
:func:`goal_relation`), for every entity type ``T`` ``tool -operates-> T`` (skills with an argument of type ``T``),
and the schema's links (from revealed fields).

``goal -targets_a->`` edges come from the request and revealed fields only, never from a goal's hidden arguments: a
goal links to an entity argument the request names (the customer said which order), and, for an argument the
request does not name, to every known entity of the argument's type that revealed fields tie to an entity the
request names (the items of the named order, once ``order.get``-like lookups listed them), directly or through
other tied entities. Which of those candidates the goal means is the policy's choice (with the goal's hints).
Once a task's short-term window has dropped the request (``Task.short_term_window``), the entities it named are no
longer marked as named, and an argument it named links like one it did not.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from agentic_ray.domains.knowledge import Knowledge
from agentic_ray.domains.protocol import DomainSchema, EntityTypeSchema, Task
from agentic_ray.domains.quantile_fit import TOOL_ERROR_RATE, TOOL_LATENCY, quantile_key
from agentic_ray.domains.quantile_map import QuantileMap
from agentic_ray.envs.episode import EpisodeState
from agentic_ray.graph_spec import (
    GOAL_NODE_TYPE,
    ROOT_CAUSES,
    SESSION_NODE_TYPE,
    TASK_TEXT,
    TOOL_NODE_TYPE,
    ActionLayout,
    GraphSpec,
    ModalityBlock,
    NumericSource,
    RelationSpec,
    SkillSlots,
    relation_key,
)
from agentic_ray.keys import ENTITIES_PAST_CAP
from agentic_ray.skills.contracts import (
    BoolParam,
    DomainContracts,
    EntityListParam,
    EntityParam,
    EnumParam,
    FloatParam,
    IntParam,
    StringParam,
)
from agentic_ray.text.tokens import VOCAB, hash_tokens

__all__ = [
    "ObservationBuilder",
    "build_specs",
    "entity_columns",
    "goal_relation",
    "goal_roles",
    "request_tied",
]

logger = logging.getLogger(__name__)

TOOL_FEATURES = 10
SESSION_FEATURES = 6
ENTITY_FLAGS = 2  # mentioned, looked up
EDGE_CACHE_MAX = 50_000  # memoised edge arrays (a few hundred bytes each) before the memo starts over
CALLS_MEMO_MAX = 4096
"""Memoised call-count columns before that memo starts over. Episodes repeat a few call-count vectors (the first
calls of an episode above all); ``np.minimum(calls, 5) / 5.0`` every step was ~1% of env time (py-spy, help-desk and
e-commerce), a lookup ~0.6 us against ~2.6 us."""


@dataclass(frozen=True)
class FieldColumns:
    """Where one schema field lives in its node type's features."""

    name: str
    kind: str
    known: int
    value: int
    choices: tuple[str, ...]
    quantile: str
    size: int = 0


def entity_columns(t: EntityTypeSchema) -> tuple[list[FieldColumns], int]:
    """Column layout of an entity type: per field ``(known col, first value col)``, and the feature width."""
    cols, c = [], ENTITY_FLAGS
    for f in t.fields:
        cols.append(FieldColumns(f.name, f.kind, c, c + 1, f.choices, quantile_key(t.name, f.name), f.size))
        c += 1 + f.width
    return cols, c


def modality_blocks(schema: DomainSchema) -> tuple[ModalityBlock, ...]:
    """The image and text blocks of the schema's node features, the session's task text last (if declared)."""
    out = [
        ModalityBlock(t.name, col.name, f.kind, col.known, col.value, f.size)
        for t in schema.entity_types
        for f, col in zip(t.fields, entity_columns(t)[0], strict=True)
        if f.modality
    ]
    if schema.task_text_tokens:
        out.append(
            ModalityBlock(
                SESSION_NODE_TYPE,
                TASK_TEXT,
                "text",
                SESSION_FEATURES,
                SESSION_FEATURES + 1,
                schema.task_text_tokens,
            )
        )
    return tuple(out)


def image_into(row: np.ndarray, start: int, size: int, pixels: object, focus: object) -> None:
    """An image's pixels and focus mask into ``row[start : start + 2 * size * size]`` (a value of the wrong length
    or type leaves the pixels zero; a missing focus mask is all ones: attend everywhere)."""
    n = size * size
    px = np.asarray(pixels, dtype=np.float32).reshape(-1) if isinstance(pixels, list | tuple) else None
    if px is not None and px.size == n:
        row[start : start + n] = np.clip(px, 0.0, 1.0)
    fm = np.asarray(focus, dtype=np.float32).reshape(-1) if isinstance(focus, list | tuple) else None
    row[start + n : start + 2 * n] = np.clip(fm, 0.0, 1.0) if fm is not None and fm.size == n else 1.0


def text_into(row: np.ndarray, start: int, size: int, text: object, weights: object = None) -> None:
    """A text's hashed token ids (``id / VOCAB``) and token weights into ``row[start : start + 2 * size]``
    (revealed weights, renormalised over the real tokens, replace the uniform ones)."""
    ids, w = hash_tokens(text if isinstance(text, str) else "", size)
    if isinstance(weights, list | tuple) and len(weights) == size:
        rw = np.clip(np.asarray(weights, dtype=np.float32), 0.0, None) * (ids > 0)
        w = rw / rw.sum() if rw.sum() > 0 else w
    row[start : start + size] = ids / VOCAB
    row[start + size : start + 2 * size] = w


def goal_relation(arg: str) -> str:
    """The relation name of the goal edges to the entities a goal names in its argument ``arg``:
    ``targets_<arg>`` (a double underscore in the name becomes one, since relation keys are ``__``-separated)."""
    return "targets_" + arg.replace("__", "_")


def goal_roles(contracts: DomainContracts) -> list[tuple[str, str]]:
    """``(argument, node type)`` of every entity (or list) argument of the contracts, each once, in contract
    order: one ``goal -targets_<argument>-> type`` relation each."""
    roles: dict[tuple[str, str], None] = {}
    for c in contracts.skills:
        for name, p in c.input.items():
            if isinstance(p, EntityParam | EntityListParam):
                roles[(goal_relation(name), p.node_type)] = None
    return list(roles)


def _param_kinds(contracts: DomainContracts) -> list[SkillSlots]:
    skills = []
    for c in contracts.skills:
        pt, po, lt, lb, es, nc = [], [], [], [], [], 0
        lists = [n for n, p in c.input.items() if isinstance(p, EntityListParam)]
        lo_, lu, lp = [], [], []
        for name, p in c.input.items():
            if isinstance(p, EntityParam):
                pt.append(p.node_type)
                po.append(not p.required)
            elif isinstance(p, StringParam) and p.copy_field is not None:  # points at the entity copied from
                pt.append(p.copy_field[0])
                po.append(not p.required)
            elif isinstance(p, StringParam) and p.max_values > 1:  # which of the fact's values
                es.append(p.max_values)
            elif isinstance(p, EntityListParam):
                lt.append(p.node_type)
                lb.append((p.min_items, p.max_items))
                lo_.append(p.ordered)
                lu.append(p.unique)
                lp.append(lists.index(p.paired_with) if p.paired_with is not None else -1)
            elif isinstance(p, EnumParam):
                es.append(len(p.choices))
            elif isinstance(p, BoolParam):
                es.append(2)
            elif isinstance(p, FloatParam | IntParam):
                nc += 1
            elif isinstance(p, StringParam) and p.source is None and p.default is None and p.required:
                raise ValueError(
                    f"{c.name}.{name}: a string argument an agent fills must be copied from the request "
                    "(`source: request.<fact>`) or a revealed field (`source: <type>.<field>`), have a default, "
                    "or be an enum"
                )
        skills.append(
            SkillSlots(
                c.name,
                pointer_types=tuple(pt),
                enum_sizes=tuple(es),
                numeric_count=nc,
                pointer_optional=tuple(po),
                list_types=tuple(lt),
                list_bounds=tuple(lb),
                list_ordered=tuple(lo_),
                list_unique=tuple(lu),
                list_paired=tuple(lp),
            )
        )
    return skills


def build_specs(
    schema: DomainSchema, contracts: DomainContracts, prototype_skills: Sequence[str] = ()
) -> tuple[GraphSpec, ActionLayout]:
    """The domain's graph spec and action layout.

    Args:
        schema: the domain schema.
        contracts: its skill contracts (skill order = the policy's skill order).
        prototype_skills: for prototype mode, the skill of each prototype (adds ``proto_mask``).
    """
    skills = _param_kinds(contracts)
    k = len(skills)
    types = {t.name: t for t in schema.entity_types}
    for s in skills:
        for nt in (*s.pointer_types, *s.list_types):
            if nt not in types:
                raise ValueError(f"skill {s.name} refers to node type {nt!r}, which the domain schema lacks")
    for c in contracts.skills:
        for name, p in c.input.items():
            cf = p.copy_field if isinstance(p, StringParam) else None
            if cf is not None and cf[1] not in {f.name for f in types[cf[0]].fields}:
                raise ValueError(
                    f"{c.name}.{name} copies {cf[0]}.{cf[1]}, which the domain schema does not declare (declare "
                    "it, e.g. as a `text` field, so the policy sees whether it is revealed)"
                )
    _check_answer_fields(schema, contracts)
    max_nodes = {t.name: t.max_nodes for t in schema.entity_types}
    max_nodes.update({TOOL_NODE_TYPE: k, GOAL_NODE_TYPE: schema.max_goals, SESSION_NODE_TYPE: 1})
    enum_max = max([n for s in skills for n in s.enum_sizes] + [2])
    feat = {t.name: entity_columns(t)[1] for t in schema.entity_types}
    feat[TOOL_NODE_TYPE] = k + TOOL_FEATURES
    feat[GOAL_NODE_TYPE] = k + 4 + enum_max + sum(h.width for h in schema.goal_hints)
    feat[SESSION_NODE_TYPE] = SESSION_FEATURES + (
        1 + 2 * schema.task_text_tokens if schema.task_text_tokens else 0
    )
    n_dep = sum(len(pc.skills) for c in contracts.skills for pc in c.preconditions)
    g = schema.max_goals
    rels = [
        RelationSpec(TOOL_NODE_TYPE, "depends", TOOL_NODE_TYPE, max(n_dep, 1)),
        RelationSpec(GOAL_NODE_TYPE, "requires", GOAL_NODE_TYPE, 2 * g),
        RelationSpec(GOAL_NODE_TYPE, "needs", TOOL_NODE_TYPE, g),
        RelationSpec(SESSION_NODE_TYPE, "uses", TOOL_NODE_TYPE, k),
    ]
    rels += [RelationSpec(GOAL_NODE_TYPE, rel, t, g * max_nodes[t]) for rel, t in goal_roles(contracts)]
    for t in schema.entity_types:
        users = sum(1 for s in skills if t.name in (*s.pointer_types, *s.list_types))
        rels.append(RelationSpec(TOOL_NODE_TYPE, "operates", t.name, max(users, 1) * t.max_nodes))
    rels += [RelationSpec(lk.src, lk.rel, lk.dst, lk.max_edges) for lk in schema.links]
    sources = []
    for t in schema.entity_types:
        cols, _ = entity_columns(t)
        sources += [
            NumericSource(t.name, f.name, col.value, col.known)
            for f, col in zip(t.fields, cols, strict=True)
            if f.copy and f.kind == "number"
        ]
    spec = GraphSpec(max_nodes, feat, tuple(rels), tuple(sources), ROOT_CAUSES, modality_blocks(schema))
    pointed = {nt for s in skills for nt in (*s.pointer_types, *s.list_types)}
    mp = max([max_nodes[nt] for nt in pointed] + [1])
    layout = ActionLayout(
        skills=tuple(skills),
        max_pointer=mp,
        num_prototypes=len(prototype_skills),
        pointer_node_types=tuple(t.name for t in schema.entity_types),
        prototype_skills=tuple(
            next(i for i, s in enumerate(skills) if s.name == p) for p in prototype_skills
        ),
        num_sources=spec.num_sources,
        type_widths=tuple((t.name, t.max_nodes) for t in schema.entity_types if t.name in pointed),
    )
    return spec, layout


def _check_answer_fields(schema: DomainSchema, contracts: DomainContracts) -> None:
    """The generic ``ask_customer`` reveals each answer as field ``<question>`` of the entity asked about: the
    schema must encode it (a category field with the question's answers), or the policy could not read it."""
    ask = contracts.ask_customer
    if ask is None:
        return
    t = next((t for t in schema.entity_types if t.name == ask.about.node_type), None)
    for q, qs in ask.questions.items():
        f = next((f for f in t.fields if f.name == q), None) if t is not None else None
        if f is None or f.kind != "category" or not set(qs.answers) <= set(f.choices):
            raise ValueError(
                f"ask_customer reveals the answer to {q!r} as field {q!r} of {ask.about.node_type!r}: add "
                f"FieldSpec({q!r}, 'category', {qs.answers!r}) to that type in the domain schema"
            )


def request_tied(
    mentioned: set[tuple[str, str]], links: Sequence[tuple[str, str, str, str]]
) -> set[tuple[str, str]]:
    """The entities the request names and every entity revealed links tie to one of them, directly or through
    other tied entities (links read both ways: an order's items, the order a revealed customer placed).

    Args:
        mentioned: ``(type, id)`` of the entities the request names.
        links: ``(src type, src id, dst type, dst id)`` of every revealed link field.
    """
    adjacent: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for st, sid, dt, did in links:
        adjacent.setdefault((st, sid), set()).add((dt, did))
        adjacent.setdefault((dt, did), set()).add((st, sid))
    tied, stack = set(mentioned), list(mentioned)
    while stack:
        for nxt in adjacent.get(stack.pop(), ()):
            if nxt not in tied:
                tied.add(nxt)
                stack.append(nxt)
    return tied


def _onehot_into(row: np.ndarray, start: int, choices: tuple[str, ...], value: object) -> None:
    if isinstance(value, str) and value in choices:
        row[start + choices.index(value)] = 1.0


class ObservationBuilder:
    """``(task, knowledge, state, SLA arrays, masks) -> observation`` in the ``graph_spec`` format.

    Args:
        schema: the domain schema.
        contracts: the domain's contracts.
        spec, layout: from :func:`build_specs`.
        quantiles: the domain's quantile tables.

    Per episode, :meth:`begin_episode` caches what is static (goal features and goal edges); per step only the
    entity rows whose knowledge changed, the tools and the session are rewritten.

    Speed (issue 32): edge arrays are memoised on their pairs, a type's rows are reused while its nodes and their
    versions repeat, the goal rows are rebuilt only when the goal status changes, and the session row is one write
    into a per-episode template. Measured on help-desk (microbenchmarks, alternating with main on a loaded box):
    a rebuilt entity part ~81 -> 38-54 us, ``begin_episode`` ~93-119 -> 54-67 us. The golden trajectories
    (``tests/unit/envs/test_env_golden.py``) pin the output bit for bit.
    """

    def __init__(
        self,
        schema: DomainSchema,
        contracts: DomainContracts,
        spec: GraphSpec,
        layout: ActionLayout,
        quantiles: QuantileMap,
    ) -> None:
        self.schema, self.spec, self.layout, self.qm = schema, spec, layout, quantiles
        self.contracts = contracts.by_name()
        self.skills = tuple(s.name for s in layout.skills)
        self.skill_idx = {s: i for i, s in enumerate(self.skills)}
        self.k = len(self.skills)
        self.types = schema.type_names
        self.columns = {t.name: entity_columns(t)[0] for t in schema.entity_types}
        for t, cols in self.columns.items():
            for col in cols:
                if col.kind == "number" and col.quantile not in quantiles.xp:
                    raise ValueError(f"the domain's quantile table has no entry {col.quantile!r} ({t} field)")
        self._rel = {r.key: r for r in spec.relations}
        # Static tool rows and tool dependency edges.
        self.tool_static = np.zeros((self.k, spec.feat_dims[TOOL_NODE_TYPE]), dtype=np.float32)
        self.tool_static[:, : self.k] = np.eye(self.k, dtype=np.float32)
        for i, s in enumerate(self.skills):
            r = self.contracts[s].risk
            self.tool_static[i, self.k + 6] = float(r.high_risk)
            self.tool_static[i, self.k + 7] = min(1.0, r.weight)
        self.tool_deps = [
            (self.skill_idx[a], i)
            for i, s in enumerate(self.skills)
            for pc in self.contracts[s].preconditions
            for a in pc.skills
        ]
        self.tools_of_type = {
            t: [i for i, s in enumerate(layout.skills) if t in (*s.pointer_types, *s.list_types)]
            for t in self.types
        }
        self.goal_relations = [relation_key(GOAL_NODE_TYPE, rel, t) for rel, t in goal_roles(contracts)]
        # Which goal argument names are entities of which type, per skill.
        self.entity_args: dict[str, list[tuple[str, str]]] = {
            s: [
                (n, p.node_type)
                for n, p in self.contracts[s].input.items()
                if isinstance(p, EntityParam | EntityListParam)
            ]
            for s in self.skills
        }
        self.first_enum: dict[str, tuple[str, list[str]] | None] = {}
        for s in self.skills:
            e = next(
                ((n, p) for n, p in self.contracts[s].input.items() if isinstance(p, EnumParam | BoolParam)),
                None,
            )
            self.first_enum[s] = (
                None
                if e is None
                else (e[0], list(e[1].choices) if isinstance(e[1], EnumParam) else ["False", "True"])
            )
        # Observation keys, formatted once rather than per step.
        self._type_keys = {t: (f"{t}_x", f"{t}_mask", f"{TOOL_NODE_TYPE}__operates__{t}") for t in self.types}
        self._link_keys = [f"{lk.src}__{lk.rel}__{lk.dst}" for lk in schema.links]
        self._num_sources = spec.num_sources
        self._uses_key = f"{SESSION_NODE_TYPE}__uses__{TOOL_NODE_TYPE}"
        self._edge_cache: dict[tuple[str, tuple[tuple[int, int], ...]], tuple[np.ndarray, np.ndarray]] = {}
        self._type_cache: dict[str, tuple[list[str], list[int], np.ndarray]] = {}
        self._goal_key: bytes | None = None
        self._goal_deps: list[tuple[int, ...]] = []  # per goal, the indices of its prerequisites
        self._goal_x: np.ndarray = np.zeros((0, 0), dtype=np.float32)
        self._session_row = np.zeros((1, spec.feat_dims[SESSION_NODE_TYPE]), dtype=np.float32)
        self._sla_key: object = None
        self._tool_sla = self.tool_static
        # Session -> tool "uses" edges per set of tools called (as bytes): a new set every few steps, and few sets
        # recur (rebuilding them on each change was ~2.4% of env time on e-commerce, py-spy).
        self._uses_memo: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        self._calls_memo: dict[bytes, np.ndarray] = {}  # the tool rows' call-count column by the calls vector
        tool_on, session_on = np.ones(self.k, dtype=np.int8), np.ones(1, dtype=np.int8)
        tool_on.flags.writeable = session_on.flags.writeable = False
        self._all_on = (tool_on, session_on)  # the tool and session node masks: every node, every episode
        self._task: Task | None = None
        self._know_version: tuple[int, int] = (-1, -1)
        self._row_cache: dict[tuple[str, str], tuple[int, np.ndarray]] = {}
        self._count_cache: dict[tuple[str, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._entity_cache: dict[str, np.ndarray] = {}
        self._src_memo: tuple[tuple[np.ndarray, ...], np.ndarray] | None = None
        self.node_ids: dict[str, list[str]] = {t: [] for t in self.types}
        self.node_index: dict[str, dict[str, int]] = {t: {} for t in self.types}
        self.past_cap: dict[str, int] = {}
        """This episode's entities past their type's node cap (``max_nodes``), per type, at the most: the agent
        knows them, the observation (and so the policy) does not. Counted here, logged once per type, and
        reported in the step info and the episode record (``ENTITIES_PAST_CAP``)."""
        self._cap_logged: set[str] = set()

    @property
    def task(self) -> Task | None:
        """The task of the current episode (:meth:`begin_episode`), None before the first."""
        return self._task

    # ------------------------------------------------------------------ helpers
    def _edges(self, key: str, pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        """The padded ``(2, max_edges)`` edge index and ``(max_edges,)`` mask of relation ``key``.

        Memoised on ``(key, pairs)``, read-only and shared (:meth:`build` hands them out): the same few edge
        sets recur across steps and episodes, and building them (two allocations, a transpose, two writes) was
        3-4% of env time on both built-in domains (py-spy, random masked policy)."""
        ck = (key, tuple(pairs))
        hit = self._edge_cache.get(ck)
        if hit is not None:
            return hit
        r = self._rel[key]
        ei = np.zeros((2, r.max_edges), dtype=np.int64)
        m = np.zeros(r.max_edges, dtype=np.int8)
        pairs = pairs[: r.max_edges]
        if pairs:
            n = len(pairs)
            ei[:, :n] = np.asarray(pairs, dtype=np.int64).T
            m[:n] = 1
        ei.flags.writeable = m.flags.writeable = False
        if len(self._edge_cache) >= EDGE_CACHE_MAX:
            self._edge_cache.clear()
        self._edge_cache[ck] = (ei, m)
        return ei, m

    def begin_episode(self, task: Task) -> None:
        """Precompute what is static within an episode (goal features, goal and tool edges)."""
        sp, k, em = self.spec, self.k, self.layout.enum_max
        self._task = task
        self._know_version = (-1, -1)
        self.past_cap = {}
        self._row_cache = {}
        self._type_cache = {}
        self._goal_key = None
        gx = np.zeros((sp.max_nodes[GOAL_NODE_TYPE], sp.feat_dims[GOAL_NODE_TYPE]), dtype=np.float32)
        gidx = task.goal_index()
        for i, g in enumerate(task.goals):
            gx[i, self.skill_idx[g.skill]] = 1.0
            gx[i, k + 3] = min(1.0, g.priority / 12.0)
            fe = self.first_enum[g.skill]
            if fe is not None and fe[0] in g.args and fe[0] not in g.hidden_args:
                _onehot_into(gx[i], k + 4, tuple(fe[1]), str(g.args[fe[0]]))
            c = k + 4 + em
            for h in self.schema.goal_hints:
                _onehot_into(gx[i], c, h.choices, g.hints.get(h.name))
                c += h.width
        self._goal_static = gx
        self._session_row = np.zeros(
            (1, sp.feat_dims[SESSION_NODE_TYPE]), dtype=np.float32
        )  # the session's features, then the request's text block (none without task_text_tokens)
        if self.schema.task_text_tokens:
            self._session_row[0, SESSION_FEATURES] = 1.0
            text_into(
                self._session_row[0], SESSION_FEATURES + 1, self.schema.task_text_tokens, task.request.text
            )
        n = len(task.goals)
        self._goal_deps = [tuple(gidx[d] for d in g.deps) for g in task.goals]
        self._ready_key: bytes | None = None
        self._static: dict[str, np.ndarray] = {}
        for key, pairs in (
            (f"{TOOL_NODE_TYPE}__depends__{TOOL_NODE_TYPE}", self.tool_deps),
            (
                f"{GOAL_NODE_TYPE}__requires__{GOAL_NODE_TYPE}",
                [(gidx[d], i) for i, g in enumerate(task.goals) for d in g.deps],
            ),
            (
                f"{GOAL_NODE_TYPE}__needs__{TOOL_NODE_TYPE}",
                [(i, self.skill_idx[g.skill]) for i, g in enumerate(task.goals)],
            ),
        ):
            self._static[f"{key}_ei"], self._static[f"{key}_mask"] = self._edges(key, pairs)
        gm = np.zeros(sp.max_nodes[GOAL_NODE_TYPE], dtype=np.int8)
        gm[:n] = 1
        gm.flags.writeable = False  # the edges above are read-only already (_edges)
        self._static[f"{GOAL_NODE_TYPE}_mask"] = gm
        self._static[f"{TOOL_NODE_TYPE}_mask"], self._static[f"{SESSION_NODE_TYPE}_mask"] = self._all_on
        # Goal -> entity edges from the request only (see the module docstring): an argument the request names
        # links to that entity; any other entity argument links to the request-tied candidates of its type. Each
        # over the relation of its argument: (goal index, relation key, type, id) and (goal index, key, type).
        named = {(r.type, r.id) for r in task.request.mentioned}
        self._goal_refs: list[tuple[int, str, str, str]] = []
        self._goal_open: list[tuple[int, str, str]] = []
        for i, g in enumerate(task.goals):
            for name, t in self.entity_args[g.skill]:
                key = relation_key(GOAL_NODE_TYPE, goal_relation(name), t)
                v = g.args.get(name)
                vals = [str(x) for x in (v if isinstance(v, list | tuple) else [v]) if x is not None]
                stated = [x for x in vals if (t, x) in named]
                if stated and len(stated) == len(vals):
                    self._goal_refs += [(i, key, t, x) for x in stated]
                elif (i, key, t) not in self._goal_open:
                    self._goal_open.append((i, key, t))

    def goal_ready(self, goal_done: np.ndarray) -> np.ndarray:
        """``(num_goals,)`` bool: pending goals whose prerequisites are all done (a fresh array).

        Cached on ``goal_done`` for the episode: the env asks ~3 times a step and goal status changes on few
        steps. Read from each goal's prerequisite indices in Python, not as a reduction over a prerequisite matrix:
        a task has a few goals, and the matrix's fancy-index writes at reset and the ``any(axis=1)`` reduction
        were ~1.5% of env time on e-commerce (py-spy, random masked policy; ~8 us against ~2 us a call)."""
        key = goal_done.tobytes()
        if key != self._ready_key:
            done = goal_done.tolist()
            self._ready = np.array(
                [
                    not d and all(done[j] for j in deps)
                    for d, deps in zip(done, self._goal_deps, strict=False)
                ],
                dtype=bool,
            )
            self._ready_key = key
        return self._ready.copy()

    def refresh(self, knowledge: Knowledge) -> None:
        """Bring the node order (``node_ids``/``node_index``) up to date with ``knowledge`` (masks read it)."""
        self._entities(knowledge)

    def _entities(self, knowledge: Knowledge) -> dict[str, np.ndarray]:
        """Entity rows, masks and link/goal/tool edges that depend on knowledge (cached by its version)."""
        if (id(knowledge), knowledge.version) == self._know_version:
            return self._entity_cache
        out: dict[str, np.ndarray] = {}
        sp = self.spec
        versions = knowledge.entity_version
        for t, (kx, kmask, key) in self._type_keys.items():
            known = knowledge.ids(t)
            if len(known) > sp.max_nodes[t]:
                self._note_past_cap(t, len(known) - sp.max_nodes[t])
            ids = known[: sp.max_nodes[t]]
            self.node_ids[t] = ids
            self.node_index[t] = {e: i for i, e in enumerate(ids)}
            # A type's rows are reused while its nodes and their versions repeat: a reveal usually changes one
            # type (measured: the row loop was ~2.5% of env time on help-desk, 45% of whose steps reveal).
            ver = [versions.get((t, e), 0) for e in ids]
            hit = self._type_cache.get(t)
            if hit is not None and hit[0] == ids and hit[1] == ver:
                x = hit[2]
            else:
                x = np.zeros((sp.max_nodes[t], sp.feat_dims[t]), dtype=np.float32)
                for i, eid in enumerate(ids):
                    x[i] = self._row(knowledge, t, eid)
                x.flags.writeable = False
                self._type_cache[t] = (ids, ver, x)
            n = len(ids)
            cached = self._count_cache.get((t, n))
            if cached is None:
                m = np.zeros(sp.max_nodes[t], dtype=np.int8)
                m[:n] = 1
                m.flags.writeable = False
                cached = self._count_cache[(t, n)] = (
                    m,
                    *self._edges(key, [(a, b) for a in self.tools_of_type[t] for b in range(n)]),
                )
            out[kx], out[kmask] = x, cached[0]
            out[f"{key}_ei"], out[f"{key}_mask"] = cached[1], cached[2]
        links: list[tuple[str, str, str, str]] = []  # (src type, src id, dst type, dst id) of revealed links
        for lk, key in zip(self.schema.links, self._link_keys, strict=True):
            src_idx, dst_idx = self.node_index[lk.src], self.node_index[lk.dst]
            pairs = []
            for sid, i in src_idx.items():
                v = knowledge.fields(lk.src, sid).get(lk.field)
                for d in v if isinstance(v, list) else [v]:
                    if isinstance(d, str) and d in dst_idx:
                        pairs.append((i, dst_idx[d]))
                        links.append((lk.src, sid, lk.dst, d))
            out[f"{key}_ei"], out[f"{key}_mask"] = self._edges(key, pairs)
        per_role: dict[str, list[tuple[int, int]]] = {key: [] for key in self.goal_relations}
        open_now = list(self._goal_open)
        for gi, key, t, v in self._goal_refs:
            if (t, str(v)) not in knowledge.mentioned:  # the short-term window dropped the request's words
                open_now.append((gi, key, t))
                continue
            j = self.node_index[t].get(str(v))
            if j is not None:
                per_role[key].append((gi, j))
        if open_now:
            tied = request_tied(knowledge.mentioned, links)
            for gi, key, t in open_now:
                per_role[key] += [(gi, j) for e, j in self.node_index[t].items() if (t, e) in tied]
        for key, pairs in per_role.items():
            out[f"{key}_ei"], out[f"{key}_mask"] = self._edges(key, list(dict.fromkeys(pairs)))
        # The source mask reads only the rows of the sources' types: reused while those row arrays are the same
        # objects (a type's rows are replaced whenever its nodes or their versions change; ~1-1.4% of env time).
        rows = tuple(out[self._type_keys[s.node_type][0]] for s in sp.numeric_sources)
        memo = self._src_memo
        if memo is not None and all(a is b for a, b in zip(memo[0], rows, strict=True)):
            src = memo[1]
        else:
            src = np.zeros(max(self._num_sources, 1), dtype=np.int8)
            c = 0
            for s, x in zip(sp.numeric_sources, rows, strict=True):
                n = len(self.node_ids[s.node_type])
                src[c : c + n] = x[:n, s.known_col] > 0
                c += sp.max_nodes[s.node_type]
            src.flags.writeable = False  # shared while it repeats
            self._src_memo = (rows, src)
        out["source_mask"] = src
        self._entity_cache, self._know_version = out, (id(knowledge), knowledge.version)
        return out

    def _note_past_cap(self, t: str, over: int) -> None:
        """``over`` known entities of type ``t`` do not fit its node cap (the latest revealed ones are left out)."""
        if over <= self.past_cap.get(t, 0):
            return
        self.past_cap[t] = over
        if t not in self._cap_logged:
            self._cap_logged.add(t)
            logger.warning(
                "%d known %s entities past the node cap of %d: the observation leaves them out, so the policy "
                "cannot point at them (raise max_nodes of %r in the domain schema). Counted per episode as %s.",
                over, t, self.spec.max_nodes[t], t, ENTITIES_PAST_CAP,
            )  # fmt: skip

    def _row(self, knowledge: Knowledge, t: str, eid: str) -> np.ndarray:
        """One entity's features (cached until the entity changes)."""
        version = knowledge.entity_version.get((t, eid), 0)
        hit = self._row_cache.get((t, eid))
        if hit is not None and hit[0] == version:
            return hit[1]
        flds = knowledge.fields(t, eid)
        row = np.zeros(self.spec.feat_dims[t], dtype=np.float32)
        row[0] = float((t, eid) in knowledge.mentioned)
        for col in self.columns[t]:
            if col.name not in flds:
                continue
            v = flds[col.name]
            row[1] = 1.0
            row[col.known] = 1.0
            if col.kind == "category":
                _onehot_into(row, col.value, col.choices, v)
            elif col.kind == "number":
                if isinstance(v, int | float) and not isinstance(v, bool):
                    row[col.value] = self.qm.scalar(col.quantile, float(v))
            elif col.kind == "flag":
                row[col.value] = float(bool(v))
            elif col.kind == "image":
                image_into(row, col.value, col.size, v, flds.get(f"{col.name}_focus"))
            elif col.kind == "text" and col.size:
                text_into(row, col.value, col.size, v, flds.get(f"{col.name}_weights"))
        self._row_cache[(t, eid)] = (version, row)
        return row

    def source_value(self, knowledge: Knowledge, c: int) -> float | None:
        """The revealed value of numeric copy source ``c`` (None if unknown)."""
        j, i = self.spec.source_table()[c]
        s = self.spec.numeric_sources[j]
        ids = self.node_ids[s.node_type]
        if i >= len(ids):
            return None
        v = knowledge.fields(s.node_type, ids[i]).get(s.field)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    # ------------------------------------------------------------------ build
    def build(
        self,
        task: Task,
        knowledge: Knowledge,
        state: EpisodeState,
        sla: dict[str, np.ndarray],
        masks: dict[str, np.ndarray],
        sla_key: object = None,
    ) -> dict[str, np.ndarray]:
        """The observation.

        Args:
            task: the episode's task.
            knowledge: what is known.
            state: the episode counters (step, budget, goal status, calls, last outcome, the reflection label
                and the failure evidence of the last step).
            sla: per-skill SLA arrays (``sla_arrays``).
            masks: ``skill_mask (K,)``, ``pointer_mask``, ``list_mask`` and optionally ``proto_mask``.
            sla_key: a token that changes whenever ``sla`` does (None: no caching). With one, the tool rows' SLA
                columns are reused while it repeats: their quantile lookups were ~10 us of a ~85 us build (p50,
                e-commerce), and the SLA changes on few steps.

        Returns:
            A dict matching ``observation_space(spec, layout)``. The arrays that repeat between steps (the episode's
            static edges and masks, the entity rows, masks and edges while the knowledge is unchanged, the goal
            rows while the goal status is) are shared and read-only; the others are freshly allocated. Copy an
            array before writing into it.
        """
        if self._task is not task:
            self.begin_episode(task)
        k = self.k
        # The episode's static arrays and the knowledge's entity arrays are memoised read-only and handed out as
        # they are: copying them was ~50 copies a step, ~4% of env time (py-spy, help-desk).
        obs: dict[str, np.ndarray] = {**self._static, **self._entities(knowledge)}
        if sla_key is None or sla_key != self._sla_key:
            tx = self.tool_static.copy()
            lat = self.qm(TOOL_LATENCY, np.rint(np.concatenate((sla["p50"], sla["p95"]))))
            er = self.qm(TOOL_ERROR_RATE, np.concatenate((sla["error_rate"], sla["attempt_error_rate"])))
            tx[:, k] = lat[:k]
            tx[:, k + 1] = lat[k:]
            tx[:, k + 2] = er[:k]
            tx[:, k + 3] = er[k:]
            tx[:, k + 4] = sla["open"]
            tx[:, k + 5] = sla["half_open"]
            self._tool_sla, self._sla_key = tx, sla_key
        tx = self._tool_sla.copy()
        tx[:, k + 8] = 1 - masks["skill_mask"]
        calls_key = state.calls.tobytes()
        col = self._calls_memo.get(calls_key)
        if col is None:
            if len(self._calls_memo) >= CALLS_MEMO_MAX:
                self._calls_memo.clear()
            col = self._calls_memo[calls_key] = np.minimum(state.calls, 5) / 5.0
        tx[:, k + 9] = col
        obs[f"{TOOL_NODE_TYPE}_x"] = tx
        bud = max(state.budget, 1)
        done = state.goal_done
        ng = len(done)
        sx = self._session_row.copy()  # one write of the six session features (was np.array + concatenate)
        sx[0, :SESSION_FEATURES] = (
            min(1.0, state.step / bud),
            max(0.0, (bud - state.step) / bud),
            (done.tolist().count(True) if done.dtype == bool else np.count_nonzero(done)) / ng if ng else 1.0,
            float(state.last_ok),
            float(state.last_failed),
            min(1.0, state.consecutive_failures / 5.0),
        )
        obs[f"{SESSION_NODE_TYPE}_x"] = sx
        gkey = done.tobytes()
        if gkey != self._goal_key:  # the goal rows change only with the goal status (a few steps an episode)
            gx = self._goal_static.copy()
            ready = self.goal_ready(done)
            gx[:ng, k] = ~done & ~ready
            gx[:ng, k + 1] = ready
            gx[:ng, k + 2] = done
            gx.flags.writeable = False
            self._goal_x, self._goal_key = gx, gkey
        obs[f"{GOAL_NODE_TYPE}_x"] = self._goal_x
        key = self._uses_key
        called = state.calls > 0
        used = self._uses_memo.get(called.tobytes())
        if used is None:
            if len(self._uses_memo) >= EDGE_CACHE_MAX:
                self._uses_memo.clear()
            used = self._uses_memo[called.tobytes()] = self._edges(
                key, [(0, int(j)) for j in np.flatnonzero(called)]
            )
        obs[f"{key}_ei"], obs[f"{key}_mask"] = used
        obs["skill_mask"] = masks["skill_mask"].astype(np.int8, copy=True)
        obs["pointer_mask"] = masks["pointer_mask"].astype(np.int8, copy=True)
        obs["list_mask"] = masks["list_mask"].astype(np.int8, copy=True)
        obs["reflection"] = state.reflection.astype(np.float32, copy=True)
        obs["failure_evidence"] = state.evidence.astype(np.float32, copy=True)
        if self.layout.num_prototypes:
            obs["proto_mask"] = masks["proto_mask"].astype(np.int8, copy=True)
        return obs

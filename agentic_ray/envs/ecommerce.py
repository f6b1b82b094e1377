"""E-commerce graph/action specs, the observation builder and the action masks.

* :func:`ecommerce_specs` returns the domain's :class:`GraphSpec` and :class:`ActionLayout` (the contract between
  the env and the models). The layout is derived from the skill contracts by :func:`layout_from_contracts`.
* :class:`ObservationBuilder` turns ``(world, task, state, sla_stats)`` into the padded-array observation of
  ``graph_spec.py``. It is a plain class, usable outside the env (Serve requests). Static, per-episode parts (tool
  one-hots, edges, goal features) are cached per task and copied; only dynamic parts are rewritten per call.
* :class:`MaskComputer` computes the three masks (hard: world rules; soft: live error rate / open breaker from the
  executor's SLA statistics; business: contract preconditions), vectorised over skills, with reasons.

Node features (all in [0, 1]; numbers through the fitted :class:`QuantileMap`, shipped as
``agentic_ray/data/ecommerce_quantiles.json``, refit by :func:`fit_quantiles`):

=========  ====================================================================================================
user       level, complaint rate, verified, device one-hot (3), balance, coupons held / 5
tool       skill one-hot (13), p50, p95, error rate, attempt error rate, breaker open, half-open, high-risk,
           risk weight, masked, calls this episode / 5
product    category one-hot (4), stock, in stock, price band one-hot (3), price, checked this session, targeted
order      status one-hot (5), total, refunded share, tracking one-hot (4), days late, courier ticket, waybill,
           ERP out of sync, address = profile, targeted
session    steps used / budget, steps left / budget, goals done share, last call ok, last call failed,
           consecutive failures / 5
goal       skill one-hot (13), pending / ready / done, priority, required enum one-hot (enum_max), has numeric
           target, numeric target as a share of its bound range, and the same target in the numeric action's
           own units (``arctanh(2·share − 1)``, what the numeric head must output, mapped from
           ``[−NUMERIC_BOUND, NUMERIC_BOUND]`` to [0, 1]; linear where the share saturates: a full refund is
           share 1.0 but action 5.0)
=========  ====================================================================================================
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agentic_ray.envs.ecommerce_tasks import FAMILIES, MAX_GOALS, Task, draw_training_seed, generate_task
from agentic_ray.envs.graph_spec import (
    NUMERIC_BOUND,
    ROOT_CAUSES,
    ActionLayout,
    GraphSpec,
    NumericTargetSpec,
    RelationSpec,
    SkillSlots,
    numeric_action,
)
from agentic_ray.envs.quantile_map import QuantileMap
from agentic_ray.skills.contracts import (
    BoolParam,
    DomainContracts,
    EntityParam,
    EnumParam,
    FloatParam,
    IntParam,
    load_contracts,
)
from agentic_ray.skills.domains import get_domain
from agentic_ray.skills.domains.ecommerce.world import (
    CATEGORIES,
    DEVICES,
    ORDER_STATUSES,
    TRACKING_STATES,
    ShopWorld,
)

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
QUANTILES_PATH = DATA_DIR / "ecommerce_quantiles.json"

MAX_NODES: dict[str, int] = {"user": 1, "tool": 13, "product": 8, "order": 4, "session": 1, "goal": MAX_GOALS}
POINTER_NODE_TYPES: tuple[str, ...] = ("user", "product", "order")


@functools.lru_cache(maxsize=4)
def ecommerce_contracts(path: str | None = None) -> DomainContracts:
    """The domain's contracts (cached; contracts are immutable)."""
    return load_contracts(path or get_domain("ecommerce").contracts_path)


def layout_from_contracts(
    contracts: DomainContracts, max_nodes: dict[str, int], num_prototypes: int = 0
) -> ActionLayout:
    """The structured action layout of a skill set: entity params → pointer slots, enum/bool params → enum
    slots, float/int params → numeric slots, in the contract's parameter order."""
    skills = []
    ptypes: list[str] = []
    for c in contracts.skills:
        pt: list[str] = []
        es: list[int] = []
        nc = 0
        for p in c.input.values():
            if isinstance(p, EntityParam):
                pt.append(p.node_type)
                if p.node_type not in ptypes:
                    ptypes.append(p.node_type)
            elif isinstance(p, EnumParam):
                es.append(len(p.choices))
            elif isinstance(p, BoolParam):
                es.append(2)
            elif isinstance(p, FloatParam | IntParam):
                nc += 1
        skills.append(SkillSlots(c.name, tuple(pt), tuple(es), nc))
    return ActionLayout(
        skills=tuple(skills),
        max_pointer=max(max_nodes[t] for t in ptypes),
        num_prototypes=num_prototypes,
        pointer_node_types=tuple(t for t in POINTER_NODE_TYPES if t in ptypes),
    )


def _feat_dims(num_skills: int, enum_max: int) -> dict[str, int]:
    return {
        "user": 8,
        "tool": num_skills + 10,
        "product": len(CATEGORIES) + 2 + 3 + 3,
        "order": len(ORDER_STATUSES) + 2 + len(TRACKING_STATES) + 6,
        "session": 6,
        "goal": num_skills + 3 + 1 + enum_max + 3,
    }


RELATIONS: tuple[RelationSpec, ...] = (
    RelationSpec("user", "uses", "tool", 13),
    RelationSpec("tool", "operates", "product", 24),
    RelationSpec("product", "in", "session", 8),
    RelationSpec("tool", "depends", "tool", 16),
    RelationSpec("session", "of", "user", 1),
    RelationSpec("goal", "requires", "goal", 16),
    RelationSpec("goal", "needs", "tool", MAX_GOALS),
    RelationSpec("order", "contains", "product", 12),
    RelationSpec("goal", "targets", "order", MAX_GOALS),
    RelationSpec("goal", "targets", "product", MAX_GOALS),
    RelationSpec("goal", "targets", "user", MAX_GOALS),
)


def ecommerce_specs(prototype_skills: Sequence[str] = ()) -> tuple[GraphSpec, ActionLayout]:
    """The e-commerce :class:`GraphSpec` and :class:`ActionLayout`.

    Args:
        prototype_skills: Empty for the structured action mode; for prototype mode the skill name of each mined
            prototype (``[p.skill for p in load_prototypes()]``), which adds ``proto_mask`` to the observation
            space and lets the model ground each prototype in its tool node.
    """
    contracts = ecommerce_contracts()
    layout = layout_from_contracts(contracts, MAX_NODES, len(prototype_skills))
    if prototype_skills:
        layout = dataclasses.replace(
            layout, prototype_skills=tuple(layout.skill_index(s) for s in prototype_skills)
        )
    spec = GraphSpec(
        max_nodes=dict(MAX_NODES),
        feat_dims=_feat_dims(layout.num_skills, layout.enum_max),
        relations=RELATIONS,
        numeric_targets=NumericTargetSpec(
            "goal",
            flag_col=layout.num_skills + 4 + layout.enum_max,
            value_col=layout.num_skills + 6 + layout.enum_max,
            skill_col=0,
        ),
    )
    return spec, layout


@functools.lru_cache(maxsize=1)
def load_quantiles(path: str | None = None) -> QuantileMap:
    """The shipped quantile tables (``agentic_ray/data/ecommerce_quantiles.json``)."""
    return QuantileMap.from_json(path or QUANTILES_PATH)


def fit_quantiles(
    n_tasks: int = 2000, seed: int = 0, path: str | Path | None = QUANTILES_PATH
) -> QuantileMap:
    """Refit the numeric-feature quantiles on sampled worlds and (by default) overwrite the shipped file.

    Samples ``n_tasks`` training tasks over all families and collects every numeric feature the builder maps.
    Tool latency and error-rate samples come from the worlds' simulated tool health and from the
    error-injection rates (so faulty episodes land inside the fitted range).
    """
    rng = np.random.default_rng(seed)
    s: dict[str, list[float]] = {
        k: []
        for k in (
            "user_level",
            "complaint_rate",
            "balance",
            "stock",
            "price",
            "order_total",
            "days_late",
            "latency_ms",
            "error_rate",
        )
    }
    for _ in range(n_tasks):
        fam = FAMILIES[int(rng.integers(len(FAMILIES)))]
        w, _t = generate_task(fam, draw_training_seed(rng))
        s["user_level"].append(w.user.level)
        s["complaint_rate"].append(w.user.complaint_rate)
        s["balance"].append(w.user.balance)
        for p in w.products:
            s["stock"].append(p.stock)
            s["price"].append(p.price)
        for o in w.orders:
            s["order_total"].append(o.total)
            s["days_late"].append(o.days_late)
        for h in w.tool_health.values():
            s["latency_ms"].append(max(0.0, rng.normal(h.latency_ms, h.latency_std_ms)))
            s["error_rate"].append(h.failure_rate if rng.random() < 0.7 else rng.uniform(0.0, 1.0))
    s["latency_ms"] += [0.0] * (len(s["latency_ms"]) // 10)  # in-process calls without simulated latency
    qm = QuantileMap.fit(s)
    if path is not None:
        qm.to_json(path)
    return qm


@dataclass
class EpisodeState:
    """What the env tracks about the running episode besides the world (input to the builder and masks)."""

    budget: int
    num_goals: int
    num_skills: int
    step: int = 0
    goal_done: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    goals_done_order: list[str] = field(default_factory=list)
    calls: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    last_ok: bool = False
    last_failed: bool = False
    consecutive_failures: int = 0
    reflection: np.ndarray = field(default_factory=lambda: np.zeros(len(ROOT_CAUSES), dtype=np.float32))
    pre_ok: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))
    succeeded: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    last_call_time: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @classmethod
    def new(cls, budget: int, num_goals: int, num_skills: int, max_pre: int) -> EpisodeState:
        return cls(
            budget=budget,
            num_goals=num_goals,
            num_skills=num_skills,
            goal_done=np.zeros(num_goals, dtype=bool),
            calls=np.zeros(num_skills, dtype=np.int64),
            pre_ok=np.zeros((num_skills, max(max_pre, 1)), dtype=bool),
            last_call_time=np.full(num_skills, -1e9),
        )


def sla_arrays(sla_stats: dict[str, Any], skills: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Executor SLA statistics as per-skill arrays (skill order of the layout)."""
    a = np.array(
        [
            (
                x.p50_ms,
                x.p95_ms,
                x.error_rate,
                x.attempt_error_rate,
                x.calls,
                x.breaker_state == "open",
                x.breaker_state == "half_open",
            )
            for x in (sla_stats[s] for s in skills)
        ],
        dtype=np.float64,
    )
    return {
        "p50": a[:, 0],
        "p95": a[:, 1],
        "error_rate": a[:, 2],
        "attempt_error_rate": a[:, 3],
        "calls": a[:, 4],
        "open": a[:, 5] > 0,
        "half_open": a[:, 6] > 0,
    }


class MaskComputer:
    """Hard, soft and business skill masks, vectorised over skills, with the reason for every masked skill.

    Args:
        contracts: the domain's contracts (skill order = action layout order).
        soft_error_rate: default live error-rate threshold of the soft mask (seed 002: 5%).
        soft_thresholds: per-skill overrides of the threshold.
        soft_min_calls: calls in the SLA window before the soft mask may apply.
        soft_cooldown_s: (simulated) seconds after a skill's last call when a soft-masked skill is let through
            again for one probe, so that a recovered tool can come back.
    """

    HARD_RULES: dict[str, tuple[str, str]] = {
        "order.update_address": ("user_verified", "hard: the user is not verified (no address change)"),
    }

    def __init__(
        self,
        contracts: DomainContracts,
        soft_error_rate: float = 0.05,
        soft_thresholds: dict[str, float] | None = None,
        soft_min_calls: int = 5,
        soft_cooldown_s: float = 30.0,
    ) -> None:
        self.skills = tuple(c.name for c in contracts.skills)
        idx = {s: i for i, s in enumerate(self.skills)}
        k = len(self.skills)
        self.threshold = np.array([(soft_thresholds or {}).get(s, soft_error_rate) for s in self.skills])
        self.soft_min_calls = soft_min_calls
        self.soft_cooldown_s = soft_cooldown_s
        self.max_pre = max([len(c.preconditions) for c in contracts.skills] + [1])
        # pad[k, j] is True where skill k has no j-th precondition (always satisfied).
        self.pre_pad = np.ones((k, self.max_pre), dtype=bool)
        self.pre_desc: list[list[str]] = [[] for _ in range(k)]
        # after-skill → [(skill idx, precondition idx, where)]
        self.by_after: dict[str, list[tuple[int, int, dict[str, Any]]]] = {}
        for i, c in enumerate(contracts.skills):
            for j, pc in enumerate(c.preconditions):
                self.pre_pad[i, j] = False
                self.by_after.setdefault(pc.after, []).append((i, j, dict(pc.where)))
                where = f" with {pc.where}" if pc.where else ""
                self.pre_desc[i].append(f"business: needs a prior successful {pc.after}{where}")
        self.hard_idx = [(idx[s], rule, why) for s, (rule, why) in self.HARD_RULES.items() if s in idx]
        self._cache_key: bytes | None = None
        self._cache_reasons: dict[str, list[str]] = {}

    def record_success(self, state: EpisodeState, skill: str, payload: dict[str, Any]) -> None:
        """Update the business-precondition bits after a successful call."""
        for i, j, where in self.by_after.get(skill, ()):
            if all(payload.get(k) == v for k, v in where.items()):
                state.pre_ok[i, j] = True

    def compute(
        self, world: ShopWorld, state: EpisodeState, sla: dict[str, np.ndarray], now: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Returns ``(mask, hard_bad, soft_bad)``; ``mask`` int8 (K,), business = ~mask & ~hard & ~soft."""
        business_ok = (state.pre_ok | self.pre_pad).all(axis=1)
        hard_bad = np.zeros(len(self.skills), dtype=bool)
        for i, rule, _ in self.hard_idx:
            if rule == "user_verified" and not world.user.verified:
                hard_bad[i] = True
        cooled = (now - state.last_call_time) >= self.soft_cooldown_s
        soft_bad = sla["open"] | (
            (sla["error_rate"] > self.threshold) & (sla["calls"] >= self.soft_min_calls) & ~cooled
        )
        mask = (business_ok & ~hard_bad & ~soft_bad).astype(np.int8)
        return mask, hard_bad, soft_bad

    def reasons(
        self,
        state: EpisodeState,
        mask: np.ndarray,
        hard_bad: np.ndarray,
        soft_bad: np.ndarray,
        sla: dict[str, np.ndarray],
    ) -> dict[str, list[str]]:
        """Skill → why it is masked (only masked skills). Cached while the masks do not change."""
        key = mask.tobytes() + hard_bad.tobytes() + soft_bad.tobytes() + state.pre_ok.tobytes()
        if key == self._cache_key:
            return self._cache_reasons
        out: dict[str, list[str]] = {}
        for i in np.flatnonzero(mask == 0):
            s = self.skills[i]
            r: list[str] = []
            if hard_bad[i]:
                r += [why for k, _, why in self.hard_idx if k == i]
            if soft_bad[i]:
                if sla["open"][i]:
                    r.append("soft: circuit breaker open")
                else:
                    r.append(f"soft: live error rate {sla['error_rate'][i]:.2f} > {self.threshold[i]:.2f}")
            for j, d in enumerate(self.pre_desc[i]):
                if not state.pre_ok[i, j]:
                    r.append(d)
            out[s] = r
        self._cache_key, self._cache_reasons = key, out
        return out


def _onehot(n: int, i: int) -> np.ndarray:
    v = np.zeros(n, dtype=np.float32)
    if 0 <= i < n:
        v[i] = 1.0
    return v


class ObservationBuilder:
    """``(world, task, state, sla_stats) → observation dict`` (the ``graph_spec`` format).

    Args:
        contracts: the domain's contracts.
        spec, layout: from :func:`ecommerce_specs`.
        quantiles: the numeric feature map (default: the shipped one).
    """

    def __init__(
        self,
        contracts: DomainContracts,
        spec: GraphSpec,
        layout: ActionLayout,
        quantiles: QuantileMap | None = None,
    ) -> None:
        self.contracts = contracts.by_name()
        self._domain_contracts = contracts
        self._default_masks: MaskComputer | None = None
        self.spec, self.layout = spec, layout
        self.qm = quantiles or load_quantiles()
        self.skills = tuple(s.name for s in layout.skills)
        self.skill_idx = {s: i for i, s in enumerate(self.skills)}
        k = len(self.skills)
        self.k = k
        # Static tool features.
        self.tool_static = np.zeros((k, spec.feat_dims["tool"]), dtype=np.float32)
        self.tool_static[:, :k] = np.eye(k, dtype=np.float32)
        for i, s in enumerate(self.skills):
            r = self.contracts[s].risk
            self.tool_static[i, k + 6] = float(r.high_risk)
            self.tool_static[i, k + 7] = min(1.0, r.weight)
        deps = [
            (self.skill_idx[pc.after], i)
            for i, s in enumerate(self.skills)
            for pc in self.contracts[s].preconditions
        ]
        self.tool_dep_edges = np.array(deps, dtype=np.int64).reshape(-1, 2).T
        self.product_tools = [i for i, s in enumerate(layout.skills) if "product" in s.pointer_types]
        self._rel = {r.key: r for r in spec.relations}
        self._count_cache: dict[tuple[int, int, int], dict[str, np.ndarray]] = {}
        self._cat_rows = {c: _onehot(len(CATEGORIES), i).tolist() for i, c in enumerate(CATEGORIES)}
        self._band_rows = {b: _onehot(3, b).tolist() for b in range(3)}
        self._status_rows = {
            x: _onehot(len(ORDER_STATUSES), i).tolist() for i, x in enumerate(ORDER_STATUSES)
        }
        self._tracking_rows = {
            x: _onehot(len(TRACKING_STATES), i).tolist() for i, x in enumerate(TRACKING_STATES)
        }
        self._task: Task | None = None
        self._world_id = -1
        self._static: dict[str, np.ndarray] = {}
        self._enum_params: dict[str, tuple[str, list[str]] | None] = {}
        self._float_params: dict[str, tuple[str, Any] | None] = {}
        for s in self.skills:
            c = self.contracts[s]
            self._enum_params[s] = next(
                ((n, p.choices) for n, p in c.input.items() if isinstance(p, EnumParam)), None
            )
            self._float_params[s] = next(
                ((n, p) for n, p in c.input.items() if isinstance(p, FloatParam)), None
            )

    # ------------------------------------------------------------------ helpers
    def _edges(self, key: str, pairs: list[tuple[int, int]]) -> None:
        r = self._rel[key]
        ei = np.zeros((2, r.max_edges), dtype=np.int64)
        m = np.zeros(r.max_edges, dtype=np.int8)
        pairs = pairs[: r.max_edges]
        if pairs:
            n = len(pairs)
            ei[0, :n] = [a for a, _ in pairs]
            ei[1, :n] = [b for _, b in pairs]
            m[:n] = 1
        self._static[f"{key}_ei"], self._static[f"{key}_mask"] = ei, m

    def numeric_bound(
        self, world: ShopWorld, skill: str, params: dict[str, Any]
    ) -> tuple[float, float] | None:
        """``(low, high)`` of the skill's numeric parameter, with ``max_from`` resolved from the referenced entity."""
        fp = self._float_params[skill]
        if fp is None:
            return None
        _, p = fp
        hi = p.max
        if p.max_from is not None:
            for v in params.values():
                o = world.order(v) if isinstance(v, str) else None
                if o is not None and hasattr(o, p.max_from):
                    hi = min(hi, float(getattr(o, p.max_from)))
        return float(p.min), float(max(hi, p.min))

    def begin_episode(self, world: ShopWorld, task: Task) -> None:
        """Precompute what is static within an episode (ids, edges, static goal features)."""
        sp = self.spec
        self._task = task
        self._world_id = id(world)
        self.order_ids = [o.id for o in world.orders][: sp.max_nodes["order"]]
        self.skus = [p.sku for p in world.products][: sp.max_nodes["product"]]
        self.node_ids: dict[str, list[str]] = {
            "user": [world.user.id],
            "product": self.skus,
            "order": self.order_ids,
        }
        self.node_index = {nt: {e: i for i, e in enumerate(ids)} for nt, ids in self.node_ids.items()}
        n_p, n_o, n_g = len(self.skus), len(self.order_ids), len(task.goals)
        self._static = {}
        # Relations that depend only on node counts are built once per count (obs copies them anyway).
        cached = self._count_cache.get((n_p, n_o, n_g))
        if cached is None:
            self._edges("tool__operates__product", [(t, p) for t in self.product_tools for p in range(n_p)])
            self._edges("product__in__session", [(p, 0) for p in range(n_p)])
            self._edges("tool__depends__tool", [(int(a), int(b)) for a, b in self.tool_dep_edges.T.tolist()])
            self._edges("session__of__user", [(0, 0)])
            for nt, n in sp.max_nodes.items():
                m = np.zeros(n, dtype=np.int8)
                m[
                    : {"user": 1, "tool": self.k, "product": n_p, "order": n_o, "session": 1, "goal": n_g}[nt]
                ] = 1
                self._static[f"{nt}_mask"] = m
            for nt in self.layout.pointer_node_types:
                self._static[f"ptr_mask_{nt}"] = self._static[f"{nt}_mask"].copy()
            cached = self._count_cache[(n_p, n_o, n_g)] = dict(self._static)
        self._static.update(cached)
        gidx = task.goal_index()
        self._edges("goal__requires__goal", [(gidx[d], i) for i, g in enumerate(task.goals) for d in g.deps])
        self._edges("goal__needs__tool", [(i, self.skill_idx[g.skill]) for i, g in enumerate(task.goals)])
        pidx = self.node_index["product"]
        self._edges(
            "order__contains__product",
            [(j, pidx[s]) for j, o in enumerate(world.orders[:n_o]) for s in o.skus if s in pidx],
        )
        oidx = self.node_index["order"]
        self._edges(
            "goal__targets__order",
            [
                (i, oidx[g.args["order_id"]])
                for i, g in enumerate(task.goals)
                if g.args.get("order_id") in oidx
            ],
        )
        self._edges(
            "goal__targets__product",
            [(i, pidx[g.args["sku"]]) for i, g in enumerate(task.goals) if g.args.get("sku") in pidx],
        )
        self._edges("goal__targets__user", [(i, 0) for i, g in enumerate(task.goals) if "user_id" in g.args])
        # Static goal features.
        k, em = self.k, self.layout.enum_max
        gx = np.zeros((sp.max_nodes["goal"], sp.feat_dims["goal"]), dtype=np.float32)
        self.goal_deps_idx = [[gidx[d] for d in g.deps] for g in task.goals]
        prio = np.array([g.priority for g in task.goals], dtype=np.float32)
        for i, g in enumerate(task.goals):
            gx[i, self.skill_idx[g.skill]] = 1.0
            gx[i, k + 3] = min(1.0, prio[i] / 12.0)
            ep = self._enum_params[g.skill]
            if ep is not None and ep[0] in g.args:
                gx[i, k + 4 + ep[1].index(g.args[ep[0]])] = 1.0
            if g.numeric:
                _name, target = next(iter(g.numeric.items()))
                b = self.numeric_bound(world, g.skill, g.args)
                if b is not None:
                    share = float(np.clip((target - b[0]) / max(b[1] - b[0], 1e-9), 0.0, 1.0))
                    gx[i, k + 4 + em] = 1.0
                    gx[i, k + 5 + em] = share
                    gx[i, k + 6 + em] = 0.5 * (numeric_action(share) / NUMERIC_BOUND + 1.0)  # in [0, 1]
        self._goal_static = gx
        self.goal_prereq = np.zeros((max(n_g, 1), max(n_g, 1)), dtype=bool)
        for i, ds in enumerate(self.goal_deps_idx):
            self.goal_prereq[i, ds] = True
        u = world.user
        dev = [float(u.device == d) for d in DEVICES]
        self._user_static = [
            self.qm.scalar("user_level", u.level),
            self.qm.scalar("complaint_rate", u.complaint_rate),
            *dev,
        ]
        self.targeted_orders = {g.args["order_id"] for g in task.goals if "order_id" in g.args}
        self.targeted_skus = {g.args["sku"] for g in task.goals if "sku" in g.args}

    def goal_ready(self, state: EpisodeState) -> np.ndarray:
        """(num_goals,) bool: pending goals whose prerequisites are all done."""
        done = state.goal_done
        n = len(done)
        return ~done & ~(self.goal_prereq[:n, :n] & ~done[None, :]).any(axis=1)

    # ------------------------------------------------------------------ build
    def build(
        self,
        world: ShopWorld,
        task: Task,
        state: EpisodeState,
        sla_stats: dict[str, Any] | dict[str, np.ndarray],
        skill_mask: np.ndarray | None = None,
        proto_mask: np.ndarray | None = None,
    ) -> dict[str, np.ndarray]:
        """The observation.

        Args:
            world: the shop world now.
            task: the episode's task.
            state: the episode state.
            sla_stats: ``executor.sla_stats()`` or its :func:`sla_arrays` form.
            skill_mask: (K,) int8 mask; computed with a default :class:`MaskComputer` when None.
            proto_mask: (P,) int8, required in prototype mode.

        Returns:
            A dict matching ``observation_space(spec, layout)``; every array is freshly allocated.
        """
        if self._task is not task or self._world_id != id(world):
            self.begin_episode(world, task)
        if isinstance(sla_stats.get("p50"), np.ndarray):
            sla: dict[str, np.ndarray] = sla_stats  # type: ignore[assignment]
        else:
            sla = sla_arrays(sla_stats, self.skills)
        if skill_mask is None:
            if self._default_masks is None:
                self._default_masks = MaskComputer(self._domain_contracts)
            skill_mask = self._default_masks.compute(world, state, sla, now=0.0)[0]
        sp, qm, k = self.spec, self.qm, self.k
        obs: dict[str, np.ndarray] = {key: v.copy() for key, v in self._static.items()}
        # user (level, complaint rate and device do not change within an episode)
        u = world.user
        ux = np.array(
            [
                [
                    *self._user_static[:2],
                    float(u.verified),
                    *self._user_static[2:],
                    qm.scalar("balance", u.balance),
                    min(1.0, len(u.coupons) / 5.0),
                ]
            ],
            dtype=np.float32,
        )
        obs["user_x"] = ux
        # tools. Latencies are rounded to whole ms so that sub-ms noise never reaches features.
        tx = self.tool_static.copy()
        lat = qm("latency_ms", np.rint(np.concatenate((sla["p50"], sla["p95"]))))
        er = qm("error_rate", np.concatenate((sla["error_rate"], sla["attempt_error_rate"])))
        tx[:, k] = lat[:k]
        tx[:, k + 1] = lat[k:]
        tx[:, k + 2] = er[:k]
        tx[:, k + 3] = er[k:]
        tx[:, k + 4] = sla["open"]
        tx[:, k + 5] = sla["half_open"]
        tx[:, k + 8] = 1 - skill_mask
        tx[:, k + 9] = np.minimum(state.calls, 5) / 5.0
        obs["tool_x"] = tx
        # products (rows built as Python lists, then one array conversion)
        px = np.zeros((sp.max_nodes["product"], sp.feat_dims["product"]), dtype=np.float32)
        prods = world.products[: sp.max_nodes["product"]]
        if prods:
            n = len(prods)
            checked, targeted = world.session.checked, self.targeted_skus
            rows = []
            for p in prods:
                r = self._cat_rows[p.category] + [0.0, float(p.stock > 0)] + self._band_rows[p.price_band]
                r += [0.0, float(p.sku in checked), float(p.sku in targeted)]
                rows.append(r)
            px[:n] = rows
            nc = len(CATEGORIES)
            px[:n, nc] = qm("stock", [p.stock for p in prods])
            px[:n, nc + 5] = qm("price", [p.price for p in prods])
        obs["product_x"] = px
        # orders
        ox = np.zeros((sp.max_nodes["order"], sp.feat_dims["order"]), dtype=np.float32)
        orders = world.orders[: sp.max_nodes["order"]]
        if orders:
            n = len(orders)
            ns, nt = len(ORDER_STATUSES), len(TRACKING_STATES)
            rows = []
            for o in orders:
                r = self._status_rows[o.status] + [0.0, o.refunded / o.total if o.total > 0 else 0.0]
                r += self._tracking_rows[o.tracking]
                r += [
                    0.0,
                    float(o.express_ticket is not None),
                    float(o.waybill is not None),
                    float(o.erp_dirty),
                    float(o.address == u.address),
                    float(o.id in self.targeted_orders),
                ]
                rows.append(r)
            ox[:n] = rows
            ox[:n, ns] = qm("order_total", [o.total for o in orders])
            ox[:n, ns + 2 + nt] = qm("days_late", [o.days_late for o in orders])
        obs["order_x"] = ox
        # session
        bud = max(state.budget, 1)
        obs["session_x"] = np.array(
            [
                [
                    min(1.0, state.step / bud),
                    max(0.0, (bud - state.step) / bud),
                    np.count_nonzero(state.goal_done) / state.num_goals if state.num_goals else 1.0,
                    float(state.last_ok),
                    float(state.last_failed),
                    min(1.0, state.consecutive_failures / 5.0),
                ]
            ],
            dtype=np.float32,
        )
        # goals
        gx = self._goal_static.copy()
        n = state.num_goals
        ready = self.goal_ready(state)
        gx[:n, k] = ~state.goal_done & ~ready
        gx[:n, k + 1] = ready
        gx[:n, k + 2] = state.goal_done
        obs["goal_x"] = gx
        # user → tool: tools used this episode
        r_ei = np.zeros((2, 13), dtype=np.int64)
        r_m = np.zeros(13, dtype=np.int8)
        used = np.flatnonzero(state.calls > 0)[:13]
        r_ei[1, : len(used)] = used
        r_m[: len(used)] = 1
        obs["user__uses__tool_ei"], obs["user__uses__tool_mask"] = r_ei, r_m
        obs["skill_mask"] = skill_mask.astype(np.int8, copy=True)
        obs["reflection"] = state.reflection.astype(np.float32, copy=True)
        if self.layout.num_prototypes:
            pm = proto_mask if proto_mask is not None else np.ones(self.layout.num_prototypes, dtype=np.int8)
            obs["proto_mask"] = pm.astype(np.int8, copy=True)
        return obs


def main() -> None:  # pragma: no cover - maintenance entry point
    """Refit the shipped quantiles: ``python -m agentic_ray.envs.ecommerce``."""
    t0 = time.perf_counter()
    qm = fit_quantiles()
    print(f"fitted {qm.names} in {time.perf_counter() - t0:.1f}s → {QUANTILES_PATH}")


if __name__ == "__main__":  # pragma: no cover
    main()

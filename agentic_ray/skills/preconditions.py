"""Business preconditions on the call history: the ONE implementation the gateway and the action mask share.

A precondition (:class:`~agentic_ray.skills.contracts.PreconditionSpec`) holds for a call when an earlier
successful, non-degraded call ``c`` exists of ``after`` (or one of ``any_of``) whose payload has the ``where``
values, whose payload field ``f`` equals the payload field ``f`` of a successful call of one of ``bind[f]``'s
skills, and which *admits* the call's constrained parameters: each ``same`` parameter equals ``c``'s parameter (or
else payload field) of that name, and for each ``belongs_to`` the owner equals ``c``'s owner and the member is
among the ids ``c``'s output ``via`` lists. One earlier call must admit them all at once.

:func:`admitted` is that definition: for one earlier call, the set of values each constrained parameter may take
(the "slot sets"). Everything else reads it:

* The gateway (:class:`~agentic_ray.skills.executor.ToolExecutor`, the skill server) calls
  :func:`precondition_status` on the concrete parameters: some matching call's slot sets hold every value.
* The env's action mask calls :func:`unconstrained_ok` (the skill mask: some matching call admits some value)
  and :func:`allowed_values` for each constrained entity argument (a pointer slot's or list slot's valid targets:
  the values some matching call admits while the precondition's other constrained arguments still have a known
  candidate that call admits). :class:`PreconditionTracker` is their incremental form.

With one constrained argument per precondition (or with a single known candidate for all but one of them, as when
one customer is identified) the per-slot mask is exact: an action the mask allows passes
:func:`precondition_status`, and every action it forbids fails it. With several arguments free at once the argument
heads choose them independently, so the per-slot mask is the projection of the joint rule (a superset); the env then
checks the chosen combination with :func:`precondition_status` before it sends the call, and a combination no
single earlier call admits is a masked action (never sent). Either way both sides read :func:`admitted`.

``same`` and ``belongs_to`` owners name entity parameters; a ``belongs_to`` member is an entity or list parameter
(every listed id must belong). Reading ``via`` needs the earlier skill's output declaration
(:meth:`~agentic_ray.skills.contracts.OutputField.entity_items`), so a contract with ``belongs_to`` is checked
with ``contracts`` (every skill by name). ``safety`` preconditions are skipped when ``enforce_safety`` is False
(``risk_mode: soft``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentic_ray.skills.contracts import EntityListParam, PreconditionSpec, SkillContract

__all__ = [
    "Call",
    "CallHistory",
    "CallRecord",
    "PreconditionTracker",
    "admitted",
    "allowed_values",
    "precondition_status",
    "unconstrained_ok",
    "unmet_precondition",
]

SlotSets = dict[str, frozenset[str]]
"""Constrained parameter -> the values one earlier call admits for it."""


@dataclass(frozen=True)
class Call:
    """One successful call in the history (degraded fallback replies are never recorded)."""

    skill: str
    params: dict[str, Any] = field(default_factory=dict)
    payload: dict[str, Any] = field(default_factory=dict)

    def value(self, name: str) -> Any:
        """The call's parameter ``name``, else its payload field of that name."""
        return self.params[name] if name in self.params else self.payload.get(name)


def _bound(pc: PreconditionSpec, c: Call, history: Sequence[Call]) -> bool:
    for fld, skills in pc.bind.items():
        v = c.payload.get(fld)
        if v is None or not any(h.skill in skills and h.payload.get(fld) == v for h in history):
            return False
    return True


def _base_match(pc: PreconditionSpec, c: Call, history: Sequence[Call]) -> bool:
    """``c`` is a call of the right skill with the ``where`` values and the ``bind`` ties (``same`` aside)."""
    return (
        c.skill in pc.skills
        and all(c.payload.get(k) == v for k, v in pc.where.items())
        and _bound(pc, c, history)
    )


def admitted(
    pc: PreconditionSpec, c: Call, contracts: Mapping[str, SkillContract] | None = None
) -> SlotSets | None:
    """The values earlier call ``c`` admits for each parameter ``pc`` constrains (``c`` already matches ``pc``'s
    skill, ``where`` and ``bind``), or None when it admits no value for one of them.

    Args:
        pc: the precondition.
        c: an earlier successful call.
        contracts: every skill by name; needed when ``pc`` has ``belongs_to`` (to read ``via``).

    Raises:
        ValueError: ``pc`` has ``belongs_to`` and ``contracts`` is None.
    """
    sets: dict[str, frozenset[str]] = {}

    def narrow(name: str, vals: Iterable[Any]) -> None:
        got = frozenset(v for v in vals if isinstance(v, str) and v)
        sets[name] = sets[name] & got if name in sets else got

    for name in pc.same:
        narrow(name, [c.value(name)])
    if pc.belongs_to:
        if contracts is None:
            raise ValueError(
                "a belongs_to precondition is read with the contracts of every skill (contracts=)"
            )
        earlier = contracts.get(c.skill)
        outs = earlier.output.fields if earlier is not None else {}
        for b in pc.belongs_to:
            narrow(b.owner, [c.value(b.owner)])
            via = outs.get(b.via)
            narrow(b.member, via.entity_ids(c.payload.get(b.via)) if via is not None else [])
    return None if any(not v for v in sets.values()) else sets


def _holds(sets: SlotSets, params: Mapping[str, Any]) -> bool:
    """Whether every constrained value of ``params`` is among the admitted ones (a list: every member)."""
    for name, ok in sets.items():
        v = params.get(name)
        vals = v if isinstance(v, list | tuple) else [v]
        if not vals or not all(x in ok for x in vals):
            return False
    return True


def _active(contract: SkillContract, enforce_safety: bool) -> list[PreconditionSpec]:
    return [pc for pc in contract.preconditions if enforce_safety or not pc.safety]


def describe(contract: SkillContract, pc: PreconditionSpec) -> str:
    """A one-line reason for an unmet precondition."""
    who = pc.after if pc.after is not None else " or ".join(pc.any_of)
    if pc.description:
        return f"{pc.description} (needs a prior {who})"
    cond = f" with {pc.where}" if pc.where else ""
    same = f" for the same {', '.join(pc.same)}" if pc.same else ""
    member = "".join(f" listing the {b.member} among the {b.owner}'s {b.via}" for b in pc.belongs_to)
    bind = f" bound to {', '.join(pc.bind)}" if pc.bind else ""
    return f"{contract.name} requires a prior successful {who}{cond}{same}{member}{bind}"


def precondition_status(
    contract: SkillContract,
    params: dict[str, Any],
    history: Sequence[Call],
    *,
    enforce_safety: bool = True,
    contracts: Mapping[str, SkillContract] | None = None,
) -> tuple[bool, str]:
    """Whether every precondition holds for a call with ``params`` (after validation).

    Args:
        contracts: every skill by name (read only by ``belongs_to`` preconditions).

    Returns:
        ``(ok, reason)``; ``reason`` names the first unmet precondition.
    """
    for pc in _active(contract, enforce_safety):
        if not any(
            _base_match(pc, c, history)
            and (sets := admitted(pc, c, contracts)) is not None
            and _holds(sets, params)
            for c in history
        ):
            return False, describe(contract, pc)
    return True, ""


def unconstrained_ok(
    contract: SkillContract,
    history: Sequence[Call],
    *,
    enforce_safety: bool = True,
    contracts: Mapping[str, SkillContract] | None = None,
) -> tuple[bool, list[str]]:
    """The skill-level part of the mask: each precondition is admitted by some matching earlier call for SOME
    value of each argument it constrains (the pointer and list masks, :func:`allowed_values`, narrow those
    arguments), or outright when it constrains none.

    Returns:
        ``(ok, reasons of the unmet preconditions)``.
    """
    reasons = [
        describe(contract, pc)
        for pc in _active(contract, enforce_safety)
        if not any(_base_match(pc, c, history) and admitted(pc, c, contracts) is not None for c in history)
    ]
    return not reasons, reasons


def _min_items(contract: SkillContract, name: str) -> int:
    p = contract.input.get(name)
    return max(1, p.min_items) if isinstance(p, EntityListParam) else 1


def _project(
    contract: SkillContract,
    param: str,
    admits: Iterable[SlotSets],
    known: Mapping[str, Sequence[str]] | None,
) -> set[str]:
    """Values of ``param`` some admitting call allows while every other constrained argument keeps enough known
    candidates that call allows (``known``: the candidates of each argument; None skips that check)."""
    out: set[str] = set()
    for sets in admits:
        if known is None or all(
            sum(v in ok for v in known.get(q, ())) >= _min_items(contract, q)
            for q, ok in sets.items()
            if q != param
        ):
            out |= sets.get(param, frozenset())
    return out


def allowed_values(
    contract: SkillContract,
    param: str,
    candidates: Iterable[str],
    history: Sequence[Call],
    *,
    enforce_safety: bool = True,
    contracts: Mapping[str, SkillContract] | None = None,
    known: Mapping[str, Sequence[str]] | None = None,
) -> list[bool]:
    """For an entity or list argument ``param``: which candidate ids every precondition constraining it admits
    (all True when none does), as the projection of the joint rule (see the module docstring).

    Args:
        known: the known candidates of each constrained argument of the skill (the mask's node order); a value is
            then allowed only if the precondition's other arguments keep a known candidate the same earlier call
            admits. None skips that check.
    """
    cands = list(candidates)
    rules = [pc for pc in _active(contract, enforce_safety) if param in pc.constrained]
    if not rules:
        return [True] * len(cands)
    ok_values = [
        _project(
            contract,
            param,
            (
                sets
                for c in history
                if _base_match(pc, c, history) and (sets := admitted(pc, c, contracts)) is not None
            ),
            known,
        )
        for pc in rules
    ]
    return [all(v in vals for vals in ok_values) for v in cands]


class PreconditionTracker:
    """Incremental form of :func:`unconstrained_ok` / :func:`allowed_values` for one call history (the mask
    reads it every step; rescanning the history per skill and step cost ~0.2 ms on e-commerce).

    For each precondition it keeps the slot sets (:func:`admitted`) of the calls that match it otherwise (or
    whether any call matches, when it constrains nothing). :meth:`add` updates only the preconditions the new
    call can satisfy, and rescans the ones whose ``bind`` names the new call's skill (a tie can complete later).
    Results equal the pure functions' (tested against them on random histories).

    Args:
        contracts: the skills, in layout order (every skill: ``belongs_to`` reads earlier skills' outputs).
        enforce_safety: False lifts ``safety`` preconditions.
    """

    def __init__(self, contracts: Sequence[SkillContract], *, enforce_safety: bool = True) -> None:
        self.contracts = list(contracts)
        self.by_name = {c.name: c for c in self.contracts}
        self.rules: list[list[PreconditionSpec]] = [_active(c, enforce_safety) for c in self.contracts]
        self.by_skill: dict[str, list[tuple[int, int]]] = {}
        self.by_bind: dict[str, list[tuple[int, int]]] = {}
        for i, rules in enumerate(self.rules):
            for j, pc in enumerate(rules):
                for s in pc.skills:
                    self.by_skill.setdefault(s, []).append((i, j))
                for skills in pc.bind.values():
                    for s in skills:
                        self.by_bind.setdefault(s, []).append((i, j))
        self.reasons: list[list[str]] = [
            [describe(c, pc) for pc in rules] for c, rules in zip(self.contracts, self.rules, strict=True)
        ]
        self._constrains: dict[tuple[int, str], list[int]] = {}
        for i, rules in enumerate(self.rules):
            for j, pc in enumerate(rules):
                for p in pc.constrained:
                    self._constrains.setdefault((i, p), []).append(j)
        self.joint: list[bool] = [any(len(pc.constrained) > 1 for pc in rules) for rules in self.rules]
        """Per skill: a precondition constrains several arguments (the env checks the chosen combination)."""
        self.history: list[Call] = []
        self._n_rules = [len(rules) for rules in self.rules]
        self.reset()

    def reset(self, history: Sequence[Call] = ()) -> None:
        """Start over (a new episode), optionally from an existing history."""
        self.history = []
        # From the rule counts, empty skills without an inner comprehension: ~2.5 of ~7.5 us per reset.
        self.admits: list[list[list[SlotSets]]] = [[[] for _ in range(n)] if n else [] for n in self._n_rules]
        self.any: list[list[bool]] = [[False] * n for n in self._n_rules]
        for c in history:
            self.add(c)

    def _update(self, i: int, j: int, c: Call) -> None:
        pc = self.rules[i][j]
        if _base_match(pc, c, self.history):
            sets = admitted(pc, c, self.by_name)
            if sets is not None:
                self.any[i][j] = True
                if sets and sets not in self.admits[i][j]:
                    self.admits[i][j].append(sets)

    def add(self, call: Call) -> None:
        """Record one more successful call."""
        self.history.append(call)
        for i, j in self.by_skill.get(call.skill, ()):
            self._update(i, j, call)
        for i, j in self.by_bind.get(call.skill, ()):
            self.admits[i][j], self.any[i][j] = [], False
            for c in self.history:
                self._update(i, j, c)

    def skill_ok(self, i: int) -> tuple[bool, list[str]]:
        """:func:`unconstrained_ok` of skill ``i``."""
        why = [r for r, ok in zip(self.reasons[i], self.any[i], strict=True) if not ok]
        return not why, why

    def allowed(
        self, i: int, param: str, candidates: Sequence[str], known: Mapping[str, Sequence[str]] | None = None
    ) -> list[bool] | None:
        """:func:`allowed_values` of skill ``i``'s ``param``, or None when no precondition constrains it."""
        js = self._constrains.get((i, param))
        if js is None:
            return None
        c = self.contracts[i]
        sets = [_project(c, param, self.admits[i][j], known) for j in js]
        if len(sets) == 1:
            one = sets[0]
            return [v in one for v in candidates]
        return [all(v in s for s in sets) for v in candidates]


CallRecord = Call
"""The history entry the gateway and the skill server store (a real, non-degraded success)."""


def unmet_precondition(
    contract: SkillContract,
    params: Mapping[str, Any],
    history: Sequence[Call],
    *,
    enforce_safety: bool = True,
    contracts: Mapping[str, SkillContract] | None = None,
) -> str | None:
    """Why ``contract``'s preconditions do not hold for a call with ``params`` (None when they all hold): the
    gateway's and the skill server's form of :func:`precondition_status`."""
    ok, why = precondition_status(
        contract, dict(params), history, enforce_safety=enforce_safety, contracts=contracts
    )
    return None if ok else why


class CallHistory:
    """Real successes by key (an intent id, or ``(world_id, intent_id)`` on the server), bounded both ways.

    Only real successes belong in a history: a degraded reply (a fallback rule's canned answer, another skill's
    substitute answer) never satisfies a precondition, so callers record only the skill that actually ran, with
    its own parameters and payload.

    Args:
        max_keys: how many keys' histories to keep; the least recently used is dropped first.
        max_records: records kept per key (the oldest go first), so a long-lived key, e.g. direct calls to a
            server without an intent id, cannot grow without bound.
    """

    def __init__(self, max_keys: int = 10_000, max_records: int = 1_000) -> None:
        self.max_keys = max_keys
        self.max_records = max_records
        self._d: OrderedDict[Hashable, deque[Call]] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, key: Hashable, rec: Call) -> None:
        with self._lock:
            h = self._d.get(key)
            if h is None:
                h = self._d[key] = deque(maxlen=self.max_records)
            h.append(rec)
            self._d.move_to_end(key)
            while len(self._d) > self.max_keys:
                self._d.popitem(last=False)

    def get(self, key: Hashable) -> list[Call]:
        """A snapshot of the key's records (empty when unknown)."""
        with self._lock:
            return list(self._d.get(key, ()))

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._d.pop(key, None)

    def forget_where(self, pred: Any) -> None:
        """Drop every key for which ``pred(key)`` is true (e.g. all intents of a deleted world)."""
        with self._lock:
            for k in [k for k in self._d if pred(k)]:
                del self._d[k]

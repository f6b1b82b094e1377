"""Structured actions <-> concrete tool calls, and prototype grounding.

:class:`ActionCodec` maps an action of the layout's ``Dict`` space (see :mod:`agentic_ray.graph_spec`) to
``(skill, params)`` and back, reading only what the agent knows: a pointer index is a node of the observation (an
entity the request or a lookup revealed), a list is the node indices before its end marker, in their order (a
set's in increasing node order), a copied numeric value is a revealed field, a string argument is copied from the
request's facts (the value at the position of its enum slot when the fact may hold several,
``StringParam.max_values``) or from a revealed field of the entity its pointer slot chooses
(``source: <type>.<field>``). Decoding never raises: a malformed action is an ``INVALID_INPUT`` step.

Prototype mode (a ``Dict`` over :meth:`~agentic_ray.graph_spec.ActionLayout.prototype_layout`): the policy picks a
prototype and, among the revealed entities, the targets of its skill's entity arguments;
:meth:`ActionCodec.ground_prototype` completes the structured action with what the prototype fixes (its enum
values, and its numeric rule: copy the prototype's source field of the entity the policy chose, or a share of the
bounds). A prototype fixes the tool and the parameter constraints, never the answer: nothing here reads the
task's goals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from agentic_ray.domains.knowledge import Knowledge
from agentic_ray.domains.protocol import Task
from agentic_ray.envs.observation import ObservationBuilder
from agentic_ray.graph_spec import NUMERIC_BOUND, ActionLayout, GraphSpec, numeric_action
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

__all__ = ["ActionCodec", "ParamSlot", "Prototype", "free_numeric_action"]


def free_numeric_action(value: float, lo: float, hi: float, integer: bool) -> float:
    """The raw action that decodes to a free numeric ``value`` in ``[lo, hi]`` (the inverse of the decoder's
    ``lo + (hi - lo)(tanh(x) + 1)/2``, rounded for an integer).

    A float: :func:`~agentic_ray.graph_spec.numeric_action` of its share of the range. An integer: the middle, in
    raw space, of the raw values that round to it. Inside the range that is the float's value within a hundredth
    of a unit; at a bound it keeps the target off the Box's clip. ``max_detections = 10`` of ``[1, 10]`` (every
    inspection expert call) encoded as ``arctanh(1)`` was raw 5.0, 12.5 nats for an initial unit Gaussian, where
    any raw above 1.42 decodes to 10; the middle, 3.2, is the same value under more of the policy's noise
    (measured on 40 inspection demonstrations: first-epoch imitation NLL 31.0 -> 17.5, sixth 4.8 -> 4.1). The
    bound's end of that interval is now :data:`~agentic_ray.graph_spec.NUMERIC_TARGET_BOUND` (about 3.45, not 5),
    so the middle is about 2.44.
    """
    if hi <= lo:
        return 0.0
    if not integer:
        return numeric_action((value - lo) / (hi - lo))
    below = numeric_action((max(lo, value - 0.5) - lo) / (hi - lo))
    above = numeric_action((min(hi, value + 0.5) - lo) / (hi - lo))
    return (below + above) / 2.0


@dataclass(frozen=True)
class ParamSlot:
    """One contract parameter and the action slot it is read from."""

    name: str
    kind: str  # pointer | copy (a pointer slot) | list | enum | numeric | fact (an enum slot, or -1) | fixed
    slot: int
    spec: Any


@dataclass(frozen=True)
class Prototype:
    """An action prototype (mined from expert steps, see :mod:`agentic_ray.envs.prototypes`).

    Attributes:
        skill: skill name.
        enum: enum slot values (one per enum slot of the skill).
        source_field: ``(node type, field)`` a numeric argument copies from, or None for a free value.
        numeric_frac: a free numeric argument as a share of its bound range.
        support: expert steps in the cluster.
    """

    skill: str
    enum: tuple[int, ...]
    source_field: tuple[str, str] | None = None
    numeric_frac: float = 0.5
    support: int = 0


def _choices(p: Any) -> list[Any]:
    return p.choices if isinstance(p, EnumParam) else [False, True]


class ActionCodec:
    """Decodes and encodes structured actions for one env (it reads the builder's current node order).

    Args:
        contracts: the domain's contracts (layout order).
        layout: the action layout.
        spec: the graph spec (copy sources).
        builder: the observation builder (node order, revealed source values).
    """

    def __init__(
        self, contracts: DomainContracts, layout: ActionLayout, spec: GraphSpec, builder: ObservationBuilder
    ) -> None:
        self.layout, self.spec, self.builder = layout, spec, builder
        self.contracts = contracts.skills
        self.skills = tuple(c.name for c in contracts.skills)
        self.params: list[list[ParamSlot]] = []
        for c in contracts.skills:
            row: list[ParamSlot] = []
            n = {"pointer": 0, "list": 0, "enum": 0, "numeric": 0}
            for name, p in c.input.items():
                if isinstance(p, EntityParam):
                    kind = "pointer"
                elif isinstance(p, EntityListParam):
                    kind = "list"
                elif isinstance(p, EnumParam | BoolParam):
                    kind = "enum"
                elif isinstance(p, FloatParam | IntParam):
                    kind = "numeric"
                elif isinstance(p, StringParam) and p.copy_field is not None:
                    row.append(ParamSlot(name, "copy", n["pointer"], p))
                    n["pointer"] += 1
                    continue
                elif isinstance(p, StringParam) and p.request_fact is not None:
                    row.append(ParamSlot(name, "fact", n["enum"] if p.max_values > 1 else -1, p))
                    n["enum"] += int(p.max_values > 1)
                    continue
                else:
                    row.append(ParamSlot(name, "fixed", -1, p))
                    continue
                row.append(ParamSlot(name, kind, n[kind], p))
                n[kind] += 1
            self.params.append(row)
        self._sources = spec.source_table()

    # ------------------------------------------------------------------ bounds
    def bounds(self, knowledge: Knowledge, params: dict[str, Any], p: Any, skill: int) -> tuple[float, float]:
        """``(low, high)`` of a numeric argument; ``max_from`` is resolved from a known field of an entity the
        call refers to (an order's total), else the contract bound."""
        lo, hi = float(p.min), float(p.max)
        if isinstance(p, FloatParam) and p.max_from is not None:
            for ps in self.params[skill]:
                if ps.kind == "pointer" and ps.name in params:
                    v = knowledge.fields(ps.spec.node_type, params[ps.name]).get(p.max_from)
                    if isinstance(v, int | float) and not isinstance(v, bool):
                        hi = min(hi, float(v))
        return lo, max(hi, lo)

    # ------------------------------------------------------------------ decode
    def decode(
        self, action: Any, task: Task, knowledge: Knowledge
    ) -> tuple[int, dict[str, Any], str | None, str]:
        """Structured action -> ``(skill index, params, error code or None, message)``; never raises."""
        lay, b = self.layout, self.builder
        mp = lay.max_pointer
        try:
            k = int(action["skill"])
            ptr = np.asarray(action.get("pointer", ()), dtype=np.int64).reshape(-1)
            mem = np.asarray(action.get("members", ()), dtype=np.int64).reshape(-1)
            enm = np.asarray(action.get("enum", ()), dtype=np.int64).reshape(-1)
            src = np.asarray(action.get("source", ()), dtype=np.int64).reshape(-1)
            num = np.asarray(action.get("numeric", ()), dtype=np.float64).reshape(-1)
        except (TypeError, ValueError, KeyError, AttributeError) as e:
            return -1, {}, "INVALID_INPUT", f"malformed action: {type(e).__name__}: {e}"
        if not 0 <= k < len(self.skills):
            return -1, {}, "INVALID_INPUT", f"skill {k} out of range"
        params: dict[str, Any] = {}
        numeric: list[ParamSlot] = []
        for ps in self.params[k]:
            p = ps.spec
            if ps.kind == "pointer":
                if ps.slot >= len(ptr):
                    return k, params, "INVALID_INPUT", f"{ps.name}: missing pointer slot {ps.slot}"
                j = int(ptr[ps.slot])
                ids = b.node_ids[p.node_type]
                if j == mp and not p.required:
                    continue
                if not 0 <= j < len(ids):
                    return k, params, "INVALID_INPUT", f"{ps.name}: pointer {j} is not a known {p.node_type}"
                params[ps.name] = ids[j]
            elif ps.kind == "list":
                t = lay.list_length
                row = mem[ps.slot * t : (ps.slot + 1) * t] if len(mem) >= (ps.slot + 1) * t else None
                if row is None:
                    return k, params, "INVALID_INPUT", f"{ps.name}: missing members slot {ps.slot}"
                ids = b.node_ids[p.node_type]
                ends = np.flatnonzero(row == mp)
                chosen = row[: ends[0] if len(ends) else t]  # the members before the end marker
                if any(not 0 <= j < len(ids) for j in chosen):
                    return k, params, "INVALID_INPUT", f"{ps.name}: a member is not a known {p.node_type}"
                if p.unique and len(set(chosen.tolist())) != len(chosen):
                    return k, params, "INVALID_INPUT", f"{ps.name}: a member is listed twice"
                if not p.min_items <= len(chosen) <= p.max_items:
                    return (
                        k,
                        params,
                        "INVALID_INPUT",
                        f"{ps.name}: {len(chosen)} members, expected {p.min_items}..{p.max_items}",
                    )
                params[ps.name] = [ids[j] for j in chosen]
            elif ps.kind == "enum":
                ch = _choices(p)
                if ps.slot >= len(enm) or not 0 <= int(enm[ps.slot]) < len(ch):
                    return k, params, "INVALID_INPUT", f"{ps.name}: enum choice out of range"
                params[ps.name] = ch[int(enm[ps.slot])]
            elif ps.kind == "fact":
                fact = p.request_fact
                values = task.request.values(fact)
                if not values:
                    return k, params, "INVALID_INPUT", f"{ps.name}: the request gives no {fact}"
                i = int(enm[ps.slot]) if 0 <= ps.slot < len(enm) else 0
                if ps.slot < 0 and len(values) > 1:
                    return (
                        k,
                        params,
                        "INVALID_INPUT",
                        f"{ps.name}: the request gives {len(values)} values for {fact}, the argument takes one "
                        "(max_values: 1)",
                    )
                if not 0 <= i < len(values):
                    return k, params, "INVALID_INPUT", f"{ps.name}: the request gives no {fact} #{i + 1}"
                params[ps.name] = values[i]
            elif ps.kind == "copy":
                t, fld = p.copy_field
                j = int(ptr[ps.slot]) if ps.slot < len(ptr) else -1
                ids = b.node_ids[t]
                if j == mp and not p.required:
                    continue
                v = knowledge.fields(t, ids[j]).get(fld) if 0 <= j < len(ids) else None
                if not isinstance(v, str):
                    return (
                        k,
                        params,
                        "INVALID_INPUT",
                        f"{ps.name}: pointer {j} is no {t} with a revealed {fld}",
                    )
                params[ps.name] = v
            elif ps.kind == "numeric":
                numeric.append(ps)
        for ps in numeric:
            p = ps.spec
            s = int(src[ps.slot]) if ps.slot < len(src) else 0
            if s > 0:
                v = b.source_value(knowledge, s - 1) if s - 1 < len(self._sources) else None
                if v is None:
                    return (
                        k,
                        params,
                        "INVALID_INPUT",
                        f"{ps.name}: copy source {s - 1} is not a revealed value",
                    )
            else:
                if ps.slot >= len(num) or not np.isfinite(num[ps.slot]):
                    return (
                        k,
                        params,
                        "INVALID_INPUT",
                        f"{ps.name}: numeric slot {ps.slot} missing or not finite",
                    )
                x = float(num[ps.slot])
                x = max(-NUMERIC_BOUND, min(NUMERIC_BOUND, x))
                lo, hi = self.bounds(knowledge, params, p, k)
                v = lo + (hi - lo) * (math.tanh(x) + 1.0) / 2.0
            params[ps.name] = round(v) if isinstance(p, IntParam) else round(v, 4)
        return k, params, None, ""

    def raw_clipped(self, action: Any) -> list[str]:
        """Warnings for raw numeric values outside ``[-NUMERIC_BOUND, NUMERIC_BOUND]`` (clipped when decoded)."""
        try:
            num = np.asarray(action.get("numeric", ()), dtype=np.float64).reshape(-1)
        except (TypeError, ValueError, AttributeError):
            return []
        # Over Python floats: the same test and text as over the array, without making NumPy scalars.
        return [
            f"numeric slot {i}: raw {x:g} clipped to ±{NUMERIC_BOUND:g}"
            for i, x in enumerate(num.tolist())
            if abs(x) > NUMERIC_BOUND
        ]

    # ------------------------------------------------------------------ encode
    def encode(self, skill: str, params: dict[str, Any], knowledge: Knowledge) -> dict[str, np.ndarray | int]:
        """Concrete ``(skill, params)`` -> a structured action (the inverse of :meth:`decode`).

        A numeric value equal to a revealed copy source is encoded as that copy (the first such source); any
        other value as a free value.

        Raises:
            KeyError: an entity argument names an entity the agent does not know.
        """
        lay, _b = self.layout, self.builder
        k = self.skills.index(skill)
        mp, t = lay.max_pointer, lay.list_length
        ptr = np.full(lay.pointer_slots, 0, dtype=np.int64)
        mem = np.full(lay.list_slots * t, mp, dtype=np.int64)
        enm = np.zeros(lay.enum_slots, dtype=np.int64)
        src = np.zeros(lay.numeric_slots, dtype=np.int64)
        num = np.zeros(lay.numeric_slots, dtype=np.float32)
        for ps in self.params[k]:
            p = ps.spec
            if ps.kind == "pointer":
                v = params.get(ps.name)
                if v is None:  # left out: "omitted" when optional, else slot 0 (decoding then checks it)
                    ptr[ps.slot] = 0 if p.required else mp
                else:
                    ptr[ps.slot] = self._node(p.node_type, v)
            elif ps.kind == "list":
                idx = [self._node(p.node_type, v) for v in params.get(ps.name) or []]
                if not lay.skills[k].is_sequence(ps.slot):
                    idx = sorted(
                        idx
                    )  # a set is listed in increasing node order (its distribution's canonical form)
                if len(idx) > t:
                    raise ValueError(f"{skill}.{ps.name}: {len(idx)} members, the action holds at most {t}")
                mem[ps.slot * t : ps.slot * t + len(idx)] = idx
            elif ps.kind == "enum":
                ch = _choices(p)
                v = params.get(ps.name, ch[0])
                enm[ps.slot] = ch.index(v) if v in ch else 0
            elif ps.kind == "fact" and ps.slot >= 0:
                values = self._task_values(p.request_fact)
                v = params.get(ps.name)
                enm[ps.slot] = values.index(v) if v in values else 0
            elif ps.kind == "copy":
                v = params.get(ps.name)
                ptr[ps.slot] = (
                    mp if v is None and not p.required else self._copy_node(p.copy_field, v, knowledge)
                )
            elif ps.kind == "numeric":
                v = float(params.get(ps.name, p.min))
                c = self.preferred_source(knowledge, v, p)
                if c is not None:
                    src[ps.slot] = c + 1
                else:
                    lo, hi = self.bounds(knowledge, params, p, k)
                    num[ps.slot] = free_numeric_action(v, lo, hi, isinstance(p, IntParam))
        return {"skill": k, "pointer": ptr, "members": mem, "enum": enm, "source": src, "numeric": num}

    def _task_values(self, fact: str) -> tuple[str, ...]:
        """The values the current episode's request gives for ``fact`` (a fact slot's choices)."""
        task = self.builder.task
        return task.request.values(fact) if task is not None else ()

    def _copy_node(self, field: tuple[str, str], value: Any, knowledge: Knowledge) -> int:
        """The first node (observation order) of type ``field[0]`` whose revealed ``field[1]`` equals ``value``."""
        t, f = field
        for j, eid in enumerate(self.builder.node_ids[t]):
            if knowledge.fields(t, eid).get(f) == value:
                return j
        raise KeyError(f"no known {t} has a revealed {f} equal to {value!r} (no lookup revealed it)")

    def _node(self, node_type: str, entity_id: Any) -> int:
        j = self.builder.node_index[node_type].get(str(entity_id))
        if j is None:
            raise KeyError(f"{node_type} {entity_id!r} is not known to the agent (no lookup revealed it)")
        return j

    def preferred_source(self, knowledge: Knowledge, value: float, p: Any) -> int | None:
        """The copy source a demonstration uses for ``value``: one of the parameter's ``copy_from`` fields when
        one holds it, else the first revealed source that does."""
        for ref in getattr(p, "copy_from", ()):
            t, _, f = ref.partition(".")
            c = self.find_source(knowledge, value, (t, f))
            if c is not None:
                return c
        return self.find_source(knowledge, value)

    def find_source(
        self, knowledge: Knowledge, value: float, field: tuple[str, str] | None = None
    ) -> int | None:
        """The first revealed copy source equal to ``value`` (of ``field`` when given), or None."""
        for c, (j, _i) in enumerate(self._sources):
            s = self.spec.numeric_sources[j]
            if field is not None and (s.node_type, s.field) != field:
                continue
            v = self.builder.source_value(knowledge, c)
            if v is not None and abs(v - value) <= 1e-6:
                return c
        return None

    def source_field(self, c: int) -> tuple[str, str]:
        s = self.spec.numeric_sources[self._sources[c][0]]
        return s.node_type, s.field

    # ------------------------------------------------------------------ prototypes
    def enum_signature(self, k: int, params: dict[str, Any]) -> tuple[int, ...]:
        out = []
        for ps in self.params[k]:
            if ps.kind == "enum":
                ch = _choices(ps.spec)
                v = params.get(ps.name, ch[0])
                out.append(ch.index(v) if v in ch else 0)
            elif ps.kind == "fact" and ps.slot >= 0:
                values = self._task_values(ps.spec.request_fact)
                v = params.get(ps.name)
                out.append(values.index(v) if v in values else 0)
        return tuple(out)

    def ground_prototype(
        self, proto: Prototype, action: Any, knowledge: Knowledge
    ) -> dict[str, np.ndarray | int]:
        """A prototype-mode action -> the structured action of the prototype's skill.

        Args:
            proto: the chosen prototype.
            action: the prototype-mode action (its ``pointer`` and ``members`` hold the policy's entity choices
                for the prototype's skill; shorter than the structured slots, padded here).
            knowledge: what is known (numeric copy sources).

        Returns:
            The structured action: the policy's entity arguments, the prototype's enum values, and its numeric
            rule (copy the prototype's source field of the entity a pointer of that type chose; else the first
            revealed source of that field; else the prototype's share of the argument's bounds).
        """
        lay = self.layout
        k = self.skills.index(proto.skill)
        mp = lay.max_pointer
        ptr = np.zeros(lay.pointer_slots, dtype=np.int64)
        mem = np.zeros(lay.list_slots * mp, dtype=np.int8)
        got_ptr = np.asarray(action.get("pointer", ()), dtype=np.int64).reshape(-1)[: lay.pointer_slots]
        got_mem = np.asarray(action.get("members", ()), dtype=np.int8).reshape(-1)[: lay.list_slots * mp]
        ptr[: len(got_ptr)] = got_ptr
        mem[: len(got_mem)] = got_mem
        enm = np.zeros(lay.enum_slots, dtype=np.int64)
        enm[: len(proto.enum)] = proto.enum[: lay.enum_slots]
        src = np.zeros(lay.numeric_slots, dtype=np.int64)
        num = np.zeros(lay.numeric_slots, dtype=np.float32)
        for ps in self.params[k]:
            if ps.kind != "numeric":
                continue
            c = None
            if proto.source_field is not None:
                t, f = proto.source_field
                for q in self.params[k]:
                    if q.kind != "pointer" or q.spec.node_type != t:
                        continue
                    ids = self.builder.node_ids[t]
                    j = int(ptr[q.slot])
                    v = knowledge.fields(t, ids[j]).get(f) if 0 <= j < len(ids) else None
                    if isinstance(v, int | float) and not isinstance(v, bool):
                        c = self.find_source(knowledge, float(v), proto.source_field)
                if c is None:
                    c = next(
                        (
                            j
                            for j in range(len(self._sources))
                            if self.source_field(j) == proto.source_field
                            and self.builder.source_value(knowledge, j) is not None
                        ),
                        None,
                    )
            if c is not None:
                src[ps.slot] = c + 1
            else:
                num[ps.slot] = numeric_action(proto.numeric_frac)
        return {"skill": k, "pointer": ptr, "members": mem, "enum": enm, "source": src, "numeric": num}

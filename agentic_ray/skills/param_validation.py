"""Check call parameters against a contract: clip numbers into bounds, reject everything else.

Hand-written rather than a per-skill pydantic model because of *clipping*: an out-of-range number is not an
error here (seed 000: a confidence of 1.2 crashed a detector; the fix was clip + warn at the SDK boundary), and
because the gateway budget is tens of microseconds per call.
"""

from __future__ import annotations

import math
from typing import Any

from agentic_ray.skills.contracts import (
    BoolParam,
    EntityListParam,
    EntityParam,
    EnumParam,
    FloatParam,
    IntParam,
    SkillContract,
    StringParam,
)


class InvalidParams(ValueError):
    """A wrong type, a missing required field, an unknown field or an unknown enum value."""


def validate_params(
    contract: SkillContract, params: Any, strict: bool = False, partial: bool = False
) -> tuple[dict[str, Any], list[str]]:
    """Validate ``params`` against ``contract.input``.

    Args:
        contract: the skill's contract.
        params: the call's parameters.
        strict: for values a client asserts rather than a call the gateway executes (the Serve endpoint's goals
            and transcripts): a number outside the bounds is an error naming them instead of being clipped.
        partial: check only the parameters given (no missing-parameter error, no defaults filled).

    Returns:
        (clean params with defaults filled and numbers clipped, warnings about clipping).

    Raises:
        InvalidParams: the call must be answered with ``INVALID_INPUT``.
    """
    if not isinstance(params, dict):
        raise InvalidParams(f"params must be an object, got {type(params).__name__}")
    spec = contract.input
    unknown = [k for k in params if k not in spec]
    if unknown:
        raise InvalidParams(f"unknown parameter(s) {sorted(map(str, unknown))}")
    out: dict[str, Any] = {}
    warnings: list[str] = []
    for name, p in spec.items():
        if name not in params or params[name] is None:
            if partial:
                continue
            if p.default is not None:
                out[name] = p.default
                continue
            if p.required:
                raise InvalidParams(f"missing required parameter {name!r}")
            continue
        v = params[name]
        if isinstance(p, FloatParam):
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise InvalidParams(f"{name}: expected a finite number, got {v!r}")
            v = float(v)
            if strict and not p.min <= v <= p.max:
                raise InvalidParams(f"{name}: {v:g} is outside the contract's bounds [{p.min:g}, {p.max:g}]")
            if v < p.min or v > p.max:
                c = min(max(v, p.min), p.max)
                warnings.append(f"{name}={v:g} clipped to {c:g} (bounds [{p.min:g}, {p.max:g}])")
                v = c
        elif isinstance(p, IntParam):
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise InvalidParams(f"{name}: expected an integer, got {v!r}")
            if isinstance(v, float):
                if not math.isfinite(v) or v != int(v):
                    raise InvalidParams(f"{name}: expected an integer, got {v!r}")
                v = int(v)
            if strict and not p.min <= v <= p.max:
                raise InvalidParams(f"{name}: {v} is outside the contract's bounds [{p.min}, {p.max}]")
            if v < p.min or v > p.max:
                c = min(max(v, p.min), p.max)
                warnings.append(f"{name}={v} clipped to {c} (bounds [{p.min}, {p.max}])")
                v = c
        elif isinstance(p, EnumParam):
            if not isinstance(v, str) or v not in p.choices:
                raise InvalidParams(f"{name}: {v!r} is not one of {p.choices}")
        elif isinstance(p, BoolParam):
            if not isinstance(v, bool):
                raise InvalidParams(f"{name}: expected a boolean, got {v!r}")
        elif isinstance(p, StringParam):
            if not isinstance(v, str) or len(v) > p.max_length:
                raise InvalidParams(f"{name}: expected a string of at most {p.max_length} characters")
        elif isinstance(p, EntityParam):
            if not isinstance(v, str) or not v:
                raise InvalidParams(f"{name}: expected a {p.node_type} id (non-empty string), got {v!r}")
        elif isinstance(p, EntityListParam):
            if not isinstance(v, list | tuple) or not all(isinstance(x, str) and x for x in v):
                raise InvalidParams(f"{name}: expected a list of {p.node_type} ids, got {v!r}")
            if p.unique and len(set(v)) != len(v):
                raise InvalidParams(f"{name}: an id is listed twice (the contract allows no repeats)")
            if not p.min_items <= len(v) <= p.max_items:
                raise InvalidParams(f"{name}: {len(v)} ids, expected {p.min_items} to {p.max_items}")
            v = list(v)
        out[name] = v
    for name, p in spec.items():
        if isinstance(p, EntityListParam) and p.paired_with is not None and name in out:
            other = out.get(p.paired_with)
            if not isinstance(other, list) or len(other) != len(out[name]):
                raise InvalidParams(
                    f"{name}: paired with {p.paired_with!r} by position, so it needs as many ids "
                    f"({len(other) if isinstance(other, list) else 0}), got {len(out[name])}"
                )
    return out, warnings


_PY_TYPES: dict[str, tuple[type, ...]] = {
    "float": (int, float),
    "int": (int,),
    "bool": (bool,),
    "string": (str,),
    "list": (list,),
    "dict": (dict,),
}


def output_problem(contract: SkillContract, payload: Any) -> str | None:
    """Why a success payload breaks the output schema (a garbled payload), or None if it is fine."""
    if not isinstance(payload, dict):
        return f"payload is {type(payload).__name__}, not an object"
    for name, spec in contract.output.fields.items():
        if name not in payload:
            return f"missing field {name!r}"
        v = payload[name]
        typ = spec.scalar_type
        if typ in ("int", "float") and isinstance(v, bool):
            return f"{name}: bool where {typ} expected"
        if not isinstance(v, _PY_TYPES[typ]):
            return f"{name}: {type(v).__name__} where {typ} expected"
        key = spec.id_field or "id"
        value: Any = payload[name]  # its type is checked above
        members: list[tuple[str, Any]] = []
        if spec.type == "entity" and spec.id_field is not None:
            members = [(name, value)]
        elif spec.type == "entity_list":
            members = [(f"{name}[{i}]", item) for i, item in enumerate(value) if not isinstance(item, str)]
        elif spec.type == "entity_map":
            for eid, item in value.items():
                if not isinstance(eid, str) or not eid:
                    return f"{name}: keys must be entity ids"
                if spec.fields and not isinstance(item, dict):
                    return f"{name}[{eid!r}]: an object with {sorted(spec.fields)} expected"
            members = [(f"{name}[{eid!r}]", item) for eid, item in value.items() if spec.fields]
        for where, item in members:
            if spec.type != "entity_map" and (
                not isinstance(item, dict) or not isinstance(item.get(key), str)
            ):
                return f"{where}: an entity id or an object with an {key!r} expected"
            for f, ftyp in spec.fields.items():
                if f not in item:
                    return f"{where}: missing field {f!r}"
                if not isinstance(item[f], _PY_TYPES[ftyp]) or (
                    ftyp in ("int", "float") and isinstance(item[f], bool)
                ):
                    return f"{where}.{f}: {type(item[f]).__name__} where {ftyp} expected"
    return None

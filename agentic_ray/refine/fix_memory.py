"""Error -> fix pairs in the long-term memory store, keyed by root cause and skill.

Every kept window whose pivot failed gives one pair: the root cause the env attributed to the failed step (the
episode's, by evaluation's rules, when the step has none), the skill that failed, and the skill the rule-based
policy called instead from the same recorded state (the counterfactual *fix* of
:mod:`~agentic_ray.refine.incremental_dataset`), with the re-scored returns of both. The pairs live in the
:class:`~agentic_ray.memory.memory_store.MemoryStore` (Qdrant, local mode under the run directory by default)
in a namespace of their own: the memory's ``customer`` is ``fix:<cause>`` and its ``episode`` the failed
skill, so :func:`read_fixes` reads exactly the pairs of one (cause, skill) without an embedding, and a search
over ``fix:<cause>`` ranks them by text. A pair's id is its (cause, skill, fix skill), so a second refine run
replaces a pair instead of repeating it.

The reflection stage reads them back with :func:`read_fixes` (by the cause its head predicts and the skill that
failed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentic_ray.memory.memory_store import MemoryEntity, MemoryRecord, MemoryStore
from agentic_ray.refine.incremental_dataset import WindowSample

__all__ = ["FIX_PREFIX", "FixPair", "fix_pairs", "fix_records", "read_fixes", "write_fixes"]

FIX_PREFIX = "fix:"
"""The memory namespace (``customer``) of a cause's pairs is this prefix and the cause."""


@dataclass(frozen=True)
class FixPair:
    """One error -> fix pair."""

    cause: str
    skill: str
    fix_skill: str
    value: float
    fix_value: float
    window_id: str

    def text(self) -> str:
        return f"{self.cause} after calling {self.skill}: call {self.fix_skill} instead"


def fix_pairs(samples: Sequence[WindowSample]) -> list[FixPair]:
    """The pairs of the kept windows whose pivot failed and whose fix is another call (see the module
    docstring)."""
    out = []
    for s in samples:
        cause = s.step_cause or s.cause
        if not s.failed or cause is None or not s.fix_skill:
            continue
        out.append(FixPair(cause, s.skill, s.fix_skill, s.value, s.fix_value, s.window_id))
    return out


def fix_records(pairs: Sequence[FixPair]) -> list[MemoryRecord]:
    """The pairs as memories (one per (cause, skill, fix skill); the last window's returns win)."""
    return [
        MemoryRecord(
            customer=FIX_PREFIX + p.cause,
            episode=p.skill,
            text=p.text(),
            entities=(
                MemoryEntity(
                    p.fix_skill, "fix", {"value": p.value, "fix_value": p.fix_value, "window": p.window_id}
                ),
            ),
            source="agent",
            key=p.fix_skill,
        )
        for p in {(p.cause, p.skill, p.fix_skill): p for p in pairs}.values()
    ]


def write_fixes(store: MemoryStore, samples: Sequence[WindowSample]) -> int:
    """Write the error -> fix pairs of ``samples`` into ``store``; returns how many."""
    records = fix_records(fix_pairs(samples))
    store.write(records)
    return len(records)


def read_fixes(store: MemoryStore, cause: str, skill: str | None = None) -> list[FixPair]:
    """The stored pairs of ``cause`` (and of the failed ``skill``, when given)."""
    out = []
    for r in store.records(FIX_PREFIX + cause, skill):
        fix = r.entities[0]
        f = fix.fields
        out.append(
            FixPair(cause, r.episode, fix.id, float(f["value"]), float(f["fix_value"]), str(f["window"]))
        )
    return out

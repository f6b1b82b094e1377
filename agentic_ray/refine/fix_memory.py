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

The reflection stage reads them back (``stages.reflection.fix_memory``): :func:`seed_fix_prior` writes each
stored pair into the policy's fix prior (:class:`~agentic_ray.models.aaac_model.FixPrior`), so that the cause the
reflection head predicts after the failed skill proposes the fix from the start of the stage, and RL then keeps
or unlearns it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentic_ray.memory.memory_store import MemoryEntity, MemoryRecord, MemoryStore
from agentic_ray.refine.incremental_dataset import WindowSample

__all__ = [
    "FIX_PREFIX",
    "FixPair",
    "fix_pairs",
    "fix_records",
    "read_all_fixes",
    "read_fixes",
    "seed_fix_prior",
    "seed_from_store",
    "write_fixes",
]

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


def read_all_fixes(store: MemoryStore, causes: Sequence[str]) -> list[FixPair]:
    """The stored pairs of every cause in ``causes``."""
    return [p for c in causes for p in read_fixes(store, c)]


def seed_fix_prior(module: Any, pairs: Sequence[FixPair], logit: float = 3.0) -> int:
    """Write ``pairs`` into ``module``'s fix prior: the table entry of (cause, failed skill) -> fix skill is raised
    to ``logit`` (the prior's skill-logit bonus when the diagnosis is certain of the cause), where it is lower.

    Pairs that better the return only (``fix_value > value``) are written; causes and skills the module does not
    know are skipped. Returns how many entries were set (0 for a module without a fix prior).
    """
    import torch

    from agentic_ray.models.aaac_model import FIX_PRIOR_GAIN

    model = getattr(module, "model", module)
    prior = getattr(model, "fix_prior", None)
    if prior is None:
        return 0
    causes = list(model.spec.root_causes)
    skills = [s.name for s in model.layout.skills]
    k = len(skills)
    target = logit / FIX_PRIOR_GAIN
    n = 0
    with torch.no_grad():
        for p in pairs:
            if (
                p.fix_value <= p.value
                or p.cause not in causes
                or p.skill not in skills
                or p.fix_skill not in skills
            ):
                continue
            row = causes.index(p.cause) * k + skills.index(p.skill)
            col = skills.index(p.fix_skill)
            if float(prior.table[row, col]) < target:
                prior.table[row, col] = target
                n += 1
    return n


def seed_from_store(module: Any, path: str | Path) -> tuple[int, int]:
    """Read every pair stored at ``path`` (a memory store folder) and :func:`seed_fix_prior` ``module`` with them;
    returns ``(pairs read, entries set)``, ``(0, 0)`` when the folder does not exist."""
    if not Path(path).is_dir():
        return 0, 0
    from agentic_ray.memory.memory_config import MemoryConfig

    model = getattr(module, "model", module)
    store = MemoryStore(MemoryConfig(path=str(path)))
    try:
        pairs = read_all_fixes(store, model.spec.root_causes)
    finally:
        store.close()
    return len(pairs), seed_fix_prior(module, pairs)

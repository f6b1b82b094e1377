"""Seeded inspection task families: each a goal DAG over a line of synthetic parts drawn for the request.

``generate_task(family, seed, garble_rate)`` draws a line (its camera contrast, its parts: cracks, scratches,
serials) and returns the world and the :class:`~agentic_ray.domains.protocol.Task`:

* ``top_cracks``: "find the k most severely cracked parts on the line and record them": detect every part (the
  line is listed first, a lookup), rank them (``rank_topk``, k as the request says), record the top k as cracked. Judged on the database: the top
  k recorded ``crack`` and no other part.
* ``disputed_batch``: the customer disputes three parts (named in the request) shipped as clean: inspect each and
  record what it is (``crack``, ``scratch`` or ``clean``). Their cracks are faint and the camera is poor that
  day. Judged on the database: each disputed part's finding is its truth.
* ``serial_reconcile``: read every part's serial on the line and record the ones that do not match the shipping
  manifest as ``serial_mismatch`` (a garbled read must be read again, not recorded). Judged on the database.
* ``mixed_batch``: the conveyor scuffed every part: record the cracked parts as cracked, and no scratch as a
  crack. Judged on the database: every cracked part ``crack``, no other part ``crack``.
* ``camera_fault``: inspect one named part whose frame is washed out: the detector reports it unusable, and the
  part goes to a human inspector (``inspector.handoff``, reason ``unreadable_image``).

The judged families are ``end: world_state``: :func:`final_check` reads the findings table of the world's SQLite
file (``Task.extra[MUST]``: part -> the finding it must have; ``[MUST_NOT]``: part -> a finding it must not have).
Validation tasks use a fixed, disjoint seed range (:func:`validation_seeds`).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from agentic_ray.domains.goal_dag import Goal
from agentic_ray.domains.inspection.font import make_serial
from agentic_ray.domains.inspection.images import CONTRAST_RANGE, draw_part
from agentic_ray.domains.inspection.world import InspectionWorld, Part, make_tool_health
from agentic_ray.domains.protocol import EntityRef, Request, Task

FAMILIES: tuple[str, ...] = (
    "top_cracks",
    "disputed_batch",
    "serial_reconcile",
    "mixed_batch",
    "camera_fault",
)
VALIDATION_SEED_BASE = 1_000_000_000
"""Task seeds at or above this value are reserved for validation; training draws below it."""
MUST, MUST_NOT, SPECS = "must", "must_not", "specs"
"""``Task.extra`` keys: the judged findings (see the module docstring) and the parts' specs (ground truth the
expert tunes its detector parameters on)."""


@dataclass
class _Line:
    r: random.Random
    rng: np.random.Generator
    line: str
    contrast: float
    parts: list[Part] = field(default_factory=list)
    manifest: dict[str, str] = field(default_factory=dict)

    def add(self, severities: list[float], n_scratches: int, **kw: Any) -> Part:
        taken = {p.id for p in self.parts}
        pid = f"P{self.r.randint(10_000, 99_999)}"
        while pid in taken:
            pid = f"P{self.r.randint(10_000, 99_999)}"
        c = min(CONTRAST_RANGE[1], max(CONTRAST_RANGE[0], self.contrast + self.r.gauss(0.0, 0.03)))
        serial = make_serial(self.rng)
        p = Part(pid, len(self.parts) + 1, draw_part(self.rng, serial, severities, n_scratches, c, **kw))
        self.parts.append(p)
        self.manifest[pid] = serial
        return p


def _spaced(r: random.Random, n: int, lo: float, hi: float, gap: float) -> list[float]:
    """``n`` severities in [lo, hi], any two at least ``gap`` apart (so a top k is well defined)."""
    while True:
        xs = sorted(r.uniform(lo, hi) for _ in range(n))
        if all(b - a >= gap for a, b in itertools.pairwise(xs)):
            r.shuffle(xs)
            return [round(x, 3) for x in xs]


def _ids(parts: list[Part]) -> list[str]:
    return [p.id for p in parts]


def _top_cracks(c: _Line) -> tuple[list[Goal], str, dict[str, Any]]:
    k = c.r.choice((2, 3))
    n_cracked = c.r.randint(k + 1, 5)
    sev = _spaced(c.r, n_cracked, 0.15, 1.0, 0.1) + [0.0] * (5 - n_cracked)
    c.r.shuffle(sev)
    for s in sev:
        c.add([s] if s > 0 else [], c.r.randint(0, 2))
    ranked = sorted(c.parts, key=lambda p: -p.spec.severity)
    ids = _ids(c.parts)
    goals, judged = _survey(c, "detect", _ids(ranked[:k]), "crack")
    rank = Goal(
        "rank",
        "rank_topk",
        {"part_ids": ids, "k": str(k)},
        deps=goals[-1].deps,
        description=f"rank them, top {k}",
    )
    goals[-1] = replace(goals[-1], deps=("rank",), priority=2)
    goals.insert(-1, rank)
    text = f"Find the {k} most severely cracked parts on line {c.line} and record them as cracked."
    return goals, text, judged


def _disputed_batch(c: _Line) -> tuple[list[Goal], str, dict[str, Any]]:
    c.contrast = c.r.uniform(CONTRAST_RANGE[0], 0.7)  # a poor camera day: that is how the cracks got through
    kinds = [c.r.choices(("crack", "scratch", "clean"), (0.5, 0.25, 0.25))[0] for _ in range(3)]
    if "crack" not in kinds:
        kinds[c.r.randrange(3)] = "crack"
    for kind in kinds:
        if kind == "crack":
            c.add([round(c.r.uniform(0.1, 0.5), 3)], c.r.randint(0, 1))
        else:
            c.add([], c.r.randint(1, 2) if kind == "scratch" else 0)
    truth = dict(zip(_ids(c.parts), kinds, strict=True))
    goals = [Goal(f"detect.{i}", "detect", {"part_id": pid}) for i, pid in enumerate(truth)]
    # One record per part: the goals' shape must not say which findings the batch holds (hidden until inspected).
    goals += [
        Goal(f"record.{i}", "db_update", {"part_ids": [pid], "finding": f}, deps=(f"detect.{i}",))
        for i, (pid, f) in enumerate(truth.items())
    ]
    names = ", ".join(truth)
    text = (
        f"The customer disputes parts {names} from line {c.line}: they were shipped as clean. Inspect each "
        "again and record what you find."
    )
    return goals, text, {MUST: truth, MUST_NOT: {}}


def _survey(c: _Line, skill: str, chosen: list[str], finding: str) -> tuple[list[Goal], dict[str, Any]]:
    """Run ``skill`` on every part of the line (which the agent lists first: a lookup, not a goal), record
    ``chosen`` with ``finding``: the goals, and the judged findings (``chosen`` have it, no other part does)."""
    ids = _ids(c.parts)
    goals = [Goal(f"{skill}.{i}", skill, {"part_id": pid}) for i, pid in enumerate(ids)]
    goals.append(
        Goal(
            "record",
            "db_update",
            {"part_ids": sorted(chosen, key=ids.index), "finding": finding},
            deps=tuple(f"{skill}.{i}" for i in range(len(ids))),
        )
    )
    must = dict.fromkeys(chosen, finding)
    return goals, {MUST: must, MUST_NOT: {pid: finding for pid in ids if pid not in must}}


def _serial_reconcile(c: _Line) -> tuple[list[Goal], str, dict[str, Any]]:
    for _ in range(4):
        c.add([round(c.r.uniform(0.1, 1.0), 3)] if c.r.random() < 0.3 else [], c.r.randint(0, 2))
    wrong = c.r.sample(c.parts, c.r.randint(1, 2))
    for p in wrong:  # a mislabelled part: the manifest expects another serial
        other = make_serial(c.rng)
        while other == p.serial:
            other = make_serial(c.rng)
        c.manifest[p.id] = other
    goals, judged = _survey(c, "ocr_extract", _ids(wrong), "serial_mismatch")
    text = (
        f"Read the serial numbers of the parts on line {c.line} and reconcile them with the shipping manifest: "
        "record every part whose serial does not match as a serial mismatch."
    )
    return goals, text, judged


def _mixed_batch(c: _Line) -> tuple[list[Goal], str, dict[str, Any]]:
    cracked = set(c.r.sample(range(5), c.r.randint(1, 3)))
    for i in range(5):
        c.add([round(c.r.uniform(0.2, 0.9), 3)] if i in cracked else [], c.r.randint(1, 3))
    goals, judged = _survey(
        c, "detect", [pid for i, pid in enumerate(_ids(c.parts)) if i in cracked], "crack"
    )
    text = (
        f"The conveyor on line {c.line} scuffed every part. Record the cracked parts as cracked; scratches are "
        "cosmetic and must not be recorded as cracks."
    )
    return goals, text, judged


def _camera_fault(c: _Line) -> tuple[list[Goal], str, dict[str, Any]]:
    n = c.r.randint(2, 4)
    fault = c.r.randrange(n)
    for i in range(n):
        c.add(
            [round(c.r.uniform(0.1, 1.0), 3)] if c.r.random() < 0.4 else [],
            c.r.randint(0, 2),
            overexposed=i == fault,
        )
    pid = c.parts[fault].id
    goals = [
        Goal("detect", "detect", {"part_id": pid}),
        Goal(
            "handoff",
            "inspector.handoff",
            {"part_id": pid, "reason": "unreadable_image"},
            deps=("detect",),
            description="a washed-out frame goes to a person",
        ),
    ]
    return goals, f"Inspect part {pid} from line {c.line} for cracks.", {}


SIMPLE: dict[str, Callable[[_Line], tuple[list[Goal], str, dict[str, Any]]]] = {
    "top_cracks": _top_cracks,
    "disputed_batch": _disputed_batch,
    "serial_reconcile": _serial_reconcile,
    "mixed_batch": _mixed_batch,
    "camera_fault": _camera_fault,
}
MENTIONED = frozenset({"disputed_batch", "camera_fault"})
"""Families whose request names its parts by id (the others list the line first)."""


def generate_task(family: str, seed: int, garble_rate: float = 0.0) -> tuple[InspectionWorld, Task]:
    """Draw the world and task of ``(family, seed)``; ``garble_rate`` is the world's OCR garbling fault."""
    if family not in FAMILIES:
        raise KeyError(f"unknown task family {family!r}; known: {FAMILIES}")
    rng = np.random.default_rng([seed, FAMILIES.index(family)])
    r = random.Random(int(rng.integers(1 << 62)))
    c = _Line(r, rng, f"L-{r.randint(1, 99):02d}", r.uniform(*CONTRAST_RANGE))
    goals, text, judged = SIMPLE[family](c)
    world = InspectionWorld(
        line=c.line,
        parts=c.parts,
        manifest=c.manifest,
        tool_health=make_tool_health(r),
        ocr_garble_rate=float(garble_rate),
        seed=int(rng.integers(2**31)),
        judged={k: dict(judged[k]) for k in (MUST, MUST_NOT) if k in judged},
    )
    mentioned = {g.args["part_id"] for g in goals if "part_id" in g.args} if family in MENTIONED else set()
    relevant = sorted(
        {
            str(x)
            for g in goals
            for k, v in g.args.items()
            if k in ("part_id", "part_ids")
            for x in (v if isinstance(v, list) else [v])
        }
    )
    task = Task(
        family=family,
        seed=int(seed),
        request=Request(
            text=text,
            facts={"line": c.line},
            mentioned=tuple(EntityRef("part", pid) for pid in _ids(c.parts) if pid in mentioned),
        ),
        goals=tuple(goals),
        optimal_steps=len(goals) + (family not in MENTIONED),  # the listing, then one call per goal
        relevant=tuple(relevant),
        end="world_state" if judged else "goals",
        extra={**judged, SPECS: {p.id: p.spec.to_dict() for p in c.parts}},
    )
    return world, task


def final_check(world: InspectionWorld, task: Task) -> bool:
    """Whether the findings table holds every finding the task needs and none it forbids."""
    if task.end != "world_state":
        return True
    found = world.db.findings()
    return all(found.get(p) == f for p, f in task.extra.get(MUST, {}).items()) and all(
        found.get(p) != f for p, f in task.extra.get(MUST_NOT, {}).items()
    )


def validation_seeds(family: str, n: int = 25) -> list[int]:
    """The fixed validation seeds of one family (disjoint from any training seed)."""
    return [VALIDATION_SEED_BASE + FAMILIES.index(family) * 100_000 + i for i in range(n)]


def draw_training_seed(rng: np.random.Generator) -> int:
    return int(rng.integers(0, VALIDATION_SEED_BASE))

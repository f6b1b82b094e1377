"""The simulated inspection station: a production line's parts (as image specs), the shipping manifest, the
camera, the inspection database and tool health.

The agent sees none of this directly. It lists a line's parts, runs the detector or the OCR on a part (the tool
renders the part's image from its :class:`~agentic_ray.domains.inspection.images.PartSpec`), ranks inspected
parts and records findings in the SQLite database (:class:`~agentic_ray.domains.inspection.inspection_db.
InspectionDB`). :func:`entity_fields` holds the facts about a part that no call's parameters change.

``detection_calls`` and ``ranking_calls`` log what each detection and ranking call returned beside the truth
(the reward layers' input, see :mod:`agentic_ray.rewards.call_outcomes`); they are never shown to the policy.
Rendered images and detector outputs are cached on the world (not serialised: a world rebuilt from
``to_dict`` renders again, identically).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from agentic_ray.domains.inspection.font import make_serial
from agentic_ray.domains.inspection.images import (
    CONTRAST_RANGE,
    PartSpec,
    RenderedPart,
    crack_spec,
    render,
    scratch_spec,
)
from agentic_ray.domains.inspection.inspection_db import InspectionDB
from agentic_ray.domains.tool_health import ToolHealth, draw_tool_health, drift_tool_health

FINDINGS: tuple[str, ...] = ("crack", "scratch", "clean", "serial_mismatch")
"""What ``db_update`` may record about a part."""
HANDOFF_REASONS: tuple[str, ...] = ("unreadable_image", "tool_failure", "complex")


@dataclass
class Part:
    """One part on the line: its id, its place on the line and how it looks."""

    id: str
    position: int
    spec: PartSpec

    @property
    def serial(self) -> str:
        """The serial printed on its label."""
        return self.spec.serial


BASE_TOOL_HEALTH: dict[str, tuple[float, float, float]] = {
    # skill: (mean latency ms, std ms, failure rate)
    "line.list_parts": (40.0, 10.0, 0.002),
    "detect": (120.0, 40.0, 0.005),
    "ocr_extract": (300.0, 100.0, 0.003),  # seed 000: OCR within 800 ms
    "rank_topk": (25.0, 8.0, 0.001),
    "db_update": (30.0, 10.0, 0.002),
    "inspector.handoff": (500.0, 200.0, 0.0),
}


@dataclass
class InspectionWorld:
    """One inspection session on one line.

    Attributes:
        line: the line id the request names.
        parts: the line's parts (a disputed batch lists only the disputed ones).
        manifest: part id -> the serial the shipping manifest expects.
        tool_health: per skill.
        ocr_garble_rate: share of OCR replies garbled inside a valid JSON shell (a fault; 0 with faults off).
        seed: seeds the garbling draws.
        detection_calls: reward-context log of detection outcomes (``DetectionOutcome.to_context()`` dicts).
        ranking_calls: the same for ranking outcomes.
        record_calls: the same for the outcomes of calls that record findings (``RecordOutcome.to_context()``).
        judged: the task's judged findings, ``{"must": {part: finding}, "must_not": {part: finding}}`` (ground
            truth for the record outcomes; empty for a task not judged on the findings table).
        ocr_calls: OCR calls so far (the garbling draw's counter).
        tick: background-change ticks.
        db: the inspection database (a SQLite file of this world).
    """

    line: str
    parts: list[Part]
    manifest: dict[str, str]
    tool_health: dict[str, ToolHealth]
    ocr_garble_rate: float = 0.0
    seed: int = 0
    detection_calls: list[dict[str, Any]] = field(default_factory=list)
    ranking_calls: list[dict[str, Any]] = field(default_factory=list)
    record_calls: list[dict[str, Any]] = field(default_factory=list)
    judged: dict[str, dict[str, str]] = field(default_factory=dict)
    ocr_calls: int = 0
    tick: int = 0
    db: InspectionDB = field(default_factory=InspectionDB)
    _render_cache: dict[str, RenderedPart] = field(default_factory=dict, repr=False, compare=False)
    _cand_cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def part(self, pid: str) -> Part | None:
        return next((p for p in self.parts if p.id == pid), None)

    def rendered(self, pid: str) -> RenderedPart:
        """The part's image and its ground truth (rendered once per world)."""
        r = self._render_cache.get(pid)
        if r is None:
            p = self.part(pid)
            if p is None:
                raise KeyError(pid)
            r = self._render_cache[pid] = render(p.spec)
        return r

    def candidates(self, pid: str) -> Any:
        """The detector's decoded peaks on the part's image (computed once per world; the detector is frozen)."""
        c = self._cand_cache.get(pid)
        if c is None:
            from agentic_ray.domains.inspection.detector import detector

            c = self._cand_cache[pid] = detector().candidates(self.rendered(pid).pixels)
        return c

    def garble_rng(self) -> random.Random:
        """The OCR garbling draw of the next call (seeded by the world and the call count)."""
        self.ocr_calls += 1
        return random.Random(self.seed * 1_000_003 + self.ocr_calls)

    def drift(self, rng: np.random.Generator) -> None:
        """One tick: tool health wanders and reverts to its base (nothing about the parts changes)."""
        self.tick += 1
        drift_tool_health(self.tool_health, rng)

    def close(self) -> None:
        """Remove the database file now (it is also removed when the world is dropped)."""
        self.db.close()

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "parts": [{"id": p.id, "position": p.position, "spec": p.spec.to_dict()} for p in self.parts],
            "manifest": dict(self.manifest),
            "tool_health": {k: dict(h.__dict__) for k, h in self.tool_health.items()},
            "ocr_garble_rate": self.ocr_garble_rate,
            "seed": self.seed,
            "detection_calls": [dict(c) for c in self.detection_calls],
            "ranking_calls": [dict(c) for c in self.ranking_calls],
            "record_calls": [dict(c) for c in self.record_calls],
            "judged": {k: dict(v) for k, v in self.judged.items()},
            "ocr_calls": self.ocr_calls,
            "tick": self.tick,
            "db": self.db.dump(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InspectionWorld:
        return cls(
            line=str(d["line"]),
            parts=[Part(str(p["id"]), int(p["position"]), PartSpec.from_dict(p["spec"])) for p in d["parts"]],
            manifest={str(k): str(v) for k, v in d["manifest"].items()},
            tool_health={k: ToolHealth(**v) for k, v in d["tool_health"].items()},
            ocr_garble_rate=float(d.get("ocr_garble_rate", 0.0)),
            seed=int(d.get("seed", 0)),
            detection_calls=[dict(c) for c in d.get("detection_calls", [])],
            ranking_calls=[dict(c) for c in d.get("ranking_calls", [])],
            record_calls=[dict(c) for c in d.get("record_calls", [])],
            judged={str(k): {str(a): str(b) for a, b in v.items()} for k, v in d.get("judged", {}).items()},
            ocr_calls=int(d.get("ocr_calls", 0)),
            tick=int(d.get("tick", 0)),
            db=InspectionDB(d.get("db")),
        )


def make_tool_health(r: random.Random) -> dict[str, ToolHealth]:
    return draw_tool_health(r, BASE_TOOL_HEALTH)


def entity_fields(world: InspectionWorld, entity_type: str, entity_id: str) -> dict[str, Any] | None:
    """The facts about one part that a lookup reveals and that hold whatever the agent does: its place on the line,
    the camera's contrast and whether the frame is usable, its printed serial and the finding recorded for it.

    What the detector or the ranking reports is left out: it depends on the parameters of the call, so it is not a
    fact of the world that a later read could contradict (the env reads these fields to tell stale information)."""
    if entity_type != "part":
        return None
    p = world.part(entity_id)
    if p is None:
        return None
    out: dict[str, Any] = {
        "position": p.position,
        "contrast": round(p.spec.contrast, 3),
        "image_ok": not p.spec.overexposed,
        "serial": p.serial,
    }
    f = world.db.findings().get(entity_id)
    return out | ({"finding": f} if f is not None else {})


def perturb_parts(world: InspectionWorld, rng: np.random.Generator) -> InspectionWorld:
    """A copy of ``world`` with two to four hidden changes: a part's crack severity, its scratches, its printed
    serial, its camera contrast, or the manifest's entry for it (ids, the line and what the request says stay)."""
    w = InspectionWorld.from_dict(world.to_dict())
    for _ in range(int(rng.integers(2, 5))):
        p = w.parts[int(rng.integers(len(w.parts)))]
        what = int(rng.integers(5))
        spec = p.spec
        if what == 0:
            cracks = [d for d in spec.defects if d.kind == "crack"]
            rest = [d for d in spec.defects if d.kind != "crack"]
            sev = float(rng.uniform(0.1, 1.0))
            new = (
                [replace(cracks[0], severity=sev, length=10.0 + 22.0 * sev)]
                if cracks
                else [crack_spec(rng, sev)]
            )
            spec = replace(spec, defects=(*new, *cracks[1:], *rest))
        elif what == 1:
            spec = replace(spec, defects=(*spec.defects, scratch_spec(rng)))
        elif what == 2:
            spec = replace(spec, serial=make_serial(rng))
        elif what == 3:
            spec = replace(spec, contrast=float(rng.uniform(*CONTRAST_RANGE)))
        else:
            w.manifest[p.id] = make_serial(rng)
        p.spec = spec
    w._render_cache.clear()
    w._cand_cache.clear()
    return w


def entity_ids(world: InspectionWorld, entity_type: str) -> list[str]:
    return [p.id for p in world.parts] if entity_type == "part" else []

"""The inspection tools: ``handler(world, params) -> payload``, with real effects on an InspectionWorld.

Parameters arrive validated and clipped by the gateway (``configs/skills/inspection.yaml``); each handler checks the
world's state and raises :class:`~agentic_ray.skills.backends.ToolError` with a typed code on a bad call.

* ``line.list_parts``: the parts waiting on the line the request names, with each image's camera contrast and the
  frame itself as a thumbnail (:func:`thumbnail`: the observation's image modality).
* ``detect``: renders the part's image, checks its exposure, runs the frozen detector (:mod:`.detector`) with the
  call's parameters, writes the inspection to the database and logs the outcome beside the truth for the reward
  layers (with what the contract's default parameters report on the same frame: the detection layers'
  ``baseline: default`` counterfactual). It returns the frame's thumbnail too (a part the request names is never listed) and its
  ``frame_focus``, the thumbnail's focus mask: 1 inside the boxes it reported. ``received`` keeps
  every parameter vector the detector was given (tests read it).
* ``ocr_extract``: reads the printed serial by template matching (:mod:`.ocr`), checks its check character and
  compares it with the shipping manifest. A world with ``ocr_garble_rate`` garbles a share of the replies inside
  a valid JSON shell (the fault seed 000 injects).
* ``rank_topk``: ranks inspected parts by the severity the detector reported (an SQL query), marks the top k.
* ``db_update``: records a finding for parts that were inspected or read.
* ``inspector.handoff``: queues a part for a human inspector (ends the automated session).
"""

from __future__ import annotations

import json
from typing import Any

from agentic_ray.domains.inspection import detector as det
from agentic_ray.domains.inspection.font import checksum_ok
from agentic_ray.domains.inspection.images import DEFECT_CLASSES, IMAGE_SIZE, to_uint8
from agentic_ray.domains.inspection.ocr import garble, read_serial
from agentic_ray.domains.inspection.schema import THUMBNAIL
from agentic_ray.domains.inspection.tasks import MUST, MUST_NOT
from agentic_ray.domains.inspection.world import InspectionWorld, Part
from agentic_ray.rewards.call_outcomes import DetectionOutcome, RankingOutcome, RecordOutcome
from agentic_ray.skills.backends import ToolError

CRACK = DEFECT_CLASSES.index("crack")
EXPOSURE_LIMIT = 0.85
"""A frame whose mean brightness is above this is washed out (a normal part image averages about 0.55)."""
QUALITY_MODEL = "agentic_ray.domains.inspection:data/quality_scorer.json"
"""The model-based scorer that judges this domain's detections (the detection_quality reward layer loads it)."""

received: list[dict[str, Any]] = []
"""Every parameter vector the detector was called with in this process (bounded; for tests and audits)."""
_RECEIVED_MAX = 10_000


def _world(world: Any) -> InspectionWorld:
    if not isinstance(world, InspectionWorld):
        raise ToolError("NOT_FOUND", "no inspection world is loaded for this world_id")
    return world


def _part(w: InspectionWorld, pid: str) -> Part:
    p = w.part(pid)
    if p is None:
        raise ToolError("NOT_FOUND", f"part {pid} not found")
    return p


SCALE = IMAGE_SIZE // THUMBNAIL


def thumbnail(pixels: Any) -> list[float]:
    """A ``(64, 64)`` frame as ``THUMBNAIL²`` block means in [0, 1], row-major (what the listing returns)."""
    t = pixels.reshape(THUMBNAIL, SCALE, THUMBNAIL, SCALE).mean(axis=(1, 3))
    return [round(float(v), 3) for v in t.reshape(-1)]


def focus_mask(boxes: list[tuple[float, float, float, float]]) -> list[float]:
    """``THUMBNAIL²`` values, 1 on the thumbnail cells a reported box touches, else 0 (row-major)."""
    m = [[0.0] * THUMBNAIL for _ in range(THUMBNAIL)]
    for x0, y0, x1, y1 in boxes:
        for y in range(max(0, int(y0 // SCALE)), min(THUMBNAIL, int(-(-y1 // SCALE)))):
            for x in range(max(0, int(x0 // SCALE)), min(THUMBNAIL, int(-(-x1 // SCALE)))):
                m[y][x] = 1.0
    return [v for row in m for v in row]


def list_parts(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The parts waiting on a line, with their position, the camera contrast and the frame (a thumbnail)."""
    w = _world(world)
    if params["line"].strip().upper() != w.line:
        raise ToolError("NOT_FOUND", f"no line {params['line']!r} at this station")
    return {
        "parts": [
            {
                "id": p.id,
                "position": p.position,
                "contrast": round(p.spec.contrast, 3),
                "frame": thumbnail(w.rendered(p.id).pixels),
            }
            for p in w.parts
        ]
    }


def detect(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Run the detector on a part's image at the call's parameters."""
    w = _world(world)
    p = _part(w, params["part_id"])
    args = {k: params[k] for k in ("confidence_threshold", "iou_threshold", "max_detections", "class_filter")}
    if len(received) < _RECEIVED_MAX:
        received.append(dict(args))
    r = w.rendered(p.id)
    image_ok = float(r.pixels.mean()) <= EXPOSURE_LIMIT
    found = det.postprocess(w.candidates(p.id), **args) if image_ok else []
    cracks = [d for d in found if d.cls == "crack"]
    severity = max((d.severity for d in cracks), default=0.0)
    n_cracks, n_scratches = len(cracks), len(found) - len(cracks)
    w.db.record_inspection(p.id, severity, n_cracks, n_scratches, json.dumps(args, sort_keys=True))
    if image_ok:  # an unusable frame is a camera question, not a detection one: nothing to judge
        true = r.boxes[r.classes == CRACK]
        # the same candidates at the contract's defaults: the counterfactual of the detection layers' baseline
        defaults = [d for d in det.postprocess(w.candidates(p.id), **det.DEFAULT_PARAMS) if d.cls == "crack"]
        w.detection_calls.append(
            DetectionOutcome(
                skill="detect",
                args=dict(params),
                key=p.id,
                pred_boxes=[list(d.box) for d in cracks],
                pred_classes=[0] * len(cracks),
                pred_scores=[d.score for d in cracks],
                true_boxes=true.tolist(),
                true_classes=[0] * len(true),
                image=to_uint8(r.pixels).tobytes(),
                image_size=IMAGE_SIZE,
                quality_model=QUALITY_MODEL,
                default_boxes=[list(d.box) for d in defaults],
                default_classes=[0] * len(defaults),
                default_scores=[d.score for d in defaults],
            ).to_context()
        )
    return {
        "part_id": p.id,
        "image_ok": image_ok,
        "n_cracks": n_cracks,
        "n_scratches": n_scratches,
        "crack_severity": round(severity, 4),
        "frame": thumbnail(r.pixels),
        "frame_focus": focus_mask([d.box for d in found]),
        "detections": [
            {"class": d.cls, "box": list(d.box), "score": d.score, "severity": d.severity} for d in found
        ],
    }


def ocr_extract(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Read the serial printed on a part's label and check it against the manifest."""
    w = _world(world)
    p = _part(w, params["part_id"])
    text, confidence = read_serial(w.rendered(p.id).pixels)
    rng = w.garble_rng()
    if w.ocr_garble_rate > 0 and rng.random() < w.ocr_garble_rate:
        text = garble(text, rng)
    ok = checksum_ok(text)
    w.db.record_serial_read(p.id, text, ok)
    return {
        "part_id": p.id,
        "serial": text,
        "checksum_ok": ok,
        "manifest_match": text == w.manifest.get(p.id),
        "confidence": round(confidence, 4),
    }


def rank_topk(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Rank inspected parts by the crack severity the detector reported; the first ``k`` are the top."""
    w = _world(world)
    ids = list(params["part_ids"])
    for pid in ids:
        _part(w, pid)
    missing = sorted(set(ids) - w.db.inspected(ids))
    if missing:
        raise ToolError("CONFLICT", f"not inspected yet: {', '.join(missing)}")
    k = int(params["k"])
    order = w.db.top_k(ids, len(ids))
    w.ranking_calls.append(
        RankingOutcome(
            skill="rank_topk",
            args=dict(params),
            key="ranking",
            ranked=[pid for pid, _ in order[:k]],
            relevance={pid: float(_part(w, pid).spec.severity) for pid in ids},
            line_relevance={p.id: float(p.spec.severity) for p in w.parts},
        ).to_context()
    )
    return {
        "ranked": [
            {"id": pid, "severity_rank": i + 1, "in_top_k": i < k, "crack_severity": round(s, 4)}
            for i, (pid, s) in enumerate(order)
        ],
        "top": [pid for pid, _ in order[:k]],
    }


def db_update(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Record one finding for parts that were inspected (detector) or read (OCR)."""
    w = _world(world)
    ids = list(params["part_ids"])
    for pid in ids:
        _part(w, pid)
    seen = w.db.inspected(ids) | w.db.inspected(ids, serials=True)
    missing = sorted(set(ids) - seen)
    if missing:
        raise ToolError("PRECONDITION_FAILED", f"neither inspected nor read: {', '.join(missing)}")
    n = w.db.record_findings(ids, params["finding"], w.tick)
    if w.judged.get(MUST):
        w.record_calls.append(
            RecordOutcome(
                skill="db_update",
                args=dict(params),
                key="findings",
                findings=w.db.findings(),
                must=dict(w.judged[MUST]),
                must_not=dict(w.judged.get(MUST_NOT, {})),
            ).to_context()
        )
    return {"recorded": n, "parts": [{"id": pid, "finding": params["finding"]} for pid in ids]}


def inspector_handoff(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Queue a part (or the session) for a human inspector; ends the automated session."""
    w = _world(world)
    pid = params.get("part_id")
    if pid is not None:
        _part(w, pid)
    hid = w.db.queue_handoff(pid, params["reason"])
    return {"handoff_id": f"H-{hid:04d}", "queued": True}

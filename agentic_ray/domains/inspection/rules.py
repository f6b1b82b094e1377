"""The inspection domain's named rule-based degrades (the contracts' ``fallback: [{rule: ...}]``).

A rule answers conservatively when the real backend is down; the gateway marks the reply degraded, so it reveals
nothing and satisfies no goal or precondition.
"""

from __future__ import annotations

from typing import Any

from agentic_ray.domains.protocol import RuleFn


def _ocr_unavailable(skill: str, params: dict[str, Any]) -> dict[str, Any]:
    # Without the OCR service nothing is read: no serial, nothing matches (a person reads the label).
    return {
        "part_id": str(params.get("part_id", "")),
        "serial": "",
        "checksum_ok": False,
        "manifest_match": False,
        "confidence": 0.0,
    }


RULES: dict[str, RuleFn] = {"ocr_unavailable": _ocr_unavailable}

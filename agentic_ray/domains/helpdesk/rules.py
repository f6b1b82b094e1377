"""The help-desk domain's named rule-based degrades (the contracts' ``fallback: [{rule: ...}]``).

A rule answers conservatively when the real backend is down; the gateway marks the reply degraded, so it
reveals nothing and satisfies no goal or precondition.
"""

from __future__ import annotations

from typing import Any

from agentic_ray.domains.protocol import RuleFn


def _registry_unavailable(skill: str, params: dict[str, Any]) -> dict[str, Any]:
    # Without the asset registry the safe answer is "no warranty left" (no free repair is promised).
    return {
        "asset_id": str(params.get("asset_id", "")),
        "employee_id": "",
        "kind": "",
        "status": "",
        "warranty_days_left": 0,
        "cost": 0.0,
    }


RULES: dict[str, RuleFn] = {"registry_unavailable": _registry_unavailable}

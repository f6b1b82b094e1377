"""Named rule-based degrades a contract's fallback chain may name.

A rule returns a payload that keeps the agent going with a conservative answer when the real backend is down,
e.g. "assume out of stock" or "queue the SMS for later". Rules take the skill's (validated) params.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

RuleFn = Callable[[str, dict[str, Any]], dict[str, Any]]


def _queue_for_retry(skill: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"queued": True, "skill": skill}


def _conservative_stock(skill: str, params: dict[str, Any]) -> dict[str, Any]:
    # Without live inventory the safe answer is "not confirmed": downstream refunds stay blocked.
    return {"in_stock": False, "stock": 0, "degraded": True}


def _cached_order(skill: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"order_id": str(params.get("order_id", "")), "status": "unknown", "degraded": True}


RULES: dict[str, RuleFn] = {
    "queue_for_retry": _queue_for_retry,
    "conservative_stock": _conservative_stock,
    "cached_order": _cached_order,
}

"""Named rule-based degrades a contract's fallback chain may name.

A rule returns a payload that keeps the agent going with a conservative answer when the real backend is down,
e.g. "assume out of stock" or "queue the SMS for later". Rules take the skill's (validated) params.

A rule's reply must satisfy the skill's output contract: the gateway checks it, skips a reply that does not fit
(with a warning) and goes on down the chain. Values a rule cannot know are neutral ("unknown", 0, []) and the
reply says ``degraded: true``; the gateway also marks the result degraded, so it never unlocks a precondition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

RuleFn = Callable[[str, dict[str, Any]], dict[str, Any]]


def _queue_for_retry(skill: str, params: dict[str, Any]) -> dict[str, Any]:
    # Not delivered yet: the message is queued, and has no id until it is sent.
    return {"message_id": "", "delivered": False, "queued": True, "skill": skill, "degraded": True}


def _conservative_stock(skill: str, params: dict[str, Any]) -> dict[str, Any]:
    # Without live inventory the safe answer is "not confirmed": downstream refunds stay blocked.
    return {"sku": str(params.get("sku", "")), "in_stock": False, "stock": 0, "degraded": True}


def _cached_order(skill: str, params: dict[str, Any]) -> dict[str, Any]:
    return {
        "order_id": str(params.get("order_id", "")),
        "status": "unknown",
        "total": 0.0,
        "refunded": 0.0,
        "tracking": "unknown",
        "days_late": 0,
        "skus": [],
        "degraded": True,
    }


RULES: dict[str, RuleFn] = {
    "queue_for_retry": _queue_for_retry,
    "conservative_stock": _conservative_stock,
    "cached_order": _cached_order,
}

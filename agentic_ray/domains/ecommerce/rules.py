"""The e-commerce domain's named rule-based degrades (the contracts' ``fallback: [{rule: ...}]``).

A rule returns a payload that keeps the agent going with a conservative answer when the real backend is down,
e.g. "assume out of stock" or "queue the SMS for later". Rules take the skill's (validated) params.
"""

from __future__ import annotations

from typing import Any

from agentic_ray.domains.protocol import RuleFn


def _queue_for_retry(skill: str, params: dict[str, Any]) -> dict[str, Any]:
    # The SMS is queued, not delivered: a degraded reply that satisfies no goal and no precondition.
    return {"message_id": "", "delivered": False}


def _conservative_stock(skill: str, params: dict[str, Any]) -> dict[str, Any]:
    # Without live inventory the safe answer is "not confirmed": downstream refunds stay blocked.
    return {"sku": str(params.get("sku", "")), "in_stock": False, "stock": 0}


RULES: dict[str, RuleFn] = {
    "queue_for_retry": _queue_for_retry,
    "conservative_stock": _conservative_stock,
}

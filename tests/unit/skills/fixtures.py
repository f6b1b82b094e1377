"""A tiny self-contained skill domain for gateway tests: contracts built in code, handlers on a dict world."""

from __future__ import annotations

from typing import Any

from agentic_ray.skills.backends import ToolError
from agentic_ray.skills.contracts import DomainContracts

CONTRACTS: dict[str, Any] = {
    "domain": "toy",
    "version": "1",
    "skills": [
        {
            "name": "detect.run",
            "description": "Run a detector.",
            "handler": "tests.unit.skills.fixtures:detect",
            "input": {
                "confidence": {"type": "float", "min": 0.3, "max": 0.9},
                "max_detections": {"type": "int", "min": 1, "max": 50, "default": 10},
                "mode": {"type": "enum", "choices": ["fast", "accurate"], "default": "fast"},
                "verbose": {"type": "bool", "required": False},
                "note": {"type": "string", "required": False, "max_length": 16},
                "part": {"type": "entity", "node_type": "product", "required": False},
            },
            "output": {"fields": {"count": "int", "confidence": "float"}},
            "sla": {
                "timeout_ms": 100,
                "p95_ms": 50,
                "max_concurrency": 4,
                "error_budget": 0.2,
                "window": 20,
                "breaker_min_calls": 5,
                "breaker_reset_s": 2.0,
            },
            "fallback": [{"skill": "detect.backup"}],
        },
        {
            "name": "detect.backup",
            "description": "A slower backup detector.",
            "handler": "tests.unit.skills.fixtures:detect",
            "input": {
                "confidence": {"type": "float", "min": 0.3, "max": 0.9},
                "max_detections": {"type": "int", "min": 1, "max": 50, "default": 10},
                "mode": {"type": "enum", "choices": ["fast", "accurate"], "default": "fast"},
                "verbose": {"type": "bool", "required": False},
                "note": {"type": "string", "required": False, "max_length": 16},
                "part": {"type": "entity", "node_type": "product", "required": False},
            },
            "output": {"fields": {"count": "int", "confidence": "float"}},
        },
        {
            "name": "stock.check",
            "description": "Check stock.",
            "handler": "tests.unit.skills.fixtures:stock",
            "input": {"sku": {"type": "entity", "node_type": "product"}},
            "output": {"fields": {"in_stock": "bool"}},
            "fallback": [{"rule": "conservative_stock"}],
        },
        {
            "name": "refund.pay",
            "description": "Refund.",
            "handler": "tests.unit.skills.fixtures:refund",
            "input": {
                "sku": {"type": "entity", "node_type": "product"},
                "amount": {"type": "float", "min": 0.01, "max": 100.0},
            },
            "output": {"fields": {"refunded": "float"}},
            "risk": {"high_risk": True, "weight": 1.0},
            "preconditions": [{"after": "stock.check", "where": {"in_stock": True}, "same": ["sku"]}],
        },
        {
            "name": "db.write",
            "description": "Needs a database driver (tests point `requires` at missing resources).",
            "handler": "tests.unit.skills.fixtures:stock",
            "input": {"sku": {"type": "entity", "node_type": "product"}},
            "requires": [{"kind": "module", "target": "sqlite3"}],
        },
        {
            "name": "admin.wipe",
            "description": "Not whitelisted.",
            "handler": "tests.unit.skills.fixtures:stock",
            "allowed": False,
        },
    ],
}


def _conservative_stock(skill: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"in_stock": False, "stock": 0}


RULES = {"conservative_stock": _conservative_stock}
"""The toy domain's rule-based degrades (a domain passes its own to the ToolExecutor)."""


def contracts() -> DomainContracts:
    return DomainContracts.model_validate(CONTRACTS)


def detect(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    if world is not None:
        world.setdefault("calls", []).append(params)
    return {"count": params["max_detections"] // 2, "confidence": params["confidence"]}


def stock(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    skus = (world or {}).get("stock", {})
    if params.get("sku") not in skus:
        raise ToolError("NOT_FOUND", f"unknown sku {params.get('sku')}")
    return {"in_stock": skus[params["sku"]] > 0}


def refund(world: Any, params: dict[str, Any]) -> dict[str, Any]:
    world["balance"] = world.get("balance", 0.0) + params["amount"]
    return {"refunded": params["amount"]}

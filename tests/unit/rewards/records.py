"""Hand-built EpisodeRecords with known layer values (shared by the reward unit tests)."""

from __future__ import annotations

from agentic_ray.rewards.episode_record import EpisodeRecord, StepRecord
from agentic_ray.rewards.ltv_model import CONTEXT_FEATURES

CUSTOMER = dict(zip(CONTEXT_FEATURES, (3.0, 0.1, 1.0), strict=True))
"""The case facts an e-commerce record carries (level 3, complaint rate 0.1, verified), as its domain gives them."""


def step(code: str = "OK", **kw) -> StepRecord:
    base = dict(skill="inventory.check", args={}, result_code=code, ok=code == "OK", latency_ms=0.0)
    base.update(kw)
    return StepRecord(**base)


def record(steps: list[StepRecord], **kw) -> EpisodeRecord:
    base = dict(
        episode_id="ep-1",
        domain="ecommerce",
        task_family="address_error",
        task_seed=1,
        steps=steps,
        completed=True,
        failed=False,
        truncated=False,
        optimal_steps=4,
        goals=["a", "b", "c"],
        goal_deps=[("a", "c")],
        goals_done_order=["a", "b", "c"],
        dag_valid=True,
        context=dict(CUSTOMER),
    )
    base.update(kw)
    return EpisodeRecord(**base)


def five_step_record(**kw) -> EpisodeRecord:
    """OK(goal a), OK(risky, weight 2, redundant), TOOL_TIMEOUT, OK(goal c), CIRCUIT_OPEN."""
    return record(
        [
            step("OK", goals_satisfied=["a"], latency_ms=400.0),
            step(
                "OK",
                skill="refund.trigger",
                high_risk=True,
                risk_weight=2.0,
                redundant=True,
                latency_ms=400.0,
            ),
            step("TOOL_TIMEOUT", latency_ms=2000.0),
            step("OK", goals_satisfied=["c"], latency_ms=400.0),
            step("CIRCUIT_OPEN", latency_ms=400.0),
        ],
        **kw,
    )

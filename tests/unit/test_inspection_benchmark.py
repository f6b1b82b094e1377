"""``benchmarks/inspection.py``'s policy rows: ``detect_threshold`` says which threshold a policy used per family."""

from __future__ import annotations

from agentic_ray.domains.inspection.baseline import FamilyParamsPolicy, FixedThresholdPolicy
from agentic_ray.domains.inspection.detector import DEFAULT_PARAMS
from agentic_ray.graph_spec import NUMERIC_RESOLUTION
from benchmarks.inspection import over_runs, planner_actor, run_policy


def test_detect_threshold_per_family_is_what_the_policy_sent() -> None:
    fixed = run_policy(planner_actor(FixedThresholdPolicy().plan), 1)
    assert fixed["detect_threshold"]
    assert set(fixed["detect_threshold"].values()) == {DEFAULT_PARAMS["confidence_threshold"]}
    by_family = {"top_cracks": 0.3, "mixed_batch": 0.65}
    adapted = run_policy(
        planner_actor(
            FamilyParamsPolicy(
                {f: {**DEFAULT_PARAMS, "confidence_threshold": t} for f, t in by_family.items()}
            ).plan
        ),
        1,
    )
    for fam, t in by_family.items():
        # a value at a bound is sent NUMERIC_RESOLUTION of the range inside it (0.3 -> 0.3006), reported to 3 places
        assert abs(adapted["detect_threshold"][fam] - t) <= 1e-3 + NUMERIC_RESOLUTION * 0.6
    assert adapted["detect_threshold"]["disputed_batch"] == DEFAULT_PARAMS["confidence_threshold"]
    mean = over_runs([fixed, adapted])["detect_threshold"]
    assert mean["top_cracks"] == round((0.5 + 0.3) / 2, 3)

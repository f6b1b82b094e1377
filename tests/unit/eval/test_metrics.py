"""Metric functions on hand-built episodes."""

from __future__ import annotations

import pytest

from agentic_ray.eval.correction import correction_uplift
from agentic_ray.eval.metrics import (
    AutoPause,
    attribute_failures,
    evaluate,
    first_action_after_failure,
    plan_violations,
    root_cause,
)
from agentic_ray.rewards.episode_record import EpisodeRecord, StepRecord


def step(skill: str, code: str = "OK", high_risk: bool = False, injected: bool = False) -> StepRecord:
    return StepRecord(
        skill=skill,
        args={},
        result_code=code,
        ok=code == "OK",
        latency_ms=1.0,
        high_risk=high_risk,
        injected=injected,
    )


def episode(
    steps, completed=True, done_order=("a", "b"), deps=(("a", "b"),), optimal=2, **kw
) -> EpisodeRecord:
    from agentic_ray.eval.metrics import plan_violations as pv

    e = EpisodeRecord(
        episode_id=kw.pop("eid", "e"),
        domain="ecommerce",
        task_family="refund",
        task_seed=0,
        steps=list(steps),
        completed=completed,
        failed=not completed,
        truncated=False,
        optimal_steps=optimal,
        goals=["a", "b"],
        goal_deps=list(deps),
        goals_done_order=list(done_order),
        dag_valid=True,
        **kw,
    )
    p = pv(e)
    e.dag_valid = not (p["violations"] or p["missing"])
    return e


def test_five_metrics_on_hand_built_episodes():
    good = episode([step("inventory.check"), step("refund.trigger")])
    slow = episode(
        [
            step("inventory.check", "TOOL_TIMEOUT", injected=True),
            step("inventory.check"),
            step("refund.trigger"),
        ]
    )
    bad = episode(
        [step("refund.trigger", high_risk=True), step("inventory.check", "INVALID_INPUT")],
        completed=False,
        done_order=("b", "a"),
    )
    m = evaluate([good, slow, bad])
    assert m.episodes == 3
    assert (m.tcsr, m.tcsr_n) == (pytest.approx(5 / 7), 7)
    # The injected outage is not the policy's: 5 of its 6 calls succeeded.
    assert (m.tcsr_policy, m.tcsr_policy_n) == (pytest.approx(5 / 6), 6)
    assert (m.dvr, m.dvr_n) == (pytest.approx(2 / 3), 3)
    assert m.entity_recall_at_5 is None and m.cu is None and m.cu_n == 0
    # Successful episodes only: 2 and 3 steps (the failed 2-step episode does not count).
    assert (m.spt, m.spt_n) == (pytest.approx(5 / 2), 2)
    assert (m.spt_over_optimal, m.spt_over_optimal_n) == (pytest.approx((1 + 1.5) / 2), 2)
    assert (m.completion, m.completion_n) == (pytest.approx(2 / 3), 3)
    assert (m.high_risk_share, m.high_risk_share_n) == (pytest.approx(1 / 7), 7)


def test_every_metric_carries_its_sample_count():
    d = evaluate([episode([step("x")])]).to_dict()
    metrics = {k for k in d if k != "episodes" and not k.endswith(("_n", "_ci"))}
    assert metrics and all(f"{k}_n" in d for k in metrics), sorted(metrics)


def test_spt_is_none_without_a_successful_episode():
    m = evaluate([episode([step("x", "INVALID_INPUT")], completed=False, done_order=())])
    assert m.spt is None and m.spt_over_optimal is None and m.spt_n == 0


def test_plan_violations_and_missing_prerequisites():
    e = episode([step("x")], done_order=("b", "a"))
    assert plan_violations(e)["violations"] == [("a", "b")]
    e = episode([step("x")], done_order=("b",))
    assert plan_violations(e)["missing"] == [("a", "b")]
    e = episode([step("x")], deps=(("a", "b"), ("b", "a")))
    assert sorted(plan_violations(e)["cycles"]) == [("a", "b"), ("b", "a")]


def test_root_causes():
    assert root_cause(episode([step("x")])) is None
    assert root_cause(episode([step("refund.trigger", high_risk=True)], completed=False)) == "risk_violation"
    assert root_cause(episode([step("x")], completed=False, done_order=("b", "a"))) == "dependency_violation"
    assert root_cause(episode([step("x", "PRECONDITION_FAILED")], completed=False, done_order=())) == (
        "missing_prerequisite"
    )
    assert (
        root_cause(
            episode(
                [step("x", "TOOL_TIMEOUT")] * 2 + [step("y", "INVALID_INPUT")], completed=False, done_order=()
            )
        )
        == "tool_error"
    )
    assert (
        root_cause(episode([step("y", "INVALID_INPUT")], completed=False, done_order=())) == "bad_parameters"
    )
    forgot = episode(
        [step("x")], completed=False, done_order=(), entities_mentioned=["o1"], entities_recalled=[]
    )
    assert root_cause(forgot) == "wrong_entity"


def test_attribution_separates_timeouts_from_bad_parameters():
    eps = [
        episode(
            [step("a", "TOOL_TIMEOUT"), step("b", "INVALID_INPUT"), step("b", "INVALID_INPUT")],
            completed=False,
            done_order=("b", "a"),
        )
    ]
    a = attribute_failures(eps)
    assert a["tcsr"]["timeouts"] == 1 and a["tcsr"]["bad_parameters"] == 2
    assert a["tcsr"]["by_skill"] == {"b:INVALID_INPUT": 2, "a:TOOL_TIMEOUT": 1}
    assert a["dvr"]["dependency_violations"] == {"a->b": 1}
    assert a["root_causes"] == {"dependency_violation": 1}


def test_first_action_after_failure():
    e = episode(
        [step("a", "TOOL_TIMEOUT"), step("a"), step("b", "INVALID_INPUT"), step("b", "INVALID_INPUT")]
    )
    assert first_action_after_failure([e]) == [True, False]
    assert first_action_after_failure([e], first_only=True) == [True]


def _failed_then(next_ok: bool, first: str = "a") -> EpisodeRecord:
    """One good call, a failed ``first`` call, then its retry that succeeds or not."""
    return episode([step("x"), step(first, "INVALID_INPUT"), step(first, "OK" if next_ok else "CONFLICT")])


def test_correction_uplift_over_first_failure_pairs_with_interval():
    # 6 tasks: the fix succeeds on 5 with reflection on, on 2 with it off → CU = 5/6 − 2/6 = 0.5 over 6 pairs.
    on = [_failed_then(ok) for ok in (True, True, True, True, True, False)]
    off = [_failed_then(ok) for ok in (True, False, False, True, False, False)]
    clean = episode([step("x"), step("y")])  # no failure: no pair
    other = _failed_then(True, first="b")  # a different first failure than its partner: no pair
    cu = correction_uplift([*on, clean, other], [*off, clean, _failed_then(False)])
    assert cu.pairs == 6
    assert cu.cu == pytest.approx(0.5) and (cu.fix_rate_on, cu.fix_rate_off) == (
        pytest.approx(5 / 6),
        pytest.approx(2 / 6),
    )
    low, high = cu.ci
    assert low < 0.5 < high and low >= -1.0 and high <= 1.0
    assert high - low > 0.2  # six pairs leave a wide interval
    m = evaluate(on, cu=cu)
    assert (m.cu, m.cu_n, m.cu_ci) == (cu.cu, 6, cu.ci)


def test_correction_uplift_without_pairs_and_with_mismatched_runs():
    none = correction_uplift([episode([step("x")])], [episode([step("x")])])
    assert (none.cu, none.ci, none.pairs) == (None, None, 0)
    with pytest.raises(ValueError, match="same tasks"):
        correction_uplift([episode([step("x")])], [])


def test_auto_pause_fires_on_three_declines_in_a_row():
    ap = AutoPause(3)
    assert [ap.update(x) for x in [0.9, 0.92, 0.91, 0.90]] == [False, False, False, False]
    assert ap.update(0.85) is True  # 0.92 > 0.91 > 0.90 > 0.85
    ap2 = AutoPause(3)
    assert not any(ap2.update(x) for x in [0.9, 0.8, 0.85, 0.7, 0.6])  # a rise breaks the run
    ap3 = AutoPause(3)
    ap3.set_state(ap.get_state())
    assert ap3.history == ap.history


def test_first_pass_completion_counts_tasks_that_came_back():
    """A task completed through a shortcut whose complaint or chargeback came back was not completed on the first
    pass; completion itself does not see it."""
    clean = episode([step("inventory.check"), step("refund.trigger")])
    came_back = episode(
        [step("refund.trigger", high_risk=True), step("inventory.check")],
        consequences=[{"skill": "refund.trigger", "kind": "chargeback", "step": 0, "weight": 1.0}],
    )
    failed = episode([step("inventory.check", "INVALID_INPUT")], completed=False, done_order=())
    m = evaluate([clean, came_back, failed])
    assert (m.completion, m.completion_n) == (pytest.approx(2 / 3), 3)
    assert (m.first_pass_completion, m.first_pass_completion_n) == (pytest.approx(1 / 3), 3)


def test_dvr_of_non_empty_plans_is_what_a_policy_that_does_nothing_fails():
    """Plain DVR counts an episode that satisfied no goal as a valid plan (1.0 for a policy that does nothing);
    ``dvr_progress``, which the RL gate reads, does not."""
    idle = [
        episode([step("inventory.check", "INVALID_INPUT")], completed=False, done_order=(), eid=f"e{i}")
        for i in range(3)
    ]
    m = evaluate(idle)
    assert m.dvr == 1.0 and m.dvr_progress == 0.0
    valid = episode([step("inventory.check"), step("refund.trigger")])
    reversed_plan = episode([step("refund.trigger")], completed=False, done_order=("b", "a"))
    m = evaluate([valid, reversed_plan, *idle[:2]])
    assert (m.dvr, m.dvr_progress, m.dvr_progress_n) == (pytest.approx(3 / 4), pytest.approx(1 / 4), 4)

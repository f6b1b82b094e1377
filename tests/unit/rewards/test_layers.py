"""Every layer formula on fixed, hand-built EpisodeRecords."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest

from agentic_ray.rewards.judge_service import episode_summary, rubric_scores
from agentic_ray.rewards.layers import (
    LAYER_CLASSES,
    CostClass,
    EfficiencyLayer,
    ExecutionLayer,
    LongTermValueLayer,
    PlanValidityLayer,
    RiskLayer,
    Stream,
    TaskOutcomeLayer,
    UserExperienceLayer,
)
from agentic_ray.rewards.layers.efficiency_layer import efficiency
from agentic_ray.rewards.layers.llm_judge_layer import InProcessRubricJudge
from agentic_ray.rewards.layers.user_experience_layer import COMPLAINT_RATE
from agentic_ray.rewards.ltv_model import FEATURES, LTVModel, episode_features, train

from .records import five_step_record, record, step


def test_layer_declarations():
    assert LAYER_CLASSES["execution"].default_weight >= 0.4
    assert LAYER_CLASSES["risk"].stream is Stream.RISK
    assert {n for n, c in LAYER_CLASSES.items() if c.stream is Stream.RISK} == {"risk"}
    assert LAYER_CLASSES["judge"].cost is CostClass.ASYNC_IO
    assert LAYER_CLASSES["long_term_value"].cost is CostClass.ASYNC_CPU
    assert LAYER_CLASSES["execution"].cost is CostClass.SYNC


def test_execution_codes_and_completion():
    layer = ExecutionLayer()  # step 2 is a redundant success: 0
    np.testing.assert_allclose(layer.score(five_step_record()), [1, 0, -2, 1, -5 + 1])
    np.testing.assert_allclose(
        layer.score(five_step_record(completed=False, failed=True)), [1, 0, -2, 1, -5.5]
    )
    np.testing.assert_allclose(
        layer.score(five_step_record(completed=False, truncated=True)), [1, 0, -2, 1, -5]
    )
    rec = record([step("INVALID_INPUT"), step("UPSTREAM_ERROR"), step("PRECONDITION_FAILED", masked=True)])
    np.testing.assert_allclose(layer.score(rec), [-3, -1, -3 + 1])
    np.testing.assert_allclose(ExecutionLayer(masked_value=-10).score(rec), [-3, -1, -10 + 1])


def test_execution_pays_nothing_for_a_successful_call_that_advanced_no_goal():
    """Looping a harmless successful call must not out-earn completing the task."""
    layer = ExecutionLayer()
    loop = record(
        [step(), step(), step(redundant=True), step(redundant=True), step(redundant=True)], completed=False
    )
    done = record([step(), step(), step()], completed=True)
    np.testing.assert_allclose(layer.score(loop), [1, 1, 0, 0, 0])
    assert layer.score(loop).sum() < layer.score(done).sum()
    np.testing.assert_allclose(ExecutionLayer(redundant_value=-1).score(loop), [1, 1, -1, -1, -1])
    # A failed call is scored by its code, redundant or not.
    np.testing.assert_allclose(layer.score(record([step("TOOL_TIMEOUT", redundant=True)])), [-2 + 1])


def test_execution_progress_share_pays_the_share_of_the_goals_not_the_calls():
    """Under ``progress: share`` a completed task's goal calls sum to the OK value whatever its goal count, so a
    long task no longer out-earns a short one for its length (issue 30)."""
    layer = ExecutionLayer(progress="share")
    long_done = record(
        [step(goals_satisfied=["a"]), step(), step(goals_satisfied=["b", "c"]), step(goals_satisfied=["d"])],
        goals=["a", "b", "c", "d"],
    )  # step 1 is a lookup that revealed something: no goal
    np.testing.assert_allclose(layer.score(long_done), [0.25, 0, 0.5, 0.25 + 1])
    short_done = record([step(goals_satisfied=["a"]), step(goals_satisfied=["b"])], goals=["a", "b"])
    np.testing.assert_allclose(layer.score(short_done), [0.5, 0.5 + 1])
    assert layer.score(long_done).sum() == pytest.approx(layer.score(short_done).sum())
    # the same records per call: the long task earns more
    assert ExecutionLayer().score(long_done).sum() > ExecutionLayer().score(short_done).sum()
    # failures are scored by their code as before, redundant calls by redundant_value
    rec = record(
        [step("TOOL_TIMEOUT"), step(redundant=True), step(goals_satisfied=["a"])],
        goals=["a", "b"],
        completed=False,
        truncated=True,
    )
    np.testing.assert_allclose(layer.score(rec), [-2, 0, 0.5])
    np.testing.assert_allclose(
        ExecutionLayer(progress="share", redundant_value=-0.1).score(rec), [-2, -0.1, 0.5]
    )
    with pytest.raises(ValueError, match="progress"):
        ExecutionLayer(progress="goal")  # type: ignore[arg-type]


def test_execution_repeat_value_charges_each_repeat_of_a_call_that_advanced_nothing():
    """A wrong record call repeated to the step budget (issue 30's greedy loop): the first earns what it would have,
    each identical repeat earns ``repeat_value``; a repeat that satisfied a goal, a different argument, a failed
    or masked repeat are scored as before. Off by default."""
    wrong = dict(skill="db_update", args={"parts": [2, 1], "finding": "crack"})
    rec = record(
        [
            step(**wrong),
            step(**wrong),
            step(skill="db_update", args={"finding": "crack", "parts": [1, 2]}),  # other arguments (order)
            step(**wrong),
            step("CONFLICT", **wrong),
            step(masked=True, **wrong),
            step(goals_satisfied=["a"], **wrong),
        ],
        goals=["a"],
        completed=True,
    )
    np.testing.assert_allclose(ExecutionLayer().score(rec), [1, 1, 1, 1, -3, -3, 1 + 1])
    np.testing.assert_allclose(
        ExecutionLayer(progress="share", repeat_value=-1).score(rec), [0, -1, 0, -1, -3, -3, 1 + 1]
    )
    # arguments compare by value, not by key order
    same = record([step(args={"a": 1, "b": 2}), step(args={"b": 2, "a": 1})], goals=["a"], completed=False)
    np.testing.assert_allclose(ExecutionLayer(repeat_value=-0.5).score(same), [1, -0.5])


def test_efficiency_formula_optimal_plan_scores_one():
    assert efficiency(4, 4) == 1.0
    assert efficiency(5, 4) == pytest.approx(0.75)
    assert efficiency(8, 4) == 0.0
    assert efficiency(12, 4) == 0.0
    assert efficiency(3, 4) == 1.0
    np.testing.assert_allclose(EfficiencyLayer().score(five_step_record()), [0, 0, 0, 0, 0.75])
    np.testing.assert_allclose(EfficiencyLayer().score(five_step_record(completed=False)), [0, 0, 0, 0, 0])
    with pytest.raises(ValueError):
        efficiency(3, 0)


def test_risk_layer():
    np.testing.assert_allclose(RiskLayer().score(five_step_record()), [0, -2, 0, 0, 0])
    rec = record([step(high_risk=True), step(), step(high_risk=True, risk_weight=0.5)])
    np.testing.assert_allclose(RiskLayer(default_weight_per_action=3.0).score(rec), [-3, 0, -0.5])


def test_plan_validity():
    layer = PlanValidityLayer(redundancy_penalty=0.1)
    np.testing.assert_allclose(layer.score(five_step_record()), [0, 0, 0, 0, 0.9], rtol=1e-6)
    np.testing.assert_allclose(
        layer.score(five_step_record(dag_valid=False, dependency_violations=1)), [0, 0, 0, 0, -1.1], rtol=1e-6
    )
    # the order says c before its prerequisite a: invalid even though the record claims dag_valid
    np.testing.assert_allclose(
        layer.score(five_step_record(goals_done_order=["c", "a", "b"])), [0, 0, 0, 0, -1.1], rtol=1e-6
    )


def test_user_experience_by_hand():
    layer = UserExperienceLayer()
    rec = five_step_record(context={COMPLAINT_RATE: 0.5})
    # replies: +0.5-0.1, (-0.3-0.1)*1.5, (-0.5-0.5)*1.5 -> clip -1, +0.5-0.1, (-0.5-0.1)*1.5, closing +1
    expected = np.mean([0.4, -0.6, -1.0, 0.4, -0.9, 1.0])
    np.testing.assert_allclose(layer.reply_sentiments(rec), [0.4, -0.6, -1.0, 0.4, -0.9, 1.0], atol=1e-9)
    np.testing.assert_allclose(layer.score(rec), [0, 0, 0, 0, expected], atol=1e-6)
    # No memory term: the ground-truth "entity recall" the layer once mixed in is gone (the memory issue adds one).
    rec_mem = five_step_record(
        context={COMPLAINT_RATE: 0.5}, entities_mentioned=["o1", "a2"], entities_recalled=["o1"]
    )
    assert layer.score(rec_mem)[-1] == pytest.approx(expected, abs=1e-6)
    # A record without the case fact is an error, not a complaint rate of 0.
    with pytest.raises(KeyError, match=COMPLAINT_RATE):
        layer.score(five_step_record(context={}))


def test_long_term_value_model():
    layer = LongTermValueLayer()
    d = json.loads(resources.files("agentic_ray.data").joinpath("ltv_model_v1.json").read_text())
    assert layer.scorer_version.startswith("1/ltv-logreg-v1@") and len(layer.model.digest) == 12
    good, bad = five_step_record(), five_step_record(completed=False, failed=True)
    x = np.stack([episode_features(good), episode_features(bad)])
    z = ((x - np.array(d["mean"])) / np.array(d["scale"])) @ np.array(d["coef"]) + d["intercept"]
    expected = 1 / (1 + np.exp(-z)) - d["base_rate"]
    out = layer.score_batch([good, bad])
    np.testing.assert_allclose([o[-1] for o in out], expected, rtol=1e-5)
    assert all(np.all(o[:-1] == 0) for o in out)
    assert out[0][-1] > out[1][-1]  # completing beats failing
    np.testing.assert_allclose(layer.score(good), out[0])
    assert episode_features(good).shape == (len(FEATURES),)


def test_shipped_ltv_model_is_reproduced_by_the_simulator_script():
    shipped = LTVModel.load()
    fresh = train()
    np.testing.assert_allclose(fresh["coef"], shipped.coef, rtol=1e-5, atol=1e-7)
    assert fresh["train"]["holdout_auc"] > 0.7


def test_judge_rubric_and_layer_value():
    rec = five_step_record()
    s = rubric_scores(episode_summary(rec))
    assert s == {"episode_id": "ep-1", "completion": 5, "plan": 4, "memory": 3}
    partial = rubric_scores(episode_summary(five_step_record(completed=False, goals_done_order=["a", "b"])))
    assert partial["completion"] == 2  # floor(4 * 2/3)
    # a goal voided by the customer's "no" is not owed: 2 of the 2 goals left, not 2 of 3
    voided = five_step_record(completed=False, goals_done_order=["a", "b"], goals_void=["c"])
    assert rubric_scores(episode_summary(voided))["completion"] == 4
    failed = rubric_scores(episode_summary(five_step_record(completed=False, failed=True)))
    assert failed["completion"] == 1
    invalid = rubric_scores(episode_summary(five_step_record(dag_valid=False, dependency_violations=1)))
    assert invalid["plan"] == 1
    # in-process rubric goes through the same request/parse path: (5+4+3)/15*2-1 = 0.6
    np.testing.assert_allclose(InProcessRubricJudge().score(rec), [0, 0, 0, 0, 0.6], rtol=1e-6)


def test_task_outcome_is_one_value_at_the_end_and_nothing_before():
    layer = TaskOutcomeLayer()
    assert not LAYER_CLASSES["task_outcome"].enabled_by_default
    np.testing.assert_array_equal(layer.score(five_step_record()), [0, 0, 0, 0, 1])
    np.testing.assert_array_equal(
        layer.score(five_step_record(completed=False, failed=True)), [0, 0, 0, 0, 0]
    )
    np.testing.assert_array_equal(layer.score(five_step_record(completed=False, truncated=True)), [0] * 5)
    custom = TaskOutcomeLayer(done_value=2.0, failure_value=-1.0, ongoing_value=-0.5)
    assert custom.score(five_step_record(completed=False, failed=True))[-1] == -1.0
    assert custom.score(five_step_record(completed=False, truncated=True))[-1] == -0.5
    # the execution layer's completion term is the same outcome rule, at its own values
    assert ExecutionLayer().completion_value(five_step_record(completed=False, failed=True)) == -0.5

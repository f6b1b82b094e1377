"""The evaluator on the real e-commerce env with the reference policies (no Ray)."""

from __future__ import annotations

from agentic_ray.envs.agent_task_env import AgentTaskEnvConfig
from agentic_ray.eval.evaluator import ExpertPolicy, RandomPolicy, evaluate_policy


def test_expert_is_perfect_on_validation_and_traced():
    r = evaluate_policy(
        ExpertPolicy(),
        AgentTaskEnvConfig(),
        tasks_per_family=2,
        max_traces=3,
        trace_meta={"stage": "test", "iteration": 0},
    )
    m = r.metrics
    assert m.episodes == 2 * 10  # 2 tasks for each of the 10 families
    assert (m.tcsr, m.dvr, m.completion, m.spt_over_optimal, m.high_risk_share) == (1.0, 1.0, 1.0, 1.0, 0.0)
    assert m.entity_recall_at_5 is None  # n/a until memory lands
    assert len(r.traces) == 3 and all(t["completed"] for t in r.traces)
    t = r.traces[0]
    assert t["stage"] == "test" and t["steps"] and t["steps"][0]["result_code"] == "OK"
    assert len(t["steps"][0]["step_trace_id"]) == 16


def test_random_policy_is_the_lower_bound():
    r = evaluate_policy(RandomPolicy(seed=1), AgentTaskEnvConfig(), tasks_per_family=2)
    assert r.metrics.completion <= 0.15, r.metrics
    assert r.metrics.tcsr < 0.95 and sum(r.attribution["root_causes"].values()) >= 12


def test_evaluation_is_deterministic():
    a = evaluate_policy(RandomPolicy(seed=3), AgentTaskEnvConfig(), tasks_per_family=1)
    b = evaluate_policy(RandomPolicy(seed=3), AgentTaskEnvConfig(), tasks_per_family=1)
    assert [(s.skill, s.result_code) for e in a.records for s in e.steps] == [
        (s.skill, s.result_code) for e in b.records for s in e.steps
    ]

"""The evaluator on the real e-commerce env with the reference policies (no Ray)."""

from __future__ import annotations

import numpy as np
import torch

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.eval.evaluator import ExpertPolicy, RandomPolicy, evaluate_policy, stack_obs


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


def test_traces_sample_every_family_and_keep_every_failure_up_to_the_cap():
    from agentic_ray.eval.evaluator import select_traces, validation_tasks

    cfg = AgentTaskEnvConfig()
    tasks = validation_tasks(cfg, 2)
    r = evaluate_policy(
        RandomPolicy(seed=1),
        cfg,
        tasks_per_family=2,
        max_traces=len(cfg.family_list()),
        max_failed_traces=100,
    )
    failed = [rec for rec in r.records if not rec.completed]
    assert failed and sum(t["failed"] for t in r.traces) == len(failed)  # every failure kept
    sampled = [t for t in r.traces if "sample" in t["kept_as"]]
    assert sorted(t["task_family"] for t in sampled) == sorted(
        cfg.family_list()
    )  # one per family, not the first 8
    # the cap bites across families in turn
    kept = select_traces(tasks, r.records, 0, 3)
    assert len(kept) == 3 and len({tasks[i][0] for i in kept}) == 3
    assert all(why == ["failed"] for why in kept.values())


def test_a_failed_episode_trace_has_argument_probabilities_reward_layers_and_reflection():
    """An untrained AAAC module (built without Ray) on the real env: its failed episodes are traced in full."""
    from pathlib import Path

    import torch

    from agentic_ray.algorithms.build import module_spec
    from agentic_ray.eval.evaluator import ModulePolicy, validation_env_config
    from agentic_ray.eval.traces import trace_reward_layers
    from agentic_ray.settings import load_settings

    torch.manual_seed(0)  # module weights and sampled actions: the same episodes every run
    s = load_settings(Path(__file__).resolve().parents[3] / "configs" / "tiny.yaml")
    module = module_spec(s).build()
    module.eval()
    torch.manual_seed(3)  # the sampled actions apart from how many numbers the weights' init drew
    cfg = validation_env_config(s.env.model_copy(update={"action_mode": "structured"}), 1.0)
    r = evaluate_policy(
        ModulePolicy(module, deterministic=False, debug=True),
        cfg,
        tasks_per_family=3,  # enough episodes that the random policy reaches a numeric skill (measured: 1 was luck)
        max_failed_traces=30,
        reward_layers=trace_reward_layers(None),
    )
    failed = [t for t in r.traces if t["failed"]]
    assert failed
    steps = [s for t in failed for s in t["steps"]]
    with_ptr = [s for s in steps if s.get("pointer")]
    assert with_ptr and all(sum(p for _, p in d) <= 1 + 1e-6 for s in with_ptr for d in s["pointer"].values())
    assert any(s.get("enum") for s in steps) and any(s.get("numeric") for s in steps)
    num = next(s["numeric"] for s in steps if s.get("numeric"))
    assert all(v["sigma"] > 0 for v in num.values())
    for t in failed:
        assert set(t["reward_layers"]) == {"execution", "efficiency", "risk", "plan", "user_experience",
                                           "long_term_value"}  # fmt: skip
        assert all(len(v) == len(t["steps"]) for v in t["reward_steps"].values())
    # every injected failure is marked; the reflection head's cause sits on the failed step it explains
    bad = [(t, i) for t in failed for i, s in enumerate(t["steps"][:-1]) if s["result_code"] != "OK"]
    assert bad, "with every episode faulty, some call fails"
    assert all("reflection" in t["steps"][i] for t, i in bad)
    assert all("reflection" not in s for t in failed for s in t["steps"] if s["result_code"] == "OK")


def test_traces_mark_injected_faults_apart_from_policy_errors():
    """The expert makes no errors of its own: every failed call in its traces is an injected fault, and the
    attribution counts them apart by error code."""
    from agentic_ray.eval.evaluator import validation_env_config

    r = evaluate_policy(
        ExpertPolicy(),
        validation_env_config(AgentTaskEnvConfig(), 1.0),
        tasks_per_family=1,
        max_failed_traces=8,
    )
    failed_calls = [s for t in r.traces for s in t["steps"] if s["result_code"] != "OK"]
    assert failed_calls and all(s["injected"] for s in failed_calls)
    assert r.attribution["errors"]["policy"] == {}
    assert sum(r.attribution["errors"]["injected"].values()) == sum(
        not s.ok for e in r.records for s in e.steps
    )
    # failed episodes with a failed call failed by injected faults only; the others ran out of steps
    with_calls = sum(not e.completed and any(not s.ok for s in e.steps) for e in r.records)
    assert sum(r.attribution["root_causes_injected"].values()) == with_calls > 0


def test_traced_episodes_are_scored_only_by_the_layers_their_domain_feeds():
    """Without a reward pool, traces are scored by a default pool's layers for the run's domain: help-desk gives no
    customer facts, so its traces get no user-experience or long-term-value score (they would raise on it)."""
    from agentic_ray.eval.traces import trace_reward_layers

    helpdesk = {layer.name for layer in trace_reward_layers(None, "helpdesk")}
    ecommerce = {layer.name for layer in trace_reward_layers(None, "ecommerce")}
    assert {"execution", "efficiency", "risk", "plan"} <= helpdesk
    assert not helpdesk & {"user_experience", "long_term_value", "detection_f1", "memory"}
    assert {"user_experience", "long_term_value"} <= ecommerce


def test_one_observation_stacks_as_a_batch_of_one_and_is_copied():
    """The batch-1 path of stack_obs (serving's) gives what the general path gives, and owns its memory."""
    env = AgentTaskEnv(AgentTaskEnvConfig())
    obs = [env.reset(seed=s)[0] for s in range(2)]
    one, both = stack_obs(obs[:1]), stack_obs(obs)
    assert list(one) == list(obs[0]) == list(both)
    for k, v in one.items():
        assert v.dtype == both[k].dtype and v.shape == (1, *both[k].shape[1:]), k
        assert torch.equal(v, both[k][:1]), k
        assert not np.shares_memory(v.numpy(), obs[0][k]), k

"""AgentTaskEnv: Gymnasium compliance, determinism, expert optimality, masks, typed errors, episode records."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig, episode_record_dict
from agentic_ray.envs.ecommerce_tasks import FAMILIES
from agentic_ray.envs.expert import RandomMaskedPolicy, ScriptedExpert
from agentic_ray.envs.graph_spec import ROOT_CAUSES
from agentic_ray.keys import EPISODE_RECORD, MASK_REASONS, STEP_TRACE
from agentic_ray.rewards.episode_record import EpisodeRecord
from agentic_ray.skills.backends import FaultConfig

MODES = ("structured", "prototype")


def _run(env: AgentTaskEnv, policy, seed: int | None = None, options=None):
    obs, info = env.reset(seed=seed, options=options)
    rows = []
    done = False
    while not done:
        a = policy(obs)
        obs, r, term, trunc, info = env.step(a)
        rows.append((obs, r, term, trunc, info))
        done = term or trunc
    return rows


def _assert_obs(env: AgentTaskEnv, obs: dict[str, np.ndarray]) -> None:
    space = env.observation_space
    assert set(obs) == set(space.spaces)
    for k, v in obs.items():
        sp = space[k]
        assert v.shape == sp.shape and v.dtype == sp.dtype, k
        assert sp.contains(v), k


@pytest.mark.parametrize("mode", MODES)
def test_check_env_passes(mode: str) -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(action_mode=mode))
    check_env(env, skip_render_check=True)
    env.close()


def test_dict_config_is_validated() -> None:
    env = AgentTaskEnv({"action_mode": "prototype", "families": ["cancellation"]})
    assert env.config.action_mode == "prototype"
    with pytest.raises(ValueError):
        AgentTaskEnv({"not_a_field": 1})
    with pytest.raises(ValueError):
        AgentTaskEnv({"families": ["nope"]})


@pytest.mark.parametrize("mode", MODES)
def test_seeded_determinism(mode: str) -> None:
    def rollout() -> list:
        env = AgentTaskEnv(AgentTaskEnvConfig(action_mode=mode))
        pol = RandomMaskedPolicy(env.layout, seed=5)
        out = []
        for ep in range(6):
            rows = _run(env, pol.act, seed=100 + ep)
            out.append(
                [
                    (o, r, t, tr, i[STEP_TRACE]["result_code"], i[STEP_TRACE]["args"])
                    for o, r, t, tr, i in rows
                ]
            )
        env.close()
        return out

    a, b = rollout(), rollout()
    assert len(a) == len(b)
    for ea, eb in zip(a, b, strict=True):
        assert len(ea) == len(eb)
        for (oa, ra, ta, tra, ca, aa), (ob, rb, tb, trb, cb, ab) in zip(ea, eb, strict=True):
            assert (ra, ta, tra, ca, aa) == (rb, tb, trb, cb, ab)
            for k in oa:
                np.testing.assert_array_equal(oa[k], ob[k])


@pytest.mark.parametrize("mode", MODES)
def test_expert_solves_every_validation_task_optimally(mode: str) -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(action_mode=mode, split="validation", validation_per_family=6))
    expert = ScriptedExpert()
    per_family: dict[str, list[bool]] = {f: [] for f in FAMILIES}
    obs, info = env.reset(seed=0)
    for _ in range(6 * len(FAMILIES)):
        fam, opt = info["task_family"], info["optimal_steps"]
        steps, done = 0, False
        while not done:
            action = expert.act(env)
            if mode == "structured":
                assert obs["skill_mask"][action["skill"]] == 1  # the expert never picks a masked action
            else:
                assert obs["proto_mask"][action] == 1
            obs, r, term, trunc, info = env.step(action)
            assert info[STEP_TRACE]["result_code"] == "OK"
            assert r >= 1.0
            steps += 1
            done = term or trunc
        rec = info[EPISODE_RECORD]
        per_family[fam].append(
            rec["completed"] and steps == opt and rec["dag_valid"] and not rec["truncated"]
        )
        assert not any(s["high_risk"] for s in rec["steps"])
        assert not any(s["redundant"] for s in rec["steps"])
        obs, info = env.reset()
    assert all(len(v) == 6 and all(v) for v in per_family.values()), per_family


def test_random_masked_policy_rarely_succeeds() -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(split="validation", validation_per_family=10))
    pol = RandomMaskedPolicy(env.layout, seed=0)
    env.reset(seed=0)
    wins = 0
    n = 10 * len(FAMILIES)
    for _ in range(n):
        rows = _run(env, pol.act)
        wins += rows[-1][4][EPISODE_RECORD]["completed"]
        for obs, *_ in rows:
            _assert_obs(env, obs)
    rate = wins / n
    print(f"random masked policy success rate: {rate:.3f} over {n} validation episodes")
    assert rate <= 0.05


def test_masked_and_out_of_range_actions_are_typed_error_steps() -> None:
    env = AgentTaskEnv()
    obs, _ = env.reset(seed=3, options={"family": "quality_refund"})
    refund = env.layout.skill_index("refund.trigger")
    assert obs["skill_mask"][refund] == 0  # business: no refund before the inventory check
    order = env.task.goals[1].args["order_id"]
    a = env.encode_action(
        "refund.trigger",
        {"order_id": order, "sku": env.task.goals[1].args["sku"], "amount": 1.0, "reason_code": "quality"},
    )
    obs, r, term, trunc, info = env.step(a)
    tr = info[STEP_TRACE]
    assert tr["result_code"] == "PRECONDITION_FAILED" and tr["masked"] and r == -3.0
    assert not term and not trunc
    assert env.world.order(order).refunded == 0.0  # never executed
    assert "refund.trigger" in info[MASK_REASONS]
    assert any("inventory.check" in why for why in info[MASK_REASONS]["refund.trigger"])
    rec_step = env._steps[-1]
    assert rec_step.masked and rec_step.high_risk and rec_step.risk_weight == 1.0
    assert obs["reflection"][ROOT_CAUSES.index("risk_violation")] == 1.0  # cause of the last failure
    assert obs["reflection"].sum() == 1.0
    # The reflection input describes the last step only: a successful call clears it.
    sku = env.task.goals[0].args["sku"]
    obs, *_, info = env.step(env.encode_action("inventory.check", {"sku": sku}))
    assert info[STEP_TRACE]["result_code"] == "OK" and obs["reflection"].sum() == 0.0
    bad = [
        {
            "skill": 99,
            "pointer": np.zeros(2, np.int64),
            "enum": np.zeros(1, np.int64),
            "numeric": np.zeros(1),
        },
        {"skill": 0, "pointer": np.array([99, 0]), "enum": np.zeros(1, np.int64), "numeric": np.zeros(1)},
        {"skill": 2, "pointer": np.array([3, 0]), "enum": np.zeros(1, np.int64), "numeric": np.zeros(1)},
        {"skill": 10, "pointer": np.zeros(2, np.int64), "enum": np.array([5]), "numeric": np.zeros(1)},
        {
            "skill": 11,
            "pointer": np.zeros(2, np.int64),
            "enum": np.zeros(1, np.int64),
            "numeric": np.array([np.nan]),
        },
        {"skill": 0},
        "garbage",
    ]
    env.reset(seed=4, options={"family": "stock_inquiry"})
    for a in bad:
        obs, r, term, trunc, info = env.step(a)
        assert info[STEP_TRACE]["result_code"] == "INVALID_INPUT", a
        assert r == -3.0
        _assert_obs(env, obs)
        if term or trunc:
            env.reset()
    penv = AgentTaskEnv(AgentTaskEnvConfig(action_mode="prototype"))
    penv.reset(seed=1)
    _, r, *_rest, info = penv.step(10_000)
    assert info[STEP_TRACE]["result_code"] == "INVALID_INPUT" and r == -3.0


def test_hard_mask_and_reasons() -> None:
    env = AgentTaskEnv()
    for s in range(40):
        obs, info = env.reset(seed=s, options={"family": "address_error"})
        if not env.world.user.verified:
            break
    k = env.layout.skill_index("order.update_address")
    assert obs["skill_mask"][k] == 0
    assert any(r.startswith("hard") for r in info[MASK_REASONS]["order.update_address"])
    assert any(r.startswith("business") for r in info[MASK_REASONS]["order.update_address"])
    expert = ScriptedExpert()
    obs, _, _, _, info = env.step(expert.act(env))  # user.verify
    assert obs["skill_mask"][k] == 1 and "order.update_address" not in info[MASK_REASONS]


def test_soft_mask_from_live_error_rate_and_cooldown() -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(soft_cooldown_s=3.0, drift=False, budget_extra=30))
    env.reset(seed=0, options={"family": "logistics_exception"})

    env.backend.set_faults(FaultConfig(per_skill={"order.get": FaultConfig(failure_rate=1.0)}, seed=0))
    k = env.layout.skill_index("order.get")
    oid = env.task.goals[0].args["order_id"]
    info: dict = {}
    obs = None
    for _ in range(5):
        _, r, _, _, info = env.step(env.encode_action("order.get", {"order_id": oid}))
        assert r == 0.0  # a (degraded) success that advances no goal: +1 success, -1 redundant
        assert info[STEP_TRACE]["fallback_used"] == "rule:cached_order"  # degraded, not a real success
        assert info[STEP_TRACE]["goals_satisfied"] == []
    assert env.executor.sla_stats()["order.get"].attempt_error_rate == 1.0
    # Fallbacks hide the failure from callers, so the call-level error rate stays 0: the soft mask keys on
    # the executor's call-level error rate; force a failing skill without fallback instead.
    env.backend.set_faults(FaultConfig(per_skill={"express.contact": FaultConfig(failure_rate=1.0)}, seed=0))
    e = env.layout.skill_index("express.contact")
    for _ in range(5):
        obs, _r, term, trunc, info = env.step(
            env.encode_action("express.contact", {"order_id": oid, "action": "trace"})
        )
        if term or trunc:
            break
    stats = env.executor.sla_stats()["express.contact"]
    assert stats.error_rate > 0.05 and stats.calls >= 5
    assert obs is not None and obs["skill_mask"][e] == 0
    assert any(r.startswith("soft") for r in info[MASK_REASONS]["express.contact"])
    assert obs["skill_mask"][k] == 1
    # After the cooldown (simulated seconds) one probe is let through again.
    env.backend.set_faults(FaultConfig())
    for _ in range(4):
        obs, *_ = env.step(env.encode_action("inventory.check", {"sku": env.world.products[0].sku}))
    assert obs["skill_mask"][e] == 1


def test_episode_record_contents_and_fast_dict() -> None:
    env = AgentTaskEnv()
    expert = ScriptedExpert()
    rows = _run(env, lambda _o: expert.act(env), seed=9, options={"family": "composite"})
    d = rows[-1][4][EPISODE_RECORD]
    rec = EpisodeRecord.from_dict(d)
    assert rec.completed and not rec.failed and not rec.truncated and rec.dag_valid
    assert rec.num_steps == rec.optimal_steps == len(rec.goals)
    assert sorted(rec.goals_done_order) == sorted(rec.goals)
    assert all(s.goals_satisfied for s in rec.steps)
    assert set(rec.entities_recalled) <= set(rec.entities_mentioned)
    assert rec.domain == "ecommerce" and rec.task_family == "composite"
    assert episode_record_dict(rec) == rec.to_dict()
    assert rows[-1][1] == 3.0  # success +1 plus completion +2
    for *_x, info in rows[:-1]:
        assert EPISODE_RECORD not in info


def test_dependency_violation_and_redundancy_are_recorded() -> None:
    env = AgentTaskEnv()
    env.reset(seed=2, options={"family": "cancellation"})
    user = env.world.user.id
    oid = env.task.goals[0].args["order_id"]
    # SMS before the cancellation: executes, satisfies nothing, violates the DAG.
    _, r, *_x, info = env.step(env.encode_action("sms.send", {"user_id": user, "template": "cancel_notice"}))
    assert r == 0.0 and info[STEP_TRACE]["goals_satisfied"] == []  # +1 success, -1 redundant
    expert = ScriptedExpert()
    done = False
    while not done:
        _, _, term, trunc, info = env.step(expert.act(env))
        done = term or trunc
    rec = info[EPISODE_RECORD]
    assert rec["completed"] and not rec["dag_valid"] and rec["dependency_violations"] == 1
    assert rec["steps"][0]["redundant"] and len(rec["steps"]) == rec["optimal_steps"] + 1
    assert oid in rec["entities_recalled"]


def test_unrecoverable_failure_and_truncation() -> None:
    env = AgentTaskEnv()
    env.reset(seed=5, options={"family": "address_error"})
    oid = env.task.goals[1].args["order_id"]
    env.step(env.encode_action("order.get", {"order_id": oid}))
    _, r, term, trunc, info = env.step(
        env.encode_action("order.cancel", {"order_id": oid, "reason": "customer_request"})
    )
    assert (
        term and not trunc and r == 1.0 - 1.0 - 0.5
    )  # executed (redundant), then the address goal became impossible
    rec = info[EPISODE_RECORD]
    assert rec["failed"] and not rec["completed"]
    assert rec["steps"][-1]["high_risk"]  # an unrequested high-risk action
    env.reset(seed=6, options={"family": "stock_inquiry"})
    sku = env.task.goals[0].args["sku"]
    n, done = 0, False
    while not done:
        _, _, term, trunc, info = env.step(
            env.encode_action("order.get", {"order_id": env.world.orders[0].id})
        )
        n += 1
        done = term or trunc
    assert trunc and not term and n == env.state.budget and info[EPISODE_RECORD]["truncated"]
    assert sku not in info[EPISODE_RECORD]["entities_recalled"]
    with pytest.raises(RuntimeError):
        env.step(env.encode_action("order.get", {"order_id": env.world.orders[0].id}))


def test_handoff_is_an_explicit_failure() -> None:
    env = AgentTaskEnv()
    env.reset(seed=1, options={"family": "late_delivery"})
    _, r, term, _, info = env.step(
        env.encode_action("human.handoff", {"user_id": env.world.user.id, "reason": "user_request"})
    )
    assert term and info[EPISODE_RECORD]["failed"] and r == 1.0 - 1.0 - 0.5  # success, redundant, failure


def test_error_injection_schedule() -> None:
    cfg = AgentTaskEnvConfig()
    cfg.faults.enabled = True
    env = AgentTaskEnv(cfg)
    assert env.fault_share() == pytest.approx(1.0)
    env.set_training_progress(1.0)
    assert env.fault_share() == pytest.approx(0.05)
    env.set_training_progress(0.5)
    assert env.fault_share() == pytest.approx(np.sqrt(0.05))
    env.set_training_progress(0.0)
    kinds, codes = set(), set()
    expert = ScriptedExpert()
    env.reset(seed=0)
    for _ in range(30):
        kinds.add(env.fault_kind)
        done = False
        while not done:
            _, _, term, trunc, info = env.step(expert.act(env))
            codes.add(info[STEP_TRACE]["result_code"])
            done = term or trunc
        env.reset()
    assert kinds == {"garbage", "transient", "outage"}
    assert codes - {"OK"}, codes  # faults surfaced as typed error codes
    env.set_training_progress(1.0)
    env.reset(seed=1)
    faulty = 0
    for _ in range(100):
        faulty += env.fault_kind is not None
        env.reset()
    assert faulty <= 15
    assert AgentTaskEnv().fault_share() == 0.0  # off by default


def test_tool_health_persists_drifts_and_reaches_sla_stats() -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(simulate_tool_health=True, tool_health_refresh_steps=1))
    expert = ScriptedExpert()
    env.reset(seed=0, options={"family": "logistics_exception"})
    health = env.world.tool_health
    lat0 = health["express.contact"].latency_ms
    for _ in range(3):
        done = False
        while not done:
            *_x, term, trunc, _info = env.step(expert.act(env))
            done = term or trunc
        env.reset(options={"family": "logistics_exception"})
        assert env.world.tool_health is health  # one set of services across customers
    assert health["express.contact"].latency_ms != lat0
    stats = env.executor.sla_stats()
    assert stats["express.contact"].p50_ms > 100.0  # the simulated courier latency, not wall time
    assert stats["express.contact"].p50_ms > 5 * stats["order.get"].p50_ms
    obs, _ = env.reset()
    k = env.layout.num_skills
    e, g = env.layout.skill_index("express.contact"), env.layout.skill_index("order.get")
    assert obs["tool_x"][e, k] > obs["tool_x"][g, k]  # quantile-mapped p50 latency


def test_tool_use_edges_count_only_executed_calls() -> None:
    env = AgentTaskEnv()
    obs, _ = env.reset(seed=3, options={"family": "quality_refund"})
    g = env.task.goals
    refund = dict(g[1].args, amount=1.0)
    obs, *_ = env.step(env.encode_action("refund.trigger", refund))  # masked: not executed
    obs, *_ = env.step(
        {
            "skill": 0,
            "pointer": np.array([99, 0]),
            "enum": np.zeros(1, np.int64),
            "numeric": np.zeros(1, np.float32),
        }
    )  # invalid: not executed
    assert obs["user__uses__tool_mask"].sum() == 0 and env.state.calls.sum() == 0
    obs, *_ = env.step(env.encode_action("inventory.check", g[0].args))
    k = env.layout.skill_index("inventory.check")
    assert obs["user__uses__tool_mask"].sum() == 1 and obs["user__uses__tool_ei"][1, 0] == k
    assert obs["tool_x"][k, env.layout.num_skills + 9] == pytest.approx(0.2)  # calls this episode / 5
    refund_k = env.layout.skill_index("refund.trigger")
    assert obs["skill_mask"][refund_k] == 1  # the business precondition now holds


def test_numeric_squash_bounds_and_clipping() -> None:
    env = AgentTaskEnv()
    env.reset(seed=3, options={"family": "quality_refund"})
    g = env.task.goals
    env.step(env.encode_action("inventory.check", g[0].args))
    order = env.world.order(g[1].args["order_id"])
    a = env.encode_action("refund.trigger", dict(g[1].args, amount=1.0))
    a["numeric"] = np.array([50.0], dtype=np.float32)  # outside the Box: clipped, bounded by the order total
    _, r, term, _, info = env.step(a)
    tr = info[STEP_TRACE]
    # Executed, but refunding the whole order leaves no room for the refund owed: unrecoverable (+1 - 0.5).
    assert tr["result_code"] == "OK" and r == -0.5 and term and info[EPISODE_RECORD]["failed"]
    assert any("clipped" in w for w in tr["warnings"])
    assert order.total * 0.999 <= tr["args"]["amount"] <= order.total  # max_from: total, tanh(5) ≈ 1
    assert order.refunded == pytest.approx(tr["args"]["amount"], abs=0.01)
    assert tr["goals_satisfied"] == []  # not the amount the customer is owed
    assert env._steps[-1].high_risk and env._steps[-1].redundant


def test_injected_marks_only_failures_the_fault_caused() -> None:
    cfg = AgentTaskEnvConfig()
    cfg.faults.enabled = True
    cfg.faults.kinds = {"outage": 1.0}
    env = AgentTaskEnv(cfg)
    expert = ScriptedExpert()
    env.reset(seed=3)
    injected = 0
    for _ in range(10):
        down = env._down
        done = False
        while not done:
            _, _, term, trunc, info = env.step(expert.act(env))
            st = info[STEP_TRACE]
            assert st["injected"] == (st["result_code"] != "OK" and st["skill"] in down)
            injected += st["injected"]
            done = term or trunc
        rec = EpisodeRecord.from_dict(info[EPISODE_RECORD])
        assert [s.injected for s in rec.steps] == [
            s.result_code != "OK" and s.skill in down for s in rec.steps
        ]
        env.reset()
    assert injected > 0
    # A caller error in a faulty episode is the policy's, not the fault's.
    env.reset(seed=4)
    _, _, _, _, info = env.step(
        {"skill": 0, "pointer": np.array([99, 0]), "enum": np.zeros(2), "numeric": np.zeros(1)}
    )
    assert info[STEP_TRACE]["result_code"] == "INVALID_INPUT" and not info[STEP_TRACE]["injected"]

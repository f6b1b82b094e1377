"""The generic AgentTaskEnv on every registered domain: Gymnasium compliance, determinism, expert optimality,
typed errors, episode records, error injection, and the obs-only rule probe."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from agentic_ray.domains import available_domains
from agentic_ray.envs.agent_task_env import AgentTaskEnv, AgentTaskEnvConfig
from agentic_ray.envs.baseline_policies import RandomMaskedPolicy
from agentic_ray.envs.episode import episode_record_dict
from agentic_ray.keys import EPISODE_RECORD, STEP_TRACE
from agentic_ray.rewards.episode_record import EpisodeRecord

MODES = ("structured", "prototype")
DOMAINS = available_domains()


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


def _expert_act(env: AgentTaskEnv):
    expert = env.domain.expert()
    return lambda _obs: env.encode_action(*expert.plan(env.view()))


def _assert_obs(env: AgentTaskEnv, obs: dict[str, np.ndarray]) -> None:
    space = env.observation_space
    assert set(obs) == set(space.spaces)
    for k, v in obs.items():
        sp = space[k]
        assert v.shape == sp.shape and v.dtype == sp.dtype, k
        assert sp.contains(v), k


def test_both_domains_are_registered() -> None:
    assert {"ecommerce", "helpdesk"} <= set(DOMAINS)


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("mode", MODES)
def test_check_env_passes(domain: str, mode: str) -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(domain=domain, action_mode=mode))
    check_env(env, skip_render_check=True)
    env.close()


def test_dict_config_is_validated() -> None:
    env = AgentTaskEnv({"action_mode": "prototype", "families": ["cancellation"]})
    assert env.config.action_mode == "prototype" and env.families == ["cancellation"]
    with pytest.raises(ValueError, match="not_a_field"):
        AgentTaskEnv({"not_a_field": 1})
    with pytest.raises(ValueError, match="unknown families"):
        AgentTaskEnv({"families": ["nope"]})
    with pytest.raises(ValueError, match="unknown domain"):
        AgentTaskEnv({"domain": "no_such_domain"})


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("mode", MODES)
def test_seeded_determinism(domain: str, mode: str) -> None:
    def rollout() -> list:
        env = AgentTaskEnv(AgentTaskEnvConfig(domain=domain, action_mode=mode))
        pol = RandomMaskedPolicy(env.layout, seed=5)
        out = []
        for ep in range(4):
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


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("mode", MODES)
def test_expert_solves_every_validation_task_optimally(domain: str, mode: str) -> None:
    per = 6
    env = AgentTaskEnv(
        AgentTaskEnvConfig(domain=domain, action_mode=mode, split="validation", validation_per_family=per)
    )
    act = _expert_act(env)
    per_family: dict[str, list[bool]] = {f: [] for f in env.families}
    obs, info = env.reset(seed=0)
    for _ in range(per * len(env.families)):
        fam, opt = info["task_family"], info["optimal_steps"]
        steps, done = 0, False
        while not done:
            action = act(obs)
            if mode == "structured":
                assert obs["skill_mask"][action["skill"]] == 1  # the expert never picks a masked action
            else:
                assert obs["proto_mask"][action["skill"]] == 1
            obs, _r, term, trunc, info = env.step(action)
            assert info[STEP_TRACE]["result_code"] == "OK", info[STEP_TRACE]
            steps += 1
            done = term or trunc
        rec = info[EPISODE_RECORD]
        per_family[fam].append(
            rec["completed"] and steps == opt and rec["dag_valid"] and not rec["truncated"]
        )
        assert not any(s["high_risk"] for s in rec["steps"])
        obs, info = env.reset()
    assert all(len(v) == per and all(v) for v in per_family.values()), per_family


@pytest.mark.parametrize("domain", DOMAINS)
def test_random_masked_policy_rarely_succeeds(domain: str) -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(domain=domain, split="validation", validation_per_family=8))
    pol = RandomMaskedPolicy(env.layout, seed=0)
    env.reset(seed=0)
    n = 8 * len(env.families)
    wins = 0
    for _ in range(n):
        rows = _run(env, pol.act)
        wins += rows[-1][4][EPISODE_RECORD]["completed"]
        for obs, *_ in rows:
            _assert_obs(env, obs)
    assert wins / n <= 0.1, wins / n


def test_malformed_actions_are_typed_error_steps() -> None:
    env = AgentTaskEnv()
    obs, _ = env.reset(seed=4, options={"family": "stock_inquiry"})
    lay = env.layout
    base = env.encode_action("inventory.check", {"sku": env.task.request.mentioned[0].id})
    bad = [
        {**base, "skill": 99},
        {**base, "pointer": np.array([7, 0])},  # no such known product
        {**base, "skill": lay.skill_index("sms.send"), "enum": np.array([99])},
        {**base, "skill": lay.skill_index("coupon.issue"), "numeric": np.array([np.nan])},
        {**base, "skill": lay.skill_index("answer.stock"), "source": np.array([5])},  # not a revealed value
        {"skill": lay.skill_index("inventory.check")},  # no pointer slot
        "garbage",
    ]
    for a in bad:
        obs, r, term, trunc, info = env.step(a)
        assert info[STEP_TRACE]["result_code"] in ("INVALID_INPUT", "PRECONDITION_FAILED"), (
            a,
            info[STEP_TRACE],
        )
        assert r == -3.0
        _assert_obs(env, obs)
        assert not term
        if trunc:
            env.reset(seed=4, options={"family": "stock_inquiry"})
    penv = AgentTaskEnv(AgentTaskEnvConfig(action_mode="prototype"))
    penv.reset(seed=1)
    for bad in (10_000, {"skill": 10_000}):
        _, r, *_rest, info = penv.step(bad)
        assert info[STEP_TRACE]["result_code"] == "INVALID_INPUT" and r == -3.0


@pytest.mark.parametrize("domain", DOMAINS)
def test_episode_record_contents_and_fast_dict(domain: str) -> None:
    env = AgentTaskEnv(AgentTaskEnvConfig(domain=domain))
    rows = _run(env, _expert_act(env), seed=9)
    d = rows[-1][4][EPISODE_RECORD]
    rec = EpisodeRecord.from_dict(d)
    assert rec.completed and not rec.failed and not rec.truncated and rec.dag_valid
    assert rec.num_steps == rec.optimal_steps
    assert sorted(rec.goals_done_order) == sorted(rec.goals)
    assert set(rec.entities_recalled) <= set(rec.entities_mentioned)
    assert rec.domain == domain
    assert episode_record_dict(rec) == rec.to_dict()
    # Lookups that first reveal a task entity net +0.5 (success + redundant + informative), goals +1, and the
    # last step gives the shaping back: the episode's total is what it is without the shaping bonus. A note the
    # expert writes to memory (a call that reveals nothing and satisfies no goal) nets success + redundant.
    rw = env.config.rewards
    steps = [info[STEP_TRACE] for *_x, info in rows]
    side = [
        (r, bool(t["revealed"]))
        for r, t in zip((row[1] for row in rows), steps, strict=True)
        if not t["goals_satisfied"]
    ]
    lookups = [r for r, revealed in side if revealed]
    notes = [r for r, revealed in side if not revealed]
    assert lookups and all(r == pytest.approx(1.0 + rw.redundant + rw.informative) for r in lookups), lookups
    assert all(r == pytest.approx(1.0 + rw.redundant) for r in notes), notes
    assert rows[-1][1] == pytest.approx(3.0 - rw.informative * len(lookups))
    assert sum(row[1] for row in rows) == pytest.approx(
        (len(rows) - len(side)) + len(side) * (1.0 + rw.redundant) + rw.completion
    )
    for *_x, info in rows[:-1]:
        assert EPISODE_RECORD not in info


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
    act = _expert_act(env)
    env.reset(seed=0)
    for _ in range(30):
        kinds.add(env.fault_kind)
        done = False
        while not done:
            _, _, term, trunc, info = env.step(act(None))
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


def test_injected_marks_only_failures_the_fault_caused() -> None:
    cfg = AgentTaskEnvConfig()
    cfg.faults.enabled = True
    cfg.faults.kinds = {"outage": 1.0}
    env = AgentTaskEnv(cfg)
    act = _expert_act(env)
    env.reset(seed=3)
    injected = 0
    for _ in range(10):
        down = env._down
        done = False
        while not done:
            _, _, term, trunc, info = env.step(act(None))
            st = info[STEP_TRACE]
            assert st["injected"] == (st["result_code"] != "OK" and not st["masked"] and st["skill"] in down)
            injected += st["injected"]
            done = term or trunc
        rec = EpisodeRecord.from_dict(info[EPISODE_RECORD])
        assert [s.injected for s in rec.steps] == [
            s.result_code != "OK" and not s.masked and s.skill in down for s in rec.steps
        ]
        env.reset()
    assert injected > 0
    # A caller error in a faulty episode is the policy's, not the fault's.
    env.reset(seed=4, options={"family": "stock_inquiry"})
    a = env.encode_action("inventory.check", {"sku": env.task.request.mentioned[0].id})
    _, _, _, _, info = env.step({**a, "pointer": np.array([7, 0])})
    assert info[STEP_TRACE]["result_code"] == "INVALID_INPUT" and not info[STEP_TRACE]["injected"]
